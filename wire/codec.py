"""Fast Ethernet-frame codec for MRC packets (the agent's hot path).

`encode` turns a packet object of `wire.packets` into the bytes of an Ethernet frame and
`decode` turns a received frame back into a packet object. Both use precompiled `struct.Struct`
objects only (no Scapy); `wire.headers` describes the same bytes as Scapy layers and the
property tests prove the two agree. Layout: docs/design.md, "Wire format".

Every way a frame can be wrong ends in one exception, `MalformedPacket`, whose `reason` says what
was wrong, so the agent can count and drop such frames with a single `except`.
"""
from __future__ import annotations

import struct
from dataclasses import fields

from wire import constants
from wire.packets import DataPacket, Nack, Packet, Probe, ProbeReply, Sack

__all__ = ["FrameWriter", "MalformedPacket", "encode", "decode"]


class MalformedPacket(ValueError):
    """A received frame that is not a well-formed MRC packet; `reason` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


# Eth(dst, src, type) IPv6(ver|tc|flow, plen, nh, hlim, src, dst) UDP(sport, dport, len, csum)
# BTH(opcode, SE|M|pad|tver, pkey, resv|qp, A|resv|psn)
_PREFIX_FMT = "!6s6sH" "IHBB16s16s" "HHHH" "BBHII"
_PREFIX = struct.Struct(_PREFIX_FMT)
# ... RETH(va, rkey, dma length) MRCH(flags, resv, msg id, msg len, tsval)
_DATA = struct.Struct(_PREFIX_FMT + "QII" "BBHII")
_ETH = struct.Struct("!6s6sH")
_DATA_OUT = struct.Struct("!" + _DATA.format[1 + len("6s6sH"):])     # _DATA without the Ethernet header
_SACK = struct.Struct(_PREFIX_FMT + "IIQIBB2xI")
_NACK = struct.Struct(_PREFIX_FMT + "IIIB3xI")
_PROBE = struct.Struct(_PREFIX_FMT + "II")
_PROBE_REPLY = struct.Struct(_PREFIX_FMT + "III")

# Decoding reads only what it needs: the fields to check, then the fields of the packet object.
_CHECK = struct.Struct("!12xHIHB35xHH2xBB")      # ethertype, IPv6 word, plen, nh, dport, UDP len, opcode, BTH flags
_DATA_IN = struct.Struct("!14xI4x16s16sH10xIIQIIBxHII")
_SACK_IN = struct.Struct("!14xI4x16s16sH10xI4xIIQIBB2xI")

assert _CHECK.size == constants.BTH_OFFSET + 2
assert _DATA_IN.size == constants.DATA_HEADERS_LEN and _SACK_IN.size == constants.RETH_OFFSET + constants.SACK_LEN
assert _PREFIX.size == constants.RETH_OFFSET
assert _DATA.size == constants.DATA_HEADERS_LEN
assert _SACK.size == constants.RETH_OFFSET + constants.SACK_LEN
assert _NACK.size == constants.RETH_OFFSET + constants.NACK_LEN
assert _PROBE.size == constants.RETH_OFFSET + constants.PROBE_LEN
assert _PROBE_REPLY.size == constants.RETH_OFFSET + constants.PROBE_REPLY_LEN

_IP6_VERSION_WORD = 6 << 28
_BTH_FLAGS = constants.BTH_TVER          # SE = 0, M = 0, pad count = 0, tver in the low 4 bits
_PSN_MASK = 0xFFFFFF
_QP_MASK = 0xFFFFFF
_ACK_REQ_BIT = 1 << 31
_ICRC = bytes(constants.ICRC_LEN)
_CONTROL_FRAME_LEN = {
    constants.OP_SACK: _SACK.size,
    constants.OP_NACK: _NACK.size,
    constants.OP_PROBE: _PROBE.size,
    constants.OP_PROBE_REPLY: _PROBE_REPLY.size,
}


def _ip_word(dscp: int, ecn: int, ev: int) -> int:
    """First 32-bit word of the IPv6 header: version, traffic class, flow label (EV >> 16)."""
    return _IP6_VERSION_WORD | (((dscp << 2) | ecn) << 20) | ((ev >> 16) & 0xFFFF)


# --- encoding ------------------------------------------------------------------------------

def _check_length(p: DataPacket, n: int) -> None:
    """Refuse an untrimmed data packet whose RETH DMA length is not its `n` payload bytes: the
    decoder refuses such a frame, and `wire.packets.wire_size` counts the length field."""
    if p.length != n:
        raise ValueError(f"DataPacket psn {p.psn}: RETH DMA length {p.length} but {n} payload bytes")


def _encode_data(p: DataPacket, src_mac: bytes, dst_mac: bytes) -> bytes:
    payload = p.payload
    if p.flags & constants.MRCH_FLAG_TRIMMED:
        if payload:
            raise ValueError("a trimmed DataPacket must have an empty payload")
        udp_len = constants.TRIMMED_UDP_LEN
    else:
        _check_length(p, len(payload))
        udp_len = constants.TRIMMED_UDP_LEN + len(payload) + constants.ICRC_LEN
    ev = p.ev
    header = _DATA.pack(
        dst_mac, src_mac, constants.ETHERTYPE_IPV6,
        _ip_word(p.dscp, p.ecn, ev), udp_len, constants.IPPROTO_UDP, constants.IPV6_HOP_LIMIT, p.src, p.dst,
        ev & 0xFFFF, constants.ROCEV2_UDP_PORT, udp_len, 0,
        constants.OP_RC_WRITE_ONLY, _BTH_FLAGS, constants.BTH_PKEY_DEFAULT, p.qp & _QP_MASK,
        (_ACK_REQ_BIT if p.ack_req else 0) | (p.psn & _PSN_MASK),
        p.va, p.rkey, p.length,
        p.flags, 0, p.msg_id, p.msg_len, p.tsval)
    if udp_len == constants.TRIMMED_UDP_LEN:
        return header
    return b"".join((header, payload, _ICRC))


def _control_prefix(p, opcode: int, psn: int, body_len: int, src_mac: bytes, dst_mac: bytes) -> tuple:
    udp_len = constants.UDP_LEN + constants.BTH_LEN + body_len
    ev = p.ev
    return (dst_mac, src_mac, constants.ETHERTYPE_IPV6,
            _ip_word(p.dscp, p.ecn, ev), udp_len, constants.IPPROTO_UDP, constants.IPV6_HOP_LIMIT, p.src, p.dst,
            ev & 0xFFFF, constants.ROCEV2_UDP_PORT, udp_len, 0,
            opcode, _BTH_FLAGS, constants.BTH_PKEY_DEFAULT, p.qp & _QP_MASK, psn & _PSN_MASK)


def _encode_sack(p: Sack, src_mac: bytes, dst_mac: bytes) -> bytes:
    prefix = _control_prefix(p, constants.OP_SACK, p.cum_psn, constants.SACK_LEN, src_mac, dst_mac)
    flags = constants.SACK_FLAG_ECN_ECHO if p.ecn_echo else 0
    return _SACK.pack(*prefix, p.cum_psn, p.sack_base, p.bitmap, p.ev_echo, flags, p.window_penalty, p.ts_echo)


def _encode_nack(p: Nack, src_mac: bytes, dst_mac: bytes) -> bytes:
    prefix = _control_prefix(p, constants.OP_NACK, p.psn, constants.NACK_LEN, src_mac, dst_mac)
    return _NACK.pack(*prefix, p.psn, p.cum_psn, p.ev_echo, p.reason, p.ts_echo)


def _encode_probe(p: Probe, src_mac: bytes, dst_mac: bytes) -> bytes:
    prefix = _control_prefix(p, constants.OP_PROBE, 0, constants.PROBE_LEN, src_mac, dst_mac)
    return _PROBE.pack(*prefix, p.probe_id, p.tsval)


def _encode_probe_reply(p: ProbeReply, src_mac: bytes, dst_mac: bytes) -> bytes:
    prefix = _control_prefix(p, constants.OP_PROBE_REPLY, 0, constants.PROBE_REPLY_LEN, src_mac, dst_mac)
    return _PROBE_REPLY.pack(*prefix, p.probe_id, p.ev_echo, p.ts_echo)


_ENCODERS = {
    DataPacket: _encode_data,
    Sack: _encode_sack,
    Nack: _encode_nack,
    Probe: _encode_probe,
    ProbeReply: _encode_probe_reply,
}


def encode(pkt: Packet, src_mac: bytes, dst_mac: bytes) -> bytes:
    """The Ethernet frame carrying `pkt` from NIC `src_mac` to `dst_mac` (6-byte MACs)."""
    try:
        encoder = _ENCODERS[type(pkt)]
    except KeyError:
        raise TypeError(f"cannot encode {type(pkt).__name__}: not an MRC packet object") from None
    return encoder(pkt, src_mac, dst_mac)


class FrameWriter:
    """Encodes packets from one NIC to one neighbour MAC into a reusable buffer (the agent's send path).

    The Ethernet header is written once; each `write` packs the rest of the headers with
    `pack_into`, copies the payload behind them and returns a memoryview of the frame, valid until
    the next `write`. The bytes are exactly those of `encode(pkt, src_mac, dst_mac)`.
    """

    def __init__(self, src_mac: bytes, dst_mac: bytes, max_payload: int = 9000) -> None:
        self._buf = bytearray(constants.DATA_HEADERS_LEN + max_payload + constants.ICRC_LEN)
        self._view = memoryview(self._buf)
        self._max_payload = max_payload
        self._src_mac, self._dst_mac = src_mac, dst_mac
        _ETH.pack_into(self._buf, 0, dst_mac, src_mac, constants.ETHERTYPE_IPV6)

    def write(self, p: Packet) -> memoryview | bytes:
        """The frame of `p` (a view into the buffer for data packets, bytes for control packets)."""
        if type(p) is not DataPacket:
            return encode(p, self._src_mac, self._dst_mac)
        payload = p.payload
        n = len(payload)
        if p.flags & constants.MRCH_FLAG_TRIMMED:
            if n:
                raise ValueError("a trimmed DataPacket must have an empty payload")
            udp_len = constants.TRIMMED_UDP_LEN
        elif n > self._max_payload:
            raise ValueError(f"payload of {n} bytes is larger than this writer's {self._max_payload}")
        else:
            _check_length(p, n)
            udp_len = constants.TRIMMED_UDP_LEN + n + constants.ICRC_LEN
        ev = p.ev
        buf = self._buf
        _DATA_OUT.pack_into(
            buf, constants.ETH_LEN,
            _ip_word(p.dscp, p.ecn, ev), udp_len, constants.IPPROTO_UDP, constants.IPV6_HOP_LIMIT, p.src, p.dst,
            ev & 0xFFFF, constants.ROCEV2_UDP_PORT, udp_len, 0,
            constants.OP_RC_WRITE_ONLY, _BTH_FLAGS, constants.BTH_PKEY_DEFAULT, p.qp & _QP_MASK,
            (_ACK_REQ_BIT if p.ack_req else 0) | (p.psn & _PSN_MASK),
            p.va, p.rkey, p.length, p.flags, 0, p.msg_id, p.msg_len, p.tsval)
        if udp_len == constants.TRIMMED_UDP_LEN:
            return self._view[:constants.DATA_HEADERS_LEN]
        end = constants.DATA_HEADERS_LEN + n
        buf[constants.DATA_HEADERS_LEN:end] = payload
        buf[end:end + constants.ICRC_LEN] = _ICRC
        return self._view[:end + constants.ICRC_LEN]


# --- decoding ------------------------------------------------------------------------------

# The decoders build packet objects positionally (faster than keywords on the hot path); these
# are the field orders they rely on, checked against wire.packets at import.
_FIELD_ORDER = {
    DataPacket: ("src", "dst", "ev", "qp", "psn", "va", "rkey", "length", "msg_id", "msg_len", "tsval",
                 "payload", "flags", "dscp", "ecn", "ack_req"),
    Sack: ("src", "dst", "ev", "qp", "cum_psn", "sack_base", "bitmap", "ev_echo", "ts_echo", "ecn_echo",
           "window_penalty", "dscp", "ecn"),
}
for _cls, _order in _FIELD_ORDER.items():
    assert tuple(f.name for f in fields(_cls)) == _order, f"wire.packets.{_cls.__name__} fields changed"


def _traffic_class(ip_word: int) -> tuple[int, int]:
    tc = (ip_word >> 20) & 0xFF
    return tc >> 2, tc & 0x3


def _decode_data(frame, n: int) -> DataPacket:
    if n < constants.DATA_HEADERS_LEN:
        raise MalformedPacket(f"data packet of {n} bytes is shorter than its {constants.DATA_HEADERS_LEN} bytes "
                              "of headers")
    (ip_word, src, dst, sport, qp_word, psn_word, va, rkey, length, flags, msg_id, msg_len,
     tsval) = _DATA_IN.unpack_from(frame, 0)
    if flags & constants.MRCH_FLAG_TRIMMED:
        if n != constants.DATA_HEADERS_LEN:
            raise MalformedPacket(f"trimmed data packet is {n} bytes, not {constants.DATA_HEADERS_LEN}")
        payload = b""
    else:
        end = n - constants.ICRC_LEN
        if end < constants.DATA_HEADERS_LEN:
            raise MalformedPacket("untrimmed data packet without room for its ICRC")
        payload = bytes(frame[constants.DATA_HEADERS_LEN:end])
        if len(payload) != length:
            raise MalformedPacket(f"RETH DMA length {length} but the packet carries {len(payload)} payload bytes")
    tc = (ip_word >> 20) & 0xFF
    return DataPacket(src, dst, ((ip_word & 0xFFFF) << 16) | sport, qp_word & _QP_MASK,
                      psn_word & _PSN_MASK, va, rkey, length, msg_id, msg_len, tsval, payload, flags,
                      tc >> 2, tc & 0x3, bool(psn_word & _ACK_REQ_BIT))


def _decode_sack(frame) -> Sack:
    (ip_word, src, dst, sport, qp_word, cum_psn, sack_base, bitmap, ev_echo, flags, penalty,
     ts_echo) = _SACK_IN.unpack_from(frame, 0)
    tc = (ip_word >> 20) & 0xFF
    return Sack(src, dst, ((ip_word & 0xFFFF) << 16) | sport, qp_word & _QP_MASK, cum_psn, sack_base,
                bitmap, ev_echo, ts_echo, bool(flags & constants.SACK_FLAG_ECN_ECHO), penalty, tc >> 2, tc & 0x3)


def _decode_nack(frame) -> Nack:
    (_, _, _, ip_word, _, _, _, src, dst, sport, _, _, _, _, _, _, qp_word, _,
     psn, cum_psn, ev_echo, reason, ts_echo) = _NACK.unpack_from(frame, 0)
    dscp, ecn = _traffic_class(ip_word)
    return Nack(src=src, dst=dst, ev=((ip_word & 0xFFFF) << 16) | sport, qp=qp_word & _QP_MASK,
                psn=psn, cum_psn=cum_psn, reason=reason, ev_echo=ev_echo, ts_echo=ts_echo,
                dscp=dscp, ecn=ecn)


def _decode_probe(frame) -> Probe:
    (_, _, _, ip_word, _, _, _, src, dst, sport, _, _, _, _, _, _, qp_word, _,
     probe_id, tsval) = _PROBE.unpack_from(frame, 0)
    dscp, ecn = _traffic_class(ip_word)
    return Probe(src=src, dst=dst, ev=((ip_word & 0xFFFF) << 16) | sport, qp=qp_word & _QP_MASK,
                 probe_id=probe_id, tsval=tsval, dscp=dscp, ecn=ecn)


def _decode_probe_reply(frame) -> ProbeReply:
    (_, _, _, ip_word, _, _, _, src, dst, sport, _, _, _, _, _, _, qp_word, _,
     probe_id, ev_echo, ts_echo) = _PROBE_REPLY.unpack_from(frame, 0)
    dscp, ecn = _traffic_class(ip_word)
    return ProbeReply(src=src, dst=dst, ev=((ip_word & 0xFFFF) << 16) | sport,
                      qp=qp_word & _QP_MASK, probe_id=probe_id, ev_echo=ev_echo,
                      ts_echo=ts_echo, dscp=dscp, ecn=ecn)


_CONTROL_DECODERS = {
    constants.OP_SACK: _decode_sack,
    constants.OP_NACK: _decode_nack,
    constants.OP_PROBE: _decode_probe,
    constants.OP_PROBE_REPLY: _decode_probe_reply,
}


def decode(frame: bytes | bytearray | memoryview) -> Packet:
    """The packet object carried by one received Ethernet frame.

    Raises MalformedPacket for anything that is not a well-formed MRC packet: a short frame,
    another ethertype, IPv6 version or next header, another UDP port, IPv6/UDP lengths that
    disagree with the frame length, an unknown BTH opcode or version, or a header whose own
    length fields disagree with what the frame carries.
    """
    n = len(frame)
    if n < constants.RETH_OFFSET:
        raise MalformedPacket(f"frame of {n} bytes is shorter than Eth/IPv6/UDP/BTH ({constants.RETH_OFFSET} bytes)")
    ethertype, ip_word, plen, next_header, dport, udp_len, opcode, bth_flags = _CHECK.unpack_from(frame, 0)
    if ethertype != constants.ETHERTYPE_IPV6:
        raise MalformedPacket(f"ethertype 0x{ethertype:04x} is not IPv6")
    if ip_word >> 28 != 6:
        raise MalformedPacket(f"IP version {ip_word >> 28} is not 6")
    if next_header != constants.IPPROTO_UDP:
        raise MalformedPacket(f"IPv6 next header {next_header} is not UDP")
    if plen != n - constants.UDP_OFFSET:
        raise MalformedPacket(f"IPv6 payload length {plen} disagrees with the {n}-byte frame")
    if udp_len != plen:
        raise MalformedPacket(f"UDP length {udp_len} disagrees with IPv6 payload length {plen}")
    if dport != constants.ROCEV2_UDP_PORT:
        raise MalformedPacket(f"UDP destination port {dport} is not {constants.ROCEV2_UDP_PORT}")
    if bth_flags & 0x0F != constants.BTH_TVER:
        raise MalformedPacket(f"BTH transport version {bth_flags & 0x0F} is not {constants.BTH_TVER}")
    if opcode == constants.OP_RC_WRITE_ONLY:
        return _decode_data(frame, n)
    decoder = _CONTROL_DECODERS.get(opcode)
    if decoder is None:
        raise MalformedPacket(f"unknown BTH opcode 0x{opcode:02x}")
    if n != _CONTROL_FRAME_LEN[opcode]:
        raise MalformedPacket(f"control packet (opcode 0x{opcode:02x}) of {n} bytes, expected {_CONTROL_FRAME_LEN[opcode]}")
    return decoder(frame)
