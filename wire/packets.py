"""Decoded MRC packets: what the transport core reads and writes.

The transport (sans-IO) and the in-process network work on these objects; `wire.codec`
turns them into Ethernet frames and back, and `wire.headers` gives the same layout as
Scapy layers. Field meanings and sizes are in docs/design.md ("Wire format").
Addresses are 16-byte IPv6 addresses; MACs are not part of a packet object (the NIC adds them).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from wire import constants


@dataclass(slots=True)
class DataPacket:
    """One RDMA WRITE-only packet carrying `payload` at offset `va - base` of message `msg_id`."""

    src: bytes                 # 16-byte IPv6 source (sender NIC address)
    dst: bytes                 # 16-byte IPv6 destination (uSID path address or NIC address)
    ev: int                    # 32-bit entropy value
    qp: int                    # destination QP (24 bits)
    psn: int                   # 24-bit packet sequence number
    va: int                    # RETH virtual address (message base + byte offset)
    rkey: int                  # RETH R_Key
    length: int                # RETH DMA length: payload bytes of this packet (kept by a trim)
    msg_id: int                # MRCH message id (16 bits)
    msg_len: int               # MRCH total message length in bytes
    tsval: int                 # MRCH sender timestamp, microseconds mod 2**32
    payload: bytes | memoryview = b""       # bytes-like (a sender passes a view of its message); empty when trimmed
    flags: int = 0             # MRCH flags (constants.MRCH_FLAG_TRIMMED, _RETX)
    dscp: int = constants.DSCP_TRIMMABLE
    ecn: int = constants.ECN_ECT0
    ack_req: bool = False      # BTH A bit

    def __init__(self, src: bytes, dst: bytes, ev: int, qp: int, psn: int, va: int, rkey: int, length: int,
                 msg_id: int, msg_len: int, tsval: int, payload: bytes | memoryview = b"", flags: int = 0,
                 dscp: int = constants.DSCP_TRIMMABLE, ecn: int = constants.ECN_ECT0, ack_req: bool = False) -> None:
        # written out, not generated: under mypyc a dataclass's generated __init__ stays interpreted
        # Python, and one of these is made per packet
        self.src = src
        self.dst = dst
        self.ev = ev
        self.qp = qp
        self.psn = psn
        self.va = va
        self.rkey = rkey
        self.length = length
        self.msg_id = msg_id
        self.msg_len = msg_len
        self.tsval = tsval
        self.payload = payload
        self.flags = flags
        self.dscp = dscp
        self.ecn = ecn
        self.ack_req = ack_req

    @property
    def trimmed(self) -> bool:
        """True when a switch cut this packet's payload."""
        return bool(self.flags & constants.MRCH_FLAG_TRIMMED)


@dataclass(slots=True)
class Sack:
    """Selective acknowledgement: cumulative PSN plus a 64-bit bitmap from `sack_base`."""

    src: bytes
    dst: bytes
    ev: int                    # EV of this SACK's own (reverse) path
    qp: int                    # QP of the data sender
    cum_psn: int               # next PSN expected in order (all below received)
    sack_base: int             # bit i of bitmap = PSN sack_base + i received
    bitmap: int                # 64 bits
    ev_echo: int               # EV of the data packet that triggered this SACK
    ts_echo: int               # tsval of that data packet
    ecn_echo: bool = False     # that data packet arrived with CE
    window_penalty: int = 0    # 0-255: the receiver asks the sender to give up this many 256ths of its largest window
    dscp: int = constants.DSCP_CONTROL
    ecn: int = constants.ECN_NOT_ECT

    def __init__(self, src: bytes, dst: bytes, ev: int, qp: int, cum_psn: int, sack_base: int, bitmap: int,
                 ev_echo: int, ts_echo: int, ecn_echo: bool = False, window_penalty: int = 0,
                 dscp: int = constants.DSCP_CONTROL, ecn: int = constants.ECN_NOT_ECT) -> None:
        # written out, not generated: under mypyc a dataclass's generated __init__ stays interpreted
        # Python, and one of these is made per acknowledgement
        self.src = src
        self.dst = dst
        self.ev = ev
        self.qp = qp
        self.cum_psn = cum_psn
        self.sack_base = sack_base
        self.bitmap = bitmap
        self.ev_echo = ev_echo
        self.ts_echo = ts_echo
        self.ecn_echo = ecn_echo
        self.window_penalty = window_penalty
        self.dscp = dscp
        self.ecn = ecn


