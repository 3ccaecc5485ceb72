"""A table entry by P4Info names: what the controller installs and what a switch stores.

Names are P4Info names (docs/design.md, "Switch pipeline contract"); `pipeline_contract.p4info.P4InfoIndex`
turns an entry into its P4Runtime message and back.
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
