"""The P4Info: loading it, name and id lookups, and TableEntry <-> P4Runtime messages.

The P4Info is the contract between the controller and a target (BMv2 or the reference switch):
table, action, match field, parameter and counter names come from it (docs/design.md, "Switch
pipeline contract"); numeric IDs are only ever read from it. Match and parameter values are sent
as canonical P4Runtime byte strings (big-endian, leading zero bytes stripped) and read back as
ints, so comparing installed and read-back entries does not depend on how a target pads them.
"""
from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from pipeline_contract.entries import TableEntry

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_P4INFO_PATH = REPO_ROOT / "p4" / "build" / "mrc.p4info.txtpb"

MATCH_EXACT = p4info_pb2.MatchField.EXACT
MATCH_LPM = p4info_pb2.MatchField.LPM


class P4InfoError(KeyError, ValueError):
    """A P4Info file that cannot be read, or a name or id that the P4Info does not define."""

    def __str__(self) -> str:
        return str(self.args[0])


def load_p4info(path: str | Path | None = None) -> p4info_pb2.P4Info:
    """Read a P4Info in protobuf text (.txt / .txtpb) or binary (.bin / .pb) format.

    Without a path, the committed p4c output `p4/build/mrc.p4info.txtpb`.
    """
    path = Path(path) if path is not None else DEFAULT_P4INFO_PATH
    if not path.exists():
        raise P4InfoError(f"P4Info file {path} does not exist (p4c writes p4/build/mrc.p4info.txtpb: "
                          "run `make -C p4`)")
    p4info = p4info_pb2.P4Info()
    if path.suffix in (".bin", ".pb"):
        p4info.ParseFromString(path.read_bytes())
        return p4info
    try:
        text_format.Parse(path.read_text(), p4info)
    except text_format.ParseError as exc:
        raise P4InfoError(f"{path}: not a P4Info in protobuf text format: {exc}") from None
    return p4info


