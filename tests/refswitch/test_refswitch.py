"""Unit tests of the reference switch: hash, tables, pipeline, queues, switch core, command line."""
from __future__ import annotations

import argparse
import ipaddress
import json
import random

import pytest
from hypothesis import given, settings, strategies as st

from pipeline_contract.entries import TableEntry
from wire import codec, constants
from wire.packets import DataPacket, Sack
from refswitch import main as switch_main
from pipeline_contract.p4info import P4InfoIndex, load_p4info
from pipeline_contract.ecmp import crc16, ecmp_hash_input, ecmp_index
from refswitch.pipeline import Pipeline
from refswitch.queues import EgressQueues
from refswitch.switch import SwitchCore
from refswitch.tables import TableError, TableStore

MAC_A, MAC_B = bytes.fromhex("020001000000"), bytes.fromhex("020001000001")


def addr(text: str) -> bytes:
    return ipaddress.IPv6Address(text).packed


def prefix(text: str) -> tuple[int, int]:
    net = ipaddress.IPv6Network(text)
    return int(net.network_address), net.prefixlen


def data_frame(dst="fc00:1:1001::", src="fc00:1:1000::", ev=7, payload=1000, dscp=constants.DSCP_TRIMMABLE,
               ecn=constants.ECN_ECT0, flags=0) -> bytes:
    pkt = DataPacket(src=addr(src), dst=addr(dst), ev=ev, qp=1, psn=3, va=0, rkey=1, length=payload,
                     msg_id=1, msg_len=payload, tsval=0, payload=bytes(range(256)) * (payload // 256)
                     + bytes(payload % 256), flags=flags, dscp=dscp, ecn=ecn)
    return codec.encode(pkt, MAC_A, MAC_B)


def route(dst: str, port: int) -> TableEntry:
    return TableEntry("MrcIngress.routing", {"dst_addr": prefix(dst)}, "MrcIngress.forward", {"port": port})


def port_config(port: int, trim: int, ecn: int, host_facing: int = 0, ecn_max: int | None = None) -> TableEntry:
    return TableEntry("MrcIngress.port_config", {"port": port}, "MrcIngress.set_port_config",
                      {"trim_threshold": trim, "ecn_threshold": ecn, "host_facing": host_facing,
                       "ecn_max_threshold": ecn if ecn_max is None else ecn_max})


@pytest.fixture
def tables() -> TableStore:
    return TableStore(P4InfoIndex(load_p4info()))


# --- ECMP hash -----------------------------------------------------------------------------

def test_crc16_is_crc16_arc():
    # CRC-16/ARC check value (poly 0x8005 reflected, init 0, no final xor) = BMv2 HashAlgorithm.crc16
    assert crc16(b"123456789") == 0xBB3D
    assert crc16(b"") == 0


def test_ecmp_hash_covers_37_bytes_in_contract_order():
    src, dst = addr("fc00:1:1000::"), addr("fc00:1:1001::")
    data = ecmp_hash_input(src, dst, 17, 0x1234, 4791)
    assert data == src + dst + bytes([17, 0x12, 0x34, 0x12, 0xB7])
    assert ecmp_index(src, dst, 17, 0x1234, 4791, 5) == crc16(data) % 5
    assert ecmp_index(src, dst, 17, 0x1234, 4791, 0) == 0


# --- tables ----------------------------------------------------------------------------------

def test_lpm_longest_prefix_wins_and_delete_falls_back(tables):
    t = tables.table("MrcIngress.routing")
    tables.insert(route("fc00:1::/32", 1))
    tables.insert(route("fc00:1:1001::/48", 2))
    dst = int(ipaddress.IPv6Address("fc00:1:1001::5"))
    assert t.lookup_lpm(dst) == ("MrcIngress.forward", {"port": 2})
    tables.delete(route("fc00:1:1001::/48", 0))
    assert t.lookup_lpm(dst) == ("MrcIngress.forward", {"port": 1})
    assert t.lookup_lpm(int(ipaddress.IPv6Address("fc00:2::"))) == ("MrcIngress.drop_no_route", {})


@pytest.mark.parametrize("entry, code", [
    (TableEntry("MrcIngress.routing", {"dst_addr": (int(ipaddress.IPv6Address("fc00:1:1001::1")), 48)},
                "MrcIngress.forward", {"port": 1}), "INVALID_ARGUMENT"),          # bits beyond the prefix
    (TableEntry("MrcIngress.routing", {"dst_addr": prefix("fc00::/16")}, "MrcIngress.drop_no_route"),
     "INVALID_ARGUMENT"),                                                          # @defaultonly action
    (TableEntry("MrcIngress.routing", {"dst_addr": prefix("fc00::/16")}, "MrcIngress.forward",
                {"port": 512}), "INVALID_ARGUMENT"),                               # port does not fit 9 bits
    (TableEntry("MrcIngress.routing", {"dst_addr": prefix("fc00::/16")}, "MrcIngress.forward", {}),
     "INVALID_ARGUMENT"),                                                          # missing parameter
    (TableEntry("MrcIngress.port_config", {"port": 1}, "MrcIngress.forward", {"port": 1}),
     "INVALID_ARGUMENT"),                                                          # action not of this table
    (TableEntry("MrcIngress.nope", {}, "NoAction"), "NOT_FOUND"),
])
def test_bad_entries_are_refused_with_a_code(tables, entry, code):
    with pytest.raises(TableError) as err:
        tables.insert(entry)
    assert err.value.code == code


def test_duplicate_insert_and_missing_modify_are_refused(tables):
    tables.insert(route("fc00:1:1001::/48", 2))
    with pytest.raises(TableError, match="exists") as err:
        tables.insert(route("fc00:1:1001::/48", 3))
    assert err.value.code == "ALREADY_EXISTS"
    with pytest.raises(TableError) as err:
        tables.modify(route("fc00:1:1002::/48", 3))
    assert err.value.code == "NOT_FOUND"
    tables.modify(route("fc00:1:1001::/48", 3))
    assert tables.entries("MrcIngress.routing") == [route("fc00:1:1001::/48", 3)]


def test_const_default_action_cannot_change(tables):
    with pytest.raises(TableError) as err:
        tables.table("MrcIngress.routing").set_default("MrcIngress.forward", {"port": 1})
    assert err.value.code == "PERMISSION_DENIED"


# --- pipeline ----------------------------------------------------------------------------------

def test_usid_shift_changes_only_the_destination(tables):
    tables.insert(TableEntry("MrcIngress.usid_local", {"dst_usid_prefix": 0xFC0000010100}, "MrcIngress.usid_shift"))
    tables.insert(route("fc00:1:102::/48", 3))
    p = Pipeline(tables)
    frame = data_frame(dst="fc00:1:100:102:101:1001::")
    port, out, prio = p.process(frame, 1, [0] * 512)
    assert (port, prio) == (3, constants.PRIORITY_LOW)
    assert out[38:54] == addr("fc00:1:102:101:1001::")
    assert out[:38] == frame[:38] and out[54:] == frame[54:]
    assert p.counters.read("MrcIngress.rx", 1) == (1, len(frame))


def test_trim_rewrites_headers_and_counts(tables):
    tables.insert(route("fc00:1:1001::/48", 2))
    tables.insert(port_config(2, trim=2, ecn=1))
    p = Pipeline(tables)
    frame = data_frame(ecn=constants.ECN_ECT0)
    queued = [0] * 512
    queued[2] = 2
    port, out, prio = p.process(frame, 1, queued)
    pkt = codec.decode(out)
    assert (port, prio, len(out)) == (2, constants.PRIORITY_HIGH, constants.DATA_HEADERS_LEN)
    assert pkt.trimmed and pkt.dscp == constants.DSCP_TRIMMED and pkt.ecn == constants.ECN_ECT0 and pkt.length == 1000
    assert int.from_bytes(out[18:20], "big") == int.from_bytes(out[58:60], "big") == constants.TRIMMED_UDP_LEN
    assert out[60:62] == b"\x00\x00"
    assert out[22:54] == frame[22:54]                              # addresses untouched
    assert p.counters.read("MrcIngress.trimmed", 2) == (1, len(frame))
    assert p.counters.read("MrcIngress.ecn_marked", 2) == (0, 0)


def test_ecn_mark_sets_ce_only(tables):
    tables.insert(route("fc00:1:1001::/48", 2))
    tables.insert(port_config(2, trim=10, ecn=1))
    p = Pipeline(tables)
    frame = data_frame(ecn=constants.ECN_ECT0)
    queued = [0] * 512
    queued[2] = 1
    _, out, prio = p.process(frame, 1, queued)
    assert prio == constants.PRIORITY_LOW
    assert codec.decode(out).ecn == constants.ECN_CE and codec.decode(out).dscp == constants.DSCP_TRIMMABLE
    assert bytearray(out)[15] & 0xCF == frame[15] & 0xCF           # only the ECN bits changed
    assert out[:15] == frame[:15] and out[16:] == frame[16:]


@pytest.mark.parametrize("depth, share", [(2, 0.0), (3, 0.25), (4, 0.5), (5, 0.75), (6, 1.0), (9, 1.0)])
def test_ecn_ramp_marks_with_a_probability_rising_from_low_to_high_threshold(tables, depth, share):
    tables.insert(route("fc00:1:1001::/48", 2))
    tables.insert(port_config(2, trim=10, ecn=2, ecn_max=6))
    p = Pipeline(tables, seed=3)
    queued = [0] * 512
    queued[2] = depth
    frame = data_frame(ecn=constants.ECN_ECT0)
    n = 2000
    marked = sum(codec.decode(p.process(frame, 1, queued)[1]).ecn == constants.ECN_CE for _ in range(n))
    assert abs(marked / n - share) < 0.05, (depth, marked)
    assert p.counters.read("MrcIngress.ecn_marked", 2)[0] == marked


def test_queue_depth_seen_counts_each_low_priority_packet_at_its_depth(tables):
    tables.insert(route("fc00:1:1001::/48", 2))
    tables.insert(port_config(2, trim=8, ecn=4))
    p = Pipeline(tables)
    queued = [0] * 512
    for depth in (0, 3, 3, 40):
        queued[2] = depth
        p.process(data_frame(), 1, queued)
    cells = p.counters.nonzero()["MrcIngress.queue_depth_seen"]
    assert {cell: packets for cell, (packets, _) in cells.items()} == {64: 1, 67: 2, 95: 1}


def test_control_packet_is_high_priority_and_untouched(tables):
    tables.insert(route("fc00:1:1001::/48", 2))
    tables.insert(port_config(2, trim=0, ecn=0))
    sack = codec.encode(Sack(src=addr("fc00:1:1000::"), dst=addr("fc00:1:1001::"), ev=1, qp=1, cum_psn=1,
                             sack_base=1, bitmap=1, ev_echo=1, ts_echo=0, dscp=constants.DSCP_TRIMMABLE,
                             ecn=constants.ECN_ECT0), MAC_A, MAC_B)
    assert Pipeline(tables).process(sack, 1, [100] * 512) == (2, sack, constants.PRIORITY_HIGH)


def test_fault_drop_random_is_seeded_and_near_its_rate(tables):
    tables.insert(route("fc00:1:1001::/48", 2))
    tables.insert(TableEntry("MrcIngress.port_fault", {"port": 2}, "MrcIngress.fault_drop_random",
                             {"drop_ppm": 100_000}))
    frame = data_frame(payload=64)

    def pattern(seed):
        p = Pipeline(tables, seed=seed)
        return [p.process(frame, 1, [0] * 512) is None for _ in range(2000)]
    a, b, c = pattern(5), pattern(5), pattern(6)
    assert a == b and a != c
    assert 120 <= sum(a) <= 280            # 200 expected, sd ~13.4
    p = Pipeline(tables, seed=5)
    for _ in range(2000):
        p.process(frame, 1, [0] * 512)
    assert p.counters.read("MrcIngress.fault_drops", 2)[0] == sum(a)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=200), st.integers(0, 199), st.integers(0, 255))
