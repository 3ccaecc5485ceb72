"""Is the graded work the student's own? The reference implementations a lab's work must not be,
derive from or call, the lab's solution kept out of reach, and copies of it recognised.

- `require_own(obj, references, what)`: CheckFailed when a student's class or function *is* a
  reference (the project's own policy, the library function the lab asks to rewrite), derives from
  one, or is made of a reference's code (its methods copied).
- `ReferenceWatch(targets)`: while in use, every call into the reference methods and functions
  made from inside the student's code is noted; `watch.student(obj)` wraps a student's object (or
  `watch.call(fn, ...)` calls a student's function) so that its calls count as the student's, and
  `watch.verify(what)` fails the check naming the first reference it called (a class that delegates
  to the reference). The grader's own calls of the same references are not counted.
- `guard_solutions()`: an audit hook (PEP 578, it cannot be removed) refusing to open any file
  of a lab's `solution/` folder or of the repository's git objects, to start processes (unless the
  lab's checks run programs themselves) and, while the student's code runs, to reach into the
  interpreter's memory (ctypes, gc's object lists). `labs.sandbox` installs it before a student's code runs.
- `copy_of_solution(lab, folder)`: the student files that are the lab's solution with only
  comments, docstrings or blank lines changed.
"""
from __future__ import annotations

import ast
import functools
import inspect
import os
import sys
import types
from pathlib import Path

from labs.catalog import LABS_DIR, Lab
from labs import checking
from labs.checking import CheckFailed, student_code

REPO_DIR = LABS_DIR.parent
_PROCESS_EVENTS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                   "os.forkpty", "pty.spawn")
_MEMORY_EVENTS = ("ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "ctypes.addressof",
                  "gc.get_objects", "gc.get_referrers", "gc.get_referents")


def _name(obj) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', getattr(obj, '__name__', repr(obj)))}"


def _code_files(references) -> set[str]:
    files = set()
    for ref in references:
        try:
            files.add(os.path.realpath(inspect.getfile(ref)))
        except TypeError:
            pass
    return files


def require_own(obj, references: list, what: str) -> None:
    """CheckFailed when `obj` (the student's class or function, named `what`) is one of
    `references` (classes, functions or modules), derives from a reference class, or has methods
    whose code was written in a reference's source file."""
    ref_objects = [r for r in references if not isinstance(r, types.ModuleType)]
    for ref in ref_objects:
        if obj is ref:
            raise CheckFailed(f"{what} is the project's own {_name(ref)}, not your work: write it yourself")
        if inspect.isclass(obj) and inspect.isclass(ref) and issubclass(obj, ref):
            raise CheckFailed(f"{what} derives from the project's own {_name(ref)}: the graded work must "
                              "be yours, not the reference implementation's")
    files = _code_files(references)
    members = {id(v): f"{_name(ref)}.{k}" for ref in ref_objects if inspect.isclass(ref)
               for k, v in vars(ref).items() if callable(v) and not k.startswith("__")}
    functions = ([v for klass in obj.__mro__ if klass is not object for v in vars(klass).values()]
                 if inspect.isclass(obj) else [obj])
    for fn in functions:
        if id(fn) in members:
            raise CheckFailed(f"{what} uses code of the project's reference implementation ({members[id(fn)]}): "
                              "write it yourself")
        fn = getattr(fn, "__func__", fn)
        code = getattr(fn, "__code__", None)
        if code is not None and os.path.realpath(code.co_filename) in files:
            raise CheckFailed(f"{what} uses code of the project's reference implementation "
                              f"({getattr(fn, '__qualname__', fn)} from {Path(code.co_filename).name}): "
                              "write it yourself")


def methods_of(cls) -> list[tuple[object, str]]:
    """(owner, name) of every method a reference class defines itself (Python functions, or the
    method descriptors of a class compiled by mypyc)."""
    return [(cls, name) for name, value in vars(cls).items() if not name.startswith("__")
            and (inspect.isfunction(value) or inspect.ismethoddescriptor(value) or inspect.isbuiltin(value))]


def functions_of(module, names: tuple[str, ...] | None = None) -> list[tuple[object, str]]:
    """(owner, name) of a reference module's functions (all of those it defines, or `names`)."""
    if names is None:
        names = tuple(n for n, v in vars(module).items()
                      if inspect.isfunction(v) and v.__module__ == module.__name__)
    return [(module, name) for name in names]


