"""Target-independent descriptions of what a switch is programmed with.

The controller computes these from a topology (controller/routes.py) and installs them over
P4Runtime; the reference model and the conformance suite consume the same objects. Names are
P4Info names (docs/design.md, "Switch pipeline contract").
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pipeline_contract.entries import TableEntry


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
