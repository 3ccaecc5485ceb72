"""The fast codec: byte positions of the wire format, trimmed packets, every malformed case."""
from __future__ import annotations

import ipaddress
import struct

import pytest

from wire import codec
from wire import constants
from wire.codec import MalformedPacket
from wire.packets import DataPacket, Nack, Probe, ProbeReply, Sack

SRC = ipaddress.IPv6Address("fc00:1:1003::").packed
DST = ipaddress.IPv6Address("fc00:1:100:101:1002::").packed
SRC_MAC = bytes.fromhex("020001000003")
DST_MAC = bytes.fromhex("020001000002")


def data_packet(payload=b"x" * 1024, **overrides) -> DataPacket:
    fields = dict(src=SRC, dst=DST, ev=0xABCD1234, qp=0x123456, psn=0xFEDCBA, va=0x10_0000_0400,
                  rkey=0xCAFE, length=len(payload), msg_id=77, msg_len=65536, tsval=123456,
                  payload=payload)
    fields.update(overrides)
    return DataPacket(**fields)


def control_packets():
    return [
        Sack(src=SRC, dst=DST, ev=7, qp=9, cum_psn=100, sack_base=100, bitmap=0b1011,
             ev_echo=0xABCD1234, ts_echo=5, ecn_echo=True, window_penalty=219),
        Nack(src=SRC, dst=DST, ev=7, qp=9, psn=101, cum_psn=100, reason=constants.NACK_TRIMMED_LASTHOP,
             ev_echo=0xABCD1234, ts_echo=5),
        Probe(src=SRC, dst=DST, ev=7, qp=9, probe_id=3, tsval=11),
        ProbeReply(src=SRC, dst=DST, ev=7, qp=9, probe_id=3, ev_echo=8, ts_echo=11),
    ]


def test_data_frame_fields_sit_where_the_design_says():
    frame = codec.encode(data_packet(ack_req=True), SRC_MAC, DST_MAC)
    assert len(frame) == constants.DATA_HEADERS_LEN + 1024 + constants.ICRC_LEN
    assert frame[0:6] == DST_MAC and frame[6:12] == SRC_MAC
    assert struct.unpack_from("!H", frame, 12)[0] == constants.ETHERTYPE_IPV6
    word, plen, nh, hlim = struct.unpack_from("!IHBB", frame, constants.IPV6_OFFSET)
    assert word >> 28 == 6
    assert (word >> 20) & 0xFF == (constants.DSCP_TRIMMABLE << 2) | constants.ECN_ECT0
    assert word & 0xFFFFF == 0xABCD                     # flow label = EV >> 16
    assert (plen, nh, hlim) == (len(frame) - constants.UDP_OFFSET, constants.IPPROTO_UDP, constants.IPV6_HOP_LIMIT)
    assert frame[22:38] == SRC and frame[38:54] == DST
    sport, dport, ulen, csum = struct.unpack_from("!HHHH", frame, constants.UDP_OFFSET)
    assert (sport, dport, ulen, csum) == (0x1234, constants.ROCEV2_UDP_PORT, plen, 0)
    opcode, flags, pkey, qp_word, psn_word = struct.unpack_from("!BBHII", frame, constants.BTH_OFFSET)
    assert (opcode, flags, pkey) == (constants.OP_RC_WRITE_ONLY, 0, constants.BTH_PKEY_DEFAULT)
    assert qp_word == 0x123456 and psn_word == (1 << 31) | 0xFEDCBA
    assert struct.unpack_from("!QII", frame, constants.RETH_OFFSET) == (0x10_0000_0400, 0xCAFE, 1024)
    assert struct.unpack_from("!BBHII", frame, constants.MRCH_OFFSET) == (0, 0, 77, 65536, 123456)
    assert frame[constants.DATA_HEADERS_LEN:-constants.ICRC_LEN] == b"x" * 1024
    assert frame[-constants.ICRC_LEN:] == bytes(constants.ICRC_LEN)


