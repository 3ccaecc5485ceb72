"""P4Info lookups by name, and conversion between TableEntry and P4Runtime messages.

Everything is looked up by the P4Info name given in docs/design.md ("Switch pipeline contract"),
never by numeric ID. Match and parameter values are sent as canonical P4Runtime byte strings
(big-endian, leading zero bytes stripped) and read back as ints, so the comparison of installed
and read-back entries does not depend on how a target pads its answers.
"""
from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from controller.entries import TableEntry


class P4InfoError(KeyError):
    """A name that the P4Info does not define (table, action, field, counter)."""

    def __str__(self) -> str:
        return str(self.args[0])


def load_p4info(path: str | Path) -> p4info_pb2.P4Info:
    """Read a P4Info in protobuf text format (.txt / .txtpb) or binary (.bin / .pb)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"P4Info file not found: {path}")
    p4info = p4info_pb2.P4Info()
    if path.suffix in (".bin", ".pb"):
        p4info.ParseFromString(path.read_bytes())
    else:
        try:
            text_format.Parse(path.read_text(), p4info)
        except text_format.ParseError as exc:
            raise ValueError(f"{path}: not a valid P4Info text file: {exc}") from exc
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


class P4InfoIndex:
    """Name-to-object lookups over one P4Info: tables, actions, match fields, counters."""

    def __init__(self, p4info: p4info_pb2.P4Info):
        self.p4info = p4info
        self.tables = {t.preamble.name: t for t in p4info.tables}
        self.actions = {a.preamble.name: a for a in p4info.actions}
        self.counters = {c.preamble.name: c for c in p4info.counters}
        self._by_id = {}
        for group in (p4info.tables, p4info.actions, p4info.counters, p4info.registers):
            for obj in group:
                self._by_id[obj.preamble.id] = obj

    # --- lookups -----------------------------------------------------------------
    def table(self, name: str) -> p4info_pb2.Table:
        """The P4Info table called `name`."""
        return self._lookup(self.tables, name, "table")

    def action(self, name: str) -> p4info_pb2.Action:
        """The P4Info action called `name`."""
        return self._lookup(self.actions, name, "action")

    def counter(self, name: str) -> p4info_pb2.Counter:
        """The P4Info counter called `name`."""
        return self._lookup(self.counters, name, "counter")

    def name_of(self, obj_id: int) -> str:
        """Name of the table, action or counter with this numeric ID."""
        try:
            return self._by_id[obj_id].preamble.name
        except KeyError:
            raise P4InfoError(f"P4Info has no object with id {obj_id}") from None

    def match_field(self, table: p4info_pb2.Table, name: str) -> p4info_pb2.MatchField:
        """The match field `name` of `table`."""
        for mf in table.match_fields:
            if mf.name == name:
                return mf
        known = ", ".join(mf.name for mf in table.match_fields)
        raise P4InfoError(f"table {table.preamble.name} has no match field {name!r} (has: {known})")

    def action_param(self, action: p4info_pb2.Action, name: str) -> p4info_pb2.Action.Param:
        """The parameter `name` of `action`."""
        for param in action.params:
            if param.name == name:
                return param
        known = ", ".join(p.name for p in action.params)
        raise P4InfoError(f"action {action.preamble.name} has no parameter {name!r} (has: {known})")

    @staticmethod
    def _lookup(objects: dict, name: str, kind: str):
        try:
            return objects[name]
        except KeyError:
            known = ", ".join(sorted(objects)) or "none"
            raise P4InfoError(f"P4Info has no {kind} named {name!r} (known: {known})") from None

    # --- TableEntry <-> p4runtime_pb2.TableEntry ------------------------------------
    def to_proto(self, entry: TableEntry) -> p4runtime_pb2.TableEntry:
        """The P4Runtime message for `entry`."""
        table = self.table(entry.table)
        action = self.action(entry.action)
        msg = p4runtime_pb2.TableEntry(table_id=table.preamble.id, priority=entry.priority)
        for name, value in sorted(entry.match.items()):
            mf = self.match_field(table, name)
            fm = msg.match.add(field_id=mf.id)
            if mf.match_type == p4info_pb2.MatchField.LPM:
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
            elif mf.match_type == p4info_pb2.MatchField.EXACT:
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
        """The TableEntry described by a P4Runtime message (as read back from a switch)."""
        table = self._by_id[msg.table_id]
        fields = {mf.id: mf for mf in table.match_fields}
        match: dict = {}
        for fm in msg.match:
            mf = fields[fm.field_id]
            kind = fm.WhichOneof("field_match_type")
            if kind == "lpm":
                match[mf.name] = (decode_value(fm.lpm.value), fm.lpm.prefix_len)
            elif kind == "exact":
                match[mf.name] = decode_value(fm.exact.value)
            else:
                raise ValueError(f"{table.preamble.name}.{mf.name}: match kind {kind} is not supported")
        for mf in table.match_fields:   # an omitted LPM field is a /0 match
            if mf.name not in match and mf.match_type == p4info_pb2.MatchField.LPM:
                match[mf.name] = (0, 0)
        action = self._by_id[msg.action.action.action_id]
        pnames = {p.id: p.name for p in action.params}
        params = {pnames[p.param_id]: decode_value(p.value) for p in msg.action.action.params}
        return TableEntry(table=table.preamble.name, match=match, action=action.preamble.name,
                          params=params, priority=msg.priority)
