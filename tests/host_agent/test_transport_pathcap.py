"""The path cap (host_agent.transport.pathcap): a path at its cap gets no new packet while another
has room, acknowledgements at a normal RTT open a path's cap and slow ones do not, and the sender
counts every path's packets in flight."""
from __future__ import annotations

import random

import pytest

from host_agent.transport import Endpoint, PathInfo, TransportConfig, sizing
from host_agent.transport.evset import EvSet
from host_agent.transport.pathcap import PathCapSelector
from host_agent.transport.policies import RotationSelector

PATHS = [PathInfo(0, 0, bytes(16), bytes([0xFC, 0, 0, 0, 1, i]) + bytes(10)) for i in range(4)]
CFG = TransportConfig(num_evs=32, ev_min_active=4, path_cap_pkts=2)


def capped_evset(seed=1):
    evset = EvSet(PATHS, CFG.num_evs, CFG.ev_floor, random.Random(seed), True, path_cap=CFG.path_cap_pkts)
    return evset, PathCapSelector(RotationSelector(CFG), CFG)


def test_a_path_at_its_cap_gets_no_new_packet_while_another_has_room():
    evset, selector = capped_evset()
    full = evset.loads[2]
    full.inflight = 2                                   # path 2 holds its cap
    picks = [selector.next_ev(evset, 0.0, None) for _ in range(64)]
    assert {ev.path_key for ev in picks} == {0, 1, 3}
    full.inflight = 1                                   # one came back: room again
    assert 2 in {selector.next_ev(evset, 0.0, None).path_key for _ in range(16)}


def test_a_retransmission_at_the_cap_avoids_the_ev_it_was_lost_on():
    evset, selector = capped_evset()
    lost = selector.next_ev(evset, 0.0, None)
    for load in evset.loads:
        load.inflight = 2
    evset.loads[lost.path_key].inflight = 0             # only the lost EV's path has room
    for _ in range(16):
        assert selector.next_ev(evset, 0.0, lost) is not lost


def test_the_cap_never_stalls_the_sender():
    """Every path at its cap: the packet still goes, on the EV the rotation chose."""
    evset, selector = capped_evset()
    plain = EvSet(PATHS, CFG.num_evs, CFG.ev_floor, random.Random(1), True)
    for load in evset.loads:
        load.inflight = 2
    rotation = RotationSelector(CFG)
    for _ in range(40):
        assert selector.next_ev(evset, 0.0, None).value == rotation.next_ev(plain, 0.0, None).value


BASE_RTT = 10e-6


def sent_burst(packets: int, cap: int):
    """A sender and a receiver wired directly (base RTT 10 us), `packets` full packets sent
    paced over 7.5 us."""
    cfg = TransportConfig(num_evs=32, ack_coalesce=4, ack_delay=2e-6, init_cwnd_pkts=packets, max_cwnd=64,
                          pacing_burst_pkts=packets, initial_rtt=BASE_RTT, base_rtt=BASE_RTT, qp_timeout=10,
                          path_cap_pkts=cap)
    tx, rx = Endpoint("tx", cfg), Endpoint("rx", cfg)
    conn = tx.connect("rx", 1, 2, PATHS)
    rx.connect("tx", 2, 1, PATHS)
    tx.send_message(conn, bytes(cfg.mtu_payload * packets))
    sent, now = [], 0.0
    while len(sent) < packets:
        last = now
        sent += [pkt for _, pkt in tx.poll(now)]
        now = tx.next_wakeup()
    assert len(sent) == packets and last < 8e-6
    return tx, rx, conn, sent


def deliver(tx, rx, packets, at: float) -> None:
    """`packets` arrive at `at`; their SACKs (the coalesced ones too, which wait longer after a
    lull) reach the sender 1 us after they leave."""
    for pkt in packets:
        rx.receive(at, 0, pkt)
    when = at
    while when is not None and when <= at + 30e-6:
        for _, sack in rx.poll(when):
            tx.receive(when + 1e-6, 0, sack)
        when = rx.next_wakeup()


def path_counts(conn, packets) -> list[int]:
    counts = [0] * len(PATHS)
    for pkt in packets:
        counts[conn.evset.get(pkt.ev).path_key] += 1
    return counts


def test_the_sender_counts_each_paths_packets_in_flight():
    tx, rx, conn, sent = sent_burst(16, cap=0)
    assert [load.inflight for load in conn.evset.loads] == path_counts(conn, sent)
    assert all(load.cap == float("inf") for load in conn.evset.loads)     # no cap unless configured
    deliver(tx, rx, sent[:6], 8e-6)
    assert [load.inflight for load in conn.evset.loads] == path_counts(conn, sent[6:])
    deliver(tx, rx, sent[6:], 9e-6)
    assert [load.inflight for load in conn.evset.loads] == [0] * len(PATHS)


def test_acknowledgements_at_a_normal_rtt_open_a_paths_cap_and_slow_ones_do_not():
    tx, rx, conn, sent = sent_burst(16, cap=2)
    loads = conn.evset.loads
    slow_path = conn.evset.get(sent[0].ev).path_key
    fast = [p for p in sent if conn.evset.get(p.ev).path_key != slow_path]
    slow = [p for p in sent if conn.evset.get(p.ev).path_key == slow_path]
    deliver(tx, rx, fast, 9e-6)                         # acknowledged within 1.5 base RTTs
    deliver(tx, rx, slow, 40e-6)                        # four base RTTs: a slow path
    counts = path_counts(conn, sent)
    for key, load in enumerate(loads):
        assert load.inflight == 0
        assert load.cap == (2 if key == slow_path else 2 + counts[key]), (key, load.cap, counts)


def test_a_cap_opens_no_further_than_the_largest_window():
    tx, rx, conn, sent = sent_burst(16, cap=60)
    deliver(tx, rx, sent, 9e-6)
    assert max(load.cap for load in conn.evset.loads) == 64


def test_sizing_caps_paths_for_spraying_only():
    sprayed = sizing.for_network(100e9, 10e-6, 4096)
    assert sprayed["path_cap_pkts"] == sizing.PATH_CAP_PKTS > 0
    assert "path_cap_pkts" not in sizing.for_network(100e9, 10e-6, 4096, spraying=False)
    TransportConfig(**sprayed)


@pytest.mark.parametrize("field, value", [("path_cap_pkts", -1), ("path_cap_pkts", 2.5), ("path_cap_rtts", 0)])
def test_a_bad_path_cap_is_refused_by_name(field, value):
    with pytest.raises(ValueError, match=field):
        TransportConfig(**{field: value})
