"""How many runs a figure needs: the median of N runs, bootstrapped from the runs that were made.

    python -m experiments.stability results/failover-* [--figure time_to_recover_s] [--case "leaf-spine / MRC"]

Reads every run of every case in the given results folders (summary.json's `runs`, written by
`mrc-testbed run --repeat N`; a folder of single runs counts as one run per case), pools the runs of
each case, and for N = 1, 2, ... draws N of them at random (with replacement, `--draws` times) and
takes their median. It prints, per N, the share of those medians within ±`--tolerance` (20 %) of
the pool's median, and where 90 % of them fall: the smallest N with at least 90 % within the
tolerance is how many runs that figure needs on the machine, at the load, the runs were made at.

Runs rank as in experiments/repeats.py, and a median is the one `run --repeat` reports: a time
that never came (never completed, never recovered) ranks above every value; a recovery whose
goodput never fell below the mark ("no dip", experiments.metrics.recovery_note) ranks before every
time. When the pool's median is such an outcome rather than a value, the share printed is that of
medians with the same outcome. A run with no figure for another reason (nothing failed, not
measured by its backend, no goodput before the failure to recover to, an averaging window longer
than the run, no base RTT for a figure in RTTs) is no draw of the figure: it is left out of the
pool, and the output says how many were and why.
"""
from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Iterable, Optional

from experiments import metrics, repeats, results
from experiments.timefmt import format_seconds

CONFIDENCE = 0.9
AFTER_FAILURE = (*repeats.RECOVERY_KEYS, "longest_delivery_gap_s", "longest_delivery_gap_rtts")
IN_SECONDS = {"completion_rtts": "completion_time_s", "time_to_recover_rtts": "time_to_recover_s",
              "longest_delivery_gap_rtts": "longest_delivery_gap_s"}     # a figure in RTTs: the same in s

Outcome = tuple[Optional[float], Optional[str]]   # (value, recovery note): (None, None) is a never


def pooled_runs(folders: list[Path], figure: str) -> dict[str, list[dict]]:
    """The summary of every run, by backend and case ('mininet: variant / transport'), over the
    folders; a folder whose runs have no field `figure` is refused."""
    pool: dict[str, list[dict]] = {}
    for folder in folders:
        summary = results.read_summary(folder)
        if summary is None:
            raise ValueError(f"{folder}: no readable {results.SUMMARY_JSON} (not a results folder)")
        for run in summary.get("runs") or summary["cases"]:
            if figure not in run:
                raise ValueError(f"{folder}: the runs have no figure {figure!r}")
            pool.setdefault(f"{run['backend']}: {run['variant']} / {run['transport']}", []).append(run)
    return pool


def left_out(run: dict, figure: str) -> Optional[str]:
    """Why `run` is no draw of `figure` (None when it has a value, or an outcome in its place:
    never, or a recovery's "no dip")."""
    if run[figure] is not None:
        return None
    if any(figure in metrics.NOT_MEASURED_FIGURES.get(name, ()) for name in run.get("not_measured") or ()):
        return f"not measured by {run.get('backend', 'its backend')}"
    if figure in AFTER_FAILURE and run.get("failure_time_s") is None:
        return "nothing failed"
    if figure in repeats.RECOVERY_KEYS:
        if run.get("goodput_before_failure") is False:
            return "no goodput before the failure to recover to"
        if run.get("recovery_note") == metrics.WINDOW_OVER_RUN:
            return f"{metrics.WINDOW_OVER_RUN}, not measurable"
    if figure in IN_SECONDS and run.get(IN_SECONDS[figure]) is not None:
        return "no base RTT measured"
    return None


def outcome(run: dict, figure: str) -> Outcome:
    """`figure` of a run that has one: (value, None), (None, "no dip") or (None, None) for a never."""
    return run[figure], (run.get("recovery_note") if figure in repeats.RECOVERY_KEYS else None)


def median(runs: list[dict], figure: str) -> Outcome:
    """The median of `figure` over `runs`, as `run --repeat` takes it (experiments.repeats)."""
    if figure in repeats.RECOVERY_KEYS:
        middle = repeats.recovery_median(runs)
        return middle[figure], middle["recovery_note"]
    return repeats.median([run[figure] for run in runs]), None


