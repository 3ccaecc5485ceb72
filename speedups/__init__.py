"""The compiled build of the simulator's hot path, and the choice between it and pure Python.

`MODULES` (netsim's event loop, links, switches and hosts, and the sans-IO transport's per-packet
parts) can be compiled to C extension modules with mypyc: `python -m speedups build` compiles them
together into one library, `speedups/native__mypyc*.so` (one C unit: the C compiler inlines and calls
directly across modules, as it could not between a library per module), puts beside each `.py` a
`.so` that loads its part of it, and records a stamp of the sources it read (`scripts/setup.sh` does
it). Both builds run the same code and give the same results; the compiled
one takes a fifth to a third of the CPU time per simulated packet (`benchmarks/bench_netsim.py` measures both
in one run).

The compiled build is used only when it matches its stamp: the digests of every source mypyc read
(`SOURCE_FOLDERS`) and the size and time of every file it made. A source edited since the build, a
compiled file replaced, or MRC_PURE_PYTHON=1 in the environment selects pure Python for all of them:
a mix would hold two copies of a class, one compiled and one not. `select()` makes the choice once,
before the first of them is imported (`wire`, `netsim` and `host_agent.transport` call it first
thing); `build_in_use()` says which build that was, and why, for a run's conditions.

Code shaped for the compiled build: a line marked `# narrowed for mypyc` repeats one expression or
call under a type check (`isinstance`, `type(x) is A`), branches the same word for word, so that mypyc
knows the exact class in one of them and reads the field or calls the method natively (through a
union or a protocol it goes by name). Folding the branches changes no result, only the instruction
count of `Simulator._run` (callgrind, as the speed rounds of docs/htsim.md measure it): keep them.
"""
from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent        # the checkout: MODULES' sources are under it
# One stamp per kind of extension (interpreter and platform), as their file names have: a checkout
# shared with a VM may hold builds for two of them.
_TAG = importlib.machinery.EXTENSION_SUFFIXES[0].rsplit(".", 1)[0].lstrip(".") or sys.implementation.cache_tag
STAMP = Path(__file__).resolve().parent / f"build.{_TAG}.json"
PURE_ENV = "MRC_PURE_PYTHON"
# What mypyc reads to compile MODULES (their own sources and the types they use): a change to any
# of these files makes the build stale.
SOURCE_FOLDERS = ("wire", "netsim", "host_agent/transport", "pipeline_contract")

# The per-packet modules, as this checkout has them. MODULES is those whose source is here: a
# revision older than some of them (benchmarks.bench_netsim --against exports one with this package
# beside it) is compiled without them, as it was then.
HOT_MODULES = (
    "netsim.sim", "netsim.link", "netsim.switch", "netsim.host",
    "host_agent.transport.endpoint", "host_agent.transport.sender", "host_agent.transport.receiver",
    "host_agent.transport.baseline", "host_agent.transport.congestion", "host_agent.transport.probes",
    "host_agent.transport.steering", "host_agent.transport.lossdetect", "host_agent.transport.psn",
    "host_agent.transport.evset", "host_agent.transport.timers", "host_agent.transport.pathcap",
    "host_agent.transport.pathloss", "host_agent.transport.shares",
    "host_agent.transport.nicclock", "host_agent.transport.message", "host_agent.transport.policies",
    "host_agent.transport.tally", "host_agent.transport.peers", "host_agent.transport.fifo",
    "wire.packets", "wire.endpoint",
)


def source_path(module: str) -> Path:
    """The `.py` file of `module`."""
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


def present_modules(modules: tuple[str, ...]) -> tuple[str, ...]:
    """Those of `modules` whose source is in this checkout, in their order."""
    return tuple(m for m in modules if source_path(m).is_file())


MODULES = present_modules(HOT_MODULES)
# mypyc's group of MODULES: its library is `library_path()`, in this package.
LIBRARY_GROUP = "speedups.native"


@dataclass(frozen=True)
class Build:
    """Which build the modules of `MODULES` are loaded from: "compiled" or "pure Python", and why."""

    kind: str
    reason: str

    @property
    def compiled(self) -> bool:
        return self.kind == "compiled"

    def __str__(self) -> str:
        return f"{self.kind} ({self.reason})"


def extension_path(module: str) -> Path:
    """Where the compiled extension of `module` is for this interpreter."""
    return source_path(module).with_suffix(importlib.machinery.EXTENSION_SUFFIXES[0])


