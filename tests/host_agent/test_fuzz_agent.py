"""Fuzz the host agent's receive path and the reference switch's pipeline with hypothesis.

The agent's receive path is what `host_agent.agent.Agent._receive` runs for every frame a NIC
delivers: `codec.decode`, then `Endpoint.receive`. Random frames and mutated valid frames (every
packet type, addressed to the agent's own QP with plausible or wild field values) must never let
an exception escape; every frame is accounted for: malformed ones counted (`rx_malformed`, and a
`malformed` record in the event log), well-formed but impossible ones counted (`rx_rejected`),
the rest handed to the endpoint (its `packets_received`). The endpoint keeps working afterwards.

tests/refswitch/test_refswitch.py already fuzzes the pipeline with junk appended to one frame; here every
packet type is mutated, and the switch's books must balance: each frame is counted in
`MrcIngress.rx`, and is either forwarded (and then parses as a whole packet, lengths consistent)
or counted in exactly one drop counter.
"""
from __future__ import annotations

import dataclasses
import io
import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wire import codec
from wire import constants
from host_agent.agent import MAX_MALFORMED_RECORDS as MAX_RECORDS, Agent
from host_agent.eventlog import LogWriter
from host_agent.job import parse_job
from wire.packets import DataPacket, Nack, Probe, ProbeReply, Sack

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

OWN_MAC, PEER_MAC = bytes.fromhex("020000001000"), bytes.fromhex("020000001001")
OWN_ADDR = bytes.fromhex("fc000000100000000000000000000000")
PEER_ADDR = bytes.fromhex("fc000000100100000000000000000000")
LOCAL_QP = 0x101                      # the agent's QP for its connection to rank 1 (job below)


def job_dict(workload: dict) -> dict:
    """Rank 0 of 2, one NIC, two paths to its peer (never opened: frames are fed directly)."""
    return {"rank": 0, "world_size": 2, "host": "h0",
            "nics": [{"name": "h0-eth0", "mac": OWN_MAC.hex(":"), "address": "fc00:0:1000::", "plane": 0}],
            "peers": [{"rank": 1, "qp": LOCAL_QP, "remote_qp": 0x200,
                       "nics": [{"plane": 0, "mac": PEER_MAC.hex(":"), "address": "fc00:0:1001::"}],
                       "paths": {"0": ["fc00:0:100:1001::", "fc00:0:101:1001::"]}}],
            "transport": {"mode": "mrc", "config": {"num_evs": 16, "qp_timeout": 10}},
            "workload": workload, "timeout": 5}


class FakeNic:
    """Stands in for host_agent.nic.RawNic: hands the agent the frames of one batch."""

    def __init__(self, frames: list[bytes]) -> None:
        self.index, self.ifname, self.frames = 0, "fuzz0", list(frames)

    def receive(self, batch: int) -> list[bytes]:
        taken, self.frames = self.frames[:batch], self.frames[batch:]
        return taken


def make_agent(kind: str) -> tuple[Agent, io.StringIO]:
    workload = ({"kind": "transfer", "src": 1, "dst": 0, "bytes": 50_000} if kind == "transfer"
                else {"kind": "allreduce", "elements": 4000, "dtype": "float32", "chunk_bytes": 4096})
    log = io.StringIO()
    agent = Agent(parse_job(job_dict(workload), "fuzz-job"), LogWriter(log), linger=0)
    agent.connect()
    agent.collective.start(agent.now())
    for _ in range(3):                     # data in flight, so SACKs and NACKs have PSNs to act on
        agent.endpoint.poll(agent.now())
    return agent, log


# --- packets the agent could plausibly get, and wild ones -----------------------------------------
u8, u16, u32, u64 = (st.integers(0, 2**b - 1) for b in (8, 16, 32, 64))
u24 = st.integers(0, 2**24 - 1)
small = st.integers(0, 300)
qp = st.one_of(st.just(LOCAL_QP), st.just(LOCAL_QP), u24)
psn = st.one_of(st.integers(0, 70), small, u24, st.integers(2**24 - 5, 2**24 - 1))
count32 = st.one_of(small, st.integers(0, 70_000), u32)
addrs = st.sampled_from([OWN_ADDR, PEER_ADDR, bytes(16)])


