"""Sizes of decoded packets on the wire (docs/design.md, "Wire format")."""
from __future__ import annotations

from host_agent import constants as C
from host_agent.packets import DataPacket, Nack, Probe, ProbeReply, Sack

CONTROL_HEADER_LEN = {Sack: 28, Nack: 20, Probe: 8, ProbeReply: 12}
CONTROL_BASE = C.BTH_OFFSET + C.BTH_LEN


def wire_size(pkt) -> int:
    """Bytes of `pkt` as an Ethernet frame."""
    if isinstance(pkt, DataPacket):
        if pkt.trimmed:
            return C.DATA_HEADERS_LEN
        return C.DATA_HEADERS_LEN + len(pkt.payload) + C.ICRC_LEN
    return CONTROL_BASE + CONTROL_HEADER_LEN[type(pkt)]


def priority_of(pkt) -> int:
    """Egress priority a host gives its own packet (control and trimmed headers go first)."""
    return C.PRIORITY_HIGH if pkt.dscp in C.HIGH_PRIORITY_DSCP else C.PRIORITY_LOW
