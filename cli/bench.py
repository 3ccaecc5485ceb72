"""`mrc-testbed bench`: run the benchmarks, print one table of figures, keep results to compare.

    mrc-testbed bench                       # every benchmark (those needing root say so when skipped)
    mrc-testbed bench --only allreduce --only failover --no-mininet
    mrc-testbed bench --only netsim --fat-tree-k16    # the simulator's speed, with the fat-tree k=16
    mrc-testbed bench --list
"""
from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.bench_netsim import NAME as NETSIM, add_k16_argument
from benchmarks.figures import RESULTS
from benchmarks import run as suite
from benchmarks.run import NAMES, REPO
from cli.errors import fail
from experiments import conditions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `mrc-testbed bench`."""
    parser.add_argument("--only", action="append", choices=NAMES, metavar="NAME",
                        help=f"run only this benchmark (repeatable): {', '.join(NAMES)}")
    parser.add_argument("--no-mininet", action="store_true",
                        help="skip the Mininet parts (netsim figures only where a benchmark has both)")
    parser.add_argument("--results", type=Path, default=RESULTS,
                        help=f"folder of saved results (default {RESULTS.relative_to(REPO)})")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    add_k16_argument(parser.add_argument_group(f"the {NETSIM} benchmark"))


def run(args: argparse.Namespace) -> int:
    """Run the chosen benchmarks (or list them); 1 when one of them failed."""
    if getattr(args, "fat_tree_k16", False) and args.only and NETSIM not in args.only:
        return fail("bench", f"--fat-tree-k16 is a figure of the {NETSIM} benchmark, which --only "
                             f"{' --only '.join(args.only)} leaves out: add --only {NETSIM}")
    chosen = [b for b in suite.benchmarks() if not args.only or b.name in args.only]
    if args.list:
        for bench in chosen:
            print(f"{bench.name:<15} {bench.description}")
        return 0
    measuring = conditions.Measuring()
    runs = [suite.run_one(bench, args, args.results) for bench in chosen]
    measured = measuring.done()
    print()
    print(f"benchmarks on {measured['host']}, {measured['date']}: {conditions.text(measured)}")
    print(suite.table(runs))
    failed = [run.benchmark.name for run in runs if run.error]
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0
