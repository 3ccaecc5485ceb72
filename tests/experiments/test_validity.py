"""Results that cannot mislead: a fault that missed its workload makes the case invalid (netsim and
hand-made Mininet-like records), and a case cut by its horizon while delivering says so instead of
"never" (table, summary, legend); `mrc-testbed run` exits 3 on an invalid case."""
from __future__ import annotations

import pytest
import yaml

from experiments import horizons, metrics, plots, rate_caps, results, validity
from experiments.backends.netsim_backend import NetsimBackend
from experiments.calibration import LinkRate
from experiments.record import CaseRecord, FaultEvent, FaultPlan, FlowRecord
from experiments.scenario import load_scenario, parse_scenario

TINY = {"name": "tiny", "title": "tiny", "topology": "leafspine:2x2x1", "horizon_s": 2.0,
        "sample_interval_s": 0.005, "link": {"rate_bps": 20_000_000},
        "workload": {"kind": "allreduce", "bytes": 65536, "chunk_bytes": 16384},
        "transports": [{"name": "MRC", "mode": "mrc"}]}


def run_tiny(planned, **overrides):
    case = parse_scenario({**TINY, **overrides, "faults": planned}).cases()[0]
    record = NetsimBackend().run_case(case)
    return record, metrics.summarise(record)


def test_a_fault_landing_within_the_workload_is_recorded_where_it_landed_and_valid():
    record, summary = run_tiny([{"kind": "link_kill", "link": "auto", "at": "40%"}])
    assert record.completed
    [landing] = summary["faults"]
    assert landing["planned_fraction"] == 0.4
    assert landing["t"] < record.completion_time and landing["fraction"] == pytest.approx(0.4, abs=0.1)
    assert record.faults[0].fault == 0 and record.faults[0].fraction == landing["fraction"]
    assert summary["invalid_reasons"] == [] and summary["fidelity"] == "simulated"


def test_a_fault_due_after_the_workload_ended_makes_the_case_invalid():
    """The workload (64 KB at 20 Mbit/s) is done long before the fault is due at 1.5 s."""
    record, summary = run_tiny([{"kind": "switch_blackhole", "switch": "auto", "at": 1.5}])
    assert record.completed and record.completion_time < 0.5 and not record.faults
    assert summary["fidelity"] == "invalid" and summary["fidelity_monitor"] == "simulated"
    [reason] = summary["invalid_reasons"]
    assert "never took effect" in reason and "switch blackhole" in reason
    header, rows = results.table_rows([summary])
    assert rows[0][header.index("fidelity")] == "invalid"
    assert results.invalid_lines([summary]) == [f"{summary['variant']} / MRC: {reason}"]


def test_a_progress_fault_due_when_the_workload_is_over_makes_the_case_invalid():
    """A fault "at 99.99%" is due with the last packet: it comes when every byte has arrived."""
    record, summary = run_tiny([{"kind": "link_kill", "link": "auto", "at": "99.99%"}])
    assert record.completed and summary["faults"][0]["fraction"] == 1.0
    [reason] = summary["invalid_reasons"]
    assert reason.startswith("link kill (auto) at 100% of the workload: took effect after the workload's "
                             "last byte had arrived")
    assert summary["fidelity"] == "invalid"


def mininet_like(completed: bool, fault_t: float, end: float = 1.0) -> CaseRecord:
    """A record as the Mininet backend leaves it: 5 ms samples of 100 kB/s, fault times only."""
    rec = CaseRecord("s", "v", "MRC", "mrc", "mininet:model", 0, "topo", 2, "allreduce", sample_interval=0.005)
    rec.flows = [FlowRecord("*", "h1", 100_000)]
    rec.samples = [[k * 0.005, [min(100_000, k * 500)]] for k in range(int(end / 0.005) + 1)]
    rec.flows[0].received_bytes = rec.samples[-1][1][0]
    rec.planned_faults = [FaultPlan("link kill (s1-s3) at 25% of the workload", fraction=0.25)]
    rec.faults = [FaultEvent(fault_t, "link down", "s1-s3", True, fault=0)]
    rec.completed = completed
    rec.completion_time = 1.0 if completed else None
    rec.end = end
    rec.horizon = end
    return rec


def test_landing_shares_are_filled_in_from_the_goodput_samples():
    rec = mininet_like(True, 0.2525)
    validity.fill_landing(rec)
    assert rec.faults[0].fraction == pytest.approx(0.2525)
    assert validity.invalid_reasons(rec) == []
    assert validity.delivered_at(rec, 5.0) == 1.0


def test_a_fault_after_the_workload_ended_is_invalid_and_says_when():
    rec = mininet_like(True, 1.015, end=1.05)
    validity.fill_landing(rec)
    [reason] = validity.invalid_reasons(rec)
    assert "after the workload ended" in reason and "1.01 s" in reason and "ended at 1 s" in reason
    assert "INVALID: a fault came after the workload ended" in validity.outcome_label(rec)
    rec = mininet_like(True, 0.5)                                      # at 50 %, planned at 25 %
    validity.fill_landing(rec)
    assert "25 points from the planned 25%" in validity.invalid_reasons(rec)[0]


