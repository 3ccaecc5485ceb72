"""Frames for conformance cases: built with the Scapy layers of wire.headers, checked field by field.

A packet spec is a dict (from a case file):

    {kind: data, src: "fc00:1:1000::", dst: "fc00:1:100:1001::", ev: 7, dscp: 10, ecn: 2,
     payload_len: 1000, flags: 0, set: {IPv6.plen: 999}, truncate: 60}

`kind` is data, sack, nack, probe, probe_reply or udp (plain IPv6/UDP to another port);
`set` overrides Scapy fields (Layer.field) after the packet is built (lengths are not
recomputed for fields set explicitly); `truncate` cuts the frame to that many bytes.
"""
from __future__ import annotations

import ipaddress
from typing import Any

from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from wire import constants
from wire import headers
from wire.packets import DataPacket, Nack, Probe, ProbeReply, Sack

SRC_MAC = bytes.fromhex("020001000000")
DST_MAC = bytes.fromhex("020001000001")
FILLER_MSG_ID = 0xF111          # MRCH message id marking the packets that build a standing queue


class SpecError(ValueError):
    """A packet spec of a case file is wrong."""


def ip6(text: str) -> bytes:
    """16 bytes of an IPv6 address written as text."""
    try:
        return ipaddress.IPv6Address(text).packed
    except ValueError:
        raise SpecError(f"not an IPv6 address: {text!r}") from None


def _packet_object(spec: dict[str, Any], seq: int):
    kind = spec.get("kind", "data")
    src, dst = ip6(spec["src"]), ip6(spec["dst"])
    ev = int(spec.get("ev", 0))
    common = dict(src=src, dst=dst, ev=ev, qp=int(spec.get("qp", 1)))
    if "dscp" in spec:
        common["dscp"] = int(spec["dscp"])
    if "ecn" in spec:
        common["ecn"] = int(spec["ecn"])
    if kind == "data":
        n = int(spec.get("payload_len", 1000))
        return DataPacket(psn=seq, va=seq * n, rkey=1, length=n, msg_id=int(spec.get("msg_id", 1)),
                          msg_len=n * 64, tsval=seq, payload=bytes((i + seq) & 0xFF for i in range(n)),
                          flags=int(spec.get("flags", 0)), **common)
    if kind == "sack":
        return Sack(cum_psn=seq, sack_base=seq, bitmap=1, ev_echo=ev, ts_echo=0, **common)
    if kind == "nack":
        return Nack(psn=seq, cum_psn=seq, reason=constants.NACK_TRIMMED, ev_echo=ev, ts_echo=0, **common)
    if kind == "probe":
        return Probe(probe_id=seq, tsval=0, **common)
    if kind == "probe_reply":
        return ProbeReply(probe_id=seq, ev_echo=ev, ts_echo=0, **common)
    raise SpecError(f"unknown packet kind {kind!r}")


def build(spec: dict[str, Any], seq: int = 0) -> bytes:
    """The Ethernet frame a packet spec describes; `seq` numbers packets of one group (PSN)."""
    kind = spec.get("kind", "data")
    if kind == "udp":
        ev = int(spec.get("ev", 0))
        tc = (int(spec.get("dscp", constants.DSCP_NO_TRIM)) << 2) | int(spec.get("ecn", constants.ECN_NOT_ECT))
        pkt = (Ether(src=SRC_MAC, dst=DST_MAC) /
               IPv6(src=spec["src"], dst=spec["dst"], tc=tc, fl=ev >> 16, hlim=constants.IPV6_HOP_LIMIT) /
               UDP(sport=ev & 0xFFFF, dport=int(spec.get("dport", 9000)), chksum=0) /
               Raw(bytes(int(spec.get("payload_len", 100)))))
    else:
        pkt = headers.to_scapy(_packet_object(spec, seq), SRC_MAC, DST_MAC)
    for name, value in (spec.get("set") or {}).items():
        layer_name, _, field = name.partition(".")
        layer = pkt.getlayer(layer_name)
        if layer is None or not field:
            raise SpecError(f"set: {name!r} names no field of {pkt.summary()}")
        layer.setfieldval(field, value)
    frame = bytes(pkt)
    if "truncate" in spec:
        frame = frame[:int(spec["truncate"])]
    return frame


def dissect(frame: bytes):
    """The frame as Scapy layers (wire.headers binds the MRC layers)."""
    return Ether(frame)


def field_value(frame: bytes, name: str):
    """Value of a check field: Layer.field (Scapy), or dscp, ecn, length, payload_len."""
    if name == "length":
        return len(frame)
    pkt = dissect(frame)
    if name in ("dscp", "ecn"):
        tc = pkt[IPv6].tc
        return tc >> 2 if name == "dscp" else tc & 3
    if name == "payload_len":
        if len(frame) <= constants.DATA_HEADERS_LEN:
            return 0
        return len(frame) - constants.DATA_HEADERS_LEN - constants.ICRC_LEN
    layer_name, _, field = name.partition(".")
    layer = pkt.getlayer(layer_name)
    if layer is None:
        return None
    value = layer.getfieldval(field)
    return value


def same_value(actual, expected) -> bool:
    """Compare a check field, reading IPv6 addresses and Scapy flag values as numbers."""
    if isinstance(expected, str) and ":" in expected and isinstance(actual, str):
        try:
            return ipaddress.IPv6Address(actual) == ipaddress.IPv6Address(expected)
        except ValueError:
            return False
    try:
        return int(actual) == int(expected)
    except (TypeError, ValueError):
        return actual == expected


def scapy_consistency(frame: bytes) -> list[str]:
    """Problems Scapy finds in a frame's length fields and MRC headers (empty when consistent)."""
    problems = []
    pkt = dissect(frame)
    if IPv6 not in pkt or UDP not in pkt:
        return ["not Ether/IPv6/UDP"]
    ip, udp = pkt[IPv6], pkt[UDP]
    if ip.plen != len(frame) - constants.UDP_OFFSET:
        problems.append(f"IPv6.plen {ip.plen} != frame length {len(frame)} - {constants.UDP_OFFSET}")
    if udp.len != ip.plen:
        problems.append(f"UDP.len {udp.len} != IPv6.plen {ip.plen}")
    if udp.dport == constants.ROCEV2_UDP_PORT:
        bth = pkt.getlayer(headers.BTH)
        if bth is None:
            problems.append("no BTH")
        elif bth.opcode == constants.OP_RC_WRITE_ONLY and pkt.getlayer(headers.MRCH) is None:
            problems.append("data packet without MRCH")
    if pkt.getlayer("Padding") is not None:
        problems.append("trailing padding after the headers")
    return problems


def is_filler(frame: bytes) -> bool:
    """True for the packets a case sent only to build a standing queue."""
    return (len(frame) >= constants.DATA_HEADERS_LEN and frame[constants.BTH_OFFSET] == constants.OP_RC_WRITE_ONLY
            and int.from_bytes(frame[constants.MRCH_OFFSET + 2:constants.MRCH_OFFSET + 4], "big") == FILLER_MSG_ID)
