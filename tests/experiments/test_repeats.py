"""`run --repeat N`: every case N times (netsim: seed + i), the median and range of its times in the
table, summary and report, every run kept in raw.jsonl; times printed in units that read well;
`run --pcap --out DIR` captures under DIR."""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest

from tests.conftest import requires_mininet
from cli import report as report_cmd
from cli import run as run_cmd
from experiments import repeats, results, runner
from experiments.backends.netsim_backend import NetsimBackend
from experiments.scenario import load_scenario
from experiments.timefmt import format_seconds
from testbed.capture import PcapCapture

ROOT = Path(__file__).resolve().parents[2]
FAILOVER = ROOT / "experiments" / "failover.yaml"


@pytest.mark.parametrize("seconds, text", [
    (0.0002803, "280 µs"), (1.8512, "1.85 s"), (0.0144, "14.4 ms"), (5e-6, "5 µs"),
    (0.00099949, "999 µs"), (0.0009996, "1 ms"),          # rounded to 3 digits before the unit is chosen
    (0.99949, "999 ms"), (0.9996, "1 s"), (0.001, "1 ms"), (1.0, "1 s"),
    (12.345, "12.3 s"), (999.6, "1000 s"), (1234.4, "1234 s"), (0.0, "0 s"), (-0.002, "-2 ms")])
def test_times_read_in_the_unit_that_suits_them(seconds, text):
    assert format_seconds(seconds) == text


def test_a_time_that_is_not_a_number_is_refused():
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError, match="finite"):
            format_seconds(bad)


def test_medians_rank_a_never_above_every_time():
    assert repeats.median([0.3, 0.1, 0.2]) == 0.2
    assert repeats.median([0.4, 0.1, 0.2, 0.3]) == pytest.approx(0.25)
    assert repeats.median([None, 0.1, 0.2]) == 0.2                  # one never, still a median time
    assert repeats.median([None, None, 0.2]) is None               # the middle run never got there
    assert repeats.median([0.1, None]) is None
    assert repeats.spread([0.3, None, 0.1]) == {"median": 0.3, "min": 0.1, "max": None, "values": [0.3, None, 0.1]}


def test_netsim_repetitions_run_with_seed_plus_i_and_mininet_keeps_the_seed():
    assert repeats.seeds(7, 3, "netsim") == [7, 8, 9]
    assert repeats.seeds(7, 3, "mininet") == [7, 7, 7]
    with pytest.raises(ValueError, match="--repeat 0"):
        repeats.seeds(7, 0, "netsim")
    cases = load_scenario(FAILOVER, quick=True).cases()[:2]
    runs = repeats.expand(cases, 2, "netsim")                      # round by round
    assert [(c.transport.name, c.repetition, c.scenario.seed) for c in runs] == [
        ("MRC", 0, 1), ("RoCE", 0, 1), ("MRC", 1, 2), ("RoCE", 1, 2)]
    assert all(c.label == cases[0].label for c in runs[::2])      # the same case, another run


def _run(tmp_path: Path, *extra: str) -> tuple[int, str, Path]:
    parser = argparse.ArgumentParser()
    run_cmd.add_arguments(parser)
    out = tmp_path / "out"
    args = parser.parse_args([str(FAILOVER), "--backend", "netsim", "--quick", "--variant", "leaf-spine",
                              "--transport", "MRC", "--out", str(out), *extra])
    return run_cmd.run(args), out


