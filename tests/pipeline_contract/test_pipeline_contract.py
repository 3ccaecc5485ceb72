"""pipeline_contract: the one P4Info loader and index the controller and the reference switch share."""
from __future__ import annotations

import subprocess
import sys

import pytest

from controller.installer import CompiledProgram
from pipeline_contract.p4info import DEFAULT_P4INFO_PATH, REPO_ROOT, P4InfoError, P4InfoIndex, load_p4info


def test_without_a_path_the_committed_p4c_output_is_loaded():
    index = P4InfoIndex(load_p4info())
    assert load_p4info() == load_p4info(DEFAULT_P4INFO_PATH)
    assert index.table_by_id(index.table("MrcIngress.routing").preamble.id).preamble.name == "MrcIngress.routing"
    assert index.name_of(index.counter("MrcEgress.tx").preamble.id) == "MrcEgress.tx"


@pytest.mark.parametrize("load", [load_p4info, lambda path: CompiledProgram.load(path, None)])
def test_a_missing_p4info_names_its_path_and_how_to_build_it(tmp_path, load):
    missing = tmp_path / "mrc.p4info.txtpb"
    with pytest.raises(P4InfoError) as err:
        load(missing)
    assert str(missing) in str(err.value) and "make -C p4" in str(err.value)


def test_a_p4info_that_is_not_one_names_the_file(tmp_path):
    bad = tmp_path / "bad.txtpb"
    bad.write_text("tables { this is not protobuf text")
    with pytest.raises(P4InfoError, match=f"{bad}: not a P4Info"):
        load_p4info(bad)


def test_unknown_ids_are_p4info_errors():
    index = P4InfoIndex(load_p4info())
    table = index.table("MrcIngress.routing")
    with pytest.raises(P4InfoError, match="no table with id 7"):
        index.table_by_id(7)
    with pytest.raises(P4InfoError, match="MrcIngress.routing has no match field id 99"):
        index.match_field_by_id(table, 99)


@pytest.mark.slow
def test_the_reference_switch_does_not_load_the_controller():
    """The switch model depends on the shared contract, not on the controller package."""
    code = ("import sys, refswitch.switch, refswitch.p4runtime_server; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'controller'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
