"""How many runs a figure needs: the median of N runs, bootstrapped from the runs that were made.

    python -m experiments.stability results/failover-* [--figure time_to_recover_s] [--case "leaf-spine / MRC"]

Reads every run of every case in the given results folders (summary.json's `runs`, written by
`mrc-testbed run --repeat N`; a folder of single runs counts as one run per case), pools the runs of
each case, and for N = 1, 2, ... draws N of them at random (with replacement, `--draws` times) and
takes their median. It prints, per N, the share of those medians within ±`--tolerance` (20 %) of
the pool's median, and where 90 % of them fall: the smallest N with at least 90 % within the
tolerance is how many runs that figure needs on the machine, at the load, the runs were made at.
A run without the figure (never recovered) ranks above every value, as in experiments/repeats.py.
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Optional

from experiments import repeats, results
from experiments.timefmt import format_seconds

CONFIDENCE = 0.9


def pooled_runs(folders: list[Path], figure: str) -> dict[str, list[Optional[float]]]:
    """`figure` of every run, by backend and case ('mininet:model: variant / transport'), over the folders."""
    pool: dict[str, list[Optional[float]]] = {}
    for folder in folders:
        summary = results.read_summary(folder)
        if summary is None:
            raise ValueError(f"{folder}: no readable {results.SUMMARY_JSON} (not a results folder)")
        for run in summary.get("runs") or summary["cases"]:
            if figure not in run:
                raise ValueError(f"{folder}: the runs have no figure {figure!r}")
            pool.setdefault(f"{run['backend']}: {run['variant']} / {run['transport']}", []).append(run[figure])
    return pool


def stability(values: list[Optional[float]], sizes: range, tolerance: float, draws: int,
              seed: int = 1) -> list[dict]:
    """Per N in `sizes`: the share of bootstrapped medians of N runs within ±tolerance of the
    pool's median, and their 5th and 95th percentiles (None: never)."""
    centre = repeats.median(values)
    if centre is None:
        raise ValueError("the pool's median run has no value (most runs never got there)")
    rng = random.Random(seed)
    out = []
    for n in sizes:
        medians = sorted((repeats.median([rng.choice(values) for _ in range(n)]) for _ in range(draws)),
                         key=lambda v: float("inf") if v is None else v)
        within = sum(1 for m in medians if m is not None and abs(m - centre) <= tolerance * centre)
        low, high = medians[int(0.05 * (draws - 1))], medians[int(0.95 * (draws - 1))]
        out.append({"n": n, "within": within / draws, "p5": low, "p95": high})
    return out


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
    shown = lambda v: "never" if v is None else (format_seconds(v) if as_time else f"{v:.3g}")  # noqa: E731
    for case, values in pool.items():
        if args.case and args.case not in case:
            continue
        known = sorted(v for v in values if v is not None)
        each = [shown(v) for v in known] + ["never"] * (len(values) - len(known))
        print(f"{case}: {args.figure} of {len(values)} runs: median {shown(repeats.median(values))}; "
              f"{', '.join(each)}")
        try:
            rows = stability(values, range(1, args.max_n + 1), args.tolerance, args.draws)
        except ValueError as error:
            print(f"  {error}")
            continue
        needed = next((r["n"] for r in rows if r["within"] >= CONFIDENCE), None)
        for r in rows:
            print(f"  N={r['n']:2d}: median within ±{args.tolerance:.0%} of the pool's in {r['within']:6.1%} "
                  f"of draws; 90 % of medians in {shown(r['p5'])}..{shown(r['p95'])}")
        print(f"  needs N = {needed if needed else f'more than {args.max_n}'} for {CONFIDENCE:.0%} of medians "
              f"within ±{args.tolerance:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
