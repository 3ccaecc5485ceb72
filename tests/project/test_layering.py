"""The packages import one way: a layer may use the layers below it, never a peer or a layer above.

The order is written once here and once in README.md ("Architecture"); a test below checks that the
two agree. Every import in a module counts, also one inside a function.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Bottom first. Packages in one layer are peers: they do not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("speedups",),                                      # which build of the hot modules runs
    ("wire",),                                          # the MRC wire format
    ("pipeline_contract",),                             # names, P4Info, entries, P4Runtime client
    ("topologies",),                                    # networks, addresses, uSID paths
    ("controller", "refswitch", "netsim", "host_agent"),  # routes; model switch; simulator; transport
    ("testbed",),                                       # Mininet networks, switch and agent processes
    ("conformance", "experiments"),                     # switch validation; scenarios and reports
    ("benchmarks", "labs"),                             # measurements; teaching
    ("cli",),                                           # the command line: calls everything below
)
LAYER_OF = {package: depth for depth, layer in enumerate(LAYERS) for package in layer}


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) of every absolute import in a Python file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def violations(package: str) -> list[str]:
    """Every import in `package` of a peer or of a higher layer, as 'file:line imports module'."""
    own = LAYER_OF[package]
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, module in imports_of(path):
            top = module.split(".")[0]
            if top == package or top not in LAYER_OF:
                continue
            if LAYER_OF[top] >= own:
                where = "a peer" if LAYER_OF[top] == own else "a higher layer"
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module} ({top} is {where} of {package})")
    return bad


@pytest.mark.slow
@pytest.mark.parametrize("package", [p for layer in LAYERS for p in layer if (ROOT / p).is_dir()])
def test_a_package_imports_only_lower_layers(package):
    assert violations(package) == []


def test_every_python_package_has_a_layer():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests"}
    assert sorted(packages - set(LAYER_OF)) == []


def test_the_readme_states_the_same_order():
    text = (ROOT / "README.md").read_text()
    block = text[text.index("Layers, bottom first"):]
    block = block[block.index("```") + 3:]
    block = block[:block.index("```")]
    stated = [tuple(re.findall(r"`([a-z_]+)/`", line)) for line in block.splitlines() if line.startswith("- `")]
    assert stated == list(LAYERS)


def test_a_violation_is_named(tmp_path, monkeypatch):
    """The check itself: a lower layer importing a higher one is reported with file and line."""
    fake = tmp_path / "wire"
    fake.mkdir()
    (fake / "bad.py").write_text("import os\n\ndef f():\n    from experiments.scenario import Case\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert violations("wire") == ["wire/bad.py:4 imports experiments.scenario (experiments is a higher layer of wire)"]
