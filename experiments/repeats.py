"""Repetitions of a scenario's cases (`mrc-testbed run --repeat N`) and what they add up to.

One run of a case on the real testbed is one draw: the same quick failover on the same machine,
minutes apart, recovered in 144 ms and in 14 ms. With N repetitions every case runs N times and
the results report, per case, the median and the range (min..max) of completion, recovery and the
longest delivery gap, with N.

- Seeds. On netsim a run is fixed by its seed, so repetition i runs with the scenario's seed + i
  (else the N runs would be one run N times). On Mininet every repetition keeps the scenario's
  seed: the runs differ anyway (the machine's timing), and the same seed keeps the same data,
  traffic plan and fault link, so the spread is the machine's, not the scenario's.
- Order. Repetition 1 of every case, then repetition 2 of every case, ...: a machine whose load
  drifts during the run weighs on every case alike, and an interrupted run has whole rounds.
- The aggregate of a case (`aggregate`) is its representative repetition's summary (the one of
  median recovery, or of median completion when nothing failed) with the medians in place of its
  times, plus `repeats`: N, the seeds, how many completed, and median/min/max/values per time.
  A time that never came (never completed, never recovered) counts as longer than any other. A
  recovery with a note instead of a time (`metrics.recovery_note`) ranks by what the note says:
  "no dip" (goodput never fell below the mark, or only for the collective's own tail) before every time, "window longer than the run" (not
  measurable) with the nevers; the aggregate's recovery is its median run's, note included.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from experiments.metrics import NO_DIP
from experiments.scenario import Case

SPREAD_KEYS = ("completion_time_s", "time_to_recover_s", "longest_delivery_gap_s",
               "completion_rtts", "time_to_recover_rtts", "longest_delivery_gap_rtts")
RECOVERY_KEYS = ("time_to_recover_s", "time_to_recover_rtts")


SIMULATORS = ("netsim", "htsim")      # deterministic by seed: a repetition takes the next seed


def seeds(seed: int, repeat: int, backend: str) -> list[int]:
    """The seed of each repetition: seed + i on netsim (deterministic by seed), seed throughout on
    Mininet (its runs differ by themselves)."""
    if repeat < 1:
        raise ValueError(f"--repeat {repeat}: expected a number of runs per case, 1 or more")
    return [seed + i if backend in SIMULATORS else seed for i in range(repeat)]


def seeds_note(seed: int, repeat: int, backend: str) -> str:
    """One sentence saying how many runs each case gets and with which seeds."""
    if repeat == 1:
        return f"seed {seed}"
    used = seeds(seed, repeat, backend)
    if backend in SIMULATORS:
        return (f"{repeat} repetitions per case, seeds {used[0]}..{used[-1]} "
                f"({backend} is deterministic: each seed gives one run)")
    return (f"{repeat} repetitions per case, all with seed {seed} (runs on {backend} differ by the "
            f"machine's timing; the same seed keeps the same data and fault)")


def expand(cases: list[Case], repeat: int, backend: str) -> list[Case]:
    """Every case `repeat` times, round by round, each with its repetition's index and seed."""
    out = []
    for index in range(repeat):
        for case in cases:
            seed = seeds(case.scenario.seed, repeat, backend)[index]
            scenario = case.scenario if seed == case.scenario.seed else dataclasses.replace(case.scenario, seed=seed)
            out.append(dataclasses.replace(case, scenario=scenario, repetition=index))
    return out


def group(summaries: list[dict]) -> list[list[dict]]:
    """The summaries of each case (variant, transport), cases in the order they first ran,
    repetitions in order."""
    groups: dict[tuple, list[dict]] = {}
    for s in summaries:
        groups.setdefault((s["variant"], s["transport"]), []).append(s)
    return [sorted(g, key=lambda s: s.get("repetition", 0)) for g in groups.values()]


def median(values: list[Optional[float]]) -> Optional[float]:
    """The median, None (never) ranking above every number; None when the median is a never."""
    ranked = sorted(values, key=rank)
    if not ranked:
        return None
    middle = len(ranked) // 2
    if len(ranked) % 2:
        return ranked[middle]
    low, high = ranked[middle - 1], ranked[middle]
    return None if low is None or high is None else (low + high) / 2


def spread(values: list[Optional[float]]) -> dict:
    """median, min, max (None: never) and the values themselves, in run order."""
    ranked = sorted(values, key=rank)
    return {"median": median(values), "min": ranked[0] if ranked else None,
            "max": ranked[-1] if ranked else None, "values": list(values)}


