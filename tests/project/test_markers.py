"""The skip markers of tests/conftest.py skip with a reason naming what is missing."""
from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import conftest

CONFTEST = Path(conftest.__file__)


def test_missing_names_the_missing_thing(monkeypatch):
    monkeypatch.setattr(conftest.shutil, "which", lambda program: None)
    monkeypatch.setattr(conftest.os, "geteuid", lambda: 1000)
    assert "root" in conftest.missing("requires_root")
    assert "simple_switch_grpc" in conftest.missing("requires_bmv2")
    assert "p4c" in conftest.missing("requires_p4c")
    reason = conftest.missing("requires_mininet")
    assert "root" in reason and "mnexec" in reason


def test_nothing_missing_when_everything_is_there(monkeypatch):
    monkeypatch.setattr(conftest.shutil, "which", lambda program: f"/usr/bin/{program}")
    monkeypatch.setattr(conftest.os, "geteuid", lambda: 0)
    monkeypatch.setattr(conftest.importlib.util, "find_spec", lambda name: object())
    for requirement in ("requires_root", "requires_mininet", "requires_bmv2", "requires_p4c"):
        assert conftest.missing(requirement) is None


@pytest.mark.slow
def test_markers_skip_tests_with_the_reason(tmp_path):
    """In a pytest run whose PATH has none of the programs, marked tests skip and say why."""
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "test_marked.py").write_text(textwrap.dedent("""
        import pytest
        from conftest import requires_bmv2, requires_p4c

        @requires_bmv2
        def test_needs_bmv2():
            raise AssertionError("must have been skipped")

        @pytest.mark.requires_p4c
        def test_needs_p4c():
            raise AssertionError("must have been skipped")

        @pytest.mark.requires_mininet
        def test_needs_mininet():
            raise AssertionError("must have been skipped")

        def test_plain():
            pass
    """))
    empty_path = tmp_path / "empty-bin"
    empty_path.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env={"PATH": str(empty_path), "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 3 skipped" in done.stdout
    assert "needs simple_switch_grpc on PATH" in done.stdout
    assert "needs p4c on PATH" in done.stdout
    assert "mnexec on PATH" in done.stdout