def test_pipeline_never_raises_and_never_forwards_inconsistent_lengths(junk, where, value):
    tables = TableStore(P4InfoIndex(load_p4info()))
    tables.insert(TableEntry("MrcIngress.routing", {"dst_addr": (0, 0)}, "MrcIngress.forward", {"port": 2}))
    tables.insert(port_config(2, trim=0, ecn=0))
    p = Pipeline(tables)
    frame = bytearray(data_frame(payload=100) + junk)
    if where < len(frame):
        frame[where] = value
    for candidate in (bytes(frame), bytes(frame[:where]), junk):
        result = p.process(candidate, 1, [0] * 512)
        if result is not None:
            out = result[1]
            plen = int.from_bytes(out[18:20], "big")
            assert plen == len(out) - constants.UDP_OFFSET
            assert int.from_bytes(out[58:60], "big") == plen
    total = p.counters.read("MrcIngress.rx", 1)[0]
    dropped = p.counters.read("MrcIngress.malformed_drops", 1)[0]
    forwarded = p.counters.read("MrcIngress.trimmed", 2)[0]
    assert total == 3 and dropped <= 3 and forwarded <= 3


# --- queues and the switch core ------------------------------------------------------------------

def test_strict_priority_and_tail_drop_per_priority():
    queues = EgressQueues()
    q = queues.queue(2)
    q.configure(depth=2)
    assert q.enqueue(b"l1", constants.PRIORITY_LOW) and q.enqueue(b"l2", constants.PRIORITY_LOW)
    assert not q.enqueue(b"l3", constants.PRIORITY_LOW)                     # low FIFO full
    assert q.enqueue(b"h1", constants.PRIORITY_HIGH)                        # high FIFO has its own room
    assert queues.low_lengths[2] == 2
    assert [q.dequeue(0.0) for _ in range(3)] == [(1, b"h1"), (0, b"l1"), (0, b"l2")]
    assert queues.low_lengths[2] == 0 and q.dequeue(0.0) is None


