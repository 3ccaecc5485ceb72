"""Scenario files, the results folder, the comparison table and the report."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import yaml

from cli import report, run as run_cmd
from experiments import runner
from experiments import metrics, results
from experiments.scenario import ScenarioError, load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[2]

TINY = {
    "name": "tiny",
    "title": "Tiny failover",
    "topology": "leafspine:2x2x1",
    "link": {"rate_bps": 100_000_000},
    "horizon_s": 1.5,
    "sample_interval_s": 0.002,
    "workload": {"kind": "allreduce", "bytes": 131072, "chunk_bytes": 16384},
    "faults": [{"kind": "link_kill", "link": "auto", "at": "30%"}],
    "transports": [{"name": "MRC", "mode": "mrc"}, {"name": "RoCE + reroute", "mode": "roce",
                                                     "reroute_delay_s": 0.2}],
}


@pytest.fixture(autouse=True)
def console_logging_only():
    """`mrc-testbed run` logs into its results folder; put logging back to the console afterwards."""
    yield
    from testbed.logs import setup_logging
    setup_logging(0)


def write(tmp_path: Path, doc, name="s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc) if not isinstance(doc, str) else doc)
    return path


@pytest.mark.parametrize("change, field, reason", [
    (lambda d: d["workload"].update(kind="broadcast"), "workload.kind", "not one of"),
    (lambda d: d["workload"].pop("bytes"), "workload.bytes", "missing"),
    (lambda d: d["faults"][0].update(at="thirty"), "faults[0].at", "neither seconds"),
    (lambda d: d["faults"][0].update(loss=2.0), "faults[0].loss", "probability"),
    (lambda d: d["faults"][0].update(kind="meteor"), "faults[0].kind", "not one of"),
    (lambda d: d["faults"][0].update(switch="s3"), "faults[0].switch", "names a link"),
    (lambda d: d["faults"][0].update(link=["s1", "s9"]), "faults[0].link", "no link between s1 and s9 in leafspine:2x2x1"),
    (lambda d: d.update(faults=[{"kind": "switch_kill", "switch": "h1"}]), "faults[0].switch", "'h1' is not a switch"),
    (lambda d: d.update(variants=[{"label": "a", "faults": [{"kind": "switch_kill", "switch": "s9"}]}]),
     "variants[0].faults[0].switch", "not a switch of leafspine:2x2x1"),
    (lambda d: d["transports"][0].update(mode="tcp"), "transports[0].mode", "not one of"),
    (lambda d: d["transports"][0].update(params={"num_evs": 999}), "transports[0].params.num_evs", "outside 16..256"),
    (lambda d: d["transports"][0].update(params={"warp": 9}), "transports[0].params.warp", "not a transport"),
    (lambda d: d["transports"][0].update(reroute_delay_s=1.0), "transports[0].reroute_delay_s", "baseline"),
    (lambda d: d.update(topology="ring:5"), "topology", "unknown kind"),
    (lambda d: d.update(colour="blue"), "colour", "unknown field"),
    (lambda d: d.update(horizon_s=-1), "horizon_s", "positive"),
    (lambda d: d.update(variants=[{"label": "a", "linkk": {}}]), "variants[0].linkk", "unknown field"),
    (lambda d: d.update(variants=[{"label": "a", "workload": {"bytes": "big"}}]), "variants[0].workload.bytes",
     "integer"),
    (lambda d: d.update(link={"rate_bps": 0}), "link.rate_bps", "minimum"),
    (lambda d: d.pop("transports"), "transports", "missing"),
])
def test_a_bad_scenario_file_gets_an_error_naming_the_file_and_field(tmp_path, change, field, reason):
    doc = json.loads(json.dumps(TINY))
    change(doc)
    path = write(tmp_path, doc)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert info.value.field == field
    assert str(path) in str(info.value) and field in str(info.value) and reason in str(info.value)


def test_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "missing.yaml")
    with pytest.raises(ScenarioError, match="line 2"):
        load_scenario(write(tmp_path, "name: x\n  bad: [indent\n"))
    with pytest.raises(ScenarioError, match="mapping"):
        load_scenario(write(tmp_path, "- just\n- a list\n"))


def test_variants_override_and_quick_merges():
    doc = dict(TINY, variants=[{"label": "a"}, {"label": "b", "topology": "multiplane:2x2x2x1",
                                                "workload": {"bytes": 65536}}],
               quick={"workload": {"bytes": 32768}, "horizon_s": 1.0})
    full = parse_scenario(doc)
    assert [v.workload.bytes for v in full.variants] == [131072, 65536]
    assert full.variants[1].topology == "multiplane:2x2x2x1" and full.variants[1].workload.kind == "allreduce"
    assert len(full.cases()) == 4
    quick = parse_scenario(doc, quick=True, seed=9)
    assert quick.horizon_s == 1.0 and quick.variants[0].workload.bytes == 32768 and quick.seed == 9


@pytest.mark.slow
def test_run_command_writes_the_results_folder_and_prints_the_table(tmp_path, capsys):
    scenario = write(tmp_path, TINY, "tiny.yaml")
    out = tmp_path / "out"
    parser = argparse.ArgumentParser()
    run_cmd.add_arguments(parser)
    args = parser.parse_args([str(scenario), "--backend", "netsim", "--out", str(out), "--seed", "3"])
    assert run_cmd.run(args) == 0
    printed = capsys.readouterr()
    assert "completion" in printed.out and "MRC" in printed.out and "RoCE + reroute" in printed.out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["seed"] == 3 and summary["backend"] == "netsim" and len(summary["cases"]) == 2
    for case in summary["cases"]:
        assert set(metrics.SUMMARY_FIELDS) <= set(case)
        for key in ("completion_time_s", "time_to_recover_s", "evs_retired", "retransmissions", "bit_exact"):
            assert key in case
    assert summary["figures"] == ["goodput.png", "completion.png"]
    for name in summary["figures"]:
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    lines = [json.loads(line) for line in (out / "raw.jsonl").read_text().splitlines()]
    assert {line["type"] for line in lines} >= {"case", "sample"}
    assert sum(line["type"] == "case" for line in lines) == 2
    assert "goodput.png" in (out / "summary.md").read_text()
    assert (out / "testbed.log").exists()

    page = tmp_path / "report.html"
    assert report.run(argparse.Namespace(results=tmp_path, output=page)) == 0
    text = page.read_text()
    assert "Tiny failover" in text and "out/goodput.png" in text and "<table>" in text
    md = tmp_path / "report.md"
    assert report.run(argparse.Namespace(results=tmp_path, output=md)) == 0
    assert "![completion](out/completion.png)" in md.read_text()
    assert "backend netsim, seed 3" in md.read_text()                 # netsim has no switch target
    from experiments.report import _backend
    assert _backend({"backend": "mininet", "target": "bmv2"}) == "mininet (target bmv2)"


def test_run_command_rejects_a_bad_scenario_with_status_2(tmp_path, capsys):
    bad = write(tmp_path, dict(TINY, workload={"kind": "allreduce"}))
    parser = argparse.ArgumentParser()
    run_cmd.add_arguments(parser)
    assert run_cmd.run(parser.parse_args([str(bad), "--backend", "netsim", "--out", str(tmp_path / "o")])) == 2
    assert "workload.bytes" in capsys.readouterr().err


def test_report_without_results(tmp_path, capsys):
    assert report.run(argparse.Namespace(results=tmp_path / "none", output=None)) == 2
    assert report.run(argparse.Namespace(results=tmp_path, output=tmp_path / "r.pdf")) == 2


def test_default_backend_falls_back_to_netsim_with_a_reason(monkeypatch, capsys):
    from experiments import backends
    monkeypatch.setattr(backends, "mininet_unavailable", lambda: "the mininet backend needs root")
    assert runner.choose_backend(None) == "netsim"
    assert "needs root" in capsys.readouterr().err
    assert runner.choose_backend("netsim") == "netsim"


def test_time_to_recover_definition():
    from experiments.record import CaseRecord, FaultEvent
    rec = CaseRecord("s", "v", "t", "mrc", "netsim", 0, "topo", 2, "allreduce", sample_interval=0.01)
    rate = 1000                       # bytes per 10 ms before the failure
    cum, samples = 0, []
    for k in range(0, 41):
        t = k * 0.01
        if k and not (10 < k <= 15):  # goodput stops for 50 ms after the failure at 0.1 s
            cum += rate
        samples.append([t, [cum]])
    rec.samples = samples
    rec.faults = [FaultEvent(0.1, "link down", "s1-s3", True)]
    rec.completion_time = rec.end = 0.4
    assert metrics.time_to_recover(rec) == pytest.approx(0.05)
    assert metrics.time_to_recover(rec, window=0.037) == pytest.approx(0.05)   # not a whole number of samples
    rec.recovery_window = 0.052
    assert metrics.time_to_recover(rec) == pytest.approx(0.05)
    rec.completion_time = None                                          # the same goodput, but it never finished
    assert metrics.time_to_recover(rec) is None
    rec.completion_time = 0.4
    rec.samples = [[t, [min(c, 11 * rate)]] for t, (c,) in samples]     # never again
    assert metrics.time_to_recover(rec) is None


def test_time_to_recover_counts_from_a_delayed_drop_and_not_from_the_collectives_tail():
    from experiments.record import CaseRecord, FaultEvent, FlowRecord

    def record(rate_at, end=0.6, first_done=0.5):
        rec = CaseRecord("s", "v", "t", "roce", "mininet", 0, "topo", 2, "allreduce", sample_interval=0.01)
        rec.flows = [FlowRecord("h1", "h2", 1, finish=first_done), FlowRecord("h2", "h1", 1, finish=end)]
        cum, samples = 0, []
        for k in range(0, round(end / 0.01) + 1):
            cum += rate_at(k * 0.01) if k else 0
            samples.append([k * 0.01, [cum]])
        rec.samples, rec.faults = samples, [FaultEvent(0.1, "link down", "s1-s3", True)]
        rec.completion_time = rec.end = end
        rec.recovery_window = 0.02
        return rec
    # messages under way keep goodput up for 40 ms, then it stalls until a reroute at 0.4 s
    stalled = record(lambda t: 1000 if t <= 0.14 or t > 0.4 else 0)
    assert metrics.time_to_recover(stalled) == pytest.approx(0.3)
    # no drop after the failure but the collective's tail at the end: no dip, not a time
    tail = record(lambda t: 1000 if t <= 0.5 else 200)
    assert metrics.time_to_recover(tail) is None
    assert metrics.recovery_note(tail) == metrics.NO_DIP
    # the same drop with every flow still sending: capacity the failure took, goodput stayed below the mark
    slowed = record(lambda t: 1000 if t <= 0.5 else 200, first_done=0.6)
    assert (metrics.time_to_recover(slowed), metrics.recovery_note(slowed)) == (None, None)
    slowed.flows.append(FlowRecord("h3", "h4", 1, finish=0.05))        # a flow done before the failure
    assert (metrics.time_to_recover(slowed), metrics.recovery_note(slowed)) == (None, None)
    # a flow had finished, but the drop begins with a stall (flap.yaml's RoCE stalled 2 s, then went on
    # below the mark): not the collective's tail, and not "no dip"
    stall = record(lambda t: 1000 if t <= 0.5 else (0 if t < 0.55 else 200))
    assert (metrics.time_to_recover(stall), metrics.recovery_note(stall)) == (None, None)
    assert metrics.longest_delivery_gap(stall) >= stall.recovery_window


def test_longest_delivery_gap_is_the_longest_run_of_samples_without_a_new_byte():
    from experiments.record import CaseRecord, FaultEvent
    rec = CaseRecord("s", "v", "t", "mrc", "mininet", 0, "topo", 2, "allreduce", sample_interval=0.01)
    assert metrics.longest_delivery_gap(rec) is None                  # no failure, no gap
    arrivals = {k for k in range(41) if not (12 <= k < 15 or 20 <= k < 30)}   # 30 ms, then 100 ms, empty
    cum, samples = 0, []
    for k in range(41):
        cum += 1000 if k in arrivals else 0
        samples.append([k * 0.01, [cum, 0]])
    rec.samples, rec.faults = samples, [FaultEvent(0.1, "link down", "s1-s3", True)]
    rec.completion_time = rec.end = 0.4
    assert metrics.longest_delivery_gap(rec) == pytest.approx(0.10)
    rec.completion_time = 0.25                      # done at 0.25: the later gap is not the failure's
    assert metrics.longest_delivery_gap(rec) == pytest.approx(0.03)
    rec.completion_time, rec.end = None, 0.4        # never done: a gap open at the end counts to it
    rec.samples = [s for s in samples if s[0] <= 0.25] + [[0.3, samples[25][1]], [0.4, samples[25][1]]]
    assert metrics.longest_delivery_gap(rec) == pytest.approx(0.21)
    summary = metrics.summarise(rec)
    assert summary["longest_delivery_gap_s"] == pytest.approx(0.21)
    header, rows = results.table_rows([summary])
    assert rows[0][header.index("longest gap")] == "210 ms"
    assert rows[0][header.index("recover")] == "never"


@pytest.mark.slow
def test_each_kind_of_figure_is_made_when_the_data_calls_for_it(tmp_path):
    """ev_states.png for a gray link, scale.png across sizes, flows.png for incast and permutation."""
    doc = {"name": "figs", "title": "Figures", "link": {"rate_bps": 100_000_000}, "horizon_s": 1.0,
           "sample_interval_s": 0.002, "workload": {"kind": "alltoall", "bytes": 65536, "chunk_bytes": 16384},
           "faults": [{"kind": "gray_loss", "loss": 0.2, "at": 0.001}],
           "transports": [{"name": "MRC", "mode": "mrc"}],
           "variants": [{"label": "2 hosts", "topology": "leafspine:2x2x1"},
                        {"label": "4 hosts", "topology": "leafspine:2x2x2"},
                        {"label": "incast", "topology": "leafspine:2x2x2", "faults": [],
                         "workload": {"kind": "incast", "senders": 2, "victim": True}}]}
    out = tmp_path / "figs"
    summaries, figures = runner.run_scenario(parse_scenario(doc), "netsim", "model", out, quick=False)
    names = sorted(f.name for f in figures)
    assert names == ["completion.png", "ev_states.png", "flows.png", "goodput.png", "scale.png"]
    for f in figures:
        assert f.exists() and f.stat().st_size > 10_000
    assert {s["hosts"] for s in summaries} == {2, 4}
    assert summaries[2]["throughput_by_role_bps"].keys() == {"incast", "victim"}


def test_variant_and_transport_filters(tmp_path):
    scenario = load_scenario(ROOT / "experiments" / "failover.yaml", quick=True)
    cases = runner.select_cases(scenario, ["multi-plane"], ["MRC"])
    assert [(c.variant.label, c.transport.name) for c in cases] == [("multi-plane", "MRC")]
    with pytest.raises(ValueError, match="--variant 'ring'"):
        runner.select_cases(scenario, ["ring"], [])


def test_backend_errors_name_what_is_missing(monkeypatch):
    from experiments import backends
    with pytest.raises(ValueError, match="--backend 'ns3'"):
        backends.make_backend("ns3")
    with pytest.raises(ValueError, match="--target 'tofino'"):
        backends.make_backend("mininet", "tofino")
    monkeypatch.setattr(backends, "mininet_unavailable", lambda: "the mininet backend needs root")
    with pytest.raises(RuntimeError, match="needs root"):
        backends.make_backend("mininet")
    monkeypatch.setattr(backends, "mininet_unavailable", lambda: None)
    monkeypatch.setattr(backends.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="simple_switch_grpc"):
        backends.make_backend("mininet", "bmv2")


@pytest.mark.slow
def test_an_interrupted_run_keeps_the_cases_that_finished(tmp_path, monkeypatch):
    from experiments.backends.netsim_backend import NetsimBackend
    real = NetsimBackend.run_case
    calls = []

    def run_then_interrupt(self, case, progress=lambda f: None):
        calls.append(case.label)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, case, progress)

    monkeypatch.setattr(NetsimBackend, "run_case", run_then_interrupt)
    out = tmp_path / "partial"
    with pytest.raises(KeyboardInterrupt):
        runner.run_scenario(parse_scenario(TINY), "netsim", "model", out, quick=False)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True and len(summary["cases"]) == 1
    assert (out / "goodput.png").exists()


def test_the_scenario_example_in_the_experiments_readme_is_valid():
    import re
    import yaml
    text = (ROOT / "experiments" / "README.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert block, "experiments/README.md has no yaml example"
    scenario = parse_scenario(yaml.safe_load(block.group(1)), "experiments/README.md")
    assert {c.transport.mode for c in scenario.cases()} == {"mrc", "roce"} and len(scenario.variants) == 2


def test_a_distorted_case_shows_its_badge_and_reasons_in_the_table_summary_and_report(tmp_path):
    cases = [{**_summary_of(v, t), "fidelity": f, "fidelity_reasons": r} for v, t, f, r in (
        ("leaf-spine", "MRC", "faithful", []),
        ("leaf-spine", "RoCE", "distorted", ["s3: CPU 98% of a core at its busiest (mean 80%): it could not keep up"]))]
    header, rows = results.table_rows(cases)
    assert [row[header.index("fidelity")] for row in rows] == ["faithful", "distorted"]
    meta = {"title": "t", "scenario": "t", "scenario_file": "t.yaml", "backend": "mininet", "seed": 1, "created": "now"}
    results.write_summary(meta, cases, [], tmp_path)
    results.write_markdown(meta, cases, [], tmp_path)
    assert "- leaf-spine / RoCE: s3: CPU 98% of a core" in (tmp_path / "summary.md").read_text()
    page = tmp_path / "report.html"
    assert report.run(argparse.Namespace(results=tmp_path, output=page)) == 0
    text = page.read_text()
    assert "<td class='distorted'>distorted</td>" in text and "<td class='faithful'>faithful</td>" in text
    assert "<li>leaf-spine / RoCE: s3: CPU 98% of a core" in text


def _summary_of(variant: str, transport: str) -> dict:
    """A case summary with every field, as metrics.summarise makes it for an empty record."""
    from experiments.record import CaseRecord
    return {**metrics.summarise(CaseRecord("t", variant, transport, "mrc", "mininet:model", 1, "topo", 4, "allreduce")),
            "variant": variant, "transport": transport}


def test_cpu_distorted_spans_are_shaded_on_the_goodput_panel():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from experiments import plots
    from experiments.record import CaseRecord
    rec = CaseRecord("s", "v", "MRC", "mrc", "mininet", 0, "topo", 2, "allreduce")
    rec.fidelity = {"verdict": "distorted", "reasons": ["h1: ..."],
                    "spans": [[0.25, 1.25, "h1: CPU wait"], [2.0, 2.5, "s3: CPU"]]}
    fig, ax = plt.subplots()
    try:
        plots._shade_distortion(ax, [rec], {"MRC": "tab:blue"}, set())
        spans = [p for p in ax.patches]
        assert len(spans) == 2
        xs = sorted(round(float(p.get_bbox().x0), 3) for p in spans)
        assert xs == [250.0, 2000.0]                                   # ms on the time axis
        assert [p.get_label() for p in spans][0].startswith("CPU-distorted")
    finally:
        plt.close(fig)


def test_short_times_in_the_table_keep_their_digits():
    assert results._millis(0.150, 1.0) == "150 ms" and results._millis(42e-6, 1.0) == "42 µs"
    assert results._millis(None, 1.0) == "-" and results._millis(0.2, None) == "-"
    assert results._recovery(None, 1.0, True) == "stayed <90%" and results._recovery(None, 1.0, False) == "never"


def test_link_keys_the_topology_refuses_are_a_scenario_error_naming_link(tmp_path):
    """ecn_threshold 24 over the default trim threshold of 8 (a fuzzed datacenter.yaml found it)."""
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\ntitle: bad\ntopology: leafspine:2x2x2\nlink: {ecn_threshold: 24}\n"
                    "workload: {kind: allreduce, bytes: 65536}\ntransports: [{name: MRC, mode: mrc}]\n")
    with pytest.raises(ScenarioError, match="link: .*ecn_threshold = 24 exceeds trim_threshold = 8"):
        load_scenario(path)


def test_with_delivery_times_the_longest_gap_is_measured_to_the_packet():
    """Samples every 5 ms, deliveries known: a 12.3 ms outage reads 12.3 ms, not a multiple of 5."""
    from experiments.record import CaseRecord, FaultEvent
    rec = CaseRecord("s", "v", "t", "mrc", "mininet", 0, "topo", 2, "allreduce", sample_interval=0.005)
    rec.samples = [[k * 0.005, [k * 1000]] for k in range(40)]
    rec.faults = [FaultEvent(0.05, "link down", "s1-s3", True)]
    rec.completion_time = rec.end = 0.2
    rec.deliveries = [[0.0401, 0.0449], [0.0451, 0.0512], [0.0635, 0.0649], [0.065, 0.0699],
                      [0.0701, 0.0748], [0.16, 0.19]]     # nothing 51.2 -> 63.5 ms and 74.8 -> 160 ms
    assert metrics.longest_delivery_gap(rec) == pytest.approx(0.0852)
    rec.deliveries = rec.deliveries[:-1]
    rec.completion_time, rec.end = None, 0.2                     # never done: open to the end
    assert metrics.longest_delivery_gap(rec) == pytest.approx(0.2 - 0.0748)
    rec.deliveries = [[0.0401, 0.0512], [0.0635, 0.07]]
    rec.completion_time = rec.end = 0.07
    assert metrics.longest_delivery_gap(rec) == pytest.approx(0.0123)


def test_agent_goodput_records_give_the_delivery_times(tmp_path):
    import json
    from experiments.backends.agent_logs import _goodput
    from experiments.record import CaseRecord, FlowRecord
    from experiments.backends.agent_jobs import FlowLog
    log = tmp_path / "h1.jsonl"
    start = 1000.0
    lines = [{"t": start + 0.005, "kind": "goodput", "rx_bytes": 2048, "rx_first": start + 0.0012,
              "rx_last": start + 0.0047},
             {"t": start + 0.010, "kind": "goodput", "rx_bytes": 0},
             {"t": start + 0.015, "kind": "goodput", "rx_bytes": 1024, "rx_first": start + 0.0131,
              "rx_last": start + 0.0131}]
    log.write_text("".join(json.dumps(r) + "\n" for r in lines))
    rec = CaseRecord("s", "v", "t", "mrc", "mininet", 0, "topo", 2, "allreduce", sample_interval=0.005)
    flow = FlowRecord("h2", "h1", 3072)
    _goodput(rec, [FlowLog(flow, log)], start)
    assert rec.deliveries == [[pytest.approx(0.0012), pytest.approx(0.0047)],
                              [pytest.approx(0.0131), pytest.approx(0.0131)]]
    assert rec.samples[-1][1] == [3072]
