"""MRC's flows against their ideal time on experiments/datacenter.yaml, seed by seed.

    .venv/bin/python -m experiments.datacenter_seeds [--seeds 1 2 3 4] [--variant LABEL ...] [--quick]
                                                     [--jobs N | --cluster FILE]

Runs MRC on netsim (deterministic) for each seed and each variant (default: `permutation`,
`permutation, gray spine`, `incast`) and prints, per run, the slowest and the median flow's
completion time over its ideal (bytes into its receiver at the line rate plus the fabric's base
RTT), then the mean over the seeds. The issue's targets (issue 16) are about the slowest flow.
With --jobs N (or --cluster FILE) the runs go N at once (experiments/parallel.py), with the same
figures; the last line gives the wall time and the machine's load.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from experiments import metrics, parallel
from experiments.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
DATACENTER = ROOT / "experiments" / "datacenter.yaml"
VARIANTS = ("permutation", "permutation, gray spine", "incast")


def run(variant: str, seed: int, quick: bool, mode: str = "mrc") -> list[float] | None:
    """The sorted flow ratios of `mode` on `variant` of datacenter.yaml with `seed`."""
    from experiments.backends.netsim_backend import NetsimBackend
    from experiments.transport_sizing import line_rate_and_base_rtt
    scenario = load_scenario(DATACENTER, quick=quick, seed=seed)
    case = next((c for c in scenario.cases() if c.transport.mode == mode and c.variant.label == variant), None)
    if case is None:
        raise SystemExit(f"datacenter.yaml has no variant {variant!r} for mode {mode!r}")
    record = NetsimBackend().run_case(case)
    return metrics.flows_over_ideal(record, *line_rate_and_base_rtt(case))


def timed_run(item: tuple[str, int, bool]) -> tuple[list[float] | None, float]:
    """`run(variant, seed, quick)` of `item` and its wall time in seconds (what a worker runs)."""
    began = time.monotonic()
    return run(*item), time.monotonic() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.datacenter_seeds", description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--variant", action="append", help="a variant label (repeatable; default: three)")
    parser.add_argument("--quick", action="store_true", help="datacenter.yaml's quick sizes (256 KB flows)")
    parallel.add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        parallel.check_options(args.jobs, args.cluster)
    except ValueError as error:
        parser.error(str(error))
    variants = args.variant or VARIANTS
    items = [(variant, seed, args.quick) for variant in variants for seed in args.seeds]
    load_start, began = os.getloadavg()[0], time.monotonic()
    with parallel.open_pool(args.jobs, args.cluster) as pool:
        where = parallel.describe(pool)
        outcomes = iter(parallel.run_all(pool, timed_run, items, [f"{v} seed {s}" for v, s, _ in items]))
    for variant in variants:
        slowest, median = [], []
        for seed in args.seeds:
            ratios, wall = next(outcomes)          # in the order of `items`
            if ratios is None:
                print(f"{variant:<24} seed {seed}: a flow never finished", flush=True)
                continue
            slowest.append(ratios[-1])
            median.append(statistics.median(ratios))
            print(f"{variant:<24} seed {seed}: slowest {ratios[-1]:.3f}x  median {median[-1]:.3f}x  "
                  f"({wall:.0f} s wall)", flush=True)
        if slowest:
            print(f"{variant:<24} mean   : slowest {statistics.mean(slowest):.3f}x  "
                  f"median {statistics.mean(median):.3f}x  (max slowest {max(slowest):.3f}x)", flush=True)
    print(f"wall time: {time.monotonic() - began:.1f} s for {len(items)} runs on {where} "
          f"({os.cpu_count()} cores, 1-min load {load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
