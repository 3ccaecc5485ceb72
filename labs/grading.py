"""A class's results: one CSV with a row per student folder and a column per check, and one folder's
results as Gradescope's `results.json`."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from labs.checking import Check, CheckResult


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


def gradescope_results(checks: list[Check], results: list[CheckResult], seconds: float) -> dict:
    """Gradescope's results.json of one submission: one test per check (name, score, max_score,
    status, output: the detail and, on failure, the hint; never the expected value)."""
    points = {c.name: c.points for c in checks}
    tests = []
    for r in results:
        output = r.detail if r.status != "fail" else f"{r.detail}\nhint: {r.hint}" if r.hint else r.detail
        if r.status == "skip":
            output = f"not checked here: {r.detail}"
        tests.append({"name": r.check, "score": points.get(r.check, 1.0) if r.passed else 0.0,
                      "max_score": points.get(r.check, 1.0), "status": "passed" if r.passed else "failed",
                      "output": output})
    passed = sum(r.passed for r in results)
    return {"score": sum(t["score"] for t in tests), "execution_time": round(seconds, 1),
            "output": f"{passed} of {len(results)} checks pass", "tests": tests}


def write_gradescope(path: Path, checks: list[Check], results: list[CheckResult], seconds: float) -> None:
    """Write `gradescope_results(...)` as JSON to `path` (its folder made if missing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(gradescope_results(checks, results, seconds), indent=2) + "\n", encoding="utf-8")
