"""A dataclass whose `__init__` is written out by hand (under mypyc a generated one stays interpreted
Python: `wire.packets.Sack`, `host_agent.transport.evset.Ev`, ...) repeats its fields: their names,
order and defaults. Each such `__init__`, found in the sources, is checked against the fields
(`dataclasses.fields`), so that a field added, moved or given another default on one side only
fails here. The `__init__` is read from the source, not from `inspect.signature`: the compiled
build's methods show no signature.
"""
from __future__ import annotations

import ast
import dataclasses
import importlib
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def project_sources() -> list[str]:
    """The project's Python files outside tests/, relative to ROOT (git's list; the disk's without git)."""
    done = subprocess.run(["git", "-C", str(ROOT), "ls-files", "*.py"], capture_output=True, text=True)
    if done.returncode == 0 and done.stdout.strip():
        paths = done.stdout.split()
    else:
        skip = {".git", ".venv", "build", "runs", "__pycache__"}
        paths = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py") if not skip & set(p.parts)]
    return sorted(p for p in paths if not p.startswith("tests/"))


def is_dataclass_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return (isinstance(target, ast.Name) and target.id == "dataclass") or \
        (isinstance(target, ast.Attribute) and target.attr == "dataclass")


def written_out_inits() -> list[tuple[str, str, ast.FunctionDef]]:
    """(module, class name, its __init__) of every dataclass of the project with an __init__ of its own."""
    found = []
    for path in project_sources():
        text = (ROOT / path).read_text()
        if "dataclass" not in text or "def __init__" not in text:
            continue
        module = path[:-len(".py")].replace("/", ".").removesuffix(".__init__")
        for node in ast.walk(ast.parse(text, filename=path)):
            if isinstance(node, ast.ClassDef) and any(map(is_dataclass_decorator, node.decorator_list)):
                found += [(module, node.name, item) for item in node.body
                          if isinstance(item, ast.FunctionDef) and item.name == "__init__"]
    return found


INITS = written_out_inits()


def test_the_written_out_inits_are_found():
    assert ("wire.packets", "Sack") in {(module, name) for module, name, _ in INITS}


def parameters(init: ast.FunctionDef, namespace: dict) -> list[tuple[str, bool, object]]:
    """(name, keyword-only, default or MISSING) of each parameter after self; defaults evaluated in
    the class's module, as Python evaluates them."""
    args = init.args
    assert args.vararg is None and args.kwarg is None, "an __init__ written out takes no *args, **kwargs"
    positional = args.posonlyargs + args.args
    assert positional and positional[0].arg == "self"
    defaults = [dataclasses.MISSING] * (len(positional) - len(args.defaults)) + list(args.defaults)
    value = (lambda node: dataclasses.MISSING if node in (None, dataclasses.MISSING)
             else eval(compile(ast.Expression(node), "<default>", "eval"), namespace))
    return ([(a.arg, False, value(d)) for a, d in zip(positional[1:], defaults[1:])]
            + [(a.arg, True, value(d)) for a, d in zip(args.kwonlyargs, args.kw_defaults)])


def assigned(init: ast.FunctionDef) -> set[str]:
    """The attributes of self the __init__ sets."""
    return {target.attr for node in ast.walk(init) if isinstance(node, (ast.Assign, ast.AnnAssign))
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"}


def expected(field: dataclasses.Field) -> object:
    """What the __init__'s default must be: the field's default; None for a field made by a factory
    (the __init__ calls the factory); none (MISSING) for a field without one."""
    if field.default is not dataclasses.MISSING:
        return field.default
    return None if field.default_factory is not dataclasses.MISSING else dataclasses.MISSING


@pytest.mark.parametrize("module, name, init", INITS, ids=[f"{m}.{n}" for m, n, _ in INITS])
def test_a_written_out_init_takes_the_fields_in_order_with_their_defaults(module, name, init):
    namespace = vars(importlib.import_module(module))
    fields = [f for f in dataclasses.fields(namespace[name]) if f.init]
    fields.sort(key=lambda f: f.kw_only is True)         # keyword-only fields come last, in their order
    want = [(f.name, f.kw_only is True, expected(f)) for f in fields]
    got = parameters(init, namespace)
    assert [n for n, _, _ in got] == [n for n, _, _ in want], f"{name}.__init__: parameters != fields"
    for (field, kw_only, default), (_, got_kw_only, got_default) in zip(want, got):
        assert got_kw_only == kw_only, f"{name}.__init__: {field} keyword-only differs from its field"
        assert (type(got_default), got_default) == (type(default), default), \
            f"{name}.__init__: {field}'s default {got_default!r}, its field's {default!r}"
    assert {f.name for f in fields} <= assigned(init), f"{name}.__init__ leaves a field unset"