@st.composite
def data_packets(draw):
    """Data packets, mostly inside the receive window of a fresh connection and of a plausible
    message (so that they get placed), some with wild offsets and lengths."""
    trimmed = draw(st.booleans())
    payload = b"" if trimmed else draw(st.binary(max_size=1100))
    msg_len = draw(st.one_of(st.integers(len(payload), 70_000), st.integers(0, 70_000), u32))
    offset = draw(st.one_of(st.integers(0, max(0, msg_len - len(payload))), st.integers(0, 70_000), u64))
    flags = draw(u8)
    flags = flags | constants.MRCH_FLAG_TRIMMED if trimmed else flags & ~constants.MRCH_FLAG_TRIMMED
    return DataPacket(src=draw(addrs), dst=draw(addrs), ev=draw(u32), qp=draw(qp), psn=draw(psn),
                      va=offset, rkey=draw(u32), length=draw(count32) if trimmed else len(payload),
                      msg_id=draw(st.one_of(st.integers(0, 4), u16)), msg_len=msg_len, tsval=draw(u32),
                      payload=payload, flags=flags, dscp=draw(st.integers(0, 63)),
                      ecn=draw(st.integers(0, 3)), ack_req=draw(st.booleans()))


sacks = st.builds(Sack, src=addrs, dst=addrs, ev=u32, qp=qp, cum_psn=st.one_of(small, u32),
                  sack_base=st.one_of(small, u32), bitmap=u64, ev_echo=u32, ts_echo=u32,
                  ecn_echo=st.booleans())
nacks = st.builds(Nack, src=addrs, dst=addrs, ev=u32, qp=qp, psn=psn, cum_psn=st.one_of(small, u32),
                  reason=u8, ev_echo=u32, ts_echo=u32)
probes = st.builds(Probe, src=addrs, dst=addrs, ev=u32, qp=qp, probe_id=u32, tsval=u32)
replies = st.builds(ProbeReply, src=addrs, dst=addrs, ev=u32, qp=qp, probe_id=st.one_of(small, u32),
                    ev_echo=u32, ts_echo=u32)
packets = st.one_of(data_packets(), data_packets(), data_packets(), sacks, nacks, probes, replies)


def mutate(frame: bytes, rng: random.Random) -> bytes:
    """One of: flip bytes, truncate, append garbage, flip a header bit, or leave it valid."""
    out = bytearray(frame)
    action = rng.randrange(8)            # 4..7: left valid
    if action == 0:
        for _ in range(rng.randint(1, 4)):
            out[rng.randrange(len(out))] = rng.randrange(256)
    elif action == 1:
        del out[rng.randrange(len(out)):]
    elif action == 2:
        out += bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
    elif action == 3:
        out[rng.randrange(min(len(out), constants.DATA_HEADERS_LEN))] ^= 1 << rng.randrange(8)
    return bytes(out)


mutated = st.tuples(packets, st.integers(0, 2**32 - 1)).map(
    lambda p: mutate(codec.encode(p[0], PEER_MAC, OWN_MAC), random.Random(p[1])))
frames = st.lists(st.one_of(mutated, mutated, mutated, st.binary(max_size=200)), min_size=1, max_size=40)


def feed(agent: Agent, batch: list[bytes]) -> None:
    nic = FakeNic(batch)
    while nic.frames:
        agent._receive(nic)


def expected_outcome(frame: bytes) -> str:
    """malformed, stray (decodes, but for a QP the agent does not have) or ours."""
    try:
        pkt = codec.decode(frame)
    except codec.MalformedPacket:
        return "malformed"
    return "ours" if pkt.qp == LOCAL_QP else "stray"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["transfer", "allreduce"])
