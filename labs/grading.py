"""One CSV of a class's results: a row per student folder, a column per check."""
from __future__ import annotations

import csv
import io
from pathlib import Path

from labs.checking import CheckResult


def class_csv(lab_number: int, results: dict[Path, list[CheckResult]]) -> str:
    """CSV text: folder, lab, each check's status, passed count, total."""
    names = list(dict.fromkeys(r.check for rs in results.values() for r in rs))
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["folder", "lab", *names, "passed", "checks"])
    for folder, rs in results.items():
        by_name = {r.check: r.status for r in rs}
        writer.writerow([str(folder), lab_number, *(by_name.get(n, "") for n in names),
                         sum(r.passed for r in rs), len(rs)])
    return out.getvalue()