def test_pacing_by_packets_and_bits():
    from refswitch.queues import MAX_LAG
    q = EgressQueues().queue(1)
    q.configure(rate_pps=10)
    q.charge(1000, now=5.0)                                        # from an idle queue: a fresh schedule
    assert q.next_time == pytest.approx(5.1)
    q.charge(1000, now=5.11, backlogged=True)                      # loop woke up late: keep the schedule
    assert q.next_time == pytest.approx(5.2)
    q.charge(1000, now=9.0, backlogged=True)                       # far too late: at most MAX_LAG behind
    assert q.next_time == pytest.approx(9.0 - MAX_LAG + 0.1)
    q.configure(rate_pps=0, rate_bps=8_000_000)
    q.next_time = 0.0
    q.charge(1000, now=1.0)                                        # 8000 bits at 8 Mbit/s = 1 ms
    assert q.next_time == pytest.approx(1.001)


def test_switch_core_paces_a_rate_limited_port_and_counts_tail_drops():
    now = [0.0]
    sent = []
    core = SwitchCore(lambda port, frame, prio: sent.append((now[0], port)) or True, load_p4info(),
                      clock=lambda: now[0])
    core.tables.insert(route("fc00:1:1001::/48", 2))
    core.queues.configure(2, depth=3, rate_pps=100)
    frame = data_frame(payload=64)
    for _ in range(6):
        core.receive(frame, 1)
    assert len(sent) == 1              # packets/s only: the first goes at once, 3 wait, 2 dropped
    assert core.pipeline.counters.read("queue_drops", 2)[0] == 2
    times = []
    while (due := core.drain()) is not None:
        now[0] = due
        times.append(due)
    assert [t for t, _ in sent] == pytest.approx([0.0, 0.01, 0.02, 0.03])
    assert core.pipeline.counters.read("MrcEgress.tx", 2)[0] == 4