@dataclass(slots=True)
class Nack:
    """Negative acknowledgement of one PSN, with a reason (constants.NACK_*)."""

    src: bytes
    dst: bytes
    ev: int
    qp: int
    psn: int                   # the PSN asked for again
    cum_psn: int
    reason: int
    ev_echo: int
    ts_echo: int
    dscp: int = constants.DSCP_CONTROL
    ecn: int = constants.ECN_NOT_ECT

    def __init__(self, src: bytes, dst: bytes, ev: int, qp: int, psn: int, cum_psn: int, reason: int, ev_echo: int,
                 ts_echo: int, dscp: int = constants.DSCP_CONTROL, ecn: int = constants.ECN_NOT_ECT) -> None:
        # written out, not generated: under mypyc a dataclass's generated __init__ stays interpreted
        # Python, and one of these is made per trimmed packet
        self.src = src
        self.dst = dst
        self.ev = ev
        self.qp = qp
        self.psn = psn
        self.cum_psn = cum_psn
        self.reason = reason
        self.ev_echo = ev_echo
        self.ts_echo = ts_echo
        self.dscp = dscp
        self.ecn = ecn


@dataclass(slots=True)
class Probe:
    """Path probe sent on one EV; answered by a ProbeReply echoing `probe_id` and the EV."""

    src: bytes
    dst: bytes
    ev: int
    qp: int
    probe_id: int
    tsval: int
    dscp: int = constants.DSCP_CONTROL
    ecn: int = constants.ECN_NOT_ECT


@dataclass(slots=True)
class ProbeReply:
    """Answer to a Probe."""

    src: bytes
    dst: bytes
    ev: int
    qp: int
    probe_id: int
    ev_echo: int
    ts_echo: int
    dscp: int = constants.DSCP_CONTROL
    ecn: int = constants.ECN_NOT_ECT


Packet = DataPacket | Sack | Nack | Probe | ProbeReply

DATA_OVERHEAD: Final = constants.DATA_HEADERS_LEN + constants.ICRC_LEN     # bytes on the wire around a data payload
CONTROL_BASE: Final = constants.BTH_OFFSET + constants.BTH_LEN      # Ethernet + IPv6 + UDP + BTH before a control header
CONTROL_HEADER_LEN = {Sack: constants.SACK_LEN, Nack: constants.NACK_LEN, Probe: constants.PROBE_LEN,
                      ProbeReply: constants.PROBE_REPLY_LEN}


_CONTROL_SIZE: Final = {kind: CONTROL_BASE + length for kind, length in CONTROL_HEADER_LEN.items()}
_DATA_HEADERS_LEN: Final = constants.DATA_HEADERS_LEN
_TRIMMED: Final = constants.MRCH_FLAG_TRIMMED


def wire_size(pkt: Packet) -> int:
    """Bytes of a decoded packet as an Ethernet frame (a trimmed data packet ends after MRCH). An
    untrimmed data packet carries `length` payload bytes (RETH's DMA length, which `wire.codec`
    requires of every frame it writes or reads): the field is read, not the payload object, which a
    simulated packet would otherwise touch at every hop for its size alone."""
    if type(pkt) is DataPacket:
        return _DATA_HEADERS_LEN if pkt.flags & _TRIMMED else DATA_OVERHEAD + pkt.length
    return _CONTROL_SIZE[type(pkt)]


def priority_of(pkt: Packet) -> int:
    """Egress priority a host gives its own packet (control and trimmed headers go first)."""
    return constants.PRIORITY_HIGH if pkt.dscp in constants.HIGH_PRIORITY_DSCP else constants.PRIORITY_LOW
