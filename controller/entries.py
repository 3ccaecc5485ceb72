"""Target-independent descriptions of what a switch is programmed with.

The controller computes these from a topology (controller/routes.py) and installs them over
P4Runtime; the reference model and the conformance suite consume the same objects. Names are
P4Info names (docs/design.md, "Switch pipeline contract").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

# An exact or ternary-free match value is an int; an LPM match is (value, prefix_length).
MatchValue = Union[int, tuple[int, int]]


@dataclass(frozen=True)
class TableEntry:
    """One entry of one P4 table: match fields by name, an action and its parameters by name."""

    table: str                                  # e.g. "MrcIngress.routing"
    match: dict[str, MatchValue]                # e.g. {"dst_addr": (0xFC00..., 48)}
    action: str                                 # e.g. "MrcIngress.forward"
    params: dict[str, int] = field(default_factory=dict)   # e.g. {"port": 3}
    priority: int = 0                           # only for ternary/range tables (none today)

    def key(self) -> tuple:
        """Identity of the entry within its table (what P4Runtime matches on for MODIFY/DELETE)."""
        return (self.table, tuple(sorted(self.match.items())), self.priority)


@dataclass(frozen=True)
class PortQueue:
    """Egress queue of one switch port: where the link's bottleneck lives."""

    port: int
    rate_bps: int            # 0 = unlimited
    depth_pkts: int          # tail-drop above this many queued packets


@dataclass
class SwitchProgram:
    """Everything one switch is given at boot: table entries and egress queue settings."""

    switch: str
    device_id: int
    entries: list[TableEntry] = field(default_factory=list)
    queues: list[PortQueue] = field(default_factory=list)

    def entries_of(self, table: str) -> list[TableEntry]:
        """The entries of one table, in installation order."""
        return [e for e in self.entries if e.table == table]
