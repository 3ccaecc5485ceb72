"""A recovery time is a measurement only when goodput dipped below the mark and came back: no dip
at the samples' resolution, or an averaging window longer than the run, is said, not timed."""
import io
import json

import pytest

from experiments import metrics, plots, report, results
from experiments.record import CaseRecord, FaultEvent

STEP = 0.01


def record(rate_at, fail_at=0.105, end=0.6, window=0.02):
    """A one-flow record sampled every 10 ms, `rate_at(t)` bytes per sample, failing at `fail_at`
    (between two samples), done at `end`."""
    rec = CaseRecord("s", "v", "t", "mrc", "netsim", 1, "topo", 2, "permutation", sample_interval=STEP)
    cum, samples = 0, []
    for k in range(round(end / STEP) + 1):
        cum += rate_at(k * STEP) if k else 0
        samples.append([k * STEP, [cum]])
    rec.samples, rec.faults = samples, [FaultEvent(fail_at, "link down", "s1-s3", True)]
    rec.completion_time = rec.end = end
    rec.recovery_window = window
    return rec


def test_goodput_that_never_dips_has_no_recovery_time_but_says_no_dip():
    steady = record(lambda t: 1000)
    assert metrics.time_to_recover(steady) is None        # not the 5 ms to the next sample
    assert metrics.recovery_note(steady) == metrics.NO_DIP
    summary = metrics.summarise(steady)
    assert summary["time_to_recover_s"] is None and summary["time_to_recover_rtts"] is None
    assert summary["recovery_note"] == "no dip" and summary["sample_interval_s"] == STEP
    header, rows = results.table_rows([summary])
    assert rows[0][header.index("recover")] == "no dip (10 ms samples)"


def test_a_real_dip_and_recovery_is_timed_as_before():
    dipped = record(lambda t: 0 if 0.11 <= t < 0.2 else 1000)
    assert metrics.time_to_recover(dipped) == pytest.approx(0.19 - 0.105)   # the first full window back at 90 %
    assert metrics.recovery_note(dipped) is None
    header, rows = results.table_rows([metrics.summarise(dipped)])
    assert "no dip" not in rows[0][header.index("recover")]
    never = record(lambda t: 0 if t >= 0.11 else 1000)      # dipped for good: stayed below, no note
    assert metrics.time_to_recover(never) is None and metrics.recovery_note(never) is None


def test_a_window_longer_than_the_failure_to_the_end_is_not_measurable():
    short = record(lambda t: 0 if 0.11 <= t < 0.2 else 1000, window=0.6)
    assert metrics.time_to_recover(short) is None
    assert metrics.recovery_note(short) == metrics.WINDOW_OVER_RUN
    summary = metrics.summarise(short)
    header, rows = results.table_rows([summary])
    assert rows[0][header.index("recover")] == "window longer than the run"
    assert plots._recovery_missing(summary) == "window > run"
    assert "window > run" in plots._no_recovery([summary])


def test_summary_md_and_report_say_what_ran_under_the_scenarios_title(tmp_path):
    meta = {"title": "Whose loss", "description": "d", "scenario_file": "x.yaml", "backend": "netsim",
            "seed": 1, "quick": True, "created": "now", "ran": "permutation 256 KiB; link kill"}
    summaries = [metrics.summarise(record(lambda t: 1000))]
    md = results.write_markdown(meta, summaries, [], tmp_path).read_text()
    assert md.splitlines()[:3] == ["# Whose loss", "", "ran: permutation 256 KiB; link kill"]
    assert '"no dip (N samples)"' in md and '"window longer than the run"' in md
    results.write_summary(meta, summaries, [], tmp_path)
    doc = json.loads((tmp_path / results.SUMMARY_JSON).read_text())
    page = report.render_markdown([(tmp_path, doc)], tmp_path / "report.md")
    assert "ran: permutation 256 KiB; link kill" in page
    assert "ran: permutation 256 KiB; link kill" in report.render_html([(tmp_path, doc)], tmp_path / "r.html")


def test_a_run_of_some_cases_says_in_summary_md_which_ran(tmp_path, monkeypatch):
    from experiments import runner
    from experiments.scenario import parse_scenario
    from tests.experiments.test_run_results import FOUR_CASES, FakeBackend
    doc = dict(FOUR_CASES, variants=[{"label": "clean", "faults": []},
                                     {"label": "bigger", "faults": [], "workload": {"kind": "allreduce", "bytes": 1 << 20}}])
    monkeypatch.setattr(runner, "make_backend", lambda *args, **kwargs: FakeBackend())
    monkeypatch.setattr(plots, "make_figures", lambda *args, **kwargs: [])
    runner.run_scenario(parse_scenario(doc), "netsim", "model", tmp_path, quick=False, variants=["bigger"],
                        progress_stream=io.StringIO())
    lines = (tmp_path / results.SUMMARY_MD).read_text().splitlines()
    assert lines[0] == "# Fake cases" and lines[2] == "ran: all-reduce 1 MiB"
    assert json.loads((tmp_path / results.SUMMARY_JSON).read_text())["ran"] == "all-reduce 1 MiB"


def test_the_paper_page_says_no_dip_rather_than_never():
    from experiments import paper
    steady = metrics.summarise(record(lambda t: 1000))
    assert paper._recovered(steady, steady["time_to_recover_s"]) == "recovery: no dip (10 ms samples)"
