"""Smoke test of p4/mrc.p4 on BMv2: pipeline push, uSID shift, ECMP, trimming, ECN, faults, drops.

One simple_switch_grpc with four ports (tests/p4/bmv2_harness.py): packets enter on port 1;
port 2 faces the fabric, port 3 faces a host, port 4 is faulted. Queue state is set by writing
the queue estimate register over thrift, so each case is exact and independent of timing.
The full per-case comparison with the reference model is the conformance suite's job.
"""
from __future__ import annotations

import ipaddress
import os
import subprocess

import pytest

from tests.p4 import bmv2_harness
from pipeline_contract.entries import TableEntry
from wire import codec
from wire import constants
from wire.packets import DataPacket, Sack

pytestmark = [pytest.mark.integration]

INGRESS, FABRIC, HOST, FAULTED, PEER_DOWN = 1, 2, 3, 4, 5
TRIM_AT, ECN_AT = 5, 3
SRC_MAC, DST_MAC = bytes.fromhex("020001000000"), bytes.fromhex("020001000001")
SRC = ipaddress.IPv6Address("fc00:1:1000::").packed
SWITCH_PREFIX = 0xFC000001_0100            # locator fc00:1 + this switch's uSID 0x0100
QUEUED_LOW = "MrcIngress.queued_low"


def addr(text: str) -> int:
    return int(ipaddress.IPv6Address(text))


def route(prefix: str, length: int, action: str, **params) -> TableEntry:
    return TableEntry("MrcIngress.routing", {"dst_addr": (addr(prefix), length)}, action, params)


ENTRIES = [
    TableEntry("MrcIngress.usid_local", {"dst_usid_prefix": SWITCH_PREFIX}, "MrcIngress.usid_shift"),
    route("fc00:1:1001::", 48, "MrcIngress.forward", port=FABRIC),
    route("fc00:1:1002::", 48, "MrcIngress.forward", port=HOST),
    route("fc00:1:1003::", 48, "MrcIngress.forward", port=FAULTED),
    route("fc00:1:1004::", 48, "MrcIngress.ecmp_select", group=7, size=2),
    route("fc00:1:1005::", 48, "MrcIngress.forward", port=PEER_DOWN),
    TableEntry("MrcIngress.ecmp_member", {"group": 7, "index": 0}, "MrcIngress.forward", {"port": FABRIC}),
    TableEntry("MrcIngress.ecmp_member", {"group": 7, "index": 1}, "MrcIngress.forward", {"port": HOST}),
    TableEntry("MrcIngress.port_config", {"port": FABRIC}, "MrcIngress.set_port_config",
               {"trim_threshold": TRIM_AT, "ecn_threshold": ECN_AT, "host_facing": 0, "ecn_max_threshold": ECN_AT}),
    TableEntry("MrcIngress.port_config", {"port": HOST}, "MrcIngress.set_port_config",
               {"trim_threshold": TRIM_AT, "ecn_threshold": ECN_AT, "host_facing": 1, "ecn_max_threshold": ECN_AT}),
    TableEntry("MrcIngress.port_fault", {"port": FAULTED}, "MrcIngress.fault_drop"),
]


@pytest.fixture(scope="module")
def switch():
    reason = bmv2_harness.missing_requirements()
    if reason:
        pytest.skip(reason)
    with bmv2_harness.Bmv2VethLab(f"t{os.getpid() % 1000:03d}", num_ports=5) as sw:
        client = sw.connect()
        client.insert(ENTRIES)
        sw.client = client
        yield sw


def data_packet(dst: str, payload: bytes = bytes(range(256)) * 4, **fields) -> DataPacket:
    values = dict(src=SRC, dst=ipaddress.IPv6Address(dst).packed, ev=0x00AB_1234, qp=5, psn=17,
                  va=0x1000, rkey=9, length=len(payload), msg_id=3, msg_len=4096, tsval=123,
                  payload=payload)
    values.update(fields)
    return DataPacket(**values)


def send_and_receive(sw, frame: bytes, out_port: int, timeout: float = 2.0) -> list[bytes]:
    """Frames out of `out_port` after sending `frame` into the ingress port."""
    sw.drain(out_port)
    sw.send(INGRESS, frame)
    return sw.receive(out_port, count=1, timeout=timeout)


def counter(sw, name: str, port: int) -> int:
    return sw.client.read_counter(name, port)[port].packets


def with_queue(sw, port: int, depth: int) -> None:
    sw.register_write(QUEUED_LOW, port, depth)


