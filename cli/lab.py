"""`mrc-testbed lab`: the hands-on labs (labs/): list them, start one, check a student's work.

    mrc-testbed lab list
    mrc-testbed lab start 3 [--dir DIR]          # copy lab 3's skeleton into a work folder
    mrc-testbed lab check 3 [--dir DIR]          # run lab 3's checks on it (exit 0: all pass)
    mrc-testbed lab check 3 --solution           # ... on the lab's own solution
    mrc-testbed lab check 3 --dir a --dir b --csv class.csv    # a class: one CSV of results
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from labs import catalog, grading, workspace
from labs.checking import CheckResult, Workspace, run_checks


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the lab subcommand."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("list", help="the labs, their duration and what each needs")
    start = actions.add_parser("start", help="copy a lab's skeleton into a work folder")
    start.add_argument("number", type=int, help="lab number (see: mrc-testbed lab list)")
    start.add_argument("--dir", type=Path, help="work folder (default: ./labN-NAME)")
    check = actions.add_parser("check", help="run a lab's checks on a work folder")
    check.add_argument("number", type=int, help="lab number")
    check.add_argument("--dir", type=Path, action="append", dest="dirs", metavar="DIR",
                       help="work folder (repeat for a class; default: ./labN-NAME)")
    check.add_argument("--solution", action="store_true", help="check the lab's own solution")
    check.add_argument("--csv", type=Path, help="write the results of every folder to this CSV file")


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "list":
            return list_labs()
        lab = catalog.get_lab(args.number)
        if args.action == "start":
            return start_lab(lab, args.dir or workspace.default_folder(lab))
        return check_lab(lab, args)
    except (catalog.LabError, workspace.WorkspaceError) as exc:
        print(f"mrc-testbed lab: {exc}", file=sys.stderr)
        return 2


def list_labs() -> int:
    """Print one line per lab, then what this machine lacks for each."""
    labs = catalog.all_labs()
    print(f"{'lab':<4} {'minutes':>7}  {'needs':<16} title")
    for lab in labs:
        print(f"{lab.number:<4} {lab.minutes:>7}  {', '.join(lab.needs) or '-':<16} {lab.title}")
    for lab in labs:
        for missing in lab.missing():
            print(f"  lab {lab.number} on this machine lacks {missing}")
    return 0


def start_lab(lab: catalog.Lab, folder: Path) -> int:
    folder = workspace.start(lab, folder)
    print(f"lab {lab.number} ({lab.title}): your work folder is {folder}")
    print(f"read {lab.folder / 'README.md'}, then check with: mrc-testbed lab check {lab.number} "
          f"--dir {folder}")
    return 0


def check_lab(lab: catalog.Lab, args: argparse.Namespace) -> int:
    """Check each folder; exit 0 only when every check of every folder passed."""
    folders = [lab.solution] if args.solution else (args.dirs or [workspace.default_folder(lab)])
    for folder in folders:
        if not folder.is_dir():
            raise workspace.WorkspaceError(f"{folder}: no such work folder "
                                           f"(make one with: mrc-testbed lab start {lab.number})")
        marked = workspace.lab_number_of(folder)
        if marked is not None and marked != lab.number:
            raise workspace.WorkspaceError(f"{folder} was started for lab {marked}, not lab {lab.number}")
    checks = lab.checks()
    results: dict[Path, list[CheckResult]] = {}
    for folder in folders:
        results[folder] = run_checks(checks, Workspace(folder))
        print_results(lab, folder, results[folder])
    if args.csv:
        args.csv.write_text(grading.class_csv(lab.number, results), encoding="utf-8")
        print(f"results of {len(folders)} folder(s) written to {args.csv}")
    return 0 if all(r.passed for rs in results.values() for r in rs) else 1


def print_results(lab: catalog.Lab, folder: Path, results: list[CheckResult]) -> None:
    print(f"lab {lab.number} ({lab.title}) in {folder}:")
    for r in results:
        print(f"  {r.status.upper():<4}  {r.check}: {r.detail}")
        if r.hint:
            print(f"        hint: {r.hint}")
    passed = sum(r.passed for r in results)
    print(f"  {passed} of {len(results)} checks pass")
