"""pyproject.toml keeps the dependency set that installs together, and the venv has it."""
from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# p4runtime-shell 0.0.6 pins protobuf 3.20.x; these exact versions were installed together.
EXACT_PINS = {
    "p4runtime-shell": "0.0.6",
    "p4runtime": "1.4.1",
    "protobuf": "3.20.3",
    "scapy": "2.8.0",
    "mininet": "2.3.0.dev6",
}


def pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib", reason="needs Python 3.11 to read pyproject.toml")
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_exact_pins_are_kept():
    dependencies = pyproject()["project"]["dependencies"]
    for name, version in EXACT_PINS.items():
        assert f"{name}=={version}" in dependencies


def test_every_runtime_and_test_dependency_is_declared():
    project = pyproject()["project"]
    declared = {spec.split("=")[0].split(">")[0].split("<")[0].strip().lower()
                for spec in project["dependencies"] + project["optional-dependencies"]["test"]}
    assert {"grpcio", "numpy", "matplotlib", "pyyaml", "pytest", "hypothesis"} <= declared
    assert project["scripts"]["mrc-testbed"] == "cli.main:main"


def test_p4_is_never_packaged_from_this_repository():
    include = pyproject()["tool"]["setuptools"]["packages"]["find"]["include"]
    assert not any(pattern.startswith("p4") for pattern in include)
    assert not (REPO / "p4" / "__init__.py").exists()


@pytest.mark.parametrize("name, version", sorted(EXACT_PINS.items()))
def test_installed_versions_match_the_pins(name, version):
    try:
        installed = metadata.version(name)
    except metadata.PackageNotFoundError:
        pytest.fail(f"{name} is not installed: run scripts/setup.sh")
    assert installed == version


def test_every_top_level_package_is_installed():
    """A new top-level package must be listed in pyproject.toml, or the installed mrc-testbed
    command cannot import it (the editable install maps only the listed packages)."""
    from fnmatch import fnmatch
    include = pyproject()["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = sorted(path.parent.name for path in REPO.glob("*/__init__.py")
                      if path.parent.name != "tests")
    assert packages, "no top-level package found"
    missing = [name for name in packages if not any(fnmatch(name, pattern) for pattern in include)]
    assert not missing, f"add {missing} to [tool.setuptools.packages.find] include in pyproject.toml"