def test_a_case_cut_by_its_horizon_while_delivering_reads_cut_at_horizon_not_never(tmp_path):
    cut = mininet_like(False, 0.25, end=0.9)                           # delivering until the end: 90 %
    stuck = mininet_like(False, 0.25, end=0.9)
    stuck.samples = [[t, [min(b, 40_000)]] for t, (b,) in stuck.samples]   # nothing after 0.4 s
    stuck.flows[0].received_bytes = 40_000
    summaries = [metrics.summarise(r) for r in (cut, stuck)]
    assert [s["ending"] for s in summaries] == ["cut at horizon", "stuck"]
    header, rows = results.table_rows(summaries)
    assert rows[0][header.index("completion")] == "cut at horizon: 90 % delivered"
    assert rows[0][header.index("recover")] == "cut at horizon"
    assert rows[1][header.index("completion")] == "never (stuck at 40 %)"
    assert rows[1][header.index("recover")] == "never"
    assert validity.outcome_label(cut) == "cut at horizon: 90 % delivered"
    cut.variant, stuck.variant, stuck.transport = "a", "a", "RoCE"
    plots.goodput_figure([cut, stuck], {"MRC": "red", "RoCE": "blue"}, tmp_path / "g.png", "t")
    assert (tmp_path / "g.png").stat().st_size > 0


def test_the_legend_names_the_horizon_cut(monkeypatch):
    cut = mininet_like(False, 0.25, end=0.9)
    labels = []
    real_plot = plots.plt.Axes.plot

    def plot(ax, *args, **kwargs):
        labels.append(kwargs.get("label"))
        return real_plot(ax, *args, **kwargs)
    monkeypatch.setattr(plots.plt.Axes, "plot", plot)
    fig, ax = plots.plt.subplots()
    plots._goodput_whole(ax, "v", [cut], {"MRC": "red"})
    plots.plt.close(fig)
    assert "MRC (cut at horizon: 90 % delivered)" in labels


def test_horizons_cover_the_workload_the_reroute_and_the_timeout_after_it():
    """The quick failover on BMv2 at 2 Mbit/s (the case of issue #30): MRC needed 3.96 s of a
    3.15 s least duration, RoCE + reroute the reroute and a backed-off timeout on top."""
    scenario = load_scenario("experiments/failover.yaml", quick=True)
    by_name = {c.transport.name: c for c in scenario.cases() if c.variant.label == "leaf-spine"}
    rate = LinkRate(2_000_000)
    mrc_topo, _ = rate_caps.target_topology(by_name["MRC"], "bmv2", rate)
    least, _ = horizons.estimated_duration(by_name["MRC"], mrc_topo, "bmv2")
    mrc, _ = horizons.horizon(by_name["MRC"], mrc_topo, "bmv2")
    assert mrc >= horizons.HORIZON_ROOM * least > 4.0
    case = by_name["RoCE + reroute 1 s"]
    topo, notes = rate_caps.target_topology(case, "bmv2", rate)
    rerouted, note = horizons.horizon(case, topo, "bmv2")
    assert rerouted >= mrc + 1.0 + 1.0 and note in notes and "until the reroute" in note


@pytest.mark.slow
def test_run_exits_3_on_an_invalid_case_unless_allowed(tmp_path, capsys):
    from cli.main import main
    path = tmp_path / "late.yaml"
    path.write_text(yaml.safe_dump({**TINY, "faults": [{"kind": "link_kill", "link": "auto", "at": 1.5}]}))
    assert main(["run", str(path), "--backend", "netsim", "--out", str(tmp_path / "a")]) == 3
    out, err = capsys.readouterr()
    assert "INVALID: leafspine:2x2x1 / MRC: link kill (auto) at t = 1.5 s: never took effect" in out
    assert "--allow-invalid" in err
    assert main(["run", str(path), "--backend", "netsim", "--out", str(tmp_path / "b"), "--allow-invalid"]) == 0
    md = (tmp_path / "b" / "summary.md").read_text()
    assert "Invalid: a fault missed the workload" in md and "never took effect" in md


def test_a_fault_of_several_changes_lands_with_its_first():
    """A blackhole writes an entry per port, 80 ms each on a busy switch here: the fault began
    with the first, and is where it landed; `t` stays when the last took effect."""
    from experiments import faults

    class BusySwitch:
        clock = 1.0

        def switch_ports(self, switch):
            return [1, 2, 3, 4]

        def set_port_fault(self, switch, port, drop_all, drop_prob):
            self.clock += 0.08

    rec = mininet_like(True, 0.0)
    rec.faults = []
    spec = parse_scenario({**TINY, "faults": [{"kind": "switch_blackhole", "switch": "s3", "at": "25%"}]}
                          ).cases()[0].variant.faults[0]
    [on] = [a for a in faults.plan_actions(spec, None, "s3", 1.0)]
    target = BusySwitch()
    t = faults.apply_action(faults.dataclasses.replace(on, fault=0), target, rec, lambda: target.clock)
    [event] = rec.faults
    assert t == event.t == pytest.approx(1.32) and event.began == pytest.approx(1.08)
    rec.faults[0].t, rec.faults[0].began = 0.57, 0.25
    validity.fill_landing(rec)
    assert event.fraction == pytest.approx(0.25) and validity.invalid_reasons(rec) == []
    assert metrics.summarise(rec)["faults"][0]["t"] == 0.25


def test_the_report_shows_an_invalid_case_and_why(tmp_path):
    from experiments import report
    record, _ = run_tiny([{"kind": "switch_blackhole", "switch": "auto", "at": 1.5}])
    summary = metrics.summarise(record)
    meta = {"scenario": "tiny", "title": "tiny", "created": "now", "backend": "netsim", "seed": 1}
    (tmp_path / "run").mkdir()
    results.write_summary(meta, [summary], [], tmp_path / "run")
    page, _ = report.write_report(tmp_path, tmp_path / "report.html")
    text = page.read_text()
    assert "<td class='invalid'>invalid</td>" in text and "never took effect" in text
    page, _ = report.write_report(tmp_path, tmp_path / "report.md")
    assert "- invalid: leafspine:2x2x1 / MRC: switch blackhole (auto) at t = 1.5 s: never took effect" in page.read_text()