def test_agent_receive_path_takes_any_frames_and_counts_the_bad_ones(kind):
    @FUZZ
    @given(batch=frames)
    def check(batch):
        agent, log = make_agent(kind)
        outcomes = [expected_outcome(f) for f in batch]
        malformed = outcomes.count("malformed")
        feed(agent, batch)                                   # nothing may escape
        stats = agent.endpoint.stats()
        assert agent.counters["rx_malformed"] == malformed
        assert stats.get("unknown_qp", 0) == outcomes.count("stray")     # counted and dropped
        assert stats.get("packets_received", 0) == len(batch) - malformed   # every other frame reached it
        assert agent.counters["rx_rejected"] <= len(batch) - malformed
        records = [json.loads(line) for line in log.getvalue().splitlines()]
        assert sum(r["kind"] == "malformed" for r in records) == min(malformed, MAX_RECORDS)
        assert sum(r["kind"] == "rejected" for r in records) == min(agent.counters["rx_rejected"], MAX_RECORDS)
        out = agent.endpoint.poll(agent.now() + 0.01)        # the endpoint still works afterwards
        for nic, pkt in out:                                 # and what it sends encodes
            codec.encode(pkt, OWN_MAC, PEER_MAC)
        agent.endpoint.next_wakeup()
        agent.result()
    check()


@pytest.mark.slow
@FUZZ
@given(batch=st.lists(st.tuples(packets, st.integers(0, 2**32 - 1)), min_size=1, max_size=30))
def test_valid_packets_in_any_order_never_break_the_endpoint(batch):
    """Unmutated, decodable packets with wild values: all reach the endpoint, none escapes."""
    agent, _ = make_agent("transfer")
    encoded = [codec.encode(p, PEER_MAC, OWN_MAC) for p, _ in batch]
    feed(agent, encoded)
    assert agent.counters["rx_malformed"] == 0
    assert agent.endpoint.stats().get("packets_received", 0) == len(batch)
    agent.endpoint.poll(agent.now() + 0.01)


# --- the reference switch's parser and pipeline ---------------------------------------------------
SWITCH_USID = 0x0101
DROP_COUNTERS = ("MrcIngress.malformed_drops", "MrcIngress.no_route_drops", "MrcIngress.fault_drops")


def switch_pipeline(trim_threshold: int, fault: str | None, seed: int):
    """A pipeline with a uSID entry, a route to port 2, an ECMP route to ports 3/4, port configs
    and, when asked, a fault on port 4."""
    import ipaddress

    from pipeline_contract.entries import TableEntry
    from pipeline_contract.p4info import P4InfoIndex, load_p4info
    from refswitch.pipeline import Pipeline
    from refswitch.tables import TableStore

    def net(text):
        n = ipaddress.IPv6Network(text)
        return int(n.network_address), n.prefixlen

    tables = TableStore(P4InfoIndex(load_p4info()))
    tables.insert(TableEntry("MrcIngress.usid_local", {"dst_usid_prefix": (0xFC000000 << 16) | SWITCH_USID},
                             "MrcIngress.usid_shift", {}))
    tables.insert(TableEntry("MrcIngress.routing", {"dst_addr": net("fc00:0:1001::/48")},
                             "MrcIngress.forward", {"port": 2}))
    tables.insert(TableEntry("MrcIngress.routing", {"dst_addr": net("fc00:0:1000::/48")},
                             "MrcIngress.ecmp_select", {"group": 1, "size": 2}))
    for index, port in enumerate((3, 4)):
        tables.insert(TableEntry("MrcIngress.ecmp_member", {"group": 1, "index": index},
                                 "MrcIngress.forward", {"port": port}))
    for port in (2, 3, 4):
        tables.insert(TableEntry("MrcIngress.port_config", {"port": port}, "MrcIngress.set_port_config",
                                 {"trim_threshold": trim_threshold, "ecn_threshold": 0, "host_facing": port == 2,
                                  "ecn_max_threshold": 0}))
    if fault == "drop":
        tables.insert(TableEntry("MrcIngress.port_fault", {"port": 4}, "MrcIngress.fault_drop", {}))
    elif fault == "random":
        tables.insert(TableEntry("MrcIngress.port_fault", {"port": 4}, "MrcIngress.fault_drop_random",
                                 {"drop_ppm": 500_000}))
    return Pipeline(tables, seed=seed)


