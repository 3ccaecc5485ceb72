"""`mrc-testbed crosscheck SCENARIO`: MRC on netsim and uet-htsim's htsim_uec on the same flows.

    mrc-testbed crosscheck experiments/datacenter.yaml                      # seed 1, every balancer
    mrc-testbed crosscheck experiments/datacenter.yaml --seeds 1 2 3 4 5 6 7 8
    mrc-testbed crosscheck experiments/datacenter.yaml --settings htsim     # htsim_uec's switch defaults
    mrc-testbed crosscheck experiments/datacenter.yaml --balancer mixed --variant incast
    mrc-testbed crosscheck experiments/datacenter.yaml --netsim-sizes       # htsim_uec's packets as netsim's

htsim_uec comes from $HTSIM_UEC or PATH (scripts/build-htsim.sh builds it). Prints the slowest
flow over ideal per case and simulator (mean over the seeds, worst seed) and each one's wall
time per case, with what it was measured on (date, load, netsim's build, htsim_uec's path and
commit when known); writes the results folder (summary.md, summary.json, raw.jsonl, crosscheck-cdf.png,
and htsim/seed<S>-<balancer>/<case>/ with each htsim_uec run's files, command.txt and htsim.out).
Exit status: 0 done, 1 a run error (htsim_uec missing, or a run of it failed: the others still
ran and are in the results), 2 bad input (including a scenario with no case htsim_uec can run);
a Ctrl-C or SIGTERM saves the runs that had finished (marked interrupted) and exits 130 / 143.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cli.errors import PROG, fail
from experiments import results
from experiments.backends.htsim.inputs import BALANCERS, SETTINGS, netsim_packet_sizes
from experiments.scenario import ScenarioError, load_scenario
from testbed.logs import setup_logging


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `mrc-testbed crosscheck`."""
    parser.add_argument("scenario", help="scenario file, e.g. experiments/datacenter.yaml")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (default: the scenario's)")
    parser.add_argument("--balancer", action="append", choices=BALANCERS, default=[],
                        help="htsim_uec's load balancer (repeatable; default: all of them)")
    parser.add_argument("--settings", choices=SETTINGS, default="scenario",
                        help="switch thresholds of both simulators: the scenario's (default) or htsim_uec's defaults")
    parser.add_argument("--variant", action="append", default=[], metavar="LABEL", help="only this variant (repeatable)")
    parser.add_argument("--quick", action="store_true", help="the scenario's quick sizes")
    parser.add_argument("--netsim-sizes", action="store_true",
                        help="htsim_uec's data headers, trimmed packets, ACKs and NACKs as large as netsim's "
                             "(needs a build with scripts/build-htsim.sh --measurement-switches; docs/htsim.md, "
                             "difference 4)")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default: results/crosscheck-<scenario>-<date-time>)")


def run(args: argparse.Namespace) -> int:
    """Entry point of `mrc-testbed crosscheck`."""
    from experiments.backends.htsim import HtsimFailed, HtsimNotFound
    from experiments.conditions import Measuring
    from experiments.crosscheck import (Crosscheck, CrosscheckInterrupted, conditions_line, failure_lines,
                                        run_conditions, table_lines, write_results)
    try:
        scenario = load_scenario(args.scenario, quick=args.quick)
    except ScenarioError as error:
        return fail("crosscheck", str(error))
    known = [v.label for v in scenario.variants]
    for label in args.variant:
        if label not in known:
            return fail("crosscheck", f"--variant {label!r}: the scenario has {', '.join(map(repr, known))}")
    seeds = args.seeds or [scenario.seed]
    try:
        check = Crosscheck(tuple(args.balancer) or BALANCERS, args.settings,
                           sizes=netsim_packet_sizes() if args.netsim_sizes else None)
    except (HtsimNotFound, ValueError) as error:
        return fail("crosscheck", str(error), 1)
    runnable, refused = check.runnable(scenario, tuple(args.variant))
    if not runnable:
        reasons = "\n".join(f"  {label}: {why}" for label, why in refused)
        return fail("crosscheck", f"{args.scenario}: no case htsim_uec can run (with "
                                  f"{', '.join(check.balancers)}), so nothing to compare:\n{reasons}")
    folder = args.out or results.default_folder(f"crosscheck-{scenario.name}")
    setup_logging(getattr(args, "verbosity", 0), folder)
    stop = None                     # a Ctrl-C or SIGTERM: what finished is saved, then it is raised again
    measuring = Measuring()
    try:
        records, rows, skipped = check.run(Path(args.scenario), seeds, args.quick, tuple(args.variant),
                                           progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True),
                                           keep=folder / "htsim")
    except CrosscheckInterrupted as interrupted:
        records, rows, skipped, stop = interrupted.records, interrupted.rows, interrupted.skipped, interrupted.cause
    except (HtsimNotFound, HtsimFailed, ValueError) as error:
        return fail("crosscheck", str(error), 1)
    kept = f"{results.RAW_JSONL}, {results.SUMMARY_JSON}, {results.SUMMARY_MD} of the {len(records)} finished run(s)"
    try:
        meta, figures = write_results(scenario, records, rows, skipped, folder,
                                      {"seeds": seeds, "settings": args.settings, "balancers": list(check.balancers),
                                       "htsim_uec": check.binary, "quick": args.quick, "interrupted": stop is not None,
                                       "htsim_packet_sizes": check.sizes.text() if check.sizes else None,
                                       "conditions": run_conditions(measuring.done(), check.binary)})
    except results.INTERRUPTIONS:
        print(f"{PROG} crosscheck: interrupted while drawing the figure; {kept} are in {folder}", file=sys.stderr)
        raise
    if stop is not None:
        print(f"{PROG} crosscheck: interrupted; {kept} are in {folder}" if records else
              f"{PROG} crosscheck: interrupted before any run finished: nothing to keep ({folder} holds empty "
              "results marked interrupted)", file=sys.stderr)
        raise stop
    print(f"{meta['title']}: htsim_uec {check.binary}, switch settings {args.settings}"
          + (f", its packets as netsim's ({check.sizes.text()})" if check.sizes else ""))
    print("slowest flow over ideal per case, mean over the seeds that completed (worst seed):")
    print("\n".join(table_lines(meta["crosscheck"])))
    print(conditions_line(meta))
    for label, why in skipped:
        print(f"skipped {label}: {why}")
    files = [f.name for f in figures] + ["summary.json", "summary.md", "raw.jsonl",
                                         "htsim/: each htsim_uec run's inputs, command and output"]
    print(f"results: {folder}  ({', '.join(files)})")
    failed = failure_lines(meta["crosscheck"], brief=True)
    if failed:
        return fail("crosscheck", f"{len(failed)} run(s) failed (the others ran; summary.md has each message):\n  "
                                  + "\n  ".join(failed), 1)
    return 0
