"""`mrc-testbed conformance`: run the switch conformance cases and print pass/fail per case and target.

    mrc-testbed conformance                      # the in-process model
    mrc-testbed conformance --target all -k trim # model, model over P4Runtime, model process on veths,
                                                 # BMv2 (when installed)
"""
from __future__ import annotations

import argparse
import signal
import sys

from cli.errors import fail
from pipeline_contract.p4info import P4InfoError
from conformance.case import CASES_DIR, CaseError, load_cases
from conformance.runner import CaseResult, run_cases

TARGETS = ("model", "model-grpc", "model-proc", "bmv2")


def make_target(name: str, args: argparse.Namespace):
    """The target object called `name`."""
    if name == "model":
        from conformance.targets import ModelTarget
        return ModelTarget(args.p4info)
    if name == "model-grpc":
        from conformance.targets import ModelGrpcTarget
        return ModelGrpcTarget(args.p4info)
    from conformance.process_targets import Bmv2Target, ModelProcessTarget
    if name == "model-proc":
        return ModelProcessTarget(args.p4info)
    return Bmv2Target(args.p4info, args.bmv2_json)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the conformance subcommand."""
    parser.add_argument("--target", choices=TARGETS + ("all",), default="model",
                        help="where to run the cases (default: model; all = every target, "
                             "unavailable ones are skipped with the reason)")
    parser.add_argument("-k", dest="select", metavar="TEXT", help="only cases whose name contains TEXT")
    parser.add_argument("--cases", default=str(CASES_DIR), help="folder of case files (*.yaml)")
    parser.add_argument("--p4info", help="text P4Info (default: p4/build/mrc.p4info.txtpb)")
    parser.add_argument("--bmv2-json", help="BMv2 JSON for the bmv2 target (default: p4/build/mrc.json)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--p4", metavar="FILE.p4",
                        help="your own program: compile it with p4c into a temporary folder, check its "
                             "P4Info against the switch contract (names, keys, actions; ids may differ) "
                             "and run the cases on BMv2 with it")
    parser.add_argument("--differential", type=int, metavar="N",
                        help="generate N cases with hypothesis, run each on the model and on --target, and "
                             "write every divergence (shrunk) as a case file (needs hypothesis: test extras)")
    parser.add_argument("--seed", type=int, default=0, help="seed of --differential (default 0)")
    parser.add_argument("--out", metavar="FILE", help="case file for the divergences of --differential "
                        "(default: differential-<target>-<seed>.yaml in the current folder)")
    explain = parser.add_mutually_exclusive_group()
    explain.add_argument("--explain", action="store_const", const="all", dest="explain", default="failed",
                         help="on bmv2, trace every case (default: only the cases that fail are run again "
                              "with BMv2's trace log and explained packet by packet)")
    explain.add_argument("--no-explain", action="store_const", const="none", dest="explain",
                         help="on bmv2, do not explain failing cases")


def format_table(results: list[CaseResult]) -> str:
    """One line per case and target: status, time, and why it failed."""
    width = max([len(r.case) for r in results] + [4])
    lines = [f"{'case':<{width}}  {'target':<10}  {'result':<6}  {'time':>6}  detail"]
    for r in results:
        lines.append(f"{r.case:<{width}}  {r.target:<10}  {r.status.upper():<6}  {r.seconds:5.2f}s  {r.message}")
    return "\n".join(lines)


def summary(results: list[CaseResult]) -> str:
    """Counts of each status per target."""
    parts = []
    for target in dict.fromkeys(r.target for r in results):
        mine = [r for r in results if r.target == target]
        counts = {s: sum(r.status == s for r in mine) for s in ("pass", "fail", "error", "skip")}
        parts.append(f"{target}: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    return "; ".join(parts)


def run_differential(args: argparse.Namespace) -> int:
    """--differential: exit status 1 when the targets diverged, 2 when the run could not be made."""
    from pathlib import Path
    if args.target in ("model", "all"):
        return fail("conformance", "--differential compares the model with one other target: give --target bmv2 "
                                   "(or model-grpc, model-proc)")
    if args.differential < 1:
        return fail("conformance", f"--differential needs N >= 1, got {args.differential}")
    try:
        from conformance.differential import run_differential as search
    except ImportError as exc:
        return fail("conformance", f"--differential needs hypothesis ({exc}); install the test extras")
    from conformance.targets import ModelTarget
    other = make_target(args.target, args)
    reason = other.unavailable()
    if reason:
        return fail("conformance", f"--target {args.target} cannot run here: {reason}")
    reference = ModelTarget(args.p4info)
    out = Path(args.out or f"differential-{args.target}-{args.seed}.yaml")
    prefix = f"diff_{args.target.replace('-', '_')}_{args.seed}"

    def write(report) -> None:          # after every divergence: a run cut short keeps what it found
        out.write_text(report.case_file(prefix))

    def interrupt(*_):                  # hypothesis takes SystemExit in a test for a failure; not this
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    other.start()
    try:
        report = search(args.differential, args.seed, reference, other,
                        progress=lambda line: print(f"  {line}", flush=True), found=write)
    finally:
        other.stop()
        signal.signal(signal.SIGTERM, previous)
    print(f"differential model vs {args.target}: {report.examples} cases generated (seed {args.seed}), "
          f"{report.runs} run on both targets with shrinking, {report.seconds:.0f} s, "
          f"{len(report.divergences)} divergences")
    if report.errors:
        print(f"  {len(report.errors)} scenarios could not run on a target (not counted as divergences); "
              f"first: {report.errors[0]}")
    for i, d in enumerate(report.divergences):
        print(f"  divergence {i}: " + "; ".join(d.differences[:8]))
    if not report.divergences:
        return 0
    write(report)
    print(f"written: {out} (run it with: mrc-testbed conformance --cases {out.parent} --target {args.target})")
    return 1


def run_own_program(args: argparse.Namespace) -> int:
    """--p4: compile the engineer's program, check it against the contract, run the cases on BMv2."""
    import tempfile
    from conformance.program import P4CompileError, compile_p4, contract_differences
    from pipeline_contract.p4info import load_p4info
    if args.target not in ("model", "bmv2"):
        return fail("conformance", f"--p4 runs your program on BMv2; --target {args.target} runs the repository's "
                                   "pipeline (give --target bmv2)")
    with tempfile.TemporaryDirectory(prefix="mrc-p4c-") as out:
        print(f"compiling {args.p4} with p4c into {out} ...", flush=True)
        try:
            files = compile_p4(args.p4, out)
        except P4CompileError as error:
            return fail("conformance", str(error))
        differences = contract_differences(load_p4info(files.p4info))
        if differences:
            return fail("conformance", f"{args.p4} does not meet the switch contract (the names, keys and actions "
                                       f"the controller and the cases use; ids may differ):\n  " + "\n  ".join(differences))
        print(f"{args.p4}: compiled; its P4Info meets the switch contract; running the cases on bmv2", flush=True)
        own = argparse.Namespace(**{**vars(args), "p4": None, "target": "bmv2", "p4info": str(files.p4info),
                                    "bmv2_json": str(files.bmv2_json)})
        return run(own)