switch_addrs = st.sampled_from([bytes.fromhex("fc000000010110010000000000000000"),     # via this switch
                                bytes.fromhex("fc000000100100000000000000000000"),     # routed to port 2
                                bytes.fromhex("fc000000100000000000000000000000"),     # ECMP
                                bytes(16)])                                            # no route
switch_packets = st.one_of(data_packets(), data_packets(), sacks, nacks, probes, replies).flatmap(
    lambda p: switch_addrs.map(lambda dst: dataclasses.replace(p, dst=dst)))
switch_frames = st.lists(st.one_of(
    st.tuples(switch_packets, st.integers(0, 2**32 - 1)).map(
        lambda p: mutate(codec.encode(p[0], PEER_MAC, OWN_MAC), random.Random(p[1]))),
    st.binary(max_size=160)), min_size=1, max_size=40)


def assert_whole_packet(frame: bytes) -> None:
    """A forwarded frame is an IPv6/UDP packet whose length fields match its length."""
    assert len(frame) >= constants.BTH_OFFSET
    assert int.from_bytes(frame[12:14], "big") == constants.ETHERTYPE_IPV6 and frame[14] >> 4 == 6
    assert frame[20] == constants.IPPROTO_UDP
    plen = int.from_bytes(frame[18:20], "big")
    assert plen == len(frame) - constants.UDP_OFFSET == int.from_bytes(frame[58:60], "big")
    if (int.from_bytes(frame[56:58], "big") == constants.ROCEV2_UDP_PORT
            and frame[constants.BTH_OFFSET] == constants.OP_RC_WRITE_ONLY):
        assert len(frame) >= constants.DATA_HEADERS_LEN


@pytest.mark.slow
@FUZZ
@given(batch=switch_frames, trim=st.integers(0, 3), fault=st.sampled_from([None, "drop", "random"]),
       seed=st.integers(0, 1000))
def test_switch_pipeline_counts_every_frame_forwarded_or_dropped(batch, trim, fault, seed):
    pipeline = switch_pipeline(trim, fault, seed)
    queued = [0] * 512
    queued[2] = queued[3] = queued[4] = 2
    forwarded = 0
    for frame in batch:
        out = pipeline.process(frame, 1, queued)
        if out is None:
            continue
        port, sent, priority = out
        assert port in (2, 3, 4)
        assert_whole_packet(sent)
        if sent[constants.BTH_OFFSET] == constants.OP_RC_WRITE_ONLY and len(sent) == constants.DATA_HEADERS_LEN and \
                len(frame) > constants.DATA_HEADERS_LEN:
            assert sent[constants.MRCH_OFFSET] & constants.MRCH_FLAG_TRIMMED and priority == constants.PRIORITY_HIGH
        forwarded += 1
    counters = pipeline.counters
    assert counters.read("MrcIngress.rx", 1) == (len(batch), sum(map(len, batch)))
    dropped = sum(counters.read(name, port)[0] for name in DROP_COUNTERS for port in range(512))
    assert forwarded + dropped == len(batch)
    if fault == "drop":
        assert counters.read("MrcIngress.trimmed", 4)[0] == counters.read("MrcIngress.ecn_marked", 4)[0] == 0


# --- the switch process itself, on veths --------------------------------------------------------------
def fuzz_batch(count: int, seed: int) -> list[bytes]:
    """`count` frames of every kind, most mutated (deterministic), between 14 and 1500 bytes."""
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        dst = rng.choice([bytes.fromhex("fc000001100100000000000000000000"), bytes(16)])
        payload = bytes(rng.randrange(256) for _ in range(rng.choice([0, 64, 700])))
        kind = rng.randrange(3)
        if kind == 0:
            pkt = DataPacket(src=PEER_ADDR, dst=dst, ev=rng.getrandbits(32), qp=1, psn=rng.getrandbits(24),
                             va=0, rkey=1, length=len(payload), msg_id=1, msg_len=len(payload),
                             tsval=0, payload=payload,
                             dscp=rng.choice([constants.DSCP_TRIMMABLE, constants.DSCP_CONTROL]))
        elif kind == 1:
            pkt = Sack(PEER_ADDR, dst, rng.getrandbits(32), 1, 5, 5, rng.getrandbits(64), 1, 2)
        else:
            pkt = Probe(PEER_ADDR, dst, rng.getrandbits(32), 1, rng.getrandbits(32), 0)
        frame = mutate(codec.encode(pkt, PEER_MAC, OWN_MAC), rng)
        if rng.random() < 0.1:
            frame = bytes(rng.randrange(256) for _ in range(rng.randint(14, 120)))
        if 14 <= len(frame) <= 1500:
            out.append(frame)
    return out