@pytest.mark.slow
def test_repeat_keeps_every_run_and_reports_median_and_range(tmp_path, capsys):
    status, out = _run(tmp_path, "--repeat", "3")
    assert status == 0
    printed = capsys.readouterr().out
    raw = [json.loads(line) for line in (out / "raw.jsonl").read_text().splitlines()]
    cases = [line for line in raw if line["type"] == "case"]
    assert [(c["repetition"], c["seed"]) for c in cases] == [(0, 1), (1, 2), (2, 3)]
    times = [c["completion_time"] for c in cases]
    assert len(set(times)) == 3                                    # three seeds, three different runs
    summary = json.loads((out / "summary.json").read_text())
    assert summary["repeat"] == 3 and summary["seeds"] == [1, 2, 3] and len(summary["runs"]) == 3
    [case] = summary["cases"]
    spread = case["repeats"]
    assert spread["n"] == 3 and spread["seeds"] == [1, 2, 3] and spread["completed"] == 3
    assert case["completion_time_s"] == sorted(times)[1] == spread["completion_time_s"]["median"]
    assert (spread["completion_time_s"]["min"], spread["completion_time_s"]["max"]) == (min(times), max(times))
    recoveries = [r["time_to_recover_s"] for r in summary["runs"]]
    assert case["time_to_recover_s"] == repeats.median(recoveries)
    # the plotted run is the one of median recovery
    assert summary["runs"][spread["representative"]]["time_to_recover_s"] == case["time_to_recover_s"]

    header, [row] = results.table_rows(summary["cases"])
    assert header[2] == "runs" and row[2] == "3"
    assert row[header.index("completion")].startswith(format_seconds(sorted(times)[1]))
    assert f"[{format_seconds(min(times))}..{format_seconds(max(times))}]" in row[header.index("completion")]
    assert row[header.index("completion")] in printed
    assert "seeds 1..3" in printed
    md = (out / "summary.md").read_text()
    assert "3 repetitions per case, seeds 1..3" in md and "median of its runs" in md
    assert row[header.index("recover")] in md
    page = tmp_path / "report.md"
    assert report_cmd.run(argparse.Namespace(results=out, output=page)) == 0
    assert row[header.index("completion")] in page.read_text() and "seeds 1..3" in page.read_text()


@pytest.mark.slow
def test_one_run_per_case_keeps_the_table_as_it_was(tmp_path, capsys):
    status, out = _run(tmp_path)
    assert status == 0
    summary = json.loads((out / "summary.json").read_text())
    assert "repeat" not in summary and "runs" not in summary
    [case] = summary["cases"]
    assert "repeats" not in case and case["repetition"] == 0
    header, [row] = results.table_rows(summary["cases"])
    assert "runs" not in header and "[" not in row[header.index("completion")]
    assert row[header.index("completion")].startswith(format_seconds(case["completion_time_s"]))
    assert "seed 1)" in capsys.readouterr().out


def test_a_bad_repeat_count_is_named(tmp_path, capsys):
    status, out = _run(tmp_path, "--repeat", "0")
    assert status == 2 and "--repeat 0" in capsys.readouterr().err
    assert not out.exists()


def test_runs_that_never_finish_show_as_never_and_count_in_the_median():
    base = {"variant": "v", "transport": "t", "failure_time_s": 1.0, "bit_exact": True, "notes": ["n"],
            "fidelity": "faithful", "fidelity_reasons": [], "longest_delivery_gap_s": 0.1,
            "completion_rtts": None, "time_to_recover_rtts": None, "longest_delivery_gap_rtts": None}
    runs = [{**base, "repetition": i, "seed": 1, "completed": done, "completion_time_s": t, "time_to_recover_s": r}
            for i, (done, t, r) in enumerate([(True, 2.0, 0.02), (False, None, None), (True, 2.5, 0.3)])]
    runs[1].update(fidelity="distorted", fidelity_reasons=["h1: late"])
    case = repeats.aggregate(runs)
    assert case["completion_time_s"] == 2.5 and case["time_to_recover_s"] == 0.3
    assert case["completed"] is False and case["repeats"]["completed"] == 2
    assert case["fidelity"] == "distorted" and case["fidelity_reasons"] == ["run 2 (seed 1): h1: late"]
    assert case["notes"] == ["n"]
    shown = {**case, "evs_retired": 0, "workload": "allreduce", "retransmissions": {"trim": 0, "timeout": 0, "nack": 0}}
    header, [cells] = results.table_rows([shown])
    row = dict(zip(header, cells))
    assert row["done"] == "2/3" and row["runs"] == "3"
    assert row["completion"] == "2.5 s [2 s..never]"
    assert row["recover"] == "300 ms [20 ms..never]"
    assert row["fidelity"] == "distorted (1/3)"


