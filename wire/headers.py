"""Scapy layers of the MRC wire format, for building, dissecting and showing packets.

Importing this module binds the layers to UDP destination port 4791 and to the BTH opcode, so
`rdpcap`/`sniff` output dissects as Ether / IPv6 / UDP / BTH / RETH / MRCH / Raw / ICRC (data)
or Ether / IPv6 / UDP / BTH / SackHdr|NackHdr|ProbeHdr|ProbeReplyHdr (control).
The BTH and RETH follow RoCEv2 byte for byte. Layout: docs/design.md, "Wire format";
`wire.codec` encodes the same bytes without Scapy (`to_scapy`/`from_scapy` convert
between these layers and the packet objects of `wire.packets`).
"""
from __future__ import annotations

import socket

from scapy.config import conf
from scapy.fields import (BitField, ByteEnumField, ByteField, FlagsField, IntField, ShortField,
                          ThreeBytesField, X3BytesField, XIntField, XLongField, XShortField)
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet as ScapyPacket
from scapy.packet import bind_layers

from wire import constants
from wire.packets import DataPacket, Nack, Packet, Probe, ProbeReply, Sack

__all__ = ["BTH", "RETH", "MRCH", "ICRC", "SackHdr", "NackHdr", "ProbeHdr", "ProbeReplyHdr",
           "to_scapy", "from_scapy"]

BTH_OPCODES = {
    constants.OP_RC_WRITE_ONLY: "RC_RDMA_WRITE_ONLY",
    constants.OP_SACK: "MRC_SACK",
    constants.OP_NACK: "MRC_NACK",
    constants.OP_PROBE: "MRC_PROBE",
    constants.OP_PROBE_REPLY: "MRC_PROBE_REPLY",
}
NACK_REASONS = {
    constants.NACK_TRIMMED: "TRIMMED",
    constants.NACK_TRIMMED_LASTHOP: "TRIMMED_LASTHOP",
    constants.NACK_NO_BITMAP: "NO_BITMAP",
    constants.NACK_NO_PKT_BUFFER: "NO_PKT_BUFFER",
    constants.NACK_PSN_OUT_OF_WINDOW: "PSN_OUT_OF_WINDOW",
    constants.NACK_UNEXPECTED: "UNEXPECTED",
}
# Flag names in bit order (bit 0 first), matching the constants' values.
MRCH_FLAG_NAMES = ["TRIMMED", "RETX", "F2", "F3", "F4", "F5", "F6", "F7"]
SACK_FLAG_NAMES = ["ECN_ECHO", "F1", "F2", "F3", "F4", "F5", "F6", "F7"]
assert 1 << MRCH_FLAG_NAMES.index("TRIMMED") == constants.MRCH_FLAG_TRIMMED
assert 1 << MRCH_FLAG_NAMES.index("RETX") == constants.MRCH_FLAG_RETX
assert 1 << SACK_FLAG_NAMES.index("ECN_ECHO") == constants.SACK_FLAG_ECN_ECHO


class BTH(ScapyPacket):
    """InfiniBand Base Transport Header, RoCEv2 layout (12 bytes)."""

    name = "MRC BTH"
    fields_desc = [
        ByteEnumField("opcode", constants.OP_RC_WRITE_ONLY, BTH_OPCODES),
        BitField("se", 0, 1),
        BitField("migreq", 0, 1),
        BitField("padcnt", 0, 2),
        BitField("tver", constants.BTH_TVER, 4),
        XShortField("pkey", constants.BTH_PKEY_DEFAULT),
        ByteField("resv8", 0),
        X3BytesField("dqpn", 0),
        BitField("ackreq", 0, 1),
        BitField("resv7", 0, 7),
        ThreeBytesField("psn", 0),
    ]

    def mysummary(self):
        return self.sprintf("BTH %opcode% qp=%dqpn% psn=%psn%")


class RETH(ScapyPacket):
    """RDMA Extended Transport Header (16 bytes): where this packet's payload goes."""

    name = "MRC RETH"
    fields_desc = [
        XLongField("va", 0),
        XIntField("rkey", 0),
        IntField("dma_len", 0),
    ]


class ICRC(ScapyPacket):
    """RoCEv2 invariant CRC trailer of a data packet (4 bytes, zero in MRC testbed packets)."""

    name = "ICRC"
    fields_desc = [XIntField("icrc", 0)]

    def extract_padding(self, s):
        return b"", s


