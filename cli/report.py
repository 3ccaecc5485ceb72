"""`mrc-testbed report`: gather every results folder into one HTML or markdown page.

    mrc-testbed report                              # results/ -> results/report.html
    mrc-testbed report --results /tmp/runs -o report.md
    mrc-testbed report --paper                      # results/ -> results/paper.md: the paper's statements
                                                    # beside the lab's figures (experiments/paper.py)
"""
from __future__ import annotations

import argparse
from pathlib import Path

from cli.errors import fail
from experiments.paper import write_paper
from experiments.report import DEFAULT_ROOT, NoResults, write_report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `mrc-testbed report`."""
    parser.add_argument("--results", type=Path, default=DEFAULT_ROOT,
                        help="folder holding results folders (default: results)")
    parser.add_argument("-o", "--output", type=Path, default=None,
                        help="report file, .html or .md (default: <results>/report.html; "
                             "with --paper <results>/paper.md)")
    parser.add_argument("--paper", action="store_true",
                        help="one page putting each measured figure beside the MRC paper's statement, "
                             "with where and why the lab-scale result differs")


def run(args: argparse.Namespace) -> int:
    """Entry point of `mrc-testbed report`."""
    root = args.results
    if not root.is_dir():
        return fail("report", f"--results {root}: no such folder (run an experiment first)")
    if getattr(args, "paper", False):
        return _paper(root, args.output or root / "paper.md")
    output = args.output or root / "report.html"
    try:
        path, count = write_report(root, output)
    except ValueError as error:
        return fail("report", str(error))
    except NoResults as error:
        return fail("report", str(error), 1)
    print(f"report of {count} results folder(s): {path}")
    return 0


def _paper(root: Path, output: Path) -> int:
    """`--paper`: write the page of the paper's statements beside the newest results."""
    try:
        path, measured, passed = write_paper(root, output)
    except ValueError as error:
        return fail("report", str(error))
    except NoResults as error:
        return fail("report", str(error), 1)
    for folder, why in passed:
        print(f"note: {folder} passed over: {why}")
    print(f"the paper's statements beside {measured} measured scenario(s): {path}")
    return 0
