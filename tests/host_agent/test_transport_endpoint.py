"""Endpoint API on the in-process network: loss-free transfers, both modes, and API errors."""
from __future__ import annotations

import random

import pytest

from host_agent.transport import (Connection, ConnectionId, Endpoint, MessageReceived, MessageSent, PathInfo,
                                  TransportConfig)
from simulation import LEAF_SPINE_TIMERS, Flow, leaf_spine_fabric, run_flows

FAST = LEAF_SPINE_TIMERS              # the transport's timers for the leaf-spine of 1 us cables


@pytest.mark.parametrize("mode", ["mrc", "roce"])
def test_loss_free_transfer_is_delivered_exactly_once(mode):
    net = leaf_spine_fabric(seed=1, planes=2)                  # h1, h2 under leaf s1; h3, h4 under s2
    cfg = TransportConfig(mode=mode, **FAST)
    res = run_flows(net, [Flow("h1", "h3", 150_000, message_size=40_000),
                              Flow("h2", "h4", 3000, message_size=1000)], cfg, until=0.05)
    for tr in res.flows:
        assert tr.exactly_once, tr
        assert tr.sender.stats.get("retransmitted", 0) == 0
    assert res.flows[0].messages == 4


def test_zero_length_and_odd_sized_messages():
    net = leaf_spine_fabric(seed=2, hosts_per_leaf=1)
    res = run_flows(net, [Flow("h1", "h2", 0), Flow("h2", "h1", 1025, message_size=1025)],
                        TransportConfig(**FAST), until=0.01)
    assert res.all_exactly_once


def test_connect_rejects_a_reused_qp_and_empty_paths():
    ep = Endpoint("h0", TransportConfig())
    path = PathInfo(0, 0, bytes(16), bytes(16))
    ep.connect("h1", 5, 6, [path])
    with pytest.raises(ValueError, match="QP 0x5"):
        ep.connect("h2", 5, 7, [path])
    with pytest.raises(ValueError, match="no paths"):
        ep.connect("h2", 8, 9, [])



def test_a_connection_built_without_paths_is_refused_by_name():
    """Built directly (not through Endpoint.connect, which refuses no paths first)."""
    ep = Endpoint("h0", TransportConfig())
    with pytest.raises(ValueError, match=r"h0->h1:0x8: a connection needs at least one path"):
        Connection(ConnectionId("h0", "h1", 8, 9), ep.config, [], None, random.Random(1), ep.nic, ep.shares,
                   lambda event: None)


def test_config_rejects_out_of_range_values():
    with pytest.raises(ValueError, match="num_evs"):
        TransportConfig(num_evs=300)
    with pytest.raises(ValueError, match="ooo_window"):
        TransportConfig(ooo_window=65)


def test_sans_io_round_trip_without_a_network():
    """Two endpoints wired back to back by hand: poll one, feed the other."""
    a, b = Endpoint("a", TransportConfig(**FAST)), Endpoint("b", TransportConfig(**FAST))
    pa = [PathInfo(0, 0, b"\xfc\x00" + bytes(14), b"\xfc\x00\x00\x00\x10\x01" + bytes(10))]
    pb = [PathInfo(0, 0, b"\xfc\x00\x00\x00\x10\x01" + bytes(10), b"\xfc\x00" + bytes(14))]
    ca = a.connect("b", 1, 2, pa)
    b.connect("a", 2, 1, pb)
    got, done, a_events = [], [], []
    data = bytes(range(256)) * 20
    mid = a.send_message(ca, data)
    now = 0.0
    for _ in range(1000):
        for src, dst in ((a, b), (b, a)):
            for nic, pkt in src.poll(now):
                dst.receive(now, nic, pkt)
        got += [(e.msg_id, e.data) for e in b.drain_events() if isinstance(e, MessageReceived)]
        a_events += a.drain_events()
        done = [e.msg_id for e in a_events if isinstance(e, MessageSent)]
        if done:
            break
        wake = [t for t in (a.next_wakeup(), b.next_wakeup()) if t is not None]
        now = max(now + 1e-7, min(wake)) if wake else now + 1e-6
    assert got == [(mid, data)]
    assert done == [mid]
    kinds = {e.kind for e in a_events}
    assert "send_complete" in kinds
    assert a.stats()["data_sent"] == 5


def test_send_message_takes_any_contiguous_buffer_and_refuses_strided_ones():
    import numpy as np

    ep = Endpoint("h0", TransportConfig())
    conn = ep.connect("h1", 1, 2, [PathInfo(0, 0, bytes(16), bytes(16))])
    ep.send_message(conn, np.arange(1000, dtype=np.float32))
    ep.send_message(conn, bytearray(b"abc"))
    assert [m.length for m in conn.sender.pending] == [4000, 3]
    with pytest.raises(ValueError, match="contiguous"):
        ep.send_message(conn, np.arange(1000)[::2])


def test_messages_above_max_message_bytes_are_refused_at_both_ends():
    """A sender cannot queue, and a receiver never buffers, a message above max_message_bytes."""
    from wire.packets import DataPacket

    cfg = TransportConfig(max_message_bytes=4096, **FAST)
    a, b = Endpoint("a", cfg), Endpoint("b", cfg)
    path = [PathInfo(0, 0, bytes(16), bytes(16))]
    ca = a.connect("b", 1, 2, path)
    b.connect("a", 2, 1, path)
    with pytest.raises(ValueError, match="max_message_bytes"):
        a.send_message(ca, bytes(4097))
    claim = DataPacket(src=bytes(16), dst=bytes(16), ev=7, qp=2, psn=0, va=0, rkey=0, length=16,
                       msg_id=0, msg_len=1 << 32, tsval=0, payload=bytes(16))
    with pytest.raises(ValueError, match="max_message_bytes"):
        b.receive(0.0, 0, claim)
    with pytest.raises(ValueError, match="max_message_bytes"):
        TransportConfig(max_message_bytes=0)