class MRCH(ScapyPacket):
    """MRC data extension header (12 bytes), followed by the payload and, unless trimmed, the ICRC."""

    name = "MRC data header"
    fields_desc = [
        FlagsField("flags", 0, 8, MRCH_FLAG_NAMES),
        ByteField("reserved", 0),
        ShortField("msg_id", 0),
        IntField("msg_len", 0),
        IntField("tsval", 0),
    ]

    def mysummary(self):
        return self.sprintf("MRC data msg=%msg_id% len=%msg_len% flags=%flags%")

    def do_dissect_payload(self, s):
        """Split what follows into the payload (Raw) and the 4-byte ICRC trailer."""
        if int(self.flags) & constants.MRCH_FLAG_TRIMMED or len(s) < constants.ICRC_LEN:
            super().do_dissect_payload(s)
            return
        body, trailer = s[:-constants.ICRC_LEN], s[-constants.ICRC_LEN:]
        if body:
            self.add_payload(conf.raw_layer(body, _internal=1, _underlayer=self))
        self.add_payload(ICRC(trailer, _internal=1, _underlayer=self))


class _ControlHeader(ScapyPacket):
    """An MRC control header: the last header of its packet, nothing follows it."""

    def extract_padding(self, s):
        return b"", s


class SackHdr(_ControlHeader):
    """MRC selective acknowledgement (28 bytes)."""

    name = "MRC SACK"
    fields_desc = [
        IntField("cum_psn", 0),
        IntField("sack_base", 0),
        XLongField("bitmap", 0),
        XIntField("ev_echo", 0),
        FlagsField("flags", 0, 8, SACK_FLAG_NAMES),
        ByteField("window_penalty", 0),
        XShortField("reserved", 0),
        IntField("ts_echo", 0),
    ]

    def mysummary(self):
        return self.sprintf("SACK cum=%cum_psn% base=%sack_base% bitmap=%bitmap% ev=%ev_echo% %flags%")


class NackHdr(_ControlHeader):
    """MRC negative acknowledgement (20 bytes)."""

    name = "MRC NACK"
    fields_desc = [
        IntField("psn", 0),
        IntField("cum_psn", 0),
        XIntField("ev_echo", 0),
        ByteEnumField("reason", constants.NACK_TRIMMED, NACK_REASONS),
        X3BytesField("reserved", 0),
        IntField("ts_echo", 0),
    ]

    def mysummary(self):
        return self.sprintf("NACK psn=%psn% %reason% ev=%ev_echo%")


class ProbeHdr(_ControlHeader):
    """MRC path probe (8 bytes)."""

    name = "MRC PROBE"
    fields_desc = [IntField("probe_id", 0), IntField("tsval", 0)]

    def mysummary(self):
        return self.sprintf("PROBE id=%probe_id%")


class ProbeReplyHdr(_ControlHeader):
    """MRC path probe reply (12 bytes)."""

    name = "MRC PROBE_REPLY"
    fields_desc = [IntField("probe_id", 0), XIntField("ev_echo", 0), IntField("ts_echo", 0)]

    def mysummary(self):
        return self.sprintf("PROBE_REPLY id=%probe_id% ev=%ev_echo%")


bind_layers(UDP, BTH, dport=constants.ROCEV2_UDP_PORT)
# The UDP source port carries the EV and may equal a well-known port (53, 123...): make the
# destination-port binding win over the bindings Scapy already has.
UDP.payload_guess.remove(({"dport": constants.ROCEV2_UDP_PORT}, BTH))
UDP.payload_guess.insert(0, ({"dport": constants.ROCEV2_UDP_PORT}, BTH))
bind_layers(BTH, RETH, opcode=constants.OP_RC_WRITE_ONLY)
bind_layers(RETH, MRCH)
bind_layers(BTH, SackHdr, opcode=constants.OP_SACK)
bind_layers(BTH, NackHdr, opcode=constants.OP_NACK)
bind_layers(BTH, ProbeHdr, opcode=constants.OP_PROBE)
bind_layers(BTH, ProbeReplyHdr, opcode=constants.OP_PROBE_REPLY)


# --- conversion to and from packet objects -----------------------------------------------------

def _mac_str(mac: bytes) -> str:
    return ":".join(f"{b:02x}" for b in mac)


def _ip6_str(addr: bytes) -> str:
    return socket.inet_ntop(socket.AF_INET6, addr)


def _ip6_bytes(addr: str) -> bytes:
    return socket.inet_pton(socket.AF_INET6, addr)


def _lower_layers(pkt: Packet, src_mac: bytes, dst_mac: bytes) -> ScapyPacket:
    sport, flow_label = constants.ev_to_fields(pkt.ev)
    return (Ether(dst=_mac_str(dst_mac), src=_mac_str(src_mac), type=constants.ETHERTYPE_IPV6)
            / IPv6(tc=(pkt.dscp << 2) | pkt.ecn, fl=flow_label, nh=constants.IPPROTO_UDP,
                   hlim=constants.IPV6_HOP_LIMIT, src=_ip6_str(pkt.src), dst=_ip6_str(pkt.dst))
            / UDP(sport=sport, dport=constants.ROCEV2_UDP_PORT, chksum=0))


