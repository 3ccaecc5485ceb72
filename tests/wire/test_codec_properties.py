"""Property tests: the fast codec and the Scapy layers describe the same bytes.

For random packets of every type: codec bytes == Scapy bytes, decode(encode(p)) == p, Scapy's
dissection of the codec's bytes gives p back; random and mutated frames never raise anything
but MalformedPacket.
"""
from __future__ import annotations

import random

import pytest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scapy.layers.l2 import Ether

from wire import codec
from wire import constants
from wire import headers
from wire.packets import DataPacket, Nack, Probe, ProbeReply, Sack, wire_size

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None,
                             suppress_health_check=[HealthCheck.too_slow])

u8, u16, u32, u64 = (st.integers(0, 2**b - 1) for b in (8, 16, 32, 64))
u24 = st.integers(0, 2**24 - 1)
addr = st.binary(min_size=16, max_size=16)
mac = st.binary(min_size=6, max_size=6)
dscp = st.integers(0, 63)
ecn = st.integers(0, 3)


@st.composite
def data_packets(draw):
    trimmed = draw(st.booleans())
    payload = b"" if trimmed else draw(st.binary(max_size=1500))
    flags = draw(u8)
    flags = flags | constants.MRCH_FLAG_TRIMMED if trimmed else flags & ~constants.MRCH_FLAG_TRIMMED
    length = draw(u32) if trimmed else len(payload)
    return DataPacket(src=draw(addr), dst=draw(addr), ev=draw(u32), qp=draw(u24), psn=draw(u24),
                      va=draw(u64), rkey=draw(u32), length=length, msg_id=draw(u16),
                      msg_len=draw(u32), tsval=draw(u32), payload=payload, flags=flags,
                      dscp=draw(dscp), ecn=draw(ecn), ack_req=draw(st.booleans()))


sacks = st.builds(Sack, src=addr, dst=addr, ev=u32, qp=u24, cum_psn=u32, sack_base=u32,
                  bitmap=u64, ev_echo=u32, ts_echo=u32, ecn_echo=st.booleans(), dscp=dscp, ecn=ecn)
nacks = st.builds(Nack, src=addr, dst=addr, ev=u32, qp=u24, psn=u24, cum_psn=u32, reason=u8,
                  ev_echo=u32, ts_echo=u32, dscp=dscp, ecn=ecn)
probes = st.builds(Probe, src=addr, dst=addr, ev=u32, qp=u24, probe_id=u32, tsval=u32,
                   dscp=dscp, ecn=ecn)
probe_replies = st.builds(ProbeReply, src=addr, dst=addr, ev=u32, qp=u24, probe_id=u32,
                          ev_echo=u32, ts_echo=u32, dscp=dscp, ecn=ecn)
any_packet = st.one_of(data_packets(), sacks, nacks, probes, probe_replies)


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(pkt=any_packet, src_mac=mac, dst_mac=mac)
def test_codec_bytes_equal_scapy_bytes(pkt, src_mac, dst_mac):
    frame = codec.encode(pkt, src_mac, dst_mac)
    assert frame == bytes(headers.to_scapy(pkt, src_mac, dst_mac))
    assert len(frame) == wire_size(pkt)


@PROPERTY_SETTINGS
@given(pkt=any_packet, src_mac=mac, dst_mac=mac)
def test_decode_inverts_encode(pkt, src_mac, dst_mac):
    assert codec.decode(codec.encode(pkt, src_mac, dst_mac)) == pkt


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(pkt=any_packet, src_mac=mac, dst_mac=mac)
def test_scapy_dissects_codec_frames(pkt, src_mac, dst_mac):
    frame = Ether(codec.encode(pkt, src_mac, dst_mac))
    assert headers.from_scapy(frame) == pkt
    assert frame.src == ":".join(f"{b:02x}" for b in src_mac)


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(frame=st.binary(max_size=300))
def test_random_frames_raise_only_malformed(frame):
    try:
        codec.decode(frame)
    except codec.MalformedPacket:
        pass


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(pkt=any_packet, seed=st.integers(0, 2**32 - 1), memview=st.booleans())
def test_mutated_frames_raise_only_malformed(pkt, seed, memview):
    rng = random.Random(seed)
    frame = bytearray(codec.encode(pkt, b"\x02" * 6, b"\x04" * 6))
    action = rng.randrange(4)
    if action == 0:                                   # flip a few bytes anywhere
        for _ in range(rng.randint(1, 4)):
            frame[rng.randrange(len(frame))] = rng.randrange(256)
    elif action == 1:                                 # truncate
        del frame[rng.randrange(len(frame)):]
    elif action == 2:                                 # append garbage
        frame += bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
    else:                                             # corrupt a header byte (first 102)
        frame[rng.randrange(min(len(frame), constants.DATA_HEADERS_LEN))] ^= 1 << rng.randrange(8)
    data = memoryview(bytes(frame)) if memview else bytes(frame)
    try:
        decoded = codec.decode(data)
    except codec.MalformedPacket:
        return
    # Whatever decodes must be a packet the codec can write out again.
    codec.encode(decoded, b"\x02" * 6, b"\x04" * 6)


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(pkts=st.lists(any_packet, min_size=1, max_size=6), src_mac=mac, dst_mac=mac)
def test_frame_writer_writes_exactly_the_encoded_bytes(pkts, src_mac, dst_mac):
    writer = codec.FrameWriter(src_mac, dst_mac, max_payload=1500)
    for pkt in pkts:                      # one writer, frames of varying sizes: nothing stale leaks
        assert bytes(writer.write(pkt)) == codec.encode(pkt, src_mac, dst_mac)
