"""Whether two p4c builds of the pipeline are the same program, whatever p4c version made them.

A build is a folder holding what `make -C p4` writes: `mrc.json` (the BMv2 pipeline),
`mrc.p4info.txtpb` (the P4Info) and `p4c-version` (the p4c release that wrote them). Two builds
are equal when their P4Info messages agree on what the controller relies on (ids, names, match
fields, actions, sizes, resources) and their BMv2 JSON agree once the parts that move between p4c
releases without changing the program are left out (`__meta__`, the `program` path and every
`source_info`). `build_difference` names the first thing that differs, in one line, with the two
p4c versions when they are not the same.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from p4.config.v1 import p4info_pb2

from pipeline_contract.p4info import load_p4info

JSON_NAME = "mrc.json"
P4INFO_NAME = "mrc.p4info.txtpb"
VERSION_NAME = "p4c-version"
UNKNOWN_VERSION = "unknown"

# BMv2 JSON keys that describe the compiler run, not the program: the format/compiler stamp,
# the path of p4c's preprocessed input, and the source file/line/fragment of each object.
JSON_METADATA_KEYS = frozenset({"__meta__", "program", "source_info"})
# P4Info fields that document the source rather than define the interface.
P4INFO_DOC_FIELDS = frozenset({"doc", "annotations", "annotation_locations", "structured_annotations"})
_VALUE_WIDTH = 60


@dataclass(frozen=True)
class P4cBuild:
    """The outputs of one p4c run, read from a build folder."""

    folder: Path
    p4c_version: str
    bmv2_json: dict
    p4info: p4info_pb2.P4Info

    @classmethod
    def load(cls, folder: str | Path) -> "P4cBuild":
        """Read mrc.json, mrc.p4info.txtpb and p4c-version (missing version: "unknown") from `folder`."""
        folder = Path(folder)
        json_path = folder / JSON_NAME
        if not json_path.exists():
            raise FileNotFoundError(f"{json_path}: no BMv2 JSON in this build folder (run `make -C p4`)")
        try:
            program = json.loads(json_path.read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"{json_path}: not JSON: {exc}") from None
        return cls(folder, read_p4c_version(folder), program, load_p4info(folder / P4INFO_NAME))


def read_p4c_version(folder: str | Path) -> str:
    """The p4c version recorded in `folder`/p4c-version (the first line of `p4c --version`, e.g.
    "p4c 1.2.4.8 (SHA: ...)" gives "1.2.4.8"), or "unknown" when there is none."""
    path = Path(folder) / VERSION_NAME
    text = path.read_text().strip() if path.exists() else ""
    if not text:
        return UNKNOWN_VERSION
    number = re.search(r"\d+(?:\.\d+)+", text)
    return number.group(0) if number else text.splitlines()[0]


# --- BMv2 JSON ----------------------------------------------------------------------------------

def normalised_bmv2_json(value: Any) -> Any:
    """A copy of a BMv2 JSON program without the keys of JSON_METADATA_KEYS, at any depth."""
    if isinstance(value, dict):
        return {k: normalised_bmv2_json(v) for k, v in value.items() if k not in JSON_METADATA_KEYS}
    if isinstance(value, list):
        return [normalised_bmv2_json(v) for v in value]
    return value


def json_difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where and how two JSON values first differ ("path: a != b"), or None when equal.

    List items that carry a name (BMv2 "name", P4Info "preamble.name") are shown by it
    (`actions[MrcIngress.forward]`), others by index.
    """
    if type(a) is not type(b):
        return f"{path or '<top>'}: {_short(a)} != {_short(b)}"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            where = f"{path}.{key}" if path else key
            if key not in b:
                return f"{where}: only in the first"
            if key not in a:
                return f"{where}: only in the second"
            found = json_difference(a[key], b[key], where)
            if found:
                return found
        return None
    if isinstance(a, list):
        for index, (x, y) in enumerate(zip(a, b)):
            found = json_difference(x, y, f"{path}[{_item_label(x, index)}]")
            if found:
                return found
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)} items"
        return None
    return None if a == b else f"{path or '<top>'}: {_short(a)} != {_short(b)}"


def _item_label(item: Any, index: int) -> str:
    if isinstance(item, dict):
        for holder in (item, item.get("preamble")):
            if isinstance(holder, dict) and isinstance(holder.get("name"), str):
                return holder["name"]
    return str(index)


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= _VALUE_WIDTH else text[:_VALUE_WIDTH - 3] + "..."


# --- P4Info -------------------------------------------------------------------------------------

def normalised_p4info(p4info: p4info_pb2.P4Info) -> p4info_pb2.P4Info:
    """A copy of `p4info` without documentation and annotations (P4INFO_DOC_FIELDS) and with
    only the architecture of pkg_info: ids, names, match fields, actions and resources stay."""
    copy = p4info_pb2.P4Info()
    copy.CopyFrom(p4info)
    arch = copy.pkg_info.arch
    copy.ClearField("pkg_info")
    copy.pkg_info.arch = arch
    _clear_doc_fields(copy)
    return copy


def _clear_doc_fields(message: Message) -> None:
    for field, value in message.ListFields():
        if field.name in P4INFO_DOC_FIELDS:
            message.ClearField(field.name)
        elif field.message_type is None:
            continue
        elif field.label == field.LABEL_REPEATED:
            if field.message_type.GetOptions().map_entry:
                continue
            for item in value:
                _clear_doc_fields(item)
        else:
            _clear_doc_fields(value)


def p4info_difference(a: p4info_pb2.P4Info, b: p4info_pb2.P4Info) -> str | None:
    """Where and how two P4Info messages first differ once normalised, or None when equal."""
    first, second = normalised_p4info(a), normalised_p4info(b)
    if first == second:
        return None
    return json_difference(MessageToDict(first), MessageToDict(second)) or "the messages differ"


# --- builds -------------------------------------------------------------------------------------

def build_difference(committed: P4cBuild, fresh: P4cBuild) -> str | None:
    """One line saying how `fresh` differs from `committed` (P4Info first), or None when equal.

    When the two were made by different p4c versions the line names both, so that a change
    brought by a new p4c is told apart from a stale committed build.
    """
    for name, found in (
            (P4INFO_NAME, p4info_difference(committed.p4info, fresh.p4info)),
            (JSON_NAME, json_difference(normalised_bmv2_json(committed.bmv2_json),
                                        normalised_bmv2_json(fresh.bmv2_json)))):
        if found:
            return f"{name} differs ({found}); {_cause(committed, fresh)}"
    return None


def _cause(committed: P4cBuild, fresh: P4cBuild) -> str:
    if committed.p4c_version != fresh.p4c_version:
        return (f"{committed.folder} was made by p4c {committed.p4c_version}, the fresh build by "
                f"p4c {fresh.p4c_version}: if the change is p4c's, run `make -C p4` and commit the build")
    return (f"{committed.folder} is stale (both p4c {fresh.p4c_version}): run `make -C p4` and "
            "commit the build")
