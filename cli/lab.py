"""`mrc-testbed lab`: the hands-on labs (labs/): list them, start one, check a student's work.

    mrc-testbed lab list
    mrc-testbed lab start 3 [--dir DIR]          # copy lab 3's skeleton into a work folder
    mrc-testbed lab check 3 [--dir DIR]          # run lab 3's checks on it (exit 0: all pass)
    mrc-testbed lab check 3 --solution           # ... on the lab's own solution
    mrc-testbed lab check 3 --dir a --dir b --csv class.csv    # a class: one CSV of results
    mrc-testbed lab check 3 --dir /autograder/submission --gradescope /autograder/results/results.json
    mrc-testbed lab key [--check]                # the answer key of labs/INSTRUCTORS.md, from the solutions

Each folder is checked in a process of its own, with a time limit and a memory limit: nothing a
student's code does changes another folder's grade.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cli.errors import fail
from labs import catalog, grading, workspace
from labs.checking import CheckResult
from labs.isolation import Limits, grade


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the lab subcommand."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("list", help="the labs, their duration and what each needs")
    start = actions.add_parser("start", help="copy a lab's skeleton into a work folder")
    start.add_argument("number", type=int, help="lab number (see: mrc-testbed lab list)")
    start.add_argument("--dir", type=Path, help="work folder (default: ./labN-NAME)")
    check = actions.add_parser("check", help="run a lab's checks on work folders, each in its own process")
    check.add_argument("number", type=int, help="lab number")
    check.add_argument("--dir", type=Path, action="append", dest="dirs", metavar="DIR",
                       help="work folder (repeat for a class; default: ./labN-NAME)")
    check.add_argument("--solution", action="store_true", help="check the lab's own solution")
    check.add_argument("--csv", type=Path, help="write the results of every folder to this CSV file")
    check.add_argument("--gradescope", type=Path, metavar="FILE",
                       help="write Gradescope's results.json for the (one) folder to FILE")
    check.add_argument("--instructor", action="store_true",
                       help="also print the value each failed check expected (never shown to students)")
    check.add_argument("--timeout", type=_positive(float), metavar="SECONDS",
                       help="time limit of one folder's checks (default: the lab's, lab.yaml time_limit_s)")
    check.add_argument("--memory-mb", type=_positive(int, zero=True), metavar="MIB",
                       help="address space of the process checking one folder (default: the lab's; 0: none)")
    key = actions.add_parser("key", help="regenerate the answer key of labs/INSTRUCTORS.md from the solutions")
    key.add_argument("--check", action="store_true",
                     help="change nothing: list the figures that differ, exit 1 when any does")


def _positive(kind, zero: bool = False):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value < 0 or (value == 0 and not zero):
            raise argparse.ArgumentTypeError(f"must be {'0 or more' if zero else 'positive'}: {text!r}")
        return value
    return parse


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "list":
            return list_labs()
        if args.action == "key":
            return answer_key(args.check)
        lab = catalog.get_lab(args.number)
        if args.action == "start":
            return start_lab(lab, args.dir or workspace.default_folder(lab))
        return check_lab(lab, args)
    except (catalog.LabError, workspace.WorkspaceError) as exc:
        return fail("lab", str(exc))


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
    """Check each folder in a process of its own; exit 0 only when every check of every folder passed."""
    folders = [lab.solution] if args.solution else (args.dirs or [workspace.default_folder(lab)])
    for folder in folders:
        if not folder.is_dir():
            raise workspace.WorkspaceError(f"{folder}: no such work folder "
                                           f"(make one with: mrc-testbed lab start {lab.number})")
        marked = workspace.lab_number_of(folder)
        if marked is not None and marked != lab.number:
            raise workspace.WorkspaceError(f"{folder} was started for lab {marked}, not lab {lab.number}")
    gradescope = getattr(args, "gradescope", None)
    if gradescope and len(folders) != 1:
        raise workspace.WorkspaceError(f"--gradescope writes the results of one submission: give one --dir, "
                                       f"not {len(folders)}")
    limits = Limits.of(lab, getattr(args, "timeout", None), getattr(args, "memory_mb", None))
    results: dict[Path, list[CheckResult]] = {}
    began = time.monotonic()
    for n, folder in enumerate(folders, 1):
        if len(folders) > 1:
            print(f"[{n}/{len(folders)}] {folder}", file=sys.stderr)
        results[folder] = grade(lab, folder, limits, solution=args.solution)
        print_results(lab, folder, results[folder], getattr(args, "instructor", False))
    if args.csv:
        args.csv.write_text(grading.class_csv(lab.number, results), encoding="utf-8")
        print(f"results of {len(folders)} folder(s) written to {args.csv}")
    if gradescope:
        grading.write_gradescope(gradescope, lab.checks(), results[folders[0]], time.monotonic() - began)
        print(f"Gradescope results written to {gradescope}")
    return 0 if all(r.passed for rs in results.values() for r in rs) else 1


def print_results(lab: catalog.Lab, folder: Path, results: list[CheckResult], instructor: bool = False) -> None:
    print(f"lab {lab.number} ({lab.title}) in {folder}:")
    for r in results:
        print(f"  {r.status.upper():<4}  {r.check}: {r.detail}")
        if r.hint:
            print(f"        hint: {r.hint}")
        if instructor and r.expected:
            print(f"        expected (instructor): {r.expected}")
    passed = sum(r.passed for r in results)
    print(f"  {passed} of {len(results)} checks pass")


def answer_key(check_only: bool) -> int:
    """Regenerate the figures of labs/INSTRUCTORS.md (or, with --check, list those that differ)."""
    from labs import answer_key as key
    text = key.GUIDE.read_text(encoding="utf-8")
    unknown = sorted(set(key.quoted(text)) - key.declared())
    if unknown:
        return fail("lab key", f"{key.GUIDE} quotes figures no lab's key.py computes: {', '.join(unknown)}")
    figures = key.compute(progress=lambda line: print(line, file=sys.stderr))
    stale = key.differences(text, figures)
    if check_only:
        for name, quoted, now in stale:
            print(f"{name}: the guide says {quoted!r}, the solutions give {now!r}")
        print(f"{len(stale)} figure(s) of {key.GUIDE} differ from the solutions' runs" if stale
              else f"every figure of {key.GUIDE} is what the solutions give")
        return 1 if stale else 0
    key.GUIDE.write_text(key.fill(text, figures), encoding="utf-8")
    print(f"{key.GUIDE}: {len(figures)} figures, {len(stale)} changed")
    return 0
