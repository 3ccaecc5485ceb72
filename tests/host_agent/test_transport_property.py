"""Property: over a channel that drops, duplicates, reorders and trims (and, for MRC, with one of
the two paths dead), every message arrives once, intact, and is acknowledged once."""
from __future__ import annotations

import dataclasses
import heapq
import random

from hypothesis import HealthCheck, given, settings, strategies as st

from wire import constants
from wire.packets import DataPacket
from host_agent.transport import Endpoint, MessageReceived, MessageSent, PathInfo, TransportConfig

CFG = dict(qp_timeout=6, initial_rtt=10e-6, ack_delay=5e-6, probe_interval=50e-6, num_evs=16,
           mtu_payload=512, line_rate_bps=10e9)


def two_paths(src_host, dst_host):
    return [PathInfo(p, p, bytes([0xFC, 0, 0, p, 0x10, src_host]) + bytes(10),
                     bytes([0xFC, 0, 0, p, 1, 0, 0x10, dst_host]) + bytes(8)) for p in range(2)]


class ChaosChannel:
    """Delivers packets between two endpoints after a random delay; drops, duplicates and trims some."""

    def __init__(self, rng, drop, dup, trim, trimmable, dead_dst=None):
        self.rng, self.drop, self.dup, self.trim, self.trimmable = rng, drop, dup, trim, trimmable
        self.dead_dst = dead_dst          # packets to this address vanish (a dead path)
        self.queue, self.seq = [], 0

    def send(self, now, dest, nic, pkt):
        if pkt.dst == self.dead_dst or self.rng.random() < self.drop:
            return
        copies = 2 if self.rng.random() < self.dup else 1
        for _ in range(copies):
            p = dataclasses.replace(pkt)
            if (self.trimmable and isinstance(p, DataPacket) and not p.trimmed and p.dscp in constants.TRIMMABLE_DSCP
                    and self.rng.random() < self.trim):
                p.payload, p.flags, p.dscp = b"", p.flags | constants.MRCH_FLAG_TRIMMED, constants.DSCP_TRIMMED
            self.seq += 1
            heapq.heappush(self.queue, (now + 2e-6 + self.rng.random() * 8e-6, self.seq, dest, nic, p))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mode=st.sampled_from(["mrc", "roce"]), seed=st.integers(0, 2**32 - 1),
       sizes=st.lists(st.integers(0, 20000), min_size=1, max_size=4),
       drop=st.sampled_from([0.0, 0.05, 0.2]), dup=st.sampled_from([0.0, 0.1]),
       trim=st.sampled_from([0.0, 0.1]), dead_path=st.booleans())
def test_exactly_once_over_a_chaotic_channel(mode, seed, sizes, drop, dup, trim, dead_path):
    rng = random.Random(seed)
    cfg = TransportConfig(mode=mode, **CFG)
    a, b = Endpoint("a", cfg, rng_seed=seed), Endpoint("b", cfg, rng_seed=seed + 1)
    ca = a.connect("b", 1, 2, two_paths(0, 1))
    b.connect("a", 2, 1, two_paths(1, 0))
    got, done = [], []
    payloads = [rng.randbytes(n) for n in sizes]
    sent = {a.send_message(ca, data): data for data in payloads}
    dead = two_paths(0, 1)[1].dst if dead_path and mode == "mrc" else None     # a -> b on plane 1 is dead
    chan = ChaosChannel(rng, drop, dup, trim, trimmable=(mode == "mrc"), dead_dst=dead)
    now, peer = 0.0, {a: b, b: a}
    for _ in range(200_000):
        for ep in (a, b):
            for nic, pkt in ep.poll(now):
                chan.send(now, peer[ep], nic, pkt)
        done += [e.msg_id for e in a.drain_events() if isinstance(e, MessageSent)]
        got += [(e.msg_id, e.data) for e in b.drain_events() if isinstance(e, MessageReceived)]
        if len(done) == len(sizes) and len(got) == len(sizes):
            break
        times = [t for t in (a.next_wakeup(), b.next_wakeup()) if t is not None]
        if chan.queue:
            times.append(chan.queue[0][0])
        now = max(now, min(times))
        while chan.queue and chan.queue[0][0] <= now:
            _, _, dest, nic, pkt = heapq.heappop(chan.queue)
            dest.receive(now, nic, pkt)
    assert sorted(done) == sorted(sent)
    assert sorted(got) == sorted(sent.items())            # each message once, byte for byte
