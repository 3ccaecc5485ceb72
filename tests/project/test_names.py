"""Every name one concept: a class name is defined in one module of the project, and no module is
imported under a one-letter alias (`from wire import constants as C`), so that a name read
anywhere means one thing and says what it is. A one-letter name a module reads but never binds
(`C.X` left by a merge with a branch that still had the alias) is named too.

A lab folder (labs/NN-slug/) is one unit: its skeleton and solution are two versions of the file
the student edits, and its checker keeps its own copy of what it must not import from the
student's files, so they share names by design. Names starting with `_` are private to their
module and not counted.
"""
from __future__ import annotations

import ast
import builtins
import re
import subprocess
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAB_FOLDER = re.compile(r"^labs/\d\d-[^/]+/")

# Names still defined twice, each with why; a name leaves the list when it is defined once.
ALLOWED_TWICE: dict[str, str] = {}


def python_files(root: Path) -> list[str]:
    """The project's Python files, relative to `root`: those git tracks (the folders on disk when
    this is not a git checkout, without environments and caches)."""
    done = subprocess.run(["git", "-C", str(root), "ls-files", "*.py"], capture_output=True, text=True)
    if done.returncode == 0 and done.stdout.strip():
        return sorted(done.stdout.split())
    skip = {".git", ".venv", "build", "runs", "__pycache__", ".hypothesis"}
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.py") if not skip & set(p.parts))


@lru_cache(maxsize=4)
def read(root: Path) -> tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...]:
    """(path, top-level classes, one-letter imports) of each of the project's Python files, read once
    per test run (the syntax trees are not kept: holding them all makes parsing several times slower)."""
    return tuple((path, tuple(top_level_classes(tree)),
                  tuple(one_letter_imports(tree, path) + unbound_one_letter_names(tree, path)))
                 for path in python_files(root)
                 for tree in [ast.parse((root / path).read_text(), filename=path)])


def unit_of(path: str) -> str:
    """What a definition belongs to: its lab folder for a lab's files, else its module."""
    lab = LAB_FOLDER.match(path)
    return lab.group(0) if lab else path


def top_level_classes(tree: ast.Module) -> list[str]:
    """The classes a module defines at its top level (also under `if` and `try`): what it exports."""
    found, todo = [], list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, ast.ClassDef):
            found.append(node.name)
        elif isinstance(node, (ast.If, ast.Try)):
            todo += node.body + node.orelse + getattr(node, "finalbody", []) + \
                [n for h in getattr(node, "handlers", []) for n in h.body]
    return found


def one_letter_imports(tree: ast.Module, path: str) -> list[str]:
    """Every import of a module's syntax tree under a one-letter name, as 'file:line imports module as X'."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            module = f"{node.module}." if isinstance(node, ast.ImportFrom) else ""
            found += [f"{path}:{node.lineno} imports {module}{alias.name} as {alias.asname}"
                      for alias in node.names if alias.asname and len(alias.asname) == 1]
    return found


def unbound_one_letter_names(tree: ast.Module, path: str) -> list[str]:
    """Every one-letter name the module reads that nothing in it binds, as 'file:line reads X, never
    bound'. (Bound counts anywhere in the module, in any scope: this looks for leftovers of removed
    aliases, not for scoping mistakes.)"""
    bound, read = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read.append(node) if isinstance(node.ctx, ast.Load) else bound.add(node.id))
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
    return [f"{path}:{node.lineno} reads {node.id}, never bound" for node in read
            if len(node.id) == 1 and node.id not in bound and node.id not in dir(builtins)]


def classes_defined_twice(root: Path = ROOT) -> dict[str, list[str]]:
    """Public class name -> the modules (or lab folders) defining it, for names defined in more than one."""
    where = defaultdict(set)
    for path, classes, _ in read(root):
        for name in classes:
            if not name.startswith("_"):
                where[name].add(unit_of(path))
    return {name: sorted(units) for name, units in sorted(where.items()) if len(units) > 1}


def one_letter_aliases(root: Path = ROOT) -> list[str]:
    """Every import under a one-letter name in the project, as 'file:line imports module as X', and
    every one-letter name read and never bound ('file:line reads X, never bound')."""
    return [line for _, _, imports in read(root) for line in imports]


def test_a_class_name_is_defined_in_one_module():
    twice = {name: units for name, units in classes_defined_twice().items() if name not in ALLOWED_TWICE}
    assert twice == {}, "class names defined in more than one module (rename one to what it is): " + \
        "; ".join(f"{name} in {', '.join(units)}" for name, units in twice.items())


def test_every_allowed_duplicate_is_still_one():
    stale = sorted(set(ALLOWED_TWICE) - set(classes_defined_twice()))
    assert stale == [], f"defined once now: remove {stale} from ALLOWED_TWICE"


def test_no_module_is_imported_under_a_one_letter_name():
    assert one_letter_aliases() == []       # (also: no one-letter name read that nothing binds)


@pytest.fixture
def fake_project(tmp_path: Path) -> Path:
    """A project of three modules and a lab folder, outside git."""
    for path, text in {
        "wire/a.py": "from wire import constants as C\n\nclass Endpoint:\n    pass\n",
        "netsim/b.py": "if True:\n    class Endpoint:\n        pass\nclass _Local:\n    pass\n",
        "cli/c.py": "class _Local:\n    pass\n\ndef f():\n    class Inner:\n        pass\n",
        "labs/01-x/skeleton/m.py": "class Monitor:\n    pass\n",
        "labs/01-x/solution/m.py": "class Monitor:\n    pass\n",
        "labs/02-y/check.py": "import wire.constants as k\n",
        "netsim/d.py": "from wire import constants\n\nX = C.MTU + k.MTU\nfor i in range(2):\n    j = i\n",
    }.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    return tmp_path


def test_the_checks_name_what_they_find(fake_project):
    """The checks themselves: a public class in two modules is named with both; private, nested
    and one lab's own copies are not; a one-letter alias, and a one-letter name read but never
    bound (an alias a merge removed under a line that still uses it), is named with file and line."""
    assert classes_defined_twice(fake_project) == {"Endpoint": ["netsim/b.py", "wire/a.py"]}
    assert one_letter_aliases(fake_project) == ["labs/02-y/check.py:1 imports wire.constants as k",
                                                "netsim/d.py:3 reads C, never bound",
                                                "netsim/d.py:3 reads k, never bound",
                                                "wire/a.py:1 imports wire.constants as C"]
    (fake_project / "labs/02-y/other.py").write_text("class Monitor:\n    pass\n")
    read.cache_clear()
    assert classes_defined_twice(fake_project)["Monitor"] == ["labs/01-x/", "labs/02-y/"]