def switch_trim(frame: bytes) -> bytes:
    """What a switch does to a trimmable packet (docs/design.md, pipeline step 7)."""
    cut = bytearray(frame[:constants.DATA_HEADERS_LEN])
    struct.pack_into("!H", cut, constants.IPV6_OFFSET + 4, constants.TRIMMED_UDP_LEN)
    struct.pack_into("!H", cut, constants.UDP_OFFSET + 4, constants.TRIMMED_UDP_LEN)
    cut[constants.MRCH_OFFSET] |= constants.MRCH_FLAG_TRIMMED
    cut[constants.IPV6_OFFSET] = (cut[constants.IPV6_OFFSET] & 0xF0) | (constants.DSCP_TRIMMED >> 2)
    cut[constants.IPV6_OFFSET + 1] = (cut[constants.IPV6_OFFSET + 1] & 0x0F) | ((constants.DSCP_TRIMMED & 0x3) << 6)
    return bytes(cut)


def test_a_switch_trimmed_packet_decodes_with_empty_payload_and_kept_length():
    trimmed = switch_trim(codec.encode(data_packet(), SRC_MAC, DST_MAC))
    assert len(trimmed) == 102
    pkt = codec.decode(trimmed)
    assert pkt.trimmed and pkt.payload == b""
    assert pkt.length == 1024 and pkt.psn == 0xFEDCBA and pkt.dscp == constants.DSCP_TRIMMED
    assert codec.encode(pkt, SRC_MAC, DST_MAC) == trimmed


def test_trimmed_packet_object_encodes_to_102_bytes_and_rejects_payload():
    pkt = data_packet(payload=b"", length=4096, flags=constants.MRCH_FLAG_TRIMMED)
    assert len(codec.encode(pkt, SRC_MAC, DST_MAC)) == constants.DATA_HEADERS_LEN
    with pytest.raises(ValueError):
        codec.encode(data_packet(flags=constants.MRCH_FLAG_TRIMMED), SRC_MAC, DST_MAC)


def test_every_control_packet_round_trips_with_its_length():
    sizes = {Sack: constants.SACK_LEN, Nack: constants.NACK_LEN, Probe: constants.PROBE_LEN,
             ProbeReply: constants.PROBE_REPLY_LEN}
    for pkt in control_packets():
        frame = codec.encode(pkt, SRC_MAC, DST_MAC)
        assert len(frame) == constants.RETH_OFFSET + sizes[type(pkt)]
        assert codec.decode(frame) == pkt
        assert codec.decode(memoryview(frame)) == pkt
        assert codec.decode(bytearray(frame)) == pkt


def test_sack_and_nack_put_their_psn_in_the_bth():
    sack, nack = control_packets()[:2]
    assert struct.unpack_from("!I", codec.encode(sack, SRC_MAC, DST_MAC), constants.BTH_OFFSET + 8)[0] == 100
    assert struct.unpack_from("!I", codec.encode(nack, SRC_MAC, DST_MAC), constants.BTH_OFFSET + 8)[0] == 101


def test_encode_rejects_non_packets():
    with pytest.raises(TypeError):
        codec.encode(object(), SRC_MAC, DST_MAC)


