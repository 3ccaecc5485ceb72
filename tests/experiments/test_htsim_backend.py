"""The htsim backend end to end: finding htsim_uec, running it, reading it back, `run --backend
htsim` and `crosscheck`. CI uses the stand-in tests/data/htsim_standin.py (htsim_uec's output
format, a toy model); the tests marked `real` run the real htsim_uec and skip where it is not built.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from experiments.backends.htsim import HtsimBackend, HtsimFailed, HtsimNotFound, Unmappable, find_htsim
from experiments.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
DATACENTER = ROOT / "experiments" / "datacenter.yaml"
STANDIN = ROOT / "tests" / "data" / "htsim_standin.py"
REAL_HTSIM = os.environ.get("HTSIM_UEC") or shutil.which("htsim_uec") or (
    "/opt/htsim/bin/htsim_uec" if os.access("/opt/htsim/bin/htsim_uec", os.X_OK) else None)
requires_htsim = pytest.mark.skipif(REAL_HTSIM is None, reason="htsim_uec is not built here (HTSIM_UEC unset, "
                                    "not on PATH, not in /opt/htsim/bin): scripts/build-htsim.sh builds it")


def mrc_case(variant: str, quick: bool = True, seed: int = 1):
    scenario = load_scenario(DATACENTER, quick=quick, seed=seed)
    return next(c for c in scenario.cases() if c.variant.label == variant and c.transport.mode == "mrc")


@pytest.fixture
def standin(monkeypatch):
    monkeypatch.setenv("HTSIM_UEC", str(STANDIN))
    monkeypatch.delenv("STANDIN_MODE", raising=False)
    return str(STANDIN)


def test_without_htsim_the_error_names_both_places_looked(monkeypatch, tmp_path):
    monkeypatch.delenv("HTSIM_UEC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(HtsimNotFound, match="HTSIM_UEC is not set and htsim_uec is not on PATH"):
        find_htsim()
    monkeypatch.setenv("HTSIM_UEC", str(tmp_path / "nowhere"))
    with pytest.raises(HtsimNotFound, match="HTSIM_UEC=.*nowhere: not an executable file"):
        find_htsim()


def test_the_standin_run_gives_a_record_like_netsims(standin):
    case = mrc_case("incast")
    record = HtsimBackend(binary=standin).run_case(case)
    assert record.backend == "htsim" and record.completed
    # what htsim_uec does not report is not measured (None), not zero or "yes"
    assert record.bit_exact is None and record.app_missing is None and record.samples == []
    assert record.transport_stats["retx_htsim"] == 0 and "retx_trim" not in record.transport_stats
    assert len(record.flows) == 7 and all(f.finish is not None for f in record.flows)
    # the stand-in drains the receiver's flows one after another: the last ends after 7 flows' bytes
    total = sum(f.expected_bytes for f in record.flows)
    assert max(f.finish for f in record.flows) == pytest.approx(total * 8 / 100e9 + 10e-6, rel=1e-3)
    assert record.transport_stats["htsim_new"] == 7 * 64


def test_figures_htsim_never_measured_are_none_in_the_summary_not_zero(standin):
    # summary.json is the machine-readable result: a figure htsim_uec does not report is None there
    from experiments import metrics, results
    summary = metrics.summarise(HtsimBackend(binary=standin).run_case(mrc_case("incast")))
    for key in ("mean_goodput_bps", "link_utilisation", "packets_trimmed", "packets_dropped_by_faults",
                "packets_dropped_queue_full", "app_duplicates", "app_missing", "bit_exact"):
        assert summary[key] is None, key
    assert {"goodput", "switch counters", "bit_exact"} <= set(summary["not_measured"])
    assert summary["completion_time_s"] is not None and summary["retransmissions_total"] is not None
    header, rows = results.table_rows([summary])
    row = dict(zip(header, rows[0]))
    assert row["link max/mean"] == row["queue drops"] == results.NOT_MEASURED_CELL


def test_a_flow_htsim_never_finished_leaves_the_case_incomplete(standin, monkeypatch):
    monkeypatch.setenv("STANDIN_MODE", "unfinished")
    record = HtsimBackend(binary=standin).run_case(mrc_case("incast"))
    assert not record.completed and record.completion_time is None
    assert sum(f.finish is None for f in record.flows) == 1


def test_a_case_htsim_cut_at_its_horizon_says_so_and_invents_no_delivery(standin, monkeypatch):
    # htsim_uec ran to its -end with a flow unfinished and says nothing of that flow's bytes: the
    # case was cut at the horizon, not "stuck at 0 %", and its flows' throughput is not measured
    from experiments import metrics
    monkeypatch.setenv("STANDIN_MODE", "unfinished")
    record = HtsimBackend(binary=standin).run_case(mrc_case("incast"))
    summary = metrics.summarise(record)
    assert summary["ending"] == "cut at horizon" and summary["delivered_fraction"] is None
    assert summary["flow_throughput_bps"]["min"] is None and summary["bit_exact"] is None
    assert record.end == record.horizon and any("stopped at its horizon" in n for n in record.notes)
    from experiments import results
    header, rows = results.table_rows([summary])
    row = dict(zip(header, rows[0]))
    assert row["completion"] == "cut at horizon" and row["flow Mb/s min/max"] == "-"


@pytest.mark.parametrize("mode, words", [("fail", "(?s)exited with status 1.*stand-in asked to fail"),
                                         ("truncated", "no totals line")])
def test_htsim_failing_or_cut_short_is_an_error_naming_it(standin, monkeypatch, mode, words):
    monkeypatch.setenv("STANDIN_MODE", mode)
    with pytest.raises(HtsimFailed, match=words):
        HtsimBackend(binary=standin).run_case(mrc_case("incast"))


def test_the_inputs_and_output_are_kept_when_asked(standin, tmp_path):
    HtsimBackend(binary=standin, keep=tmp_path).run_case(mrc_case("permutation"))
    folder = tmp_path / "permutation-MRC"
    assert {p.name for p in folder.iterdir()} >= {"topology.topo", "flows.cm", "htsim.out", "command.txt"}
    command = (folder / "command.txt").read_text().split()
    assert command[0] == standin and command[command.index("-tm") + 1] == str(folder / "flows.cm")



def test_a_relative_keep_folder_still_names_files_htsim_can_open(standin, tmp_path, monkeypatch):
    # htsim_uec runs inside the case's folder: a path relative to the caller's directory (the
    # default results/... of `crosscheck`) would name nothing from there
    monkeypatch.chdir(tmp_path)
    HtsimBackend(binary=standin, keep=Path("results") / "kept").run_case(mrc_case("permutation"))
    command = (tmp_path / "results" / "kept" / "permutation-MRC" / "command.txt").read_text().split()
    assert command[command.index("-topo") + 1] == str(tmp_path / "results" / "kept" / "permutation-MRC" / "topology.topo")


@pytest.mark.slow
def test_run_backend_htsim_writes_the_usual_results_folder(standin, tmp_path):
    from experiments.runner import run_scenario
    scenario = load_scenario(DATACENTER, quick=True)
    summaries, figures = run_scenario(scenario, "htsim", "model", tmp_path, True, progress_stream=open(os.devnull, "w"),
                                      variants=["incast", "permutation"], transports=["MRC"], repeat=2)
    assert [s["backend"] for s in summaries] == ["htsim", "htsim"]
    assert all(s["completed"] for s in summaries)
    assert json.loads((tmp_path / "summary.json").read_text())["backend"] == "htsim"
    # as crosscheck does: each run's htsim_uec inputs, command and output kept, one folder per run
    kept = {p.name for p in (tmp_path / "htsim").iterdir()}
    assert kept == {"incast-MRC", "incast-MRC-run2", "permutation-MRC", "permutation-MRC-run2"}
    assert {p.name for p in (tmp_path / "htsim" / "incast-MRC").iterdir()} >= {"topology.topo", "flows.cm",
                                                                                "command.txt", "htsim.out"}
    # htsim_uec samples no goodput: no goodput figure (it would be empty)
    assert "goodput.png" not in [f.name for f in figures] and not (tmp_path / "goodput.png").exists()


def test_run_backend_htsim_s_summary_says_which_balancer_ran_and_the_backend_s_notes(standin, tmp_path):
    from experiments.runner import run_scenario
    scenario = load_scenario(DATACENTER, quick=True)
    run_scenario(scenario, "htsim", "model", tmp_path, True, progress_stream=open(os.devnull, "w"),
                 variants=["incast"], transports=["MRC"], balancer="reps")
    assert json.loads((tmp_path / "summary.json").read_text())["balancer"] == "reps"
    md = (tmp_path / "summary.md").read_text()
    assert "backend **htsim** (load balancer reps)" in md
    assert "- incast / MRC: htsim: load balancer reps; htsim_uec reports completions only" in md


def test_run_backend_htsim_refuses_the_cases_it_cannot_map_before_running(standin, tmp_path):
    from experiments.runner import run_scenario
    scenario = load_scenario(DATACENTER, quick=True)
    with pytest.raises(Unmappable, match=r"(?s)cannot run 3 of 4 case.*failover / MRC: .*collective.*RoCE-style"):
        run_scenario(scenario, "htsim", "model", tmp_path, True, progress_stream=open(os.devnull, "w"),
                     variants=["incast", "failover"])
    assert not (tmp_path / "summary.json").exists()
    with pytest.raises(Unmappable) as repeated:             # --repeat: each case counted and named once
        run_scenario(scenario, "htsim", "model", tmp_path, True, progress_stream=open(os.devnull, "w"),
                     variants=["incast", "failover"], repeat=2)
    assert "cannot run 3 of 4 case(s)" in str(repeated.value)
    assert str(repeated.value).count("failover / MRC:") == 1


def test_run_backend_htsim_refuses_reps_on_drop_tail_before_running(standin, tmp_path):
    from experiments.runner import run_scenario
    scenario = load_scenario(ROOT / "experiments" / "incast.yaml", quick=True)
    with pytest.raises(Unmappable, match="MRC drop-tail.*REPS needs trimming"):
        run_scenario(scenario, "htsim", "model", tmp_path, True, progress_stream=open(os.devnull, "w"),
                     transports=["MRC drop-tail"], balancer="reps")
    assert not (tmp_path / "summary.json").exists()


@pytest.mark.slow
def test_crosscheck_puts_both_simulators_side_by_side(standin, tmp_path):
    from experiments.crosscheck import NETSIM, Crosscheck, table_lines, write_results
    check = Crosscheck(("mixed", "reps"))
    records, rows, skipped = check.run(DATACENTER, [1], quick=True, variants=("incast",))
    assert [r.backend for r in records] == ["netsim", "htsim", "htsim"]
    assert [label for label, _ in skipped] == ["incast / RoCE"]
    scenario = load_scenario(DATACENTER, quick=True)
    meta, figures = write_results(scenario, records, rows, skipped, tmp_path, {"seeds": [1], "settings": "scenario"})
    assert [f.name for f in figures] == ["crosscheck-cdf.png"] and figures[0].stat().st_size > 0
    table = json.loads((tmp_path / "summary.json").read_text())["crosscheck"]
    assert table[0]["case"] == "incast / MRC" and table[0]["transport"] == "MRC"
    assert list(table[0]["columns"]) == [NETSIM, "htsim reps", "htsim mixed"]   # netsim, then BALANCERS' order
    assert all(c["mean"] > 1.0 for c in table[0]["columns"].values())
    netsim_flows = records[0].flows                 # run until its senders saw every byte acknowledged
    assert all(f.acked is not None and f.acked > f.finish for f in netsim_flows)
    columns = table[0]["columns"]                   # the ideal at wire bytes: each simulator's own headers
    assert columns[NETSIM]["wire_factor"] == pytest.approx((4096 + 106) / 4096)
    assert columns["htsim mixed"]["wire_factor"] == pytest.approx((4096 + 64) / 4096)
    assert all(c["wire_mean"] < c["mean"] for c in columns.values())
    lines = "\n".join(table_lines(table))
    assert "| incast / MRC |" in lines and "Over the ideal at wire bytes" in lines
    assert "netsim and htsim side by side" in (tmp_path / "summary.md").read_text()
    from experiments.report import find_runs, render_html
    page = render_html(find_runs(tmp_path), tmp_path / "report.html")
    assert "netsim and htsim side by side" in page and "crosscheck-cdf.png" in page


@requires_htsim
def test_real_htsim_runs_the_exported_incast(monkeypatch):
    """The real htsim_uec accepts the exported files and finishes every flow near its ideal."""
    from experiments import metrics
    from experiments.transport_sizing import line_rate_and_base_rtt
    case = mrc_case("incast", quick=False)
    record = HtsimBackend(binary=REAL_HTSIM).run_case(case)
    assert record.completed and len(record.flows) == 7
    slowest = metrics.slowest_over_ideal(record, *line_rate_and_base_rtt(case))
    assert 1.0 < slowest < 1.5


@requires_htsim
def test_real_htsim_default_settings_read_back_as_packets():
    backend = HtsimBackend(settings="htsim", binary=REAL_HTSIM)
    backend.run_case(mrc_case("permutation"))
    from experiments.backends.htsim import parse_output
    chosen = parse_output(backend.last_run.stdout).switch_settings()
    assert chosen["queue_depth"] == chosen["trim_threshold"] > chosen["ecn_max_threshold"] > chosen["ecn_threshold"] > 0


def test_crosscheck_command_without_htsim_exits_1_naming_both_places(monkeypatch, tmp_path, capsys):
    from cli.main import main
    monkeypatch.delenv("HTSIM_UEC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["crosscheck", str(DATACENTER), "--quick", "--out", str(tmp_path / "r")]) == 1
    assert "HTSIM_UEC is not set and htsim_uec is not on PATH" in capsys.readouterr().err


def test_crosscheck_command_names_an_unknown_variant(standin, tmp_path, capsys):
    from cli.main import main
    assert main(["crosscheck", str(DATACENTER), "--variant", "nope", "--out", str(tmp_path / "r")]) == 2
    assert "--variant 'nope'" in capsys.readouterr().err


def test_run_balancer_without_the_htsim_backend_is_refused(tmp_path, capsys):
    from cli.main import main
    assert main(["run", str(DATACENTER), "--backend", "netsim", "--balancer", "reps", "--out", str(tmp_path)]) == 2
    assert "--backend htsim" in capsys.readouterr().err


def test_the_benchmark_beside_htsim_uses_the_recorded_figures_where_htsim_is_absent(monkeypatch, tmp_path, capsys):
    from benchmarks import netsim_vs_htsim as bench
    from benchmarks.figures import Measurement
    monkeypatch.delenv("HTSIM_UEC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setitem(bench.RECORDED_HTSIM, "quick incast", {"wall_s": 0.01, "cpu_s": 0.01,
                                                                "cpu_range_s": (0.008, 0.014),
                                                                "wall_range_s": (0.009, 0.03)})
    result = Measurement()
    bench.measure_side_by_side(result, 1, [("quick incast", mrc_case("incast")), ("unknown", mrc_case("incast"))])
    out = capsys.readouterr().out
    assert "htsim_uec is not run here (no htsim_uec" in out and "no recorded htsim figure" in out
    assert [f.note for f in result.figures] == ["htsim recorded", "htsim recorded"]
    # a figure of its own, never compared with a run that had htsim beside it; and the verdict on the target
    recorded = f"netsim over htsim's time recorded {bench.RECORDED_ON}"
    assert [f.name for f in result.figures] == [f"quick incast: {recorded}, wall time per case",
                                                f"quick incast: {recorded}, CPU time per case"]
    assert "issue 29's 2x" in out
    # the line says what the recorded figure stands on: a median, its range, a machine whose speed moves
    assert ("htsim recorded: the median of its measurements, 0.008-0.014 s CPU, 0.009-0.030 s wall; "
            "the machine's speed moves, so the ratio is a rough one") in out
    rows = result.details["netsim_vs_htsim"]["cases"]
    assert rows[0]["htsim_recorded"] and rows[0]["htsim_cpu_s"] == 0.01 and "htsim_cpu_s" not in rows[1]


def test_the_benchmark_beside_htsim_runs_it_where_built(standin, capsys):
    from benchmarks import netsim_vs_htsim as bench
    from benchmarks.figures import Measurement
    result = Measurement()
    bench.measure_side_by_side(result, 1, [("quick incast", mrc_case("incast"))])
    row = result.details["netsim_vs_htsim"]["cases"][0]
    assert not row["htsim_recorded"] and row["htsim_wall_s"] > 0 and row["completed"]
    assert len(result.figures) == 2 and "quick incast: netsim" in capsys.readouterr().out
    assert result.figures[0].name == "quick incast: netsim over htsim, wall time per case"


@pytest.mark.parametrize("option", [["--jobs", "2"], ["--cluster", "servers.yaml"]])
def test_run_backend_htsim_refuses_jobs_and_cluster_up_front_saying_why(standin, tmp_path, capsys, option):
    # refused before the cluster file is read (no SSH to its servers) and before any case runs
    from cli.main import main
    cluster = tmp_path / "servers.yaml"
    cluster.write_text("servers: [{host: 192.0.2.1}]\n")
    argv = ["run", str(DATACENTER), "--backend", "htsim", "--transport", "MRC", "--variant", "incast",
            "--out", str(tmp_path / "r")] + [str(cluster) if o == "servers.yaml" else o for o in option]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{option[0]} " in err and "htsim cases run one at a time on this machine" in err
    assert "real time on the network" not in err and not (tmp_path / "r" / "summary.json").exists()


def test_netsim_sizes_run_with_the_switches_and_count_htsims_wire_bytes_with_them(standin, tmp_path):
    from experiments.backends.htsim.inputs import netsim_packet_sizes
    from experiments.crosscheck import htsim_wire_factor
    case, sizes = mrc_case("incast"), netsim_packet_sizes()
    backend = HtsimBackend(binary=standin, keep=tmp_path, sizes=sizes)
    assert backend.run_case(case).completed
    said = backend.last_run.stdout
    assert "Measurement switch MRC_DATA_HEADER_BYTES=106" in said and "Measurement switch MRC_NACK_BYTES=94" in said
    command = (tmp_path / "incast-MRC" / "command.txt").read_text().split()
    assert command[:3] == ["MRC_DATA_HEADER_BYTES=106", "MRC_ACK_BYTES=102", "MRC_NACK_BYTES=94"]
    assert command[command.index("-mtu") + 1] == "4202" and command[command.index("-trimsize") + 1] == "102"
    # the ideal at wire bytes counts htsim's data packets as they now are: netsim's 106 header bytes
    assert htsim_wire_factor(backend.last_run.result, case, sizes) == pytest.approx((4096 + 106) / 4096)
    plain = HtsimBackend(binary=standin)
    plain.run_case(case)
    assert htsim_wire_factor(plain.last_run.result, case) == pytest.approx((4096 + 64) / 4096)


def test_netsim_sizes_on_a_build_without_the_switches_fail_naming_them(standin, monkeypatch):
    from experiments.backends.htsim.inputs import netsim_packet_sizes
    monkeypatch.setenv("STANDIN_MODE", "release")      # a release build ignores the variables
    with pytest.raises(HtsimFailed, match="did not say it read MRC_DATA_HEADER_BYTES=106, MRC_ACK_BYTES=102, "
                                          "MRC_NACK_BYTES=94: a build without the measurement switches"):
        HtsimBackend(binary=standin, sizes=netsim_packet_sizes()).run_case(mrc_case("incast"))


def test_crosscheck_netsim_sizes_reaches_htsim_and_its_summary(standin, tmp_path, capsys):
    from cli.main import main
    folder = tmp_path / "r"
    assert main(["crosscheck", str(DATACENTER), "--quick", "--variant", "incast", "--balancer", "mixed",
                 "--netsim-sizes", "--out", str(folder)]) == 0
    assert "its packets as netsim's (data headers 106, trimmed 102, ACK 102, NACK 94 bytes)" in capsys.readouterr().out
    command = (folder / "htsim" / "seed1-mixed" / "incast-MRC" / "command.txt").read_text()
    assert command.startswith("MRC_DATA_HEADER_BYTES=106 ") and " -mtu 4202 " in command
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["htsim_packet_sizes"] == "data headers 106, trimmed 102, ACK 102, NACK 94 bytes"
    columns = summary["crosscheck"][0]["columns"]
    assert columns["htsim mixed"]["wire_factor"] == pytest.approx(columns["netsim"]["wire_factor"])
    assert "htsim_uec's packets as netsim's: data headers 106" in (folder / "summary.md").read_text()


def _switches_build():
    from experiments.crosscheck import htsim_commit
    return REAL_HTSIM if REAL_HTSIM and (htsim_commit(REAL_HTSIM) or "").endswith("+measurement-switches") else None


@pytest.mark.skipif(_switches_build() is None, reason="needs htsim_uec built with scripts/build-htsim.sh "
                    "--measurement-switches (its htsim_uec.commit ends +measurement-switches) as HTSIM_UEC")
def test_real_htsim_with_the_switches_runs_netsims_packet_sizes():
    from experiments.backends.htsim.inputs import netsim_packet_sizes
    backend = HtsimBackend(binary=_switches_build(), sizes=netsim_packet_sizes())
    record = backend.run_case(mrc_case("incast"))
    assert record.completed and backend.last_run.result.packet_bytes == 4096 + 106
    assert record.transport_stats["htsim_new"] == 7 * 64           # the same 4,096-byte payloads
