"""The child process that grades one work folder: `python -m labs.sandbox LAB_FOLDER FOLDER --result-fd FD`.

Started by `labs.isolation` (never by hand), one per student folder. Before any of the student's
code runs it reads the run's nonce from stdin, limits its own memory (RLIMIT_AS) and the size of
the files it writes, loads the lab's checks, guards the solutions and the interpreter
(`originality.guard_solutions`) and takes a snapshot of every namespace of the project's modules.
Then it runs the checks one by one and writes one JSON line per check to the result fd: the nonce,
the check's index and name, status, detail and expected value. After each check the namespaces are
compared with the snapshot: a class, function or module of the grader or the testbed replaced (a
monkey-patch) fails that check and every later one, naming what changed. Whatever the student's
code does (exit, raise, loop), the parent process decides what the folder scored.
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import resource
import sys
import types
from pathlib import Path

from labs import catalog, originality
from labs.checking import CheckResult, Workspace, where
from labs.checking import run_check as _run_check

FILE_LIMIT = 64 << 20                         # bytes of any file the child writes
_STDLIB_WATCHED = ("builtins", "json", "copy", "math", "random", "heapq", "functools", "itertools",
                   "dataclasses", "collections", "ipaddress", "os", "sys", "resource")
_WATCHED_PACKAGES = ("labs", "host_agent", "netsim", "experiments", "topologies", "controller", "wire",
                     "refswitch", "pipeline_contract", "conformance", "speedups", "testbed")
_CLASS_CACHES = {"__abstractmethods__", "_abc_impl", "__slotnames__"}   # filled in by the interpreter
_VOLATILE = {"sys": {"stdout", "stderr", "stdin", "last_type", "last_value", "last_traceback", "ps1", "ps2",
                     "exc_info", "path_importer_cache", "_git"},
             "os": {"environ"}}


def _watched(name: str, module) -> bool:
    return name in _STDLIB_WATCHED or (isinstance(module, types.ModuleType)
                                       and name.split(".")[0] in _WATCHED_PACKAGES) or name.startswith("labs_check_")


class Namespaces:
    """A snapshot of the project's modules, their classes, and a few of the standard library's."""

    def __init__(self, extra: dict[str, dict] | None = None) -> None:
        """`extra`: more namespaces to watch ({label: namespace}), e.g. the lab's check.py."""
        self.modules = {name: m for name, m in list(sys.modules.items()) if _watched(name, m)}
        self.namespaces = {name: vars(m) for name, m in self.modules.items()}
        self.namespaces.update(extra or {})
        self.values = {name: {k: v for k, v in ns.items() if k != "__warningregistry__"
                              and k not in _VOLATILE.get(name, ())}
                       for name, ns in self.namespaces.items()}
        self.classes = {}
        for name, ns in self.namespaces.items():
            for value in list(ns.values()):
                if inspect.isclass(value) and value.__module__ == ns.get("__name__"):
                    self.classes[f"{name}.{value.__qualname__}"] = (value, dict(vars(value)))

    def changes(self) -> list[str]:
        """What was replaced, added to a class or removed since the snapshot."""
        out = []
        for name, module in self.modules.items():
            if sys.modules.get(name) is not module:
                out.append(f"the module {name} was replaced")
        for name, now in self.namespaces.items():
            for key, value in self.values[name].items():
                if key not in now:
                    out.append(f"{name}.{key} was deleted")
                elif now[key] is not value:
                    out.append(f"{name}.{key} was replaced")
        for label, (cls, attrs) in self.classes.items():
            now = vars(cls)
            for key in set(attrs) | set(now):
                if key in _CLASS_CACHES:
                    continue
                if key not in now:
                    out.append(f"{label}.{key} was deleted")
                elif key not in attrs:
                    out.append(f"{label}.{key} was added")
                elif now[key] is not attrs[key]:
                    out.append(f"{label}.{key} was replaced")
        return sorted(out)


def _limit_resources(memory_mb: int) -> None:
    if memory_mb > 0:
        cap = memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _channel(fd: int, nonce: str):
    """A writer of one JSON line per record to `fd`, bound now to the functions it needs."""
    dumps, write, encode = json.dumps, os.write, str.encode

    def emit(record: dict) -> None:
        data = encode(dumps({"nonce": nonce, **record}) + "\n")
        while data:
            data = data[write(fd, data):]
    return emit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labs.sandbox", description=__doc__.splitlines()[0])
    parser.add_argument("lab", type=Path, help="the lab's folder (labs/NN-slug)")
    parser.add_argument("folder", type=Path)
    parser.add_argument("--result-fd", type=int, required=True)
    parser.add_argument("--memory-mb", type=int, default=0)
    parser.add_argument("--solution", action="store_true", help="the folder is the lab's own solution")
    args = parser.parse_args(argv)
    nonce = sys.stdin.readline().strip()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    _limit_resources(args.memory_mb)
    lab = catalog.read_lab(args.lab)
    checks = lab.checks()
    emit = _channel(args.result_fd, nonce)
    run_check, exit_now, result_type = _run_check, os._exit, CheckResult
    workspace = Workspace(args.folder)
    if not args.solution:
        originality.guard_solutions(allow_processes=lab.spawns_programs, also=[lab.solution])
    snapshot = Namespaces({f"lab {lab.number}'s check.py": check.run.__globals__ for check in checks})
    changed: list[str] = []
    for index, check in enumerate(checks):
        if changed:
            result = result_type(check.name, "fail", "not run: an earlier check found the grader changed "
                                 f"by your code ({changed[0]})")
        else:
            try:
                result = run_check(check, workspace)
            except BaseException as exc:         # noqa: BLE001 - KeyboardInterrupt, GeneratorExit...
                result = result_type(check.name, "fail", f"raised {where(exc, workspace.folder)}")
            changed = snapshot.changes()
            if changed:
                more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
                result = result_type(check.name, "fail", f"your code changed the grader or the testbed: "
                                     f"{changed[0]}{more}; a monkey-patch makes every result untrustworthy")
        emit({"index": index, "check": check.name, "status": result.status, "detail": result.detail,
              "expected": result.expected})
    emit({"done": len(checks)})
    exit_now(0)                                  # no atexit handler of the student's runs
    return 0


if __name__ == "__main__":
    sys.exit(main())
