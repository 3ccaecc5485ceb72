"""What a run writes and how its results read: results before figures, interrupted runs marked
(summary.md, report, report --paper), figures that were not measured shown as not measured."""
from __future__ import annotations

import argparse
import os
import signal
import io
import json

import pytest

from experiments import conditions, plots, report, results, runner
from experiments.record import CaseRecord, FlowRecord
from experiments.scenario import parse_scenario
from testbed.processes import Terminated

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

    def __init__(self, stop_at: int = 0, stop: BaseException = KeyboardInterrupt()) -> None:
        self.stop_at, self.stop, self.calls = stop_at, stop, 0

    def run_case(self, case, progress=lambda fraction: None):
        self.calls += 1
        if self.calls == self.stop_at:
            raise self.stop
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
    measured = summary["conditions"]                          # what the run was measured in, said beside it
    assert measured["cores"] and "load_1min_end" in measured and summary["created"] == measured["date"]
    assert f"on {conditions.text(measured)}." in (out / "summary.md").read_text()
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
    assert "Results folders passed over: `out` (an interrupted run: not every case ran)." in paper
    assert "(`whole`: backend netsim" in paper.split("## Loss")[1].split("\n## ")[0]


def made_up(backend="netsim", fault_at=None, **fields) -> CaseRecord:
    """A finished case of 4 ms, 1000 bytes a millisecond; a failure at `fault_at` when given."""
    from experiments.record import FaultEvent
    record = CaseRecord("s", "v", "MRC", "mrc", backend, 1, "topo", 2, "allreduce", end=0.004, completed=True,
                        completion_time=0.004, bit_exact=True, sample_interval=0.001, recovery_window=0.002)
    record.samples = [[t / 1000, [1000 * t]] for t in range(5)]
    if fault_at is not None:
        record.faults = [FaultEvent(fault_at, "loss", "link", True)]
    for key, value in fields.items():
        setattr(record, key, value)
    return record


def cells(summary: dict) -> dict:
    header, rows = results.table_rows([summary])
    return dict(zip(header, rows[0]))


def test_what_htsim_does_not_measure_reads_as_not_measured_with_its_own_retransmission_count():
    from experiments import metrics
    htsim = metrics.summarise(made_up("htsim", fault_at=0.0, transport_stats={"retx_htsim": 221, "htsim_new": 448}))
    assert htsim["not_measured"] == ["goodput", "retransmission causes", "bit_exact", "evs", "switch counters"]
    assert htsim["bit_exact"] is None and htsim["evs_retired"] is None and htsim["retransmissions"] is None
    row = cells(htsim)
    assert (row["recover"], row["longest gap"], row["EVs retired"], row["bit-exact"]) == ("-", "-", "-", "-")
    assert row["retx trim/timeout/nack/sack"] == "221 (total)"


def test_fields_a_record_leaves_none_read_as_not_measured_whatever_the_backend():
    from experiments import metrics, repeats
    summary = metrics.summarise(made_up(fault_at=0.002, samples=[], bit_exact=None,
                                        transport_stats={"retx_trim": None, "evs_retired": None}))
    assert summary["not_measured"] == ["goodput", "retransmission causes", "bit_exact", "evs"]
    row = cells(summary)
    assert (row["recover"], row["EVs retired"], row["bit-exact"], row["retx trim/timeout/nack/sack"]) == \
        ("-", "-", "-", "-")
    twice = repeats.aggregate([dict(summary, repetition=0), dict(summary, repetition=1)])
    assert twice["bit_exact"] is None and cells(twice)["bit-exact"] == "-"
    measured = metrics.summarise(made_up(transport_stats={"retx_trim": 3, "evs_retired": 2}))
    assert measured["not_measured"] == [] and cells(measured)["retx trim/timeout/nack/sack"] == "3/0/0/0"
    assert (cells(measured)["EVs retired"], cells(measured)["bit-exact"]) == ("2", "yes")


def test_a_failure_with_no_goodput_before_it_has_recovery_n_a_not_stayed_below(tmp_path, monkeypatch):
    from experiments import metrics
    at_start = metrics.summarise(made_up(fault_at=0.0))
    assert at_start["goodput_before_failure"] is False and cells(at_start)["recover"] == "n/a"
    later = metrics.summarise(made_up(fault_at=0.002))       # goodput before it, and the same after
    assert later["goodput_before_failure"] is True and cells(later)["recover"] == "no dip (1 ms samples)"
    md = results.write_markdown({"title": "t", "scenario_file": "f", "backend": "netsim", "seed": 1,
                                 "created": "now"}, [at_start], [], tmp_path).read_text()
    assert '"n/a": no goodput before the failure to compare with (a fault from the start)' in md
    said = []
    monkeypatch.setattr(plots, "_message_panel", lambda ax, heading, message: said.append(message))
    plots.completion_figure([at_start], {"MRC": "red"}, tmp_path / "c.png", "t")
    assert said and said[0].startswith("n/a: no goodput before the failure to compare with")
    htsim = metrics.summarise(made_up("htsim", fault_at=0.0, transport_stats={"retx_htsim": 5}))
    said.clear()
    plots.completion_figure([htsim], {"MRC": "red"}, tmp_path / "h.png", "t")      # no causes: a total bar
    assert said and said[0].startswith("not measured")


