"""Table store of the reference switch: entries by P4Info name, exact and LPM lookup.

Entries are `pipeline_contract.entries.TableEntry` objects (names, not ids); the P4Runtime server
translates protobuf entries into this form. Each table keeps the entries as written (for
reads) and a lookup structure the pipeline reads directly on every packet.
"""
from __future__ import annotations

from typing import Optional

from p4.config.v1 import p4info_pb2

from pipeline_contract.entries import TableEntry
from pipeline_contract.p4info import MATCH_EXACT, MATCH_LPM, P4InfoIndex, decode_value


class TableError(Exception):
    """A table write that the switch refuses; `code` is a gRPC status code name."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


# An action call as the pipeline sees it: (action name, {param name: value}).
ActionCall = tuple[str, dict[str, int]]


class Table:
    """One match-action table: exact (one or more fields) or a single LPM field."""

    def __init__(self, info: p4info_pb2.Table, actions: dict[int, p4info_pb2.Action], default: ActionCall):
        self.info = info
        self.name = info.preamble.name
        refs = [r for r in info.action_refs if r.id in actions]
        self.allowed_actions = {actions[r.id].preamble.name: actions[r.id] for r in refs}
        self.entry_actions = {actions[r.id].preamble.name for r in refs
                              if r.scope != p4info_pb2.ActionRef.DEFAULT_ONLY}
        self.const_default = bool(info.const_default_action_id)
        self.field_names = tuple(f.name for f in info.match_fields)
        self.field_bits = {f.name: f.bitwidth for f in info.match_fields}
        kinds = {f.match_type for f in info.match_fields}
        if kinds - {MATCH_EXACT, MATCH_LPM} or (MATCH_LPM in kinds and len(info.match_fields) != 1):
            raise TableError("UNIMPLEMENTED", f"table {self.name}: only exact keys or one LPM key are supported")
        self.is_lpm = MATCH_LPM in kinds
        self.initial_default = default
        self.default: ActionCall = default
        self.entries: dict[tuple, TableEntry] = {}   # entry key -> entry as written
        self.exact: dict = {}                         # exact key value(s) -> ActionCall
        self.lpm: dict[int, dict[int, ActionCall]] = {}   # prefix length -> masked value -> ActionCall
        self.lpm_order: list[tuple[int, int, dict[int, ActionCall]]] = []   # (length, mask, dict), longest first

    # --- writes ---------------------------------------------------------------------
    def insert(self, entry: TableEntry) -> None:
        """Add an entry; refused when one with the same key exists."""
        key = self._check(entry)
        if key in self.entries:
            raise TableError("ALREADY_EXISTS", f"table {self.name}: entry {dict(entry.match)} exists")
        self._store(key, entry)

    def modify(self, entry: TableEntry) -> None:
        """Replace the action of an existing entry."""
        key = self._check(entry)
        if key not in self.entries:
            raise TableError("NOT_FOUND", f"table {self.name}: no entry {dict(entry.match)} to modify")
        self._store(key, entry)

    def delete(self, entry: TableEntry) -> None:
        """Remove an existing entry (its action is ignored)."""
        key = self._check(entry, check_action=False)
        if key not in self.entries:
            raise TableError("NOT_FOUND", f"table {self.name}: no entry {dict(entry.match)} to delete")
        del self.entries[key]
        if self.is_lpm:
            value, length = key
            del self.lpm[length][value]
            if not self.lpm[length]:
                del self.lpm[length]
                self._reorder()
        else:
            del self.exact[key if len(key) > 1 else key[0]]

    def set_default(self, action: str, params: dict[str, int]) -> None:
        """Change the action applied on a miss."""
        if self.const_default:
            raise TableError("PERMISSION_DENIED", f"table {self.name}: the default action is const")
        self._check_action(action, params)
        self.default = (action, dict(params))

    def clear(self) -> None:
        """Remove every entry and restore the initial default action."""
        self.entries.clear()
        self.exact.clear()
        self.lpm.clear()
        self.lpm_order = []
        self.default = self.initial_default

    # --- lookups ----------------------------------------------------------------------
    def lookup_exact(self, value) -> ActionCall:
        """The action for an exact key (an int, or a tuple for several fields)."""
        return self.exact.get(value, self.default)

    def lookup_lpm(self, value: int) -> ActionCall:
        """The action of the longest prefix containing `value`."""
        for _, mask, bucket in self.lpm_order:
            hit = bucket.get(value & mask)
            if hit is not None:
                return hit
        return self.default

    # --- helpers ----------------------------------------------------------------------
    def _check(self, entry: TableEntry, check_action: bool = True) -> tuple:
        if set(entry.match) != set(self.field_names):
            raise TableError("INVALID_ARGUMENT",
                             f"table {self.name}: match fields {sorted(entry.match)} != {list(self.field_names)}")
        if check_action:
            if entry.action not in self.entry_actions and entry.action in self.allowed_actions:
                raise TableError("INVALID_ARGUMENT", f"table {self.name}: action {entry.action} is default-only")
            self._check_action(entry.action, entry.params)
        if self.is_lpm:
            name = self.field_names[0]
            bits = self.field_bits[name]
            m = entry.match[name]
            value, length = (m, bits) if isinstance(m, int) else m
            if not 0 <= length <= bits:
                raise TableError("INVALID_ARGUMENT", f"table {self.name}: prefix length {length} out of 0..{bits}")
            if not 0 <= value < (1 << bits) or value & ~_prefix_mask(length, bits):
                raise TableError("INVALID_ARGUMENT",
                                 f"table {self.name}: {name} value {value:#x} has bits beyond /{length}")
            return (value, length)
        key = []
        for name in self.field_names:
            value = entry.match[name]
            if not isinstance(value, int) or not 0 <= value < (1 << self.field_bits[name]):
                raise TableError("INVALID_ARGUMENT",
                                 f"table {self.name}: {name} = {value!r} does not fit {self.field_bits[name]} bits")
            key.append(value)
        return tuple(key)

    def _check_action(self, action: str, params: dict[str, int]) -> None:
        info = self.allowed_actions.get(action)
        if info is None:
            raise TableError("INVALID_ARGUMENT", f"table {self.name}: action {action!r} not allowed here")
        names = {p.name for p in info.params}
        if set(params) != names:
            raise TableError("INVALID_ARGUMENT",
                             f"action {action}: parameters {sorted(params)} != {sorted(names)}")
        for p in info.params:
            if not 0 <= params[p.name] < (1 << p.bitwidth):
                raise TableError("INVALID_ARGUMENT",
                                 f"action {action}: {p.name} = {params[p.name]} does not fit {p.bitwidth} bits")

    def _store(self, key: tuple, entry: TableEntry) -> None:
        self.entries[key] = entry
        call: ActionCall = (entry.action, dict(entry.params))
        if self.is_lpm:
            value, length = key
            bucket = self.lpm.get(length)
            if bucket is None:
                bucket = self.lpm[length] = {}
                bucket[value] = call
                self._reorder()
            else:
                bucket[value] = call
        else:
            self.exact[key if len(key) > 1 else key[0]] = call

    def _reorder(self) -> None:
        bits = self.field_bits[self.field_names[0]]
        self.lpm_order = [(n, _prefix_mask(n, bits), self.lpm[n]) for n in sorted(self.lpm, reverse=True)]


def _prefix_mask(length: int, bits: int) -> int:
    return ((1 << length) - 1) << (bits - length)


class TableStore:
    """All tables of a P4Info, by name."""

    def __init__(self, index: P4InfoIndex):
        self.index = index
        self.tables: dict[str, Table] = {}
        for name, info in index.tables.items():
            self.tables[name] = Table(info, index.actions_by_id, self._initial_default(info))

    def _initial_default(self, info: p4info_pb2.Table) -> ActionCall:
        index = self.index
        if info.HasField("initial_default_action"):
            action = index.action_by_id(info.initial_default_action.action_id)
            args = {index.action_param_by_id(action, a.param_id).name: decode_value(a.value)
                    for a in info.initial_default_action.arguments}
            return (action.preamble.name, args)
        if info.const_default_action_id:
            return (index.action_by_id(info.const_default_action_id).preamble.name, {})
        return ("NoAction", {})

    def table(self, name: str) -> Table:
        """The table called `name`."""
        try:
            return self.tables[name]
        except KeyError:
            raise TableError("NOT_FOUND", f"no table {name!r} in the P4Info") from None

    def insert(self, entry: TableEntry) -> None:
        """Insert one entry into its table."""
        self.table(entry.table).insert(entry)

    def modify(self, entry: TableEntry) -> None:
        """Modify one entry of its table."""
        self.table(entry.table).modify(entry)

    def delete(self, entry: TableEntry) -> None:
        """Delete one entry of its table."""
        self.table(entry.table).delete(entry)

    def install(self, entries) -> None:
        """Insert entries in order."""
        for e in entries:
            self.insert(e)

    def entries(self, name: Optional[str] = None) -> list[TableEntry]:
        """Entries of one table, or of all tables, in insertion order."""
        names = [name] if name else list(self.tables)
        return [e for n in names for e in self.table(n).entries.values()]

    def clear(self) -> None:
        """Empty every table."""
        for t in self.tables.values():
            t.clear()