def test_a_frame_leaves_a_rate_limited_port_when_its_last_bit_is_out():
    """Store and forward: a lone frame on an idle port takes its serialisation time, as on a real link
    (without it, a model fabric's RTT left out every hop's time on the wire)."""
    now = [5.0]
    sent = []
    core = SwitchCore(lambda port, frame, prio: sent.append((now[0], len(frame))) or True, load_p4info(),
                      clock=lambda: now[0])
    core.tables.insert(route("fc00:1:1001::/48", 2))
    core.queues.configure(2, rate_bps=8_000_000)
    frame = data_frame(payload=1000)
    wire_s = len(frame) * 8 / 8_000_000
    core.receive(frame, 1)
    assert sent == [] and core.drain() == pytest.approx(5.0 + wire_s)
    now[0] = 5.0 + wire_s / 2
    assert core.drain() == pytest.approx(5.0 + wire_s) and sent == []
    now[0] = 5.0 + wire_s
    assert core.drain() is None
    assert sent == [(pytest.approx(5.0 + wire_s), len(frame))]
    assert core.queues.low_lengths[2] == 0           # on the wire, not in the queue the pipeline sees
    core.receive(frame, 1)
    core.receive(frame, 1)                           # back to back: one serialisation apart
    while (due := core.drain()) is not None:
        now[0] = due
    assert [t for t, _ in sent[1:]] == pytest.approx([5.0 + 2 * wire_s, 5.0 + 3 * wire_s])


