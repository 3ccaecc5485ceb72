"""Checks of lab 2: compile the student's mrc.p4 with p4c (into a temporary folder, never p4/build)
and run the trimming conformance cases on BMv2 with the result."""
import shutil
import tempfile
from pathlib import Path

from labs.catalog import HOW_TO_GET, get_lab
from labs.checking import Check, CheckFailed, CheckSkipped

CASE_FILE = "trim.yaml"          # every case of this file, and the other cases named after trimming


def _compile(source: Path, out: Path) -> tuple[Path, Path]:
    """(BMv2 JSON, text P4Info) of `source` compiled into `out`; CheckFailed with p4c's errors."""
    from conformance.program import P4CompileError, compile_p4
    if shutil.which("p4c") is None:
        raise CheckSkipped(f"p4c is not on PATH: {HOW_TO_GET['p4c']}")
    try:
        files = compile_p4(source, out)
    except P4CompileError as error:
        lines = [line for line in str(error).splitlines() if line.strip()]
        raise CheckFailed(" | ".join(lines[:7])) from None
    return files.bmv2_json, files.p4info


def check_compiles(ws):
    source = ws.path("mrc.p4")
    with tempfile.TemporaryDirectory(prefix="lab2-p4c-") as out:
        bmv2_json, _ = _compile(source, Path(out))
        return f"p4c compiled {source.name} ({bmv2_json.stat().st_size // 1024} KiB of BMv2 JSON)"


def check_trimming_on_bmv2(ws):
    missing = get_lab(2).missing()
    if missing:
        raise CheckSkipped("cannot run BMv2 here: " + "; ".join(missing))
    from conformance.case import CASES_DIR, load_cases
    from conformance.process_targets import Bmv2Target
    from conformance.runner import run_cases
    source = ws.path("mrc.p4")
    with tempfile.TemporaryDirectory(prefix="lab2-p4c-") as out:
        bmv2_json, p4info = _compile(source, Path(out))
        target = Bmv2Target(str(p4info), str(bmv2_json))
        reason = target.unavailable()
        if reason:
            raise CheckSkipped(f"cannot run BMv2 here: {reason}")
        cases = [c for c in load_cases(CASES_DIR) if c.source == CASE_FILE or "trim" in c.name]
        results = run_cases(cases, target)
    bad = [r for r in results if r.status != "pass"]
    if bad:
        raise CheckFailed(f"{len(bad)} of {len(results)} trimming cases fail on BMv2: "
                          + "; ".join(f"{r.case}: {r.message}" for r in bad[:3]))
    return f"all {len(results)} trimming conformance cases pass on BMv2 ({', '.join(r.case for r in results)})"


CHECKS = [
    Check("compiles with p4c", "read p4c's first error: it names the line; v1model's truncate() takes a "
          "byte count, and a header field is written with its own width", check_compiles),
    Check("trimming conformance on BMv2", "the cases say what they expect (conformance/cases/trim.yaml): a "
          "trim happens only at the threshold, the packet that is left must still be a consistent "
          "IPv6/UDP packet, and the receiver must be able to tell it was trimmed, and where",
          check_trimming_on_bmv2),
]
