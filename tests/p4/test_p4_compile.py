"""The committed p4/build/ outputs are what p4/mrc.p4 compiles to (needs p4c).

The comparison is pipeline_contract.compiled's: the P4Info as messages (ids, names, match fields,
actions), the BMv2 JSON without p4c's metadata and source positions, so a newer p4c that only
moves those passes, and one that changes the program fails in one line naming both p4c versions.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import requires_p4c
from pipeline_contract.compiled import P4cBuild, build_difference, read_p4c_version

REPO = Path(__file__).resolve().parents[2]
P4_DIR = REPO / "p4"
COMMITTED = P4_DIR / "build"

pytestmark = [requires_p4c, pytest.mark.slow]


@pytest.fixture(scope="module")
def fresh_build(tmp_path_factory) -> Path:
    """p4/mrc.p4 compiled by `make -C p4` into a temporary directory."""
    if shutil.which("make") is None:
        pytest.skip("needs make on PATH")
    out = tmp_path_factory.mktemp("p4build")
    result = subprocess.run(["make", "-C", str(P4_DIR), f"BUILD={out}"],
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, f"make -C p4 failed:\n{result.stdout}\n{result.stderr}"
    return out


def test_make_writes_every_output(fresh_build):
    assert (fresh_build / "mrc.json").stat().st_size > 0
    assert (fresh_build / "mrc.p4info.txtpb").stat().st_size > 0
    assert read_p4c_version(fresh_build) != "unknown"


def test_committed_build_is_what_this_p4c_makes(fresh_build):
    difference = build_difference(P4cBuild.load(COMMITTED), P4cBuild.load(fresh_build))
    assert difference is None, difference
