"""pipeline_contract.compiled without p4c: the committed build against copies changed the way a
newer p4c changes its output (equal) and the way a program change does (different, in one line)."""
from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
from google.protobuf import text_format

from pipeline_contract.compiled import (P4cBuild, build_difference, json_difference, normalised_bmv2_json,
                                        read_p4c_version)

COMMITTED = Path(__file__).resolve().parents[2] / "p4" / "build"
NEW_P4C = "1.2.5.17"


def _write_build(folder: Path, program: dict, p4info, version_line: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mrc.json").write_text(json.dumps(program, indent=2))
    (folder / "mrc.p4info.txtpb").write_text(text_format.MessageToString(p4info))
    (folder / "p4c-version").write_text(version_line + "\n")
    return folder


def _as_newer_p4c_writes_it(program: dict) -> dict:
    """The program with a new compiler stamp, another preprocessed-file path and every source
    position moved (absolute file names, other lines, columns and fragments)."""
    moved = copy.deepcopy(program)
    moved["__meta__"] = {"version": [2, 24], "compiler": "https://github.com/p4lang/p4c", "p4c": NEW_P4C}
    moved["program"] = "/tmp/p4c-build-1234/mrc.p4i"

    def shift(value):
        if isinstance(value, dict):
            if "source_info" in value:
                info = value["source_info"]
                value["source_info"] = {"filename": f"/home/vagrant/mrc/p4/{info['filename']}",
                                        "line": info["line"] + 3, "column": 1,
                                        "source_fragment": info["source_fragment"] + " "}
            for v in value.values():
                shift(v)
        elif isinstance(value, list):
            for v in value:
                shift(v)
    shift(moved)
    return moved


@pytest.fixture(scope="module")
def committed() -> P4cBuild:
    return P4cBuild.load(COMMITTED)


def _newer(committed: P4cBuild, folder: Path, program: dict | None = None, p4info=None) -> P4cBuild:
    newer_info = copy.deepcopy(committed.p4info) if p4info is None else p4info
    return P4cBuild.load(_write_build(folder, _as_newer_p4c_writes_it(program or committed.bmv2_json),
                                      newer_info, f"p4c {NEW_P4C} (SHA: 0123abc BUILD: RELEASE)"))


def test_the_committed_build_records_its_p4c_version(committed):
    assert committed.p4c_version == "1.2.4.8"
    assert build_difference(committed, P4cBuild.load(COMMITTED)) is None


def test_metadata_and_source_positions_do_not_count(committed, tmp_path):
    p4info = copy.deepcopy(committed.p4info)
    p4info.pkg_info.version = "9"                        # a newer p4c may stamp these
    p4info.pkg_info.doc.brief = "generated"
    p4info.tables[0].preamble.annotations.append('@source_location("mrc.p4", 211)')
    p4info.actions[0].preamble.doc.description = "an action"
    newer = _newer(committed, tmp_path / "newer", p4info=p4info)
    assert newer.p4c_version == NEW_P4C
    assert newer.bmv2_json != committed.bmv2_json      # the raw JSON differs...
    assert build_difference(committed, newer) is None   # ...but not in what matters


def _table(program: dict, name: str) -> dict:
    return next(t for p in program["pipelines"] for t in p["tables"] if t["name"] == name)


def _one_line_naming(difference: str | None, *words: str) -> None:
    assert difference is not None
    assert "\n" not in difference, difference
    for word in words:
        assert word in difference, (word, difference)


def test_a_changed_table_differs_in_one_line_naming_both_p4c_versions(committed, tmp_path):
    program = copy.deepcopy(committed.bmv2_json)
    _table(program, "MrcIngress.routing")["key"][0]["match_type"] = "exact"
    difference = build_difference(committed, _newer(committed, tmp_path / "t", program))
    _one_line_naming(difference, "mrc.json", "MrcIngress.routing", "match_type", '"lpm" != "exact"',
                     "p4c 1.2.4.8", f"p4c {NEW_P4C}")


def test_a_changed_action_differs(committed, tmp_path):
    program = copy.deepcopy(committed.bmv2_json)
    forward = next(a for a in program["actions"] if a["name"] == "MrcIngress.set_port_config")
    forward["primitives"].pop()
    difference = build_difference(committed, _newer(committed, tmp_path / "a", program))
    _one_line_naming(difference, "actions[MrcIngress.set_port_config].primitives", "items",
                     "1.2.4.8", NEW_P4C)


@pytest.mark.parametrize("change, words", [
    (lambda info: setattr(info.tables[1].match_fields[0], "bitwidth", 64), ("bitwidth", "128", "64")),
    (lambda info: setattr(info.actions[1].preamble, "id", info.actions[1].preamble.id + 1), ("id",)),
    (lambda info: setattr(info.actions[2].params[0], "name", "out_port"), ("params", "out_port")),
    (lambda info: info.tables[1].action_refs.pop(), ("actionRefs", "items")),
])
def test_a_changed_p4info_differs(committed, tmp_path, change, words):
    p4info = copy.deepcopy(committed.p4info)
    change(p4info)
    difference = build_difference(committed, _newer(committed, tmp_path / "i", p4info=p4info))
    _one_line_naming(difference, "mrc.p4info.txtpb", *words, "1.2.4.8", NEW_P4C)


def test_the_same_p4c_version_calls_the_committed_build_stale(committed, tmp_path):
    program = copy.deepcopy(committed.bmv2_json)
    _table(program, "MrcIngress.port_config")["max_size"] += 1
    folder = _write_build(tmp_path / "same", program, committed.p4info, "p4c 1.2.4.8 (SHA: x)")
    difference = build_difference(committed, P4cBuild.load(folder))
    _one_line_naming(difference, "MrcIngress.port_config", "max_size", "stale", "both p4c 1.2.4.8")


def test_json_difference_reports_paths_and_lengths():
    assert json_difference({"a": [1, 2]}, {"a": [1, 2]}) is None
    assert json_difference({"a": [1, 2]}, {"a": [1]}) == "a: 2 items != 1 items"
    assert json_difference({"a": 1}, {"b": 1}) == "a: only in the first"
    assert json_difference([{"name": "x", "v": 1}], [{"name": "x", "v": 2}]) == "[x].v: 1 != 2"
    assert normalised_bmv2_json({"source_info": 1, "k": [{"source_info": 2, "n": 3}]}) == {"k": [{"n": 3}]}


def test_version_file_reading(tmp_path):
    assert read_p4c_version(tmp_path) == "unknown"
    (tmp_path / "p4c-version").write_text("p4c 1.2.5.17 (SHA: 1a2b3c BUILD: RELEASE)\n")
    assert read_p4c_version(tmp_path) == "1.2.5.17"


def test_a_folder_without_outputs_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="mrc.json"):
        P4cBuild.load(tmp_path)
    shutil.copy(COMMITTED / "mrc.json", tmp_path / "mrc.json")
    with pytest.raises(KeyError, match="mrc.p4info.txtpb"):
        P4cBuild.load(tmp_path)