def representative(runs: list[dict]) -> dict:
    """The repetition of median recovery (of median completion when nothing failed); the lower of
    the two middle ones when N is even."""
    if any(s["failure_time_s"] is not None for s in runs):
        ranked = sorted(runs, key=_recovery_rank)
    else:
        ranked = sorted(runs, key=lambda s: rank(s["completion_time_s"]))
    return ranked[(len(ranked) - 1) // 2]


def representative_records(records: list, runs: list[dict]) -> list:
    """The record of each case's representative run, cases in the order they first ran; `runs`
    are the summaries of `records`, one for one."""
    chosen = [representative(case_runs) for case_runs in group(runs)]
    return [records[next(i for i, s in enumerate(runs) if s is c)] for c in chosen]


def aggregate(runs: list[dict]) -> dict:
    """One case's summary over its repetitions (see the module's docstring); a single run is
    returned as it is."""
    if len(runs) == 1:
        return runs[0]
    chosen = representative(runs)
    out = dict(chosen)
    for key in SPREAD_KEYS:
        out[key] = median([s[key] for s in runs])
    out.update(recovery_median(runs))
    out["completed"] = all(s["completed"] for s in runs)
    exact = [s["bit_exact"] for s in runs]
    out["bit_exact"] = None if None in exact else all(exact)       # None: not measured
    out["fidelity"], out["fidelity_reasons"] = _fidelity(runs)
    out["invalid_reasons"] = [f"run {s.get('repetition', 0) + 1} (seed {s['seed']}): {reason}"
                              for s in runs for reason in s.get("invalid_reasons", [])]
    if out["invalid_reasons"]:
        out["fidelity"] = "invalid"              # one run whose fault missed its workload is enough to say so
    out["notes"] = list(dict.fromkeys(note for s in runs for note in s["notes"]))
    out["repeats"] = {"n": len(runs), "seeds": [s["seed"] for s in runs],
                      "representative": chosen.get("repetition", 0),
                      "completed": sum(1 for s in runs if s["completed"]),
                      "completed_each": [s["completed"] for s in runs],
                      "distorted": sum(1 for s in runs if s.get("fidelity") == "distorted"),
                      **{key: spread([s[key] for s in runs]) for key in SPREAD_KEYS},
                      **{key: _recovery_spread(runs, key) for key in RECOVERY_KEYS}}
    return out


def aggregate_all(summaries: list[dict]) -> list[dict]:
    """The aggregate of every case, in the order the cases first ran."""
    return [aggregate(runs) for runs in group(summaries)]


def _fidelity(runs: list[dict]) -> tuple[str, list[str]]:
    """'faithful'/'simulated' when every run was; else 'distorted' with each run's reasons."""
    verdicts = {s.get("fidelity", "unknown") for s in runs} - {"invalid"}     # invalid: aggregate() says it
    if not verdicts:
        return "unknown", []
    if len(verdicts) == 1 and "distorted" not in verdicts:
        return verdicts.pop(), []
    reasons = [f"run {s.get('repetition', 0) + 1} (seed {s['seed']}): {reason}"
               for s in runs for reason in s.get("fidelity_reasons", [])]
    return ("distorted" if "distorted" in verdicts else "unknown"), reasons


def rank(value: Optional[float], note: Optional[str] = None) -> float:
    """A figure's place among its runs': a recovery whose note is "no dip" first, then the values,
    then the rest (None: never, or not measurable)."""
    if value is None and note == NO_DIP:
        return float("-inf")
    return float("inf") if value is None else value


def _recovery_rank(s: dict) -> float:
    """A run's place among recoveries (`rank` of its time and note)."""
    return rank(s["time_to_recover_s"], s.get("recovery_note"))


def recovery_median(runs: list[dict]) -> dict:
    """The recovery of the median run (two middle runs' times averaged; a middle run without a
    time gives its own), with its note."""
    ranked = sorted(runs, key=_recovery_rank)
    middle = len(ranked) // 2
    pair = ranked[middle - 1:middle + 1] if len(ranked) % 2 == 0 else [ranked[middle]]
    if all(s["time_to_recover_s"] is not None for s in pair):
        return {**{key: median([s[key] for s in pair]) for key in RECOVERY_KEYS}, "recovery_note": None}
    upper = pair[-1] if pair[-1]["time_to_recover_s"] is None else pair[0]
    return {**{key: upper[key] for key in RECOVERY_KEYS}, "recovery_note": upper.get("recovery_note")}


def _recovery_spread(runs: list[dict], key: str) -> dict:
    """`spread` of a recovery key, its ends ranked as `_recovery_rank` does, with each end's note
    (`min_note`, `max_note`) and every run's (`notes`)."""
    ranked = sorted(runs, key=_recovery_rank)
    return {"median": recovery_median(runs)[key], "min": ranked[0][key], "max": ranked[-1][key],
            "min_note": ranked[0].get("recovery_note"), "max_note": ranked[-1].get("recovery_note"),
            "values": [s[key] for s in runs], "notes": [s.get("recovery_note") for s in runs]}