def crc16_arc(data: bytes) -> int:
    """CRC-16/ARC (BMv2's crc16): poly 0x8005 reflected (0xA001), init 0, no final xor."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def test_crc16_arc_reference_value():
    assert crc16_arc(b"123456789") == 0xBB3D


def test_pipeline_is_installed(switch):
    installed = switch.client.get_p4info()
    assert {t.preamble.name for t in installed.tables} >= {"MrcIngress.routing", "MrcIngress.usid_local"}
    assert len(switch.client.read_table("MrcIngress.routing")) == 5


def test_usid_shift_and_forward(switch):
    with_queue(switch, FABRIC, 0)
    pkt = data_packet("fc00:1:100:1001::")
    out = send_and_receive(switch, codec.encode(pkt, SRC_MAC, DST_MAC), FABRIC)
    assert len(out) == 1, "no packet out of the fabric port"
    got = codec.decode(out[0])
    assert ipaddress.IPv6Address(got.dst) == ipaddress.IPv6Address("fc00:1:1001::")
    assert got.payload == pkt.payload and not got.trimmed
    assert (got.dscp, got.ecn) == (constants.DSCP_TRIMMABLE, constants.ECN_ECT0)


def test_trim_exactly_at_the_threshold(switch):
    frame = codec.encode(data_packet("fc00:1:1001::"), SRC_MAC, DST_MAC)
    before = counter(switch, "MrcIngress.trimmed", FABRIC)
    with_queue(switch, FABRIC, TRIM_AT - 1)
    below = send_and_receive(switch, frame, FABRIC)
    with_queue(switch, FABRIC, TRIM_AT)
    at = send_and_receive(switch, frame, FABRIC)
    assert len(below) == 1 and len(below[0]) == len(frame), "trimmed below the threshold"
    assert len(at) == 1 and len(at[0]) == constants.DATA_HEADERS_LEN, "not trimmed at the threshold"
    trimmed = codec.decode(at[0])          # raises if a length field is wrong
    assert trimmed.trimmed and trimmed.payload == b""
    assert trimmed.dscp == constants.DSCP_TRIMMED
    assert trimmed.length == 1024          # RETH DMA length kept: the receiver knows what was cut
    assert at[0][60:62] == b"\x00\x00"     # UDP checksum
    assert counter(switch, "MrcIngress.trimmed", FABRIC) == before + 1


def test_last_hop_trim_class_and_no_last_hop_ecn(switch):
    frame = codec.encode(data_packet("fc00:1:1002::"), SRC_MAC, DST_MAC)
    with_queue(switch, HOST, TRIM_AT)
    at = send_and_receive(switch, frame, HOST)
    with_queue(switch, HOST, TRIM_AT - 1)
    below = send_and_receive(switch, frame, HOST)
    assert codec.decode(at[0]).dscp == constants.DSCP_TRIMMED_LASTHOP
    assert codec.decode(below[0]).ecn == constants.ECN_ECT0, "ECN marked on the last hop"


def test_ecn_marks_above_its_threshold(switch):
    frame = codec.encode(data_packet("fc00:1:1001::"), SRC_MAC, DST_MAC)
    before = counter(switch, "MrcIngress.ecn_marked", FABRIC)
    with_queue(switch, FABRIC, ECN_AT - 1)
    unmarked = send_and_receive(switch, frame, FABRIC)
    with_queue(switch, FABRIC, ECN_AT)
    marked = send_and_receive(switch, frame, FABRIC)
    assert codec.decode(unmarked[0]).ecn == constants.ECN_ECT0
    assert codec.decode(marked[0]).ecn == constants.ECN_CE and not codec.decode(marked[0]).trimmed
    assert counter(switch, "MrcIngress.ecn_marked", FABRIC) == before + 1


def test_control_and_trimmed_packets_are_never_trimmed(switch):
    sack = Sack(src=SRC, dst=ipaddress.IPv6Address("fc00:1:1001::").packed, ev=1, qp=5, cum_psn=3,
                sack_base=3, bitmap=5, ev_echo=2, ts_echo=4)
    already = data_packet("fc00:1:1001::", payload=b"", length=1024, flags=constants.MRCH_FLAG_TRIMMED,
                          dscp=constants.DSCP_TRIMMED)
    for pkt in (sack, already):
        frame = codec.encode(pkt, SRC_MAC, DST_MAC)
        with_queue(switch, FABRIC, 100)
        out = send_and_receive(switch, frame, FABRIC)
        assert out == [frame], f"{type(pkt).__name__} was changed"


def test_ecmp_member_is_the_crc16_of_the_five_tuple(switch):
    for ev in range(6):
        pkt = data_packet("fc00:1:1004::", ev=ev * 7919)
        tuple_bytes = pkt.src + pkt.dst + bytes([constants.IPPROTO_UDP]) + \
            (pkt.ev & 0xFFFF).to_bytes(2, "big") + constants.ROCEV2_UDP_PORT.to_bytes(2, "big")
        port = (FABRIC, HOST)[crc16_arc(tuple_bytes) % 2]
        with_queue(switch, FABRIC, 0)
        with_queue(switch, HOST, 0)
        out = send_and_receive(switch, codec.encode(pkt, SRC_MAC, DST_MAC), port)
        assert len(out) == 1, f"EV {pkt.ev:#x}: expected on port {port}"


def test_faulted_port_drops_and_counts(switch):
    before = counter(switch, "MrcIngress.fault_drops", FAULTED)
    out = send_and_receive(switch, codec.encode(data_packet("fc00:1:1003::"), SRC_MAC, DST_MAC),
                           FAULTED, timeout=0.5)
    assert out == []
    assert counter(switch, "MrcIngress.fault_drops", FAULTED) == before + 1


def test_no_route_drops_and_counts(switch):
    before = counter(switch, "MrcIngress.no_route_drops", INGRESS)
    switch.send(INGRESS, codec.encode(data_packet("fc00:9::"), SRC_MAC, DST_MAC))
    assert switch.receive(FABRIC, timeout=0.5) == []
    assert counter(switch, "MrcIngress.no_route_drops", INGRESS) == before + 1


def malformed_frames() -> dict[str, bytes]:
    good = codec.encode(data_packet("fc00:1:1001::"), SRC_MAC, DST_MAC)
    bad_version = good[:14] + bytes([0x40 | good[14] & 0x0F]) + good[15:]
    bad_plen = good[:18] + (int.from_bytes(good[18:20], "big") + 1).to_bytes(2, "big") + good[20:]
    bad_udp_len = good[:58] + (int.from_bytes(good[58:60], "big") - 1).to_bytes(2, "big") + good[60:]
    short = good[:80]
    short = short[:18] + (len(short) - 54).to_bytes(2, "big") + short[20:58] + \
        (len(short) - 54).to_bytes(2, "big") + short[60:]   # consistent lengths, cut inside RETH
    not_ipv6 = good[:12] + b"\x08\x00" + good[14:]
    return {"short": short, "bad version": bad_version, "bad payload length": bad_plen,
            "bad udp length": bad_udp_len, "not ipv6": not_ipv6}


def test_malformed_packets_are_dropped_and_counted(switch):
    frames = malformed_frames()
    before = counter(switch, "MrcIngress.malformed_drops", INGRESS)
    switch.drain(FABRIC)
    for frame in frames.values():
        switch.send(INGRESS, frame)
    assert switch.receive(FABRIC, count=1, timeout=0.5, accept=lambda f: True) == []
    assert counter(switch, "MrcIngress.malformed_drops", INGRESS) == before + len(frames)


@pytest.mark.slow
def test_trimmed_headers_overtake_a_rate_limited_queue(switch):
    """With the port slowed to 100 packets/s, a burst overflows the threshold: the headers
    trimmed from its tail leave the port before the data packets queued ahead of them."""
    burst = 12
    switch.set_queue(FABRIC, rate_pps=100, depth=64)
    try:
        with_queue(switch, FABRIC, 0)
        switch.drain(FABRIC)
        for psn in range(burst):
            switch.send(INGRESS, codec.encode(data_packet("fc00:1:1001::", psn=psn), SRC_MAC, DST_MAC))
        out = [codec.decode(f) for f in switch.receive(FABRIC, count=burst, timeout=2 * burst / 100 + 2)]
    finally:
        switch.set_queue(FABRIC, rate_pps=0, depth=64)
    assert len(out) == burst
    order = [("T" if p.trimmed else "D", p.psn) for p in out]
    trimmed = [psn for kind, psn in order if kind == "T"]
    full = [psn for kind, psn in order if kind == "D"]
    assert trimmed and len(full) >= TRIM_AT, order
    assert min(trimmed) > max(full[:TRIM_AT]), order          # the tail of the burst was cut
    first_trim = next(i for i, (kind, _) in enumerate(order) if kind == "T")
    assert any(psn < min(trimmed) for psn in full[first_trim:]), f"no overtaking: {order}"


@pytest.mark.slow
def test_tail_drops_do_not_inflate_the_queue_estimate(switch):
    """Packets BMv2 tail-drops never reach egress; the estimate still returns to the real depth."""
    burst = 30
    switch.set_queue(FABRIC, rate_pps=200, depth=8)
    try:
        with_queue(switch, FABRIC, 0)
        switch.drain(FABRIC)
        frame = codec.encode(data_packet("fc00:1:1001::", payload=bytes(64), dscp=constants.DSCP_NO_TRIM),
                             SRC_MAC, DST_MAC)
        for _ in range(burst):
            switch.send(INGRESS, frame)
        out = switch.receive(FABRIC, count=burst, timeout=1.0)
    finally:
        switch.set_queue(FABRIC, rate_pps=0, depth=64)
    assert len(out) < burst, "no tail drop happened: the case proves nothing"
    assert switch.register_read(QUEUED_LOW, FABRIC) <= 1


def test_a_dead_peer_blackholes_only_its_port(switch):
    """The safe way to fail a BMv2 link: the veth end facing the switch's port goes down."""
    peer = ["ip", "-n", switch.host_ns, "link", "set", switch.host_ifname(PEER_DOWN)]
    before = counter(switch, "MrcEgress.tx", PEER_DOWN)
    subprocess.run(peer + ["down"], check=True)
    try:
        switch.send(INGRESS, codec.encode(data_packet("fc00:1:1005::"), SRC_MAC, DST_MAC))
        with_queue(switch, FABRIC, 0)
        still = send_and_receive(switch, codec.encode(data_packet("fc00:1:1001::"), SRC_MAC, DST_MAC), FABRIC)
    finally:
        subprocess.run(peer + ["up"], check=True)
    assert len(still) == 1, "a dead peer stopped the other ports"
    assert counter(switch, "MrcEgress.tx", PEER_DOWN) == before + 1     # sent into the dead link