def _patched(frame: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(frame)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


GOOD_DATA = codec.encode(data_packet(payload=b"abcdefgh"), SRC_MAC, DST_MAC)
GOOD_SACK = codec.encode(control_packets()[0], SRC_MAC, DST_MAC)

MALFORMED = {
    "empty": b"",
    "short": GOOD_DATA[:60],
    "ethertype ipv4": _patched(GOOD_DATA, 12, "!H", 0x0800),
    "ip version 4": _patched(GOOD_DATA, constants.IPV6_OFFSET, "!B", 0x40),
    "next header tcp": _patched(GOOD_DATA, constants.IPV6_OFFSET + 6, "!B", 6),
    "next header icmpv6": _patched(GOOD_DATA, constants.IPV6_OFFSET + 6, "!B", 58),
    "payload length too big": _patched(GOOD_DATA, constants.IPV6_OFFSET + 4, "!H", len(GOOD_DATA)),
    "udp length wrong": _patched(GOOD_DATA, constants.UDP_OFFSET + 4, "!H", 40),
    "udp port 4792": _patched(GOOD_DATA, constants.UDP_OFFSET + 2, "!H", 4792),
    "bth version 1": _patched(GOOD_DATA, constants.BTH_OFFSET + 1, "!B", 1),
    "unknown opcode": _patched(GOOD_DATA, constants.BTH_OFFSET, "!B", 0x04),
    "trailing bytes": GOOD_DATA + b"\0\0",
    "reth length disagrees": _patched(GOOD_DATA, constants.RETH_OFFSET + 12, "!I", 9),
    "trimmed flag on full packet": _patched(GOOD_DATA, constants.MRCH_OFFSET, "!B", constants.MRCH_FLAG_TRIMMED),
    "sack too long": _patched(_patched(GOOD_SACK + b"\0" * 4, constants.IPV6_OFFSET + 4, "!H", 52),
                              constants.UDP_OFFSET + 4, "!H", 52),
    "sack opcode on data frame": _patched(GOOD_DATA, constants.BTH_OFFSET, "!B", constants.OP_SACK),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_frames_raise_malformed_packet_with_reason(name):
    with pytest.raises(MalformedPacket) as err:
        codec.decode(MALFORMED[name])
    assert err.value.reason


def test_untrimmed_data_without_icrc_is_malformed():
    headers_only = _patched(_patched(GOOD_DATA[:constants.DATA_HEADERS_LEN], constants.IPV6_OFFSET + 4, "!H", 48),
                            constants.UDP_OFFSET + 4, "!H", 48)
    with pytest.raises(MalformedPacket, match="ICRC"):
        codec.decode(headers_only)


def test_zero_length_payload_is_a_valid_data_packet():
    pkt = data_packet(payload=b"")
    frame = codec.encode(pkt, SRC_MAC, DST_MAC)
    assert len(frame) == constants.DATA_HEADERS_LEN + constants.ICRC_LEN
    assert codec.decode(frame) == pkt


def test_frame_writer_rejects_oversized_and_trimmed_with_payload():
    writer = codec.FrameWriter(SRC_MAC, DST_MAC, max_payload=512)
    with pytest.raises(ValueError, match="larger"):
        writer.write(data_packet(payload=b"x" * 513))
    with pytest.raises(ValueError, match="trimmed"):
        writer.write(data_packet(flags=constants.MRCH_FLAG_TRIMMED))
    assert len(writer.write(data_packet(payload=b"x" * 512))) == constants.DATA_HEADERS_LEN + 512 + constants.ICRC_LEN


def test_a_data_packet_whose_dma_length_is_not_its_payload_is_refused_and_wire_size_counts_the_field():
    """Both encoders refuse an untrimmed packet whose RETH DMA length disagrees with its payload
    (the decoder refuses such a frame too), so `wire_size`, which reads the length field, is the
    frame's length for every packet they write, trimmed or not."""
    from wire.packets import wire_size
    writer = codec.FrameWriter(SRC_MAC, DST_MAC, max_payload=2048)
    for bad in (data_packet(length=1023), data_packet(payload=memoryview(b"y" * 100), length=101)):
        with pytest.raises(ValueError, match=f"psn {bad.psn}: RETH DMA length {bad.length} but {len(bad.payload)} payload bytes"):
            codec.encode(bad, SRC_MAC, DST_MAC)
        with pytest.raises(ValueError, match="RETH DMA length"):
            writer.write(bad)
    for pkt in (data_packet(), data_packet(payload=b""), data_packet(payload=memoryview(b"z" * 700)),
                data_packet(payload=b"", length=4096, flags=constants.MRCH_FLAG_TRIMMED)):
        assert wire_size(pkt) == len(codec.encode(pkt, SRC_MAC, DST_MAC)) == len(writer.write(pkt))
