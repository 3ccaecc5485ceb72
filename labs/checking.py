"""Checks of a student's work: each passes or fails with a detail and, on failure, a hint.

A check is a function of a `Workspace` (the student's folder, and a loader for the Python files in
it) that returns a detail line when the work is right and raises `CheckFailed` when it is not. The
hint of a check points at the concept the check is about, never at the answer. A failure's detail
says what went wrong in the student's terms (the first path that differs, the direction of an
error) and never the expected value: that goes into `CheckFailed.expected`, shown to instructors
only (`lab check --instructor`).

These functions run a check in the calling process. A class is graded with `labs.isolation`,
which runs every student folder's checks in a child process of its own (`labs.sandbox`).
"""
from __future__ import annotations

import hashlib
import importlib.util
import itertools
import sys
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable

_module_ids = itertools.count()
_student_depth = [0]             # > 0 while a student's code runs (labs.originality's guard reads it)
STATUSES = ("pass", "fail", "skip")


@contextmanager
def student_code():
    """The block runs a student's code (an import, a call of their function or policy)."""
    _student_depth[0] += 1
    try:
        yield
    finally:
        _student_depth[0] -= 1


def in_student_code() -> bool:
    """True while a student's code runs."""
    return _student_depth[0] > 0


class CheckFailed(AssertionError):
    """The student's work does not do what the check asks; the message says what it saw.

    `expected`: the value the check wanted, for instructors only (never shown to a student)."""

    def __init__(self, detail: str, expected: str = "") -> None:
        super().__init__(detail)
        self.expected = expected


class CheckSkipped(Exception):
    """The check cannot run here (a program or root is missing); the message says what and how."""


@dataclass(frozen=True)
class Workspace:
    """The folder a check looks at: a student's work folder or the lab's solution."""

    folder: Path

    def path(self, name: str) -> Path:
        """A file of the work folder; CheckFailed naming it when it is not there."""
        path = self.folder / name
        if not path.exists():
            raise CheckFailed(f"{path}: not found (start from the skeleton: mrc-testbed lab start N)")
        return path

    def module(self, name: str) -> ModuleType:
        """The student's Python file `name` (e.g. "sack.py"), freshly imported."""
        path = self.path(name)
        module_name = f"lab_work_{path.stem}_{next(_module_ids)}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            with student_code():
                spec.loader.exec_module(module)
        except CheckFailed:
            raise
        except (Exception, SystemExit) as exc:   # noqa: BLE001 - a student's error or exit is a result
            raise CheckFailed(f"{path} does not import: {where(exc, path)}") from None
        return module

    def call(self, fn, *args, **kwargs):
        """Call a student's function `fn` (its exceptions propagate: the check fails naming them)."""
        with student_code():
            return fn(*args, **kwargs)


class StudentRuns:
    """Results of runs made with a student's file `file`, each made once per state of that file
    (its folder and its content's digest) and what else the run depends on: the checks of one
    folder share a run, and a file whose content changed since is run again, whatever its time
    and size say. Only the folder being checked is kept."""

    def __init__(self, file: str) -> None:
        self.file = file
        self._made: dict[tuple, object] = {}

    def get(self, ws: "Workspace", what: tuple, make: Callable[[], object]):
        """`make()` for workspace `ws` and `what` (the run's other inputs), made the first time asked."""
        path = ws.path(self.file)
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as exc:               # a folder, a dangling link, no permission: named, not a crash
            raise CheckFailed(f"{path}: cannot be read ({exc.strerror or exc})") from None
        key = (str(ws.folder.resolve()), digest, *what)
        if key not in self._made:
            for old in [k for k in self._made if k[0] != key[0]]:
                del self._made[old]
            self._made[key] = make()
        return self._made[key]


@dataclass(frozen=True)
class Check:
    """One thing the lab asks for, worth `points` in a grade book (Gradescope)."""

    name: str
    hint: str
    run: Callable[[Workspace], str]
    points: float = 1.0


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check on one work folder (`expected`: for instructors only)."""

    check: str
    status: str            # "pass", "fail" or "skip"
    detail: str
    hint: str = ""
    expected: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "pass"


def run_check(check: Check, workspace: Workspace) -> CheckResult:
    """Run one check; a student's exception (or sys.exit) is a failure that names where it was raised."""
    try:
        detail = check.run(workspace)
    except CheckSkipped as exc:
        return CheckResult(check.name, "skip", str(exc))
    except CheckFailed as exc:
        return CheckResult(check.name, "fail", str(exc), check.hint, exc.expected)
    except (Exception, SystemExit) as exc:      # noqa: BLE001 - the student's code raised or exited
        return CheckResult(check.name, "fail", f"raised {where(exc, workspace.folder)}", check.hint)
    return CheckResult(check.name, "pass", detail or "")


def run_checks(checks: list[Check], workspace: Workspace) -> list[CheckResult]:
    """Every check, in order."""
    return [run_check(check, workspace) for check in checks]


def where(exc: BaseException, inside: Path) -> str:
    """`Type: message` and the last line of the traceback in the student's files, if any."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SystemExit):
        text = (f"SystemExit: your code called sys.exit({exc.code!r}); code a check calls must return "
                "(or raise), never end the process")
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if Path(f.filename).resolve().is_relative_to(Path(inside).resolve())]
    if frames:
        text += f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})"
    return text
