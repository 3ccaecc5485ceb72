"""What a run writes and how its results read: results before figures, interrupted runs marked
(summary.md, report, report --paper), figures that were not measured shown as not measured."""
from __future__ import annotations

import argparse
import io
import json

import pytest

from experiments import plots, report, results, runner
from experiments.record import CaseRecord, FlowRecord
from experiments.scenario import parse_scenario

FOUR_CASES = {
    "name": "fake", "title": "Fake cases", "topology": "leafspine:2x2x1", "horizon_s": 1.0,
    "workload": {"kind": "allreduce", "bytes": 65536},
    "transports": [{"name": "MRC", "mode": "mrc"}, {"name": "RoCE", "mode": "roce"}],
    "variants": [{"label": "clean", "faults": []}, {"label": "also clean", "faults": []}],
}


def fake_record(case) -> CaseRecord:
    """A finished case, made up: two samples, one flow."""
    record = CaseRecord(case.scenario.name, case.variant.label, case.transport.name, case.transport.mode,
                        "netsim", case.scenario.seed, "topo", 2, "allreduce", end=0.01, completed=True,
                        completion_time=0.01, bit_exact=True, sample_interval=0.005)
    record.flows = [FlowRecord("h1", "h2", 1000, received_bytes=1000, finish=0.01)]
    record.samples = [[0.005, [500]], [0.01, [1000]]]
    return record


class FakeBackend:
    """Hands back a made-up record per case; raises KeyboardInterrupt at case `stop_at` (1-based)."""

    name = "netsim"

    def __init__(self, stop_at: int = 0) -> None:
        self.stop_at, self.calls = stop_at, 0

    def run_case(self, case, progress=lambda fraction: None):
        self.calls += 1
        if self.calls == self.stop_at:
            raise KeyboardInterrupt
        progress(1.0)
        return fake_record(case)


def run_fake(tmp_path, monkeypatch, backend: FakeBackend, stream=None):
    monkeypatch.setattr(runner, "make_backend", lambda *args, **kwargs: backend)
    return runner.run_scenario(parse_scenario(FOUR_CASES), "netsim", "model", tmp_path / "out", quick=False,
                               progress_stream=stream or io.StringIO())


def test_results_are_written_before_the_figures_and_a_ctrl_c_while_drawing_says_what_is_missing(
        tmp_path, monkeypatch, capsys):
    seen = {}

    def interrupted_drawing(summaries, colour, path, title):
        seen["written"] = sorted(p.name for p in path.parent.iterdir())
        raise KeyboardInterrupt
    monkeypatch.setattr(plots, "completion_figure", interrupted_drawing)
    with pytest.raises(KeyboardInterrupt):
        run_fake(tmp_path, monkeypatch, FakeBackend())
    assert {"raw.jsonl", "summary.json", "summary.md"} <= set(seen["written"])
    out = tmp_path / "out"
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["cases"]) == 4 and summary["interrupted"] is False
    assert summary["figures"] == ["goodput.png"] and summary["figures_missing"] == ["completion.png"]
    assert "Figures not drawn (interrupted while drawing them): completion.png." in (out / "summary.md").read_text()
    said = capsys.readouterr().err
    assert "interrupted while drawing figures; raw.jsonl, summary.json, summary.md of all 4 case(s)" in said
    assert "figures not drawn: completion.png" in said


def test_an_interrupted_run_says_so_in_summary_md_the_report_and_is_passed_over_by_the_paper_page(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(plots, "make_figures", lambda *args, **kwargs: [])
    with pytest.raises(KeyboardInterrupt):
        run_fake(tmp_path, monkeypatch, FakeBackend(stop_at=3))
    out = tmp_path / "out"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True and (summary["cases_run"], summary["cases_planned"]) == (2, 4)
    assert "interrupted after 2 of 4 case(s)" in capsys.readouterr().err
    top = (out / "summary.md").read_text().split("|")[0]        # before the table
    assert "**Interrupted (Ctrl-C or SIGTERM): 2 of its 4 cases ran" in top
    page, _ = report.write_report(tmp_path, tmp_path / "report.html")
    assert "Interrupted (Ctrl-C or SIGTERM): 2 of its 4 cases ran" in page.read_text()
    md, _ = report.write_report(tmp_path, tmp_path / "report.md")
    assert "**Interrupted (Ctrl-C or SIGTERM): 2 of its 4 cases ran" in md.read_text()

    from cli import report as report_cmd
    parser = argparse.ArgumentParser()
    report_cmd.add_arguments(parser)
    whole = dict(summary, scenario="loss-sweep", interrupted=False, created="2000-01-01 00:00:00 UTC")
    (tmp_path / "whole").mkdir()
    (tmp_path / "whole" / "summary.json").write_text(json.dumps(whole))
    (out / "summary.json").write_text(json.dumps(dict(summary, scenario="loss-sweep")))   # the newer one
    assert report_cmd.run(parser.parse_args(["--results", str(tmp_path), "--paper"])) == 0
    assert f"note: {out} passed over: an interrupted run" in capsys.readouterr().out
    paper = (tmp_path / "paper.md").read_text()
    assert "Interrupted runs passed over (not every case ran): `out`" in paper
    assert "(`whole`: backend netsim" in paper.split("## Loss")[1].split("\n## ")[0]