class ReferenceWatch:
    """Notes calls into reference code made from inside the student's code (see the module)."""

    def __init__(self, targets: list[tuple[object, str]]) -> None:
        self.targets = targets
        self.depth = 0                   # > 0 while the student's code runs
        self.calls: list[str] = []       # reference functions the student's code called
        self._saved: list[tuple[object, str, object]] = []

    def __enter__(self) -> "ReferenceWatch":
        for owner, name in self.targets:
            original = vars(owner)[name]
            self._saved.append((owner, name, original))
            setattr(owner, name, self._noting(original, f"{_name(owner)}.{name}" if inspect.isclass(owner)
                                              else f"{owner.__name__}.{name}"))
        return self

    def __exit__(self, *exc) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()

    def _noting(self, fn, label: str):
        watch = self

        @functools.wraps(fn)
        def noted(*args, **kwargs):
            if watch.depth:
                watch.calls.append(label)
            return fn(*args, **kwargs)
        return noted

    def call(self, fn, *args, **kwargs):
        """Call the student's function `fn`; reference calls inside it are noted."""
        self.depth += 1
        try:
            with student_code():
                return fn(*args, **kwargs)
        finally:
            self.depth -= 1

    def student(self, obj) -> "_StudentProxy":
        """`obj` (a student's policy object) behind a proxy whose method calls are the student's."""
        return _StudentProxy(obj, self)

    def factory(self, cls):
        """A policy factory: `cls(*args)` made inside the watch, behind a proxy."""
        def make(*args):
            return self.student(self.call(cls, *args))
        return make

    def verify(self, what: str) -> None:
        """CheckFailed naming the first reference the student's code called."""
        if self.calls:
            first = self.calls[0]
            raise CheckFailed(f"{what} calls the project's reference implementation ({first}, "
                              f"{len(self.calls)} call(s) during the check): it must do the work itself")


class _StudentProxy:
    """Forwards attribute reads to a student's object; its methods run inside the watch."""

    __slots__ = ("_obj", "_watch")

    def __init__(self, obj, watch: ReferenceWatch) -> None:
        object.__setattr__(self, "_obj", obj)
        object.__setattr__(self, "_watch", watch)

    def __getattr__(self, name: str):
        value = getattr(self._obj, name)
        if not callable(value):
            return value
        watch = self._watch

        def method(*args, **kwargs):
            return watch.call(value, *args, **kwargs)
        return method

    def __setattr__(self, name: str, value) -> None:
        setattr(self._obj, name, value)


def guard_solutions(allow_processes: bool = False, also: list[Path] = ()) -> None:
    """Install the audit hook that keeps the solutions (every lab's, and the folders `also`), the
    repository's git objects, other processes (unless `allow_processes`) and, while a student's
    code runs (`checking.student_code`), the interpreter's memory out of the student's reach."""
    fenced = [os.path.realpath(p) for p in [*LABS_DIR.glob("[0-9][0-9]-*/solution"), *also]]
    fenced.append(os.path.realpath(REPO_DIR / ".git"))

    def fenced_path(path) -> bool:
        if isinstance(path, int):
            return False
        try:
            real = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        return any(real == f or real.startswith(f + os.sep) for f in fenced)

    depth = checking._student_depth          # held here: a student rebinding names changes nothing

    def hook(event: str, args: tuple) -> None:
        if event == "open" and args and fenced_path(args[0]):
            raise PermissionError(f"the grader refuses to open {args[0]}: a lab's solution is not "
                                  "readable while work is graded")
        if event in ("os.link", "os.symlink", "shutil.copyfile", "shutil.copytree") and args \
                and fenced_path(args[0]):
            raise PermissionError(f"the grader refuses {event} of {args[0]}: a lab's solution is not "
                                  "readable while work is graded")
        if not allow_processes and event.startswith(_PROCESS_EVENTS):
            raise PermissionError(f"the grader refuses {event}: graded code starts no process")
        if event in _MEMORY_EVENTS and depth[0] > 0:
            raise PermissionError(f"the grader refuses {event}: graded code does not read the "
                                  "interpreter's memory")

    sys.addaudithook(hook)


def _shape(source: str) -> str | None:
    """The code of `source` without docstrings, comments and layout (None: not Python)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False)


def copy_of_solution(lab: Lab, folder: Path) -> list[str]:
    """Names of the Python files of `folder` that are the lab's solution file of the same name,
    changed at most in comments, docstrings and layout."""
    copies = []
    for theirs in sorted(lab.solution.glob("*.py")):
        mine, start = Path(folder) / theirs.name, lab.skeleton / theirs.name
        answer = _shape(theirs.read_text(encoding="utf-8"))
        if not mine.is_file() or not start.is_file() or _shape(start.read_text(encoding="utf-8")) == answer:
            continue                                   # a file the student is not asked to write
        try:
            text = mine.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        shape = _shape(text)
        if shape is not None and shape == answer:
            copies.append(theirs.name)
    return copies