@pytest.mark.integration
@pytest.mark.requires_root
def test_switch_process_survives_fuzzed_frames_and_counts_them_like_the_model(tmp_path):
    """A running refswitch process fed mutated frames on a veth stays up, forwards what the
    in-process pipeline forwards and counts in its P4Runtime counters exactly what the pipeline
    counts for the same frames and tables."""
    import ipaddress
    import os
    import subprocess
    import sys
    import time

    from pipeline_contract.entries import TableEntry
    from pipeline_contract.client import P4RuntimeClient
    from pipeline_contract.p4info import P4InfoIndex, load_p4info
    from refswitch.pipeline import Pipeline
    from refswitch.tables import TableStore
    from refswitch.vethlab import VethLab

    net = ipaddress.IPv6Network("fc00:1:1001::/48")
    entries = [TableEntry("MrcIngress.routing", {"dst_addr": (int(net.network_address), 48)},
                          "MrcIngress.forward", {"port": 2})]
    frames = fuzz_batch(240, seed=5)
    tables = TableStore(P4InfoIndex(load_p4info()))
    for entry in entries:
        tables.insert(entry)
    model = Pipeline(tables)
    expected_out = [out[1] for out in (model.process(f, 1, [0] * 512) for f in frames) if out is not None]
    counters = ("MrcIngress.rx", "MrcIngress.malformed_drops", "MrcIngress.no_route_drops")
    expected = {name: model.counters.read(name, 1) for name in counters}
    assert expected_out and expected["MrcIngress.malformed_drops"][0] > 0    # the batch exercises both

    sock, ready = tmp_path / "p4rt.sock", tmp_path / "ready"
    with VethLab(f"fz{os.getpid() % 1000}", 2) as lab:
        proc = lab.popen("switch", [sys.executable, "-m", "refswitch.main", "--port", f"1={lab.switch_if(1)}",
                                    "--port", f"2={lab.switch_if(2)}", "--grpc-addr", f"unix:{sock}",
                                    "--ready-file", str(ready), "--queue", "2:0:1000:0"],
                         stderr=subprocess.PIPE)
        host1, host2 = lab.open_port(1), lab.open_port(2)
        received: list[bytes] = []

        def wait(condition, what: str, timeout: float = 15) -> None:
            deadline = time.monotonic() + timeout
            while not condition():
                assert proc.poll() is None, f"the switch died: {proc.stderr.read().decode()[-800:]}"
                assert time.monotonic() < deadline, f"timed out waiting for {what}"
                while (frame := host2.recv()) is not None:
                    received.append(frame)
                time.sleep(0.01)

        try:
            wait(ready.exists, "the ready file")
            with P4RuntimeClient(f"unix:{sock}", 1, "s1", timeout=10) as client:
                client.set_pipeline(load_p4info())
                client.insert(entries)
                sent = 0
                for start in range(0, len(frames), 20):        # in steps the switch keeps up with
                    for frame in frames[start:start + 20]:
                        assert host1.send(frame)
                    sent += len(frames[start:start + 20])
                    wait(lambda: client.read_counter("MrcIngress.rx", 1)[1].packets >= sent, "the switch to read")
                wait(lambda: len(received) >= len(expected_out), "the forwarded frames")
                got = {name: client.read_counter(name, 1)[1] for name in counters}
                assert {name: (v.packets, v.bytes) for name, v in got.items()} == expected
                assert client.read_counter("MrcEgress.tx", 2)[2].packets == len(expected_out)
            assert sorted(received) == sorted(expected_out)
            assert proc.poll() is None
        finally:
            host1.close()
            host2.close()
            if proc.poll() is None:
                proc.terminate()
                proc.wait(10)
