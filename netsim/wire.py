"""Sizes of decoded packets on the wire (docs/design.md, "Wire format")."""
from __future__ import annotations

from wire import constants as C
from host_agent.transport.message import wire_size

__all__ = ["wire_size", "priority_of"]


def priority_of(pkt) -> int:
    """Egress priority a host gives its own packet (control and trimmed headers go first)."""
    return C.PRIORITY_HIGH if pkt.dscp in C.HIGH_PRIORITY_DSCP else C.PRIORITY_LOW