def test_repeated_rows_have_no_seed_column_though_their_typical_runs_differ_in_seed():
    """A repeated case's row is over all its runs (`runs` says how many): the seed of its typical
    run is no seed of the row, even when two rows' typical runs had different seeds."""
    base = {"transport": "t", "failure_time_s": None, "bit_exact": True, "notes": [], "fidelity": "faithful",
            "fidelity_reasons": [], "longest_delivery_gap_s": None, "completion_rtts": None,
            "time_to_recover_rtts": None, "longest_delivery_gap_rtts": None, "time_to_recover_s": None,
            "completed": True, "evs_retired": 0, "workload": "allreduce",
            "retransmissions": {"trim": 0, "timeout": 0, "nack": 0}}
    rows = []
    for variant, times in (("a", [1.0, 2.0, 3.0]), ("b", [3.0, 1.0, 2.0])):
        runs = [{**base, "variant": variant, "repetition": i, "seed": i + 1, "completion_time_s": t}
                for i, t in enumerate(times)]
        rows.append({**base, **repeats.aggregate(runs)})
    assert len({row["seed"] for row in rows}) == 2         # the typical runs' seeds differ
    header, cells = results.table_rows(rows)
    assert "seed" not in header and header[2] == "runs"
    assert [cell[2] for cell in cells] == ["3", "3"]


@pytest.mark.slow
def test_pcaps_go_under_the_results_folder(tmp_path, monkeypatch):
    """`run --pcap --out DIR`: the backend is given a capture into DIR/pcap, and each case (and each
    repetition) of it captures into its own subfolder there."""
    handed = []

    def backend(name, target="model", pcap=None, link_rate=None, cluster=None):
        handed.append(pcap)
        return NetsimBackend()                      # runs the case without ports, cheaply

    monkeypatch.setattr(runner, "make_backend", backend)
    scenario = load_scenario(FAILOVER, quick=True)
    out = tmp_path / "out"
    runner.run_scenario(scenario, "mininet", "model", out, True, variants=["leaf-spine"], transports=["MRC"],
                        pcap=PcapCapture(128))
    [capture] = handed
    assert capture == PcapCapture(128, (out / "pcap").resolve())
    assert capture.case_folder("leaf-spine / MRC").folder == (out / "pcap" / "leaf-spine-mrc").resolve()
    assert capture.case_folder("leaf-spine / RoCE + reroute 1 s", 2).folder.name == "leaf-spine-roce-reroute-1-s-run3"
    run_dir = tmp_path / "runs" / "x"
    assert capture.case_folder("leaf-spine / MRC").files_folder(run_dir) == (out / "pcap" / "leaf-spine-mrc").resolve()
    assert PcapCapture().files_folder(run_dir) == run_dir           # `up --pcap`: the network's run folder
    assert PcapCapture().case_folder("leaf-spine / MRC") == PcapCapture()


class _Stop(Exception):
    pass


def test_the_mininet_backend_captures_each_run_of_a_case_into_its_own_folder(tmp_path, monkeypatch):
    from experiments.backends.mininet_backend import MininetBackend
    from testbed import network
    seen = []

    def fake_network(topo, **kwargs):
        seen.append(kwargs)
        raise _Stop

    monkeypatch.setattr(network, "TestbedNetwork", fake_network)
    case = load_scenario(FAILOVER, quick=True).cases()[0]
    backend = MininetBackend("model", run_root=tmp_path / "runs", pcap=PcapCapture(200).into(tmp_path / "out" / "pcap"))
    for run in repeats.expand([case], 2, "mininet"):
        with pytest.raises(_Stop):
            backend.run_case(run)
    assert [k["pcap"] for k in seen] == [PcapCapture(200, tmp_path / "out" / "pcap" / "leaf-spine-mrc"),
                                         PcapCapture(200, tmp_path / "out" / "pcap" / "leaf-spine-mrc-run2")]
    assert all(tmp_path / "runs" in Path(k["run_dir"]).parents for k in seen)   # logs stay in the run folder