def test_goodput_reads_in_a_unit_of_its_size_and_titles_say_what_ran(monkeypatch, tmp_path):
    from pathlib import Path
    from experiments.scenario import load_scenario
    root = Path(__file__).resolve().parents[2]
    cases = load_scenario(root / "experiments" / "loss-sweep.yaml", quick=True).cases()
    assert runner.what_ran(cases) == "all-reduce 8 MiB, all-to-all 1 MiB; random loss 0 and 1 %"
    assert runner.what_ran(cases[2:4]) == "all-reduce 8 MiB; random loss 1 %"
    fast = made_up(fault_at=0.002)
    fast.samples = [[t / 1000, [int(2e8) * t]] for t in range(5)]          # 1.6 Tbit/s
    shown = {}
    monkeypatch.setattr(plots, "save_figure", lambda fig, path, heading, fontsize=13: shown.update(fig=fig, heading=heading))
    plots.goodput_figure([fast], {"MRC": "red"}, tmp_path / "g.png", "Loss sweep\nran: all-reduce 8 MiB")
    assert shown["heading"] == "Loss sweep: goodput over time\nran: all-reduce 8 MiB"
    ax = shown["fig"].axes[0]
    shown["fig"].canvas.draw()
    assert ax.get_ylabel() == "goodput (Tbit/s)" and ax.yaxis.get_offset_text().get_text() == ""
    assert max(max(line.get_ydata()) for line in ax.get_lines() if len(line.get_ydata()) > 1) == pytest.approx(1.6)