def encode_value(value: int, bitwidth: int) -> bytes:
    """Canonical P4Runtime byte string of an unsigned value of `bitwidth` bits."""
    if value < 0 or value >= (1 << bitwidth):
        raise ValueError(f"value {value:#x} does not fit in {bitwidth} bits")
    nbytes = max(1, (value.bit_length() + 7) // 8)
    return value.to_bytes(nbytes, "big")


def decode_value(data: bytes) -> int:
    """Unsigned int of a P4Runtime byte string (padded or canonical)."""
    return int.from_bytes(data, "big")


def _member(items, key: str, value, owner: str, kind: str):
    """The item of `items` (match fields, parameters) whose `key` ("name" or "id") is `value`."""
    for item in items:
        if getattr(item, key) == value:
            return item
    if key == "name":
        known = ", ".join(item.name for item in items)
        raise P4InfoError(f"{owner} has no {kind} {value!r} (has: {known})")
    raise P4InfoError(f"{owner} has no {kind} id {value}")


class P4InfoIndex:
    """Tables, actions and counters of one P4Info, by name and by id (the P4Info's own messages)."""

    def __init__(self, p4info: p4info_pb2.P4Info):
        self.p4info = p4info
        self.tables = {t.preamble.name: t for t in p4info.tables}
        self.actions = {a.preamble.name: a for a in p4info.actions}
        self.counters = {c.preamble.name: c for c in p4info.counters}
        self.tables_by_id = {t.preamble.id: t for t in p4info.tables}
        self.actions_by_id = {a.preamble.id: a for a in p4info.actions}
        self.counters_by_id = {c.preamble.id: c for c in p4info.counters}
        self._by_id = {}
        for group in (p4info.tables, p4info.actions, p4info.counters, p4info.registers):
            for obj in group:
                self._by_id[obj.preamble.id] = obj

    # --- lookups by name -----------------------------------------------------------
    def table(self, name: str) -> p4info_pb2.Table:
        """The table called `name` (fully qualified, e.g. MrcIngress.routing)."""
        return self._lookup(self.tables, name, "table")

    def action(self, name: str) -> p4info_pb2.Action:
        """The action called `name` (fully qualified, e.g. MrcIngress.forward)."""
        return self._lookup(self.actions, name, "action")

    def counter(self, name: str) -> p4info_pb2.Counter:
        """The counter called `name`."""
        return self._lookup(self.counters, name, "counter")

    @staticmethod
    def match_field(table: p4info_pb2.Table, name: str) -> p4info_pb2.MatchField:
        """The match field `name` of `table`."""
        return _member(table.match_fields, "name", name, f"table {table.preamble.name}", "match field")

    @staticmethod
    def action_param(action: p4info_pb2.Action, name: str) -> p4info_pb2.Action.Param:
        """The parameter `name` of `action`."""
        return _member(action.params, "name", name, f"action {action.preamble.name}", "parameter")

    @staticmethod
    def _lookup(objects: dict, name: str, kind: str):
        try:
            return objects[name]
        except KeyError:
            known = ", ".join(sorted(objects)) or "none"
            raise P4InfoError(f"P4Info has no {kind} named {name!r} (known: {known})") from None

    # --- lookups by id -----------------------------------------------------------------
    def name_of(self, obj_id: int) -> str:
        """Name of the table, action, counter or register with this numeric ID."""
        try:
            return self._by_id[obj_id].preamble.name
        except KeyError:
            raise P4InfoError(f"P4Info has no object with id {obj_id}") from None

    def table_by_id(self, table_id: int) -> p4info_pb2.Table:
        """The table with this id."""
        return self._lookup_id(self.tables_by_id, table_id, "table")

    def action_by_id(self, action_id: int) -> p4info_pb2.Action:
        """The action with this id."""
        return self._lookup_id(self.actions_by_id, action_id, "action")

    @staticmethod
    def match_field_by_id(table: p4info_pb2.Table, field_id: int) -> p4info_pb2.MatchField:
        """The match field of `table` with this id."""
        return _member(table.match_fields, "id", field_id, f"table {table.preamble.name}", "match field")

    @staticmethod
    def action_param_by_id(action: p4info_pb2.Action, param_id: int) -> p4info_pb2.Action.Param:
        """The parameter of `action` with this id."""
        return _member(action.params, "id", param_id, f"action {action.preamble.name}", "parameter")

    @staticmethod
    def _lookup_id(objects: dict, obj_id: int, kind: str):
        try:
            return objects[obj_id]
        except KeyError:
            raise P4InfoError(f"P4Info has no {kind} with id {obj_id}") from None

    # --- TableEntry <-> p4runtime_pb2.TableEntry ------------------------------------
    def to_proto(self, entry: TableEntry) -> p4runtime_pb2.TableEntry:
        """The P4Runtime message for `entry`."""
        table = self.table(entry.table)
        action = self.action(entry.action)
        msg = p4runtime_pb2.TableEntry(table_id=table.preamble.id, priority=entry.priority)
        for name, value in sorted(entry.match.items()):
            mf = self.match_field(table, name)
            fm = msg.match.add(field_id=mf.id)
            if mf.match_type == MATCH_LPM:
                if not isinstance(value, tuple):
                    raise ValueError(f"{entry.table}.{name} is LPM: give (value, prefix_len), not {value!r}")
                prefix, plen = value
                if not 0 <= plen <= mf.bitwidth:
                    raise ValueError(f"{entry.table}.{name}: prefix length {plen} outside 0..{mf.bitwidth}")
                if plen == 0:       # P4Runtime: a /0 LPM match is expressed by omitting the field
                    del msg.match[-1]
                    continue
                mask = ((1 << plen) - 1) << (mf.bitwidth - plen)
                fm.lpm.value = encode_value(prefix & mask, mf.bitwidth)
                fm.lpm.prefix_len = plen
            elif mf.match_type == MATCH_EXACT:
                if isinstance(value, tuple):
                    raise ValueError(f"{entry.table}.{name} is exact: give an int, not {value!r}")
                fm.exact.value = encode_value(value, mf.bitwidth)
            else:
                raise ValueError(f"{entry.table}.{name}: match type {mf.match_type} is not supported")
        msg.action.action.action_id = action.preamble.id
        for name, value in sorted(entry.params.items()):
            param = self.action_param(action, name)
            msg.action.action.params.add(param_id=param.id, value=encode_value(value, param.bitwidth))
        missing = {p.name for p in action.params} - set(entry.params)
        if missing:
            raise ValueError(f"{entry.table}: action {entry.action} needs parameters {sorted(missing)}")
        return msg

    def from_proto(self, msg: p4runtime_pb2.TableEntry) -> TableEntry:
        """The TableEntry described by a P4Runtime message (an entry written to or read from a switch).

        An omitted LPM field is a /0 match; a message without an action means NoAction.
        Raises P4InfoError for an unknown id, ValueError for a match of the wrong kind.
        """
        table = self.table_by_id(msg.table_id)
        match: dict = {}
        for fm in msg.match:
            mf = self.match_field_by_id(table, fm.field_id)
            kind = fm.WhichOneof("field_match_type")
            if mf.match_type == MATCH_LPM and kind == "lpm":
                match[mf.name] = (decode_value(fm.lpm.value), fm.lpm.prefix_len)
            elif mf.match_type == MATCH_EXACT and kind == "exact":
                match[mf.name] = decode_value(fm.exact.value)
            else:
                raise ValueError(f"table {table.preamble.name}: field {mf.name} given as {kind}")
        for mf in table.match_fields:
            if mf.name not in match and mf.match_type == MATCH_LPM:
                match[mf.name] = (0, 0)
        action_name, params = "NoAction", {}
        if msg.HasField("action"):
            if msg.action.WhichOneof("type") != "action":
                raise ValueError(f"table {table.preamble.name}: only direct actions are supported")
            action = self.action_by_id(msg.action.action.action_id)
            action_name = action.preamble.name
            params = {self.action_param_by_id(action, p.param_id).name: decode_value(p.value)
                      for p in msg.action.action.params}
        return TableEntry(table=table.preamble.name, match=match, action=action_name,
                          params=params, priority=msg.priority)
