"""`mrc-testbed sweep experiments/trim-sweep.yaml`: offered load through one bottleneck on Mininet.

    mrc-testbed sweep experiments/trim-sweep.yaml                      # the model target
    mrc-testbed sweep experiments/trim-sweep.yaml --target model --target bmv2 --out /tmp/ts
    mrc-testbed sweep experiments/trim-sweep.yaml --quick              # two loads, 1 s each

Writes sweep-<target>.json (every step, with the run's conditions) and <name>.png (both targets
on one figure) to the results folder, and prints a line per step. Needs root (Mininet).
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from cli.errors import fail
from experiments import conditions, results
from experiments.load_sweep.figure import plot_sweep, save_steps
from experiments.load_sweep.steps import run_sweep
from experiments.load_sweep.sweep_file import SweepError, load_sweep_spec
from testbed.logs import setup_logging
from testbed.nodes import TARGETS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `mrc-testbed sweep`."""
    parser.add_argument("sweep", help="sweep file, e.g. experiments/trim-sweep.yaml")
    parser.add_argument("--target", action="append", choices=TARGETS, default=None,
                        help="switch target (repeatable; default: model)")
    parser.add_argument("--quick", action="store_true", help="the file's `quick:` loads and step time")
    parser.add_argument("--out", type=Path, default=None,
                        help="results folder (default: results/<name>-<date-time>)")


def run(args: argparse.Namespace) -> int:
    """Entry point of `mrc-testbed sweep`."""
    try:
        spec = load_sweep_spec(args.sweep, quick=args.quick)
    except SweepError as error:
        return fail("sweep", str(error))
    if os.geteuid() != 0:
        return fail("sweep", "Mininet needs root: run it with sudo")
    targets = args.target or ["model"]
    folder = args.out or results.default_folder(spec.name)
    folder.mkdir(parents=True, exist_ok=True)
    setup_logging(getattr(args, "verbosity", 0), folder)
    by_target = {}
    for target in targets:
        measuring = conditions.Measuring()
        try:
            steps = run_sweep(spec, target, folder / target, progress=print)
        except (RuntimeError, ValueError) as error:
            return fail("sweep", f"{target}: {error}", 1)
        save_steps(steps, folder / f"sweep-{target}.json", {"target": target, "quick": args.quick, **measuring.done()})
        by_target[target] = steps
    figure = folder / f"{spec.name}.png"
    plot_sweep(spec, by_target, figure)
    print(f"results: {folder}  ({figure.name}, {', '.join(f'sweep-{t}.json' for t in by_target)})")
    return 0