@pytest.mark.slow
@pytest.mark.integration
@requires_mininet
def test_a_mininet_run_with_pcap_writes_its_captures_under_out(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)                     # the run folders (logs) go to ./runs/experiments
    parser = argparse.ArgumentParser()
    run_cmd.add_arguments(parser)
    out = tmp_path / "out"
    args = parser.parse_args([str(FAILOVER), "--backend", "mininet", "--target", "model", "--quick",
                              "--variant", "leaf-spine", "--transport", "MRC", "--pcap-snaplen", "102",
                              "--out", str(out)])
    assert run_cmd.run(args) == 0
    captures = sorted((out / "pcap" / "leaf-spine-mrc").glob("*-port*.pcap"))
    assert len(captures) == 12                       # leafspine:2x2x2: 4 switches, 12 switch ports
    assert all(path.stat().st_size > 24 for path in captures)      # more than the pcap file header
    assert not list((tmp_path / "runs").rglob("*.pcap"))
    assert "pcap/" in capsys.readouterr().out


def test_a_repeated_case_with_one_invalid_run_is_invalid_naming_the_run():
    from experiments import repeats
    base = {"variant": "v", "transport": "MRC", "completed": True, "bit_exact": True, "notes": [],
            "fidelity": "simulated", "fidelity_reasons": [], "invalid_reasons": [], "failure_time_s": 0.5}
    keys = {key: 1.0 for key in repeats.SPREAD_KEYS}
    runs = [dict(base, **keys, seed=1, repetition=0),
            dict(base, **keys, seed=2, repetition=1, fidelity="invalid",
                 invalid_reasons=["link_kill at 30%: took effect after the workload ended"])]
    out = repeats.aggregate(runs)
    assert out["fidelity"] == "invalid"
    assert out["invalid_reasons"] == ["run 2 (seed 2): link_kill at 30%: took effect after the workload ended"]
    assert repeats.aggregate(runs[:1] * 1)["invalid_reasons"] == []


def _failover_run(seed: int, recover, note=None) -> dict:
    """A repeated failover case's run summary, as far as aggregating it reads."""
    return {"variant": "link killed", "transport": "MRC", "seed": seed, "repetition": seed - 1,
            "failure_time_s": 0.05, "completed": True, "bit_exact": True, "fidelity": "simulated",
            "fidelity_reasons": [], "invalid_reasons": [], "notes": [], "sample_interval_s": 0.005,
            "completion_time_s": 0.2, "completion_rtts": 20.0, "longest_delivery_gap_s": 0.01,
            "longest_delivery_gap_rtts": 1.0, "time_to_recover_s": recover,
            "time_to_recover_rtts": None if recover is None else recover * 100, "recovery_note": note}


def test_a_run_without_a_dip_ranks_as_the_quickest_recovery_not_as_a_never():
    runs = [_failover_run(1, None, "no dip"), _failover_run(2, 0.03), _failover_run(3, 0.01)]
    out = repeats.aggregate(runs)
    assert out["time_to_recover_s"] == 0.01 and out["recovery_note"] is None      # the median run's time
    assert out["repetition"] == 2                                                 # and that run shown
    row = ["link killed", "MRC", "yes", "200 ms", results._recovery_cell(out), "-", "simulated"]
    results._add_spread(row, out)                      # the table's recover cell with the runs' range
    assert row[5] == "10 ms (1 RTT) [no dip (5 ms samples)..30 ms]"
    most = repeats.aggregate([_failover_run(1, None, "no dip"), _failover_run(2, None, "no dip"),
                              _failover_run(3, 0.03)])
    assert most["time_to_recover_s"] is None and most["recovery_note"] == "no dip"