def library_path() -> Path:
    """Where the compiled code of every module of `MODULES` is: mypyc's one library (group
    `LIBRARY_GROUP`), which each module's extension loads its part of."""
    package, name = LIBRARY_GROUP.rsplit(".", 1)
    return ROOT.joinpath(*package.split("."), name + "__mypyc" + importlib.machinery.EXTENSION_SUFFIXES[0])


def compiled_files() -> list[Path]:
    """Every file the build makes: each module's extension, and the library."""
    return [extension_path(m) for m in MODULES] + [library_path()]


def orphaned_files() -> list[Path]:
    """Compiled files in `SOURCE_FOLDERS` that no build of this checkout makes: the extension of a
    module whose source is gone (renamed or removed since a build), which Python would still import,
    compiled and stale; and the library of one module (`X__mypyc*.so`, as builds before the one
    library made them)."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    orphans = []
    for folder in SOURCE_FOLDERS:
        for path in sorted((ROOT / folder).glob("*" + suffix)):
            stem = path.name[:-len(suffix)]
            if stem.endswith("__mypyc") or not path.with_name(stem + ".py").exists():
                orphans.append(path)
    return orphans


def source_digests() -> dict[str, str]:
    """The SHA-256 of every source file mypyc reads (`SOURCE_FOLDERS`), by path from the checkout."""
    files = sorted(path for folder in SOURCE_FOLDERS for path in (ROOT / folder).glob("*.py"))
    return {str(path.relative_to(ROOT)): hashlib.sha256(path.read_bytes()).hexdigest() for path in files}


def compiled_stats() -> dict[str, list[int]]:
    """The size and modification time of each compiled file, by path from the checkout."""
    out = {}
    for path in compiled_files():
        info = path.stat()
        out[str(path.relative_to(ROOT))] = [info.st_size, info.st_mtime_ns]
    return out


def read_stamp() -> dict:
    """The stamp the last build wrote ({} when there is none or it cannot be read)."""
    try:
        return json.loads(STAMP.read_text())
    except (OSError, ValueError):
        return {}


def inspect_build() -> Build:
    """Which build `select()` would choose now, and why (reads the files; imports nothing)."""
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return Build("pure Python", f"{PURE_ENV} is set")
    built = [m for m in MODULES if extension_path(m).exists()]
    if not built:
        return Build("pure Python", "not compiled: python -m speedups build")
    if len(built) < len(MODULES):
        missing = sorted(set(MODULES) - set(built))
        return Build("pure Python", f"compiled build incomplete, {missing[0]} missing: python -m speedups build")
    stamp = read_stamp()
    if not stamp:
        return Build("pure Python", f"the compiled build has no stamp {STAMP.name}: python -m speedups build")
    if not all(path.exists() for path in compiled_files()):
        return Build("pure Python", "compiled build incomplete: python -m speedups build")
    recorded, digests = stamp.get("sources", {}), source_digests()
    changed = sorted(set(recorded) ^ set(digests)) or [f for f, digest in digests.items() if recorded[f] != digest]
    if changed:
        return Build("pure Python", f"{changed[0]} changed since the compiled build: python -m speedups build")
    replaced = [f for f, stat in compiled_stats().items() if stamp.get("compiled", {}).get(f) != stat]
    if replaced:
        return Build("pure Python", f"{replaced[0]} is not the file the build made: python -m speedups build")
    return Build("compiled", f"mypyc {stamp.get('mypy', '?')}")


class _SourceFinder(importlib.abc.MetaPathFinder):
    """Finds the `.py` of a module of `MODULES` ahead of its compiled extension."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MODULES:
            return None
        return importlib.util.spec_from_file_location(fullname, source_path(fullname))


_chosen: Build | None = None


def select() -> Build:
    """Choose the build for this process, once: pure Python unless the compiled one is complete and
    current. Must run before any module of `MODULES` is imported; later calls return the choice."""
    global _chosen
    if _chosen is not None:
        return _chosen
    build = inspect_build()
    if not build.compiled:
        sys.meta_path.insert(0, _SourceFinder())   # even with no extension now: a build may come later
        if any(extension_path(m).exists() for m in MODULES) and PURE_ENV not in build.reason:
            warnings.warn(f"speedups: using pure Python: {build.reason}", RuntimeWarning, stacklevel=2)
    _chosen = build
    return build


def build_in_use() -> Build:
    """The build this process runs (`select()`'s choice; chosen now if no module was imported yet)."""
    return select()