def test_rate_holds_when_the_loop_wakes_up_only_every_millisecond():
    now = [0.0]
    sent = []
    core = SwitchCore(lambda port, frame, prio: sent.append(len(frame)) or True, load_p4info(),
                      clock=lambda: now[0])
    core.tables.insert(route("fc00:1:1001::/48", 2))
    core.queues.configure(2, depth=10_000, rate_bps=100_000_000)
    frame = data_frame(payload=1000)                               # 1106 bytes: 88.48 us at 100 Mbit/s
    for _ in range(3000):
        core.receive(frame, 1)
    for step in range(1, 101):                                     # 100 ms in 1 ms wake-ups
        now[0] = step / 1000
        core.drain()
    expected = 0.1 * 100_000_000 / (len(frame) * 8)                # 1130 packets
    assert abs(len(sent) - expected) <= 2


# --- command line ------------------------------------------------------------------------------

def parse(argv):
    parser = argparse.ArgumentParser()
    switch_main.add_arguments(parser)
    return parser.parse_args(argv)


def test_switch_options_and_json_config_merge(tmp_path):
    cfg_file = tmp_path / "s.json"
    cfg_file.write_text(json.dumps({"name": "s7", "device_id": 7, "ports": {"1": "a-eth1", "2": "a-eth2"},
                                    "queues": [{"port": 2, "rate_bps": 1000000, "depth": 16}],
                                    "grpc_address": "unix:/tmp/x.sock"}))
    cfg = switch_main.build_config(parse(["--config", str(cfg_file), "--port", "3=a-eth3",
                                          "--queue", "1:0:8:50", "--grpc-addr", "127.0.0.1:50001"]))
    assert cfg.name == "s7" and cfg.device_id == 7
    assert cfg.ports == {1: "a-eth1", 2: "a-eth2", 3: "a-eth3"}
    assert cfg.queues == {2: (1000000, 0, 16), 1: (0, 50, 8)}
    assert cfg.grpc_address == "127.0.0.1:50001"