def to_scapy(pkt: Packet, src_mac: bytes, dst_mac: bytes) -> ScapyPacket:
    """The Scapy packet (Ether / IPv6 / UDP / BTH / ...) carrying the packet object `pkt`."""
    base = _lower_layers(pkt, src_mac, dst_mac)
    if isinstance(pkt, DataPacket):
        frame = (base
                 / BTH(opcode=constants.OP_RC_WRITE_ONLY, dqpn=pkt.qp, ackreq=int(pkt.ack_req), psn=pkt.psn)
                 / RETH(va=pkt.va, rkey=pkt.rkey, dma_len=pkt.length)
                 / MRCH(flags=pkt.flags, msg_id=pkt.msg_id, msg_len=pkt.msg_len, tsval=pkt.tsval))
        if pkt.trimmed:
            return frame
        if pkt.payload:
            frame = frame / conf.raw_layer(pkt.payload)
        return frame / ICRC()
    if isinstance(pkt, Sack):
        return (base / BTH(opcode=constants.OP_SACK, dqpn=pkt.qp, psn=pkt.cum_psn)
                / SackHdr(cum_psn=pkt.cum_psn, sack_base=pkt.sack_base, bitmap=pkt.bitmap,
                          ev_echo=pkt.ev_echo, flags=constants.SACK_FLAG_ECN_ECHO if pkt.ecn_echo else 0,
                          window_penalty=pkt.window_penalty, ts_echo=pkt.ts_echo))
    if isinstance(pkt, Nack):
        return (base / BTH(opcode=constants.OP_NACK, dqpn=pkt.qp, psn=pkt.psn)
                / NackHdr(psn=pkt.psn, cum_psn=pkt.cum_psn, ev_echo=pkt.ev_echo, reason=pkt.reason,
                          ts_echo=pkt.ts_echo))
    if isinstance(pkt, Probe):
        return base / BTH(opcode=constants.OP_PROBE, dqpn=pkt.qp) / ProbeHdr(probe_id=pkt.probe_id, tsval=pkt.tsval)
    if isinstance(pkt, ProbeReply):
        return (base / BTH(opcode=constants.OP_PROBE_REPLY, dqpn=pkt.qp)
                / ProbeReplyHdr(probe_id=pkt.probe_id, ev_echo=pkt.ev_echo, ts_echo=pkt.ts_echo))
    raise TypeError(f"cannot convert {type(pkt).__name__}: not an MRC packet object")


def from_scapy(frame: ScapyPacket) -> Packet:
    """The packet object of a dissected MRC frame (Ether / IPv6 / UDP / BTH / ...)."""
    ip, udp, bth = frame[IPv6], frame[UDP], frame[BTH]
    common = dict(src=_ip6_bytes(ip.src), dst=_ip6_bytes(ip.dst),
                  ev=constants.ev_from_fields(udp.sport, ip.fl), qp=bth.dqpn,
                  dscp=ip.tc >> 2, ecn=ip.tc & 0x3)
    if MRCH in frame:
        reth, mrch = frame[RETH], frame[MRCH]
        payload = b""
        if not int(mrch.flags) & constants.MRCH_FLAG_TRIMMED and conf.raw_layer in frame:
            payload = bytes(frame[conf.raw_layer].load)
        return DataPacket(psn=bth.psn, va=reth.va, rkey=reth.rkey, length=reth.dma_len,
                          msg_id=mrch.msg_id, msg_len=mrch.msg_len, tsval=mrch.tsval,
                          payload=payload, flags=int(mrch.flags), ack_req=bool(bth.ackreq), **common)
    if SackHdr in frame:
        h = frame[SackHdr]
        return Sack(cum_psn=h.cum_psn, sack_base=h.sack_base, bitmap=h.bitmap, ev_echo=h.ev_echo,
                    ts_echo=h.ts_echo, ecn_echo=bool(int(h.flags) & constants.SACK_FLAG_ECN_ECHO),
                    window_penalty=h.window_penalty, **common)
    if NackHdr in frame:
        h = frame[NackHdr]
        return Nack(psn=h.psn, cum_psn=h.cum_psn, reason=h.reason, ev_echo=h.ev_echo,
                    ts_echo=h.ts_echo, **common)
    if ProbeHdr in frame:
        h = frame[ProbeHdr]
        return Probe(probe_id=h.probe_id, tsval=h.tsval, **common)
    if ProbeReplyHdr in frame:
        h = frame[ProbeReplyHdr]
        return ProbeReply(probe_id=h.probe_id, ev_echo=h.ev_echo, ts_echo=h.ts_echo, **common)
    raise ValueError(f"not an MRC frame: {frame.summary()}")
