"""The committed p4/build/ outputs are what p4/mrc.p4 compiles to (needs p4c)."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from conftest import requires_p4c

REPO = Path(__file__).resolve().parent.parent
P4_DIR = REPO / "p4"
COMMITTED = P4_DIR / "build"

pytestmark = [requires_p4c, pytest.mark.slow]


def _p4info(path: Path) -> p4info_pb2.P4Info:
    info = p4info_pb2.P4Info()
    text_format.Parse(path.read_text(), info)
    return info


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


def test_make_writes_both_outputs(fresh_build):
    assert (fresh_build / "mrc.json").stat().st_size > 0
    assert (fresh_build / "mrc.p4info.txtpb").stat().st_size > 0


def test_committed_p4info_is_current(fresh_build):
    assert _p4info(COMMITTED / "mrc.p4info.txtpb") == _p4info(fresh_build / "mrc.p4info.txtpb"), (
        "p4/build/mrc.p4info.txtpb is stale: run `make -C p4` and commit p4/build/")


def _bmv2_json(path: Path) -> dict:
    """The BMv2 JSON without "program", the path of p4c's preprocessed file (build dir specific)."""
    program = json.loads(path.read_text())
    program.pop("program", None)
    return program


def test_committed_bmv2_json_is_current(fresh_build):
    committed = _bmv2_json(COMMITTED / "mrc.json")
    fresh = _bmv2_json(fresh_build / "mrc.json")
    assert committed == fresh, "p4/build/mrc.json is stale: run `make -C p4` and commit p4/build/"
