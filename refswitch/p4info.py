"""P4Info loading and the name <-> id maps the reference switch looks everything up with.

The P4Info is the contract between the controller and a target: table, action, match field,
parameter and counter names come from it; numeric IDs are only ever read from it.
`contract_p4info()` builds a provisional P4Info carrying the names of docs/design.md
("Switch pipeline contract"), used only when the compiled `p4/build/mrc.p4info.txtpb` is absent.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_P4INFO_PATH = REPO_ROOT / "p4" / "build" / "mrc.p4info.txtpb"

MATCH_EXACT = p4info_pb2.MatchField.EXACT
MATCH_LPM = p4info_pb2.MatchField.LPM
MATCH_TERNARY = p4info_pb2.MatchField.TERNARY


class P4InfoError(ValueError):
    """A P4Info file or a name looked up in it is wrong."""


@dataclass(frozen=True)
class MatchFieldInfo:
    """One match field of a table."""

    id: int
    name: str
    bitwidth: int
    match_type: int


@dataclass(frozen=True)
class ParamInfo:
    """One parameter of an action."""

    id: int
    name: str
    bitwidth: int


@dataclass(frozen=True)
class ActionInfo:
    """One action: id, fully qualified name and parameters in declaration order."""

    id: int
    name: str
    params: tuple[ParamInfo, ...]

    def param(self, name: str) -> ParamInfo:
        """The parameter called `name`."""
        for p in self.params:
            if p.name == name:
                return p
        raise P4InfoError(f"action {self.name} has no parameter {name!r}")

    def param_by_id(self, pid: int) -> ParamInfo:
        """The parameter with id `pid`."""
        for p in self.params:
            if p.id == pid:
                return p
        raise P4InfoError(f"action {self.name} has no parameter id {pid}")


@dataclass(frozen=True)
class TableInfo:
    """One table: id, name, match fields, allowed action ids, size and initial default action."""

    id: int
    name: str
    match_fields: tuple[MatchFieldInfo, ...]
    action_ids: tuple[int, ...]
    size: int
    const_default_action_id: int = 0
    default_only_ids: tuple[int, ...] = ()    # actions allowed only as the default action

    def field(self, name: str) -> MatchFieldInfo:
        """The match field called `name`."""
        for f in self.match_fields:
            if f.name == name:
                return f
        raise P4InfoError(f"table {self.name} has no match field {name!r}")

    def field_by_id(self, fid: int) -> MatchFieldInfo:
        """The match field with id `fid`."""
        for f in self.match_fields:
            if f.id == fid:
                return f
        raise P4InfoError(f"table {self.name} has no match field id {fid}")


@dataclass(frozen=True)
class CounterInfo:
    """One indirect counter array."""

    id: int
    name: str
    size: int
    unit: int


@dataclass
class P4InfoIndex:
    """Tables, actions and counters of one P4Info, by name and by id."""

    p4info: p4info_pb2.P4Info
    tables: dict[str, TableInfo] = field(default_factory=dict)
    actions: dict[str, ActionInfo] = field(default_factory=dict)
    counters: dict[str, CounterInfo] = field(default_factory=dict)
    tables_by_id: dict[int, TableInfo] = field(default_factory=dict)
    actions_by_id: dict[int, ActionInfo] = field(default_factory=dict)
    counters_by_id: dict[int, CounterInfo] = field(default_factory=dict)

    @classmethod
    def from_proto(cls, p4info: p4info_pb2.P4Info) -> "P4InfoIndex":
        """Index a parsed P4Info message."""
        index = cls(p4info=p4info)
        for a in p4info.actions:
            params = tuple(ParamInfo(p.id, p.name, p.bitwidth) for p in a.params)
            info = ActionInfo(a.preamble.id, a.preamble.name, params)
            index.actions[info.name] = info
            index.actions_by_id[info.id] = info
        for t in p4info.tables:
            fields = tuple(MatchFieldInfo(m.id, m.name, m.bitwidth, m.match_type) for m in t.match_fields)
            info = TableInfo(t.preamble.id, t.preamble.name, fields,
                             tuple(r.id for r in t.action_refs), t.size, t.const_default_action_id,
                             tuple(r.id for r in t.action_refs if r.scope == p4info_pb2.ActionRef.DEFAULT_ONLY))
            index.tables[info.name] = info
            index.tables_by_id[info.id] = info
        for c in p4info.counters:
            info = CounterInfo(c.preamble.id, c.preamble.name, c.size, c.spec.unit)
            index.counters[info.name] = info
            index.counters_by_id[info.id] = info
        return index

    def table(self, name: str) -> TableInfo:
        """The table called `name` (fully qualified, e.g. MrcIngress.routing)."""
        try:
            return self.tables[name]
        except KeyError:
            raise P4InfoError(f"P4Info has no table {name!r}") from None

    def action(self, name: str) -> ActionInfo:
        """The action called `name` (fully qualified, e.g. MrcIngress.forward)."""
        try:
            return self.actions[name]
        except KeyError:
            raise P4InfoError(f"P4Info has no action {name!r}") from None

    def counter(self, name: str) -> CounterInfo:
        """The counter called `name`."""
        try:
            return self.counters[name]
        except KeyError:
            raise P4InfoError(f"P4Info has no counter {name!r}") from None


def parse_p4info_text(text: str, source: str = "<text>") -> p4info_pb2.P4Info:
    """Parse a P4Info in protobuf text format."""
    msg = p4info_pb2.P4Info()
    try:
        text_format.Parse(text, msg)
    except text_format.ParseError as exc:
        raise P4InfoError(f"{source}: not a P4Info in protobuf text format: {exc}") from None
    return msg


def load_p4info(path: str | Path | None = None) -> p4info_pb2.P4Info:
    """Load a text P4Info from `path`; without a path, the committed build output or the contract one."""
    if path is None:
        if DEFAULT_P4INFO_PATH.exists():
            path = DEFAULT_P4INFO_PATH
        else:
            return contract_p4info()
    path = Path(path)
    if not path.exists():
        raise P4InfoError(f"P4Info file {path} does not exist")
    return parse_p4info_text(path.read_text(), str(path))


# --- the provisional P4Info of docs/design.md -------------------------------------------

_ID_PREFIX = {"table": 0x02, "action": 0x01, "counter": 0x12}

CONTRACT_ACTIONS: dict[str, list[tuple[str, int]]] = {
    "NoAction": [],
    "MrcIngress.usid_shift": [],
    "MrcIngress.forward": [("port", 9)],
    "MrcIngress.ecmp_select": [("group", 16), ("size", 16)],
    "MrcIngress.drop_no_route": [],
    "MrcIngress.fault_drop": [],
    "MrcIngress.fault_drop_random": [("drop_ppm", 32)],
    "MrcIngress.set_port_config": [("trim_threshold", 19), ("ecn_threshold", 19), ("host_facing", 1)],
}

# table -> (match fields (name, bits, type), actions, const default action); as p4/mrc.p4 declares them.
# A default action that is also in the list below is @defaultonly.
DEFAULT_ONLY = {"MrcIngress.drop_no_route"}
CONTRACT_TABLES: dict[str, tuple[list[tuple[str, int, int]], list[str], str]] = {
    "MrcIngress.usid_local": ([("dst_usid_prefix", 48, MATCH_EXACT)],
                              ["MrcIngress.usid_shift", "NoAction"], "NoAction"),
    "MrcIngress.routing": ([("dst_addr", 128, MATCH_LPM)],
                           ["MrcIngress.forward", "MrcIngress.ecmp_select", "MrcIngress.drop_no_route"],
                           "MrcIngress.drop_no_route"),
    "MrcIngress.ecmp_member": ([("group", 16, MATCH_EXACT), ("index", 16, MATCH_EXACT)],
                               ["MrcIngress.forward", "MrcIngress.drop_no_route"], "MrcIngress.drop_no_route"),
    "MrcIngress.port_fault": ([("port", 9, MATCH_EXACT)],
                              ["MrcIngress.fault_drop", "MrcIngress.fault_drop_random", "NoAction"], "NoAction"),
    "MrcIngress.port_config": ([("port", 9, MATCH_EXACT)],
                               ["MrcIngress.set_port_config", "NoAction"], "NoAction"),
}

CONTRACT_COUNTERS = ("MrcIngress.rx", "MrcIngress.malformed_drops", "MrcIngress.no_route_drops",
                     "MrcIngress.fault_drops", "MrcIngress.trimmed", "MrcIngress.ecn_marked", "MrcEgress.tx")
COUNTER_SIZE = 512


def contract_id(kind: str, name: str) -> int:
    """A stable P4Runtime-style id for `name` (type prefix byte + 24 bits of its CRC32)."""
    return (_ID_PREFIX[kind] << 24) | (zlib.crc32(name.encode()) & 0xFFFFFF)


def contract_p4info() -> p4info_pb2.P4Info:
    """A P4Info with the tables, actions and counters named in docs/design.md."""
    info = p4info_pb2.P4Info()
    info.pkg_info.arch = "v1model"
    for name, params in CONTRACT_ACTIONS.items():
        a = info.actions.add()
        a.preamble.id = contract_id("action", name)
        a.preamble.name = name
        a.preamble.alias = name.split(".")[-1]
        for i, (pname, bits) in enumerate(params, start=1):
            p = a.params.add()
            p.id, p.name, p.bitwidth = i, pname, bits
    for name, (fields, actions, default) in CONTRACT_TABLES.items():
        t = info.tables.add()
        t.preamble.id = contract_id("table", name)
        t.preamble.name = name
        t.preamble.alias = name.split(".")[-1]
        for i, (fname, bits, mtype) in enumerate(fields, start=1):
            m = t.match_fields.add()
            m.id, m.name, m.bitwidth, m.match_type = i, fname, bits, mtype
        for aname in actions:
            ref = t.action_refs.add()
            ref.id = contract_id("action", aname)
            if aname in DEFAULT_ONLY:
                ref.scope = p4info_pb2.ActionRef.DEFAULT_ONLY
        t.size = 1024
        t.const_default_action_id = contract_id("action", default)
    for name in CONTRACT_COUNTERS:
        c = info.counters.add()
        c.preamble.id = contract_id("counter", name)
        c.preamble.name = name
        c.preamble.alias = name.split(".")[-1]
        c.spec.unit = p4info_pb2.CounterSpec.BOTH
        c.size = COUNTER_SIZE
    return info