@pytest.mark.parametrize("argv", [["--port", "x=eth0"], ["--port", "511=eth0"], ["--port", "0=eth0"],
                                  ["--queue", "1:2"], ["--queue", "1:100:0"]])
def test_bad_switch_options_are_refused(argv):
    with pytest.raises(SystemExit):
        parse(argv)


@pytest.mark.parametrize("address", ["0.0.0.0:9559", "10.0.0.1:9559", "localhost:9559", "[::]:9559", "unix:"])
def test_switch_refuses_non_loopback_address(address, caplog):
    args = parse(["--port", "1=no-such-if0", "--grpc-addr", address])
    assert switch_main.run(args) == 2
    assert "refused" in caplog.text or "needs a socket path" in caplog.text


def test_loopback_and_unix_addresses_are_accepted():
    from refswitch.p4runtime_server import check_address
    assert check_address("127.0.0.1:0") == "127.0.0.1:0"
    assert check_address("unix:/tmp/s1.sock") == "unix:/tmp/s1.sock"


def test_random_frames_with_ecmp_reach_only_group_members(tables):
    tables.insert(TableEntry("MrcIngress.routing", {"dst_addr": prefix("fc00:1:1001::/48")},
                             "MrcIngress.ecmp_select", {"group": 1, "size": 3}))
    for i, port in enumerate((4, 5, 6)):
        tables.insert(TableEntry("MrcIngress.ecmp_member", {"group": 1, "index": i}, "MrcIngress.forward",
                                 {"port": port}))
    p = Pipeline(tables)
    rng = random.Random(1)
    seen = {}
    for _ in range(300):
        ev = rng.getrandbits(32)
        port = p.process(data_frame(ev=ev, payload=64), 1, [0] * 512)[0]
        sport = ev & 0xFFFF
        assert port == (4, 5, 6)[ecmp_index(addr("fc00:1:1000::"), addr("fc00:1:1001::"), 17, sport, 4791, 3)]
        seen[port] = seen.get(port, 0) + 1
    assert set(seen) == {4, 5, 6}


def test_a_frame_from_a_host_link_enters_when_its_last_bit_is_in():
    """A host's link into the switch has no egress queue to serialise it: the model does it at
    ingress, so host -> switch -> host takes two serialisations, as on netsim."""
    now = [1.0]
    sent = []
    core = SwitchCore(lambda port, frame, prio: sent.append(now[0]) or True, load_p4info(), clock=lambda: now[0])
    core.tables.insert(route("fc00:1:1001::/48", 2))
    core.queues.configure(2, rate_bps=8_000_000)
    core.ingress_rates = {1: 8_000_000}
    frame = data_frame(payload=1000)
    wire_s = len(frame) * 8 / 8_000_000
    core.receive(frame, 1)
    core.receive(frame, 1)                              # back to back behind it on the host's link
    assert core.pipeline.counters.read("MrcIngress.rx", 1)[0] == 0
    while (due := core.drain()) is not None:
        now[0] = due
    assert sent == [pytest.approx(1.0 + 2 * wire_s), pytest.approx(1.0 + 3 * wire_s)]
    assert core.pipeline.counters.read("MrcIngress.rx", 1)[0] == 2
    core.receive(frame, 3)                              # no ingress rate: the pipeline sees it at once
    assert core.pipeline.counters.read("MrcIngress.rx", 3)[0] == 1


def test_ingress_rates_on_the_command_line():
    import argparse
    from refswitch.main import add_arguments, build_config, parse_ingress
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert build_config(parser.parse_args(["--port", "1=a", "--ingress", "1:20000000"])).ingress == {1: 20_000_000}
    for bad in ("1", "1:0", "x:5", "1:2:3"):
        with pytest.raises(argparse.ArgumentTypeError, match="--ingress"):
            parse_ingress(bad)