class FakeClock:
    """time.monotonic, moved by hand."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class PairPool:
    """Two workers, made up: every case takes 5 s of the clock from its start, two at once."""

    workers = 2
    where = "a made-up pool of 2 workers"

    def __init__(self, clock: FakeClock) -> None:
        self.clock, self.queue = clock, []

    def start(self, index, work, item):
        self.queue.append((index, work, item, self.clock.t))

    def next_finished(self):
        index, work, item, began = self.queue.pop(0)
        self.clock.t = max(self.clock.t, began + 5.0)
        return index, True, work(item)

    def stop(self):
        self.queue.clear()

    def close(self):
        pass


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def screen(text: str) -> list[str]:
    """What a terminal shows after `text`: a carriage return goes back to the start of the line."""
    lines, column = [[]], 0
    for char in text:
        if char == "\r":
            column = 0
        elif char == "\n":
            lines.append([])
            column = 0
        else:
            line = lines[-1]
            line[column:column + 1] = [char]
            column += 1
    return ["".join(line).rstrip() for line in lines]


def run_pooled(tmp_path, monkeypatch, stream):
    import logging
    import time
    from experiments import parallel
    clock = FakeClock()
    monkeypatch.setattr(time, "monotonic", clock)
    monkeypatch.setattr(parallel, "netsim_case", fake_record)
    monkeypatch.setattr(plots, "make_figures", lambda *args, **kwargs: [])
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    root, mrc = logging.getLogger(), logging.getLogger("mrc")
    level = mrc.level
    mrc.setLevel(logging.INFO)
    root.addHandler(handler)
    try:
        runner.run_scenario(parse_scenario(FOUR_CASES), "netsim", "model", tmp_path / "out", quick=False,
                            progress_stream=stream, pool=PairPool(clock))
    finally:
        root.removeHandler(handler)
        mrc.setLevel(level)
    return stream.getvalue()


def test_a_pooled_run_without_a_terminal_counts_what_runs_and_times_each_case_not_the_wait(tmp_path, monkeypatch):
    lines = run_pooled(tmp_path, monkeypatch, io.StringIO()).splitlines()
    done = [line.split("]")[0] + "]" for line in lines if line.startswith("[")]
    assert done == ["[1/4 done, 2 running]", "[2/4 done, 2 running]", "[3/4 done, 1 running]",
                    "[4/4 done, 0 running]"]                      # no "[i/4] X ..." start lines among them
    took = [line for line in lines if "of wall time" in line]
    assert len(took) == 4 and all(line.endswith("completed in 5.0 s of wall time") for line in took), took


def test_on_a_terminal_one_progress_line_shows_and_log_lines_start_on_their_own(tmp_path, monkeypatch):
    shown = screen(run_pooled(tmp_path, monkeypatch, FakeTerminal()))
    logged = [line for line in shown if "mrc.experiments" in line]
    assert len(logged) == 4 and all(line.startswith("mrc.experiments: ") for line in logged), shown
    assert not any("case 1/4" in line for line in shown)           # the runner's own bar stays off
    assert shown[-1] == ""                                         # the progress line wiped at the end
    bar = runner.ProgressBar(2, FakeTerminal())
    bar.case(0, "a long label of the first case")
    bar.case(1, "b")
    assert screen(bar.stream.getvalue()) == [bar.stream.getvalue().split("\r")[-1].rstrip()]
    assert screen(bar.stream.getvalue())[0].endswith("case 2/2: b")   # no tail of the longer label left


def test_a_sigterm_keeps_the_finished_cases_as_a_ctrl_c_does(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(plots, "make_figures", lambda *args, **kwargs: [])
    with pytest.raises(Terminated) as stopped:             # cli.main unwinds SIGTERM as Terminated(143)
        run_fake(tmp_path, monkeypatch, FakeBackend(stop_at=2, stop=Terminated(143)))
    assert stopped.value.code == 143
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["interrupted"] is True and len(summary["cases"]) == 1
    assert "interrupted after 1 of 4 case(s)" in capsys.readouterr().err


def test_another_system_exit_in_a_case_is_no_interruption(tmp_path, monkeypatch):
    """Only SIGTERM's Terminated (and Ctrl-C) mark a run interrupted; a SystemExit a case's code
    raised is its own exit, passed on without a results folder calling it a Ctrl-C or SIGTERM."""
    monkeypatch.setattr(plots, "make_figures", lambda *args, **kwargs: [])
    with pytest.raises(SystemExit) as stopped:
        run_fake(tmp_path, monkeypatch, FakeBackend(stop_at=2, stop=SystemExit("a case's own exit")))
    assert not isinstance(stopped.value, Terminated)
    assert not (tmp_path / "out" / "summary.json").exists()


def test_cli_main_unwinds_a_sigterm_as_terminated():
    import signal

    import cli.main
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        replaced = cli.main._catch_sigterm()
        with pytest.raises(Terminated) as stopped:
            signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)
        assert stopped.value.code == 128 + signal.SIGTERM and replaced is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_pooled_case_s_time_is_its_own_even_beside_an_equal_case(monkeypatch):
    """PooledBackend.took(index): the time of the case at that place, not of the first equal one."""
    import time

    from experiments import parallel

    class SlowerPool(PairPool):
        def next_finished(self):                       # case i takes 5 + i s of the clock
            index, work, item, began = self.queue.pop(0)
            self.clock.t = max(self.clock.t, began + 5.0 + index)
            return index, True, work(item)

    clock = FakeClock()
    monkeypatch.setattr(time, "monotonic", clock)
    monkeypatch.setattr(parallel, "netsim_case", fake_record)
    case = parse_scenario(FOUR_CASES).cases()[0]
    backend = parallel.PooledBackend(SlowerPool(clock), [case, case], "netsim", io.StringIO())
    backend.run_case(case)
    backend.run_case(case)
    assert (backend.took(0), backend.took(1)) == (5.0, 6.0)
    with pytest.raises(ValueError, match="case 2 has not been handed back"):
        backend.took(2)


def test_a_run_interrupted_before_any_case_finished_says_nothing_was_kept(tmp_path, monkeypatch, capsys):
    with pytest.raises(KeyboardInterrupt):
        run_fake(tmp_path, monkeypatch, FakeBackend(stop_at=1))
    said = capsys.readouterr().err
    assert "interrupted before any of the 4 case(s) finished: nothing to keep" in said
    assert "0 finished" not in said
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["interrupted"] is True


@pytest.mark.parametrize("signum, raised", [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, Terminated)])
def test_a_signal_while_the_results_are_written_waits_for_them(tmp_path, monkeypatch, capsys, signum, raised):
    # the last case is over and raw.jsonl is being written when the user presses Ctrl-C (or a SIGTERM
    # comes): the results are still written whole, no figure is drawn, and the run ends interrupted
    write_raw = results.write_raw

    def signalled(records, folder):
        os.kill(os.getpid(), signum)
        write_raw(records, folder)
    monkeypatch.setattr(results, "write_raw", signalled)
    previous = signal.signal(signal.SIGTERM, lambda *args: pytest.fail("SIGTERM not held"))
    try:
        with pytest.raises(raised):
            run_fake(tmp_path, monkeypatch, FakeBackend())
    finally:
        signal.signal(signal.SIGTERM, previous)
    out = tmp_path / "out"
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["cases"]) == 4 and (out / "raw.jsonl").read_text().count('"type": "case"') == 4
    assert summary["figures"] == [] and "completion.png" in summary["figures_missing"]
    assert "figures not drawn: " in capsys.readouterr().err