def run(args: argparse.Namespace) -> int:
    """Run the cases; exit status 1 when any case failed or errored, 2 when none could run."""
    from pathlib import Path
    if getattr(args, "p4", None):
        return run_own_program(args)
    if getattr(args, "differential", None) is not None:
        return run_differential(args)
    try:
        cases = load_cases(Path(args.cases), args.select)
    except CaseError as exc:
        return fail("conformance", str(exc))
    if not cases:
        return fail("conformance", f"no case matches {args.select!r}")
    if args.list:
        for c in cases:
            print(f"{c.name:<40} {c.source:<16} {c.about}")
        return 0
    # SIGTERM unwinds like Ctrl-C, so that a target's namespaces and switch process are removed
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        names = TARGETS if args.target == "all" else (args.target,)
        results: list[CaseResult] = []
        reports: list[str] = []
        for name in names:
            if name == "bmv2" and getattr(args, "explain", "none") != "none":
                from conformance.explain import run_cases_explained
                mine, explained = run_cases_explained(cases, make_target(name, args), args.explain)
                results += mine
                reports += explained
            else:
                results += run_cases(cases, make_target(name, args))
    except P4InfoError as exc:
        return fail("conformance", str(exc))
    finally:
        signal.signal(signal.SIGTERM, previous)
    for report in reports:
        print(report, end="\n\n")
    print(format_table(results))
    print(summary(results))
    if all(r.status == "skip" for r in results):       # a skip of everything is not a pass
        return fail("conformance", f"nothing was run on --target {args.target}: {results[0].message}")
    return 1 if any(r.status in ("fail", "error") for r in results) else 0
