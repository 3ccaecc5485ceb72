"""CPU time of one netsim case, run again and again in one process: the quick figure for comparing two
checkouts of the simulator, taken in turns.

    python -m benchmarks.case_cpu "fat-tree" 5        # in one checkout, then in the other, in turns

The case is one of the two that `benchmarks.netsim_vs_htsim` sets beside htsim_uec, chosen by a part
of its label ("4x4x4", "fat-tree"). It runs once to warm up (imports, the first allocations), then
`runs` times; the line printed gives the fastest and the median process time of those runs, the
build in use and the load average, so that two checkouts measured in turns on a shared machine can
be compared line by line. Where the simulator's speed is concerned a result must not change: check
with `benchmarks.record_digest`. `bench_netsim --against REV --compile-against --interleave N` is
the slower, fuller comparison (every case, the other revision built alike).
"""
from __future__ import annotations

import argparse
import os
import sys
import time


def choose(part: str) -> tuple:
    """The (label, case) of netsim_vs_htsim whose label holds `part`; an error naming the labels
    when none or more than one does."""
    from benchmarks.netsim_vs_htsim import cases
    found = [(label, case) for label, case in cases() if part in label]
    if len(found) != 1:
        labels = ", ".join(repr(label) for label, _ in cases())
        raise SystemExit(f"case_cpu: {part!r} names {'no' if not found else 'more than one'} case of {labels}")
    return found[0]


def measure(case, runs: int) -> list[float]:
    """Process seconds of `runs` runs of `case`, after one run to warm up."""
    from experiments.backends.netsim_backend import NetsimBackend
    NetsimBackend().run_case(case)
    seconds = []
    for _ in range(runs):
        start = time.process_time()
        NetsimBackend().run_case(case)
        seconds.append(time.process_time() - start)
    return seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.case_cpu", description=__doc__.splitlines()[0])
    parser.add_argument("case", help='a part of the case\'s label: "4x4x4" or "fat-tree"')
    parser.add_argument("runs", type=int, nargs="?", default=5, help="runs measured after the warm-up (default 5)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"runs must be at least 1, not {args.runs}")
    import speedups
    label, case = choose(args.case)
    seconds = sorted(measure(case, args.runs))
    checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    print(f"{checkout} [{speedups.build_in_use()}] {label}: fastest {seconds[0]:.4f} s, median "
          f"{seconds[len(seconds) // 2]:.4f} s CPU over {len(seconds)} runs, load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