def stability(runs: list[dict], figure: str, sizes: Iterable[int], tolerance: float, draws: int,
              seed: int = 1) -> list[dict]:
    """Per N in `sizes`: the share of bootstrapped medians of N of `runs` (each with `figure`: see
    `left_out`) within ±tolerance of the pool's median (when that is an outcome, not a value: the
    share with the same outcome), and their 5th and 95th percentiles (`p5`, `p95`: outcomes)."""
    if not runs:
        raise ValueError(f"no run has {figure}")
    centre = median(runs, figure)
    rng = random.Random(seed)
    out = []
    for n in sizes:
        medians = sorted((median([rng.choice(runs) for _ in range(n)], figure) for _ in range(draws)),
                         key=lambda m: repeats.rank(*m))
        within = sum(1 for m in medians if _close(m, centre, tolerance))
        out.append({"n": n, "within": within / draws,
                    "p5": medians[int(0.05 * (draws - 1))], "p95": medians[int(0.95 * (draws - 1))]})
    return out


def _close(m: Outcome, centre: Outcome, tolerance: float) -> bool:
    """Whether the median `m` is within ±tolerance of the pool's `centre` (the same outcome, when
    the centre has no value)."""
    if centre[0] is None:
        return m == centre
    return m[0] is not None and abs(m[0] - centre[0]) <= tolerance * abs(centre[0])


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Runs rank as `run --repeat` ranks them: a recovery with no dip before every time, a never "
               "after every value. A run with no figure for another reason (nothing failed, not measured, "
               "window longer than the run, ...) is left out of the pool, and counted with its reason.")
    parser.add_argument("folders", nargs="+", type=Path, help="results folders of `mrc-testbed run --repeat N`")
    parser.add_argument("--figure", default="time_to_recover_s",
                        help="a time of the case summaries (default time_to_recover_s)")
    parser.add_argument("--case", default=None, help="only the cases whose label holds this text ('leaf-spine / MRC')")
    parser.add_argument("--tolerance", type=float, default=0.2, help="stable within this share (default 0.2)")
    parser.add_argument("--max-n", type=int, default=12, help="largest N (default 12)")
    parser.add_argument("--draws", type=int, default=10000, help="bootstrap draws per N (default 10000)")
    args = parser.parse_args(argv)
    try:
        pool = pooled_runs(args.folders, args.figure)
    except ValueError as error:
        print(f"stability: {error}", file=sys.stderr)
        return 2
    as_time = args.figure.endswith("_s")                   # a time in seconds, else a count (RTTs)

    def shown(m: Outcome) -> str:
        value, note = m
        if value is None:
            return note or "never"
        return format_seconds(value) if as_time else f"{value:.3g}"

    for case, every in pool.items():
        if args.case and args.case not in case:
            continue
        runs = [run for run in every if left_out(run, args.figure) is None]
        each = sorted((outcome(run, args.figure) for run in runs), key=lambda m: repeats.rank(*m))
        print(f"{case}: {args.figure} of {len(runs)} runs"
              + (f": median {shown(median(runs, args.figure))}; {', '.join(shown(m) for m in each)}" if runs else ""))
        why = Counter(reason for reason in (left_out(run, args.figure) for run in every) if reason)
        if why:
            print(f"  {len(every) - len(runs)} of {len(every)} runs left out, with no {args.figure}: "
                  + "; ".join(f"{reason} ({count})" for reason, count in why.items()))
        if not runs:
            continue
        centre = median(runs, args.figure)
        near = (f"within ±{args.tolerance:.0%} of the pool's" if centre[0] is not None
                else f"{shown(centre)}, as the pool's,")
        rows = stability(runs, args.figure, range(1, args.max_n + 1), args.tolerance, args.draws)
        needed = next((r["n"] for r in rows if r["within"] >= CONFIDENCE), None)
        for r in rows:
            print(f"  N={r['n']:2d}: median {near} in {r['within']:6.1%} of draws; "
                  f"90 % of medians in {shown(r['p5'])}..{shown(r['p95'])}")
        print(f"  needs N = {needed if needed else f'more than {args.max_n}'} for {CONFIDENCE:.0%} of medians "
              + (f"within ±{args.tolerance:.0%}" if centre[0] is not None else f"{shown(centre)}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
