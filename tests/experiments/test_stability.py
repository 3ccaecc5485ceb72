"""`python -m experiments.stability`: how many runs a figure needs. Runs rank as `run --repeat`
ranks them (experiments/repeats.py): a recovery with no dip before every time, a never above every
value; a run with no figure for another reason is left out of the pool and said, not ranked."""
from __future__ import annotations

import pytest

from experiments import metrics, repeats, results
from experiments.stability import left_out, main, median, stability
from tests.experiments.test_recovery_note import record
from tests.experiments.test_repeats import _failover_run

STEADY = lambda t: 1000                                       # noqa: E731  goodput never dips: "no dip"
DIPPED = lambda t: 0 if 0.11 <= t < 0.2 else 1000             # noqa: E731  recovers 85 ms after the kill
STUCK = lambda t: 0 if t >= 0.11 else 1000                    # noqa: E731  never back to the mark


def _runs(rates, window=0.02) -> list[dict]:
    """The summary of one run per goodput function, repetitions in order."""
    out = []
    for i, rate in enumerate(rates):
        rec = record(rate, window=window)
        rec.repetition = i
        out.append(metrics.summarise(rec))
    return out


def _folder(tmp_path, runs, name="r"):
    """A results folder of a `run --repeat` over `runs` (summary.json: the aggregates and every run)."""
    folder = tmp_path / name
    folder.mkdir()
    results.write_summary({"runs": runs}, repeats.aggregate_all(runs), [], folder)
    return folder


def test_the_median_of_more_runs_lands_near_the_pools_more_often():
    steady = stability([_failover_run(i, 0.1) for i in range(1, 6)], "time_to_recover_s", range(1, 4), 0.2, draws=500)
    assert [r["within"] for r in steady] == [1.0, 1.0, 1.0]
    scattered = [_failover_run(i + 1, v) for i, v in enumerate([0.1, 0.1, 0.11, 0.09, 0.5, 0.02, 0.3])]
    one, nine = stability(scattered, "time_to_recover_s", (1, 9), 0.2, draws=2000)   # the pool's median is 0.1
    assert 0.5 < one["within"] < 0.65                         # 4 of 7 runs are within 20 % of 0.1
    assert nine["within"] > 0.85 and nine["p5"][0] >= 0.09 and one["p5"] == (0.02, None)


def test_runs_without_a_dip_rank_before_every_time_not_as_nevers():
    runs = [_failover_run(1, None, metrics.NO_DIP), _failover_run(2, None, metrics.NO_DIP),
            _failover_run(3, 0.03), _failover_run(4, 0.05), _failover_run(5, None)]
    assert median(runs, "time_to_recover_s") == (0.03, None)                # as `run --repeat` reports it
    assert median(runs, "time_to_recover_s") == (repeats.aggregate(runs)["time_to_recover_s"], None)
    one = stability(runs, "time_to_recover_s", (1,), 0.2, draws=2000)[0]
    assert one["p5"] == (None, metrics.NO_DIP) and one["p95"] == (None, None)    # no dip lowest, never highest
    assert 0.15 < one["within"] < 0.25                        # one run in five is 30 ms ± 20 %


def test_a_pool_of_runs_without_a_dip_has_no_dip_for_its_median_not_no_value():
    runs = [_failover_run(i, None, metrics.NO_DIP) for i in range(1, 5)] + [_failover_run(5, 0.04)]
    assert median(runs, "time_to_recover_s") == (None, metrics.NO_DIP)
    rows = stability(runs, "time_to_recover_s", (1, 5), 0.2, draws=2000)
    assert 0.75 < rows[0]["within"] < 0.85                    # a draw of one says no dip 4 times in 5
    assert rows[1]["within"] > rows[0]["within"] and rows[1]["p5"] == (None, metrics.NO_DIP)
    nevers = [_failover_run(i, None) for i in range(1, 4)]
    assert stability(nevers, "time_to_recover_s", (1,), 0.2, draws=100)[0]["within"] == 1.0   # all never


def test_a_run_with_no_figure_for_another_reason_is_left_out_saying_why():
    window, dipped = _runs([DIPPED], window=0.6)[0], _runs([DIPPED])[0]
    assert left_out(window, "time_to_recover_s") == "window longer than the run, not measurable"
    assert left_out(dipped, "time_to_recover_s") is None
    assert left_out(_runs([STEADY])[0], "time_to_recover_s") is None       # no dip: an outcome, kept
    assert left_out(_runs([STUCK])[0], "time_to_recover_s") is None        # never: an outcome, kept
    assert left_out(dipped, "time_to_recover_rtts") == "no base RTT measured"   # the record has none
    assert left_out(_runs([STEADY])[0], "time_to_recover_rtts") is None
    calm = dict(_failover_run(1, None), failure_time_s=None)
    assert left_out(calm, "time_to_recover_s") == "nothing failed"
    assert left_out(calm, "completion_time_s") is None
    htsim = dict(_failover_run(1, None), backend="htsim", not_measured=["goodput"])
    assert left_out(htsim, "time_to_recover_s") == "not measured by htsim"
    no_baseline = dict(_failover_run(1, None), goodput_before_failure=False)
    assert left_out(no_baseline, "time_to_recover_s") == "no goodput before the failure to recover to"
    with pytest.raises(ValueError, match="no run has time_to_recover_s"):
        stability([], "time_to_recover_s", (1,), 0.2, draws=10)


def test_the_command_prints_no_dip_and_says_which_runs_it_left_out(tmp_path, capsys):
    runs = _runs([STEADY, STEADY, DIPPED, STEADY, STUCK])
    runs += _runs([DIPPED], window=0.6)                        # not measurable: no draw of the figure
    folder = _folder(tmp_path, runs)
    assert main([str(folder), "--max-n", "3", "--draws", "400"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("netsim: v / t: time_to_recover_s of 5 runs: median no dip; "
                      "no dip, no dip, no dip, 85 ms, never")
    assert out[1] == "  1 of 6 runs left out, with no time_to_recover_s: window longer than the run, not measurable (1)"
    assert out[2].startswith("  N= 1: median no dip, as the pool's, in ") and out[2].endswith("no dip..never")
    assert out[-1].startswith("  needs N = ") and out[-1].endswith("for 90% of medians no dip")
    assert "has no value" not in "\n".join(out)


def test_the_command_on_a_pool_with_no_figure_says_so(tmp_path, capsys):
    folder = _folder(tmp_path, _runs([DIPPED, DIPPED], window=0.6))
    assert main([str(folder), "--draws", "10"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "netsim: v / t: time_to_recover_s of 0 runs",
        "  2 of 2 runs left out, with no time_to_recover_s: window longer than the run, not measurable (2)"]


def test_the_command_reads_times_of_completion_as_before(tmp_path, capsys):
    folder = _folder(tmp_path, _runs([STEADY, DIPPED, STUCK]))
    assert main([str(folder), "--figure", "completion_time_s", "--max-n", "2", "--draws", "50"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "netsim: v / t: completion_time_s of 3 runs: median 600 ms; 600 ms, 600 ms, 600 ms"
    assert out[1] == "  N= 1: median within ±20% of the pool's in 100.0% of draws; 90 % of medians in 600 ms..600 ms"
    assert main([str(folder), "--figure", "no_such_figure"]) == 2
    assert "the runs have no figure 'no_such_figure'" in capsys.readouterr().err
