"""Unit tests of the transport's parts: PSN arithmetic, EV set, receiver, window."""
from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, strategies as st

from wire import constants
from wire.packets import DataPacket, Nack, Probe, Sack
from host_agent.transport import Endpoint, EvState, MessageReceived, PathInfo, TransportConfig
from host_agent.transport.congestion import NsccWindow, RttEstimator
from host_agent.transport.evset import EvSet, ev_path_index
from host_agent.transport.psn import PSN_MOD, from_wire, psn_lt, to_wire


def paths(planes=2, per_plane=4):
    return [PathInfo(p, p, bytes([0xFC, 0, 0, p]) + bytes(12), bytes([0xFC, 0, 0, p, 1, i]) + bytes(10))
            for p in range(planes) for i in range(per_plane)]


# --- PSN ----------------------------------------------------------------------------------------
@given(st.integers(0, PSN_MOD - 1), st.integers(0, 10**9), st.integers(-(1 << 22), 1 << 22))
def test_psn_round_trips_near_any_reference(initial, near, delta):
    seq = max(0, near + delta)
    assert from_wire(to_wire(seq, initial), initial, near) == seq


def test_psn_compare_is_wrap_safe():
    assert psn_lt(PSN_MOD - 1, 0) and not psn_lt(0, PSN_MOD - 1)
    assert psn_lt(5, 6) and not psn_lt(6, 5) and not psn_lt(7, 7)


# --- EV set -----------------------------------------------------------------------------------------
def make_evset(num=128, planes=2, per_plane=4, floor=16, share=True, seed=1):
    changes = []
    evs = EvSet(paths(planes, per_plane), num, floor, random.Random(seed), share,
                on_change=lambda ev, old, cause, now: changes.append((ev.value, old, ev.state, cause)))
    return evs, changes


def test_evs_split_evenly_across_planes_and_map_to_paths_by_hash():
    evs, _ = make_evset(num=128, planes=2, per_plane=4)
    homes = evs.home_evs()
    assert len(homes) == 128 and len({e.value for e in homes}) == 128
    assert Counter(e.plane for e in homes) == {0: 64, 1: 64}
    for e in homes:
        plane_paths = evs.plane_paths[e.plane]
        assert e.path_key == plane_paths[ev_path_index(e.value, len(plane_paths))]
    used = Counter(e.path_key for e in homes)
    assert len(used) == 8 and set(used.values()) == {16}        # every path gets its share


def test_ev_path_index_is_the_32_bit_mix_of_the_value():
    """The mix as Python's integers compute it, over the whole 32-bit range (the compiled build
    computes it over 64-bit ones)."""
    def mix(x, n):
        x = (x ^ (x >> 16)) * 0x45D9F3B & 0xFFFFFFFF
        x = (x ^ (x >> 16)) * 0x45D9F3B & 0xFFFFFFFF
        return (x ^ (x >> 16)) % n
    values = [0, 1, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF] + random.Random(5).sample(range(1 << 32), 200)
    assert [ev_path_index(v, n) for v in values for n in (1, 7, 64)] == [mix(v, n) for v in values for n in (1, 7, 64)]


def test_every_packet_gets_a_different_ev_and_a_rotation_covers_the_set():
    evs, _ = make_evset(num=32)
    seq = [evs.next_data_ev(0.0) for _ in range(64)]
    assert all(a is not b for a, b in zip(seq, seq[1:]))
    assert {id(e) for e in seq[:32]} == {id(e) for e in evs.home_evs()}
    assert [e.plane for e in seq[:4]] == [0, 1, 0, 1]              # planes interleave


def test_skip_passes_an_ev_over_for_exactly_one_rotation():
    evs, changes = make_evset(num=16, planes=1, floor=4)
    first = evs.next_data_ev(0.0)
    for _ in range(15):
        evs.next_data_ev(0.0)
    evs.skip(first, "ecn", 0.0)
    assert first.state is EvState.SKIP
    rotation = [evs.next_data_ev(0.0) for _ in range(15)]
    assert first not in rotation and first.state is EvState.GOOD
    assert evs.next_data_ev(0.0) is first
    assert (first.value, EvState.GOOD, EvState.SKIP, "ecn") in changes


def test_timeout_retires_the_path_and_backups_of_the_same_plane_avoid_it():
    evs, _ = make_evset(num=64, planes=2, per_plane=2)
    victim = evs.home_evs()[0]
    retired = evs.mark_bad(victim, 1.0, "timeout")
    assert victim in retired and all(e.path_key == victim.path_key for e in retired)
    assert all(e.state is EvState.ASSUMED_BAD for e in retired)
    active = evs.active_evs()
    assert len(active) == 64                                        # every slot got a backup
    assert all(e.path_key != victim.path_key for e in active)
    assert Counter(e.plane for e in active) == {0: 32, 1: 32}       # planes stay equally loaded
    assert max(Counter(e.path_key for e in active if e.plane == victim.plane).values()) == 32
    for _ in range(200):
        assert evs.next_data_ev(1.0).path_key != victim.path_key
    assert set(map(id, evs.bad_home_evs())) == set(map(id, retired))
    evs.reinstate(victim, "probe", 2.0)
    assert evs.active_evs() == evs.home_evs()                       # home EVs take their slots back


def test_without_fate_sharing_only_the_timed_out_ev_is_retired():
    evs, _ = make_evset(num=64, share=False)
    victim = evs.home_evs()[0]
    assert evs.mark_bad(victim, 0.0, "timeout") == [victim]
    assert sum(e.state is EvState.ASSUMED_BAD for e in evs.home_evs()) == 1


def test_floor_keeps_min_active_evs_in_the_rotation():
    evs, _ = make_evset(num=16, planes=1, per_plane=2, floor=12)
    a, b = evs.plane_paths[0]
    for e in list(evs.home_evs()):
        evs.mark_bad(e, 0.0, "timeout")                            # both paths of the only plane die
    assert all(not e.usable for e in evs.active_evs())
    assert len(evs.active_evs()) == 12


# --- receiver (through an Endpoint, packets crafted by hand) --------------------------------------------
CFG = TransportConfig(qp_timeout=6, initial_rtt=10e-6, ack_delay=5e-6, probe_interval=50e-6)


def receiver_endpoint(**overrides):
    cfg = TransportConfig(**{**CFG.__dict__, **overrides})
    ep = Endpoint("rx", cfg)
    conn = ep.connect("tx", 2, 1, paths(1, 2))
    got = []

    def received():
        """Every message the endpoint reported received so far: (msg id, data)."""
        got.extend((e.msg_id, e.data) for e in ep.drain_events() if isinstance(e, MessageReceived))
        return got
    return ep, conn, received


def data(psn, va, payload, msg_len, msg_id=0, **kw):
    return DataPacket(src=bytes(16), dst=bytes(16), ev=0x1234 + psn, qp=2, psn=psn, va=va, rkey=0,
                      length=len(payload), msg_id=msg_id, msg_len=msg_len, tsval=psn, payload=payload, **kw)


def test_receiver_places_out_of_order_suppresses_duplicates_and_sacks_gaps():
    ep, conn, got = receiver_endpoint()
    ep.receive(0.0, 0, data(2, 20, b"c" * 10, 30))
    assert ep.poll(0.0) == []                        # a gap is coalesced too (losses are found by trim or timeout)
    out = ep.poll(ep.next_wakeup())
    sacks = [p for _, p in out if isinstance(p, Sack)]
    assert len(sacks) == 1 and sacks[0].cum_psn == 0 and sacks[0].bitmap == 0b100
    assert sacks[0].ev_echo == 0x1234 + 2 and sacks[0].ts_echo == 2
    ep.receive(0.0, 0, data(0, 0, b"a" * 10, 30))
    ep.receive(0.0, 0, data(0, 0, b"a" * 10, 30))                 # duplicate
    ep.receive(0.0, 0, data(1, 10, b"b" * 10, 30))
    assert got() == [(0, b"a" * 10 + b"b" * 10 + b"c" * 10)]
    assert ep.stats()["duplicates"] == 1
    ep.receive(0.0, 0, data(1, 10, b"b" * 10, 30))                # late duplicate after completion
    assert len(got()) == 1
    last = [p for _, p in ep.poll(0.0) if isinstance(p, Sack)][-1]
    assert last.cum_psn == 3 and last.bitmap == 0


def test_receiver_coalesces_in_order_sacks_and_flushes_on_its_timer():
    ep, conn, _ = receiver_endpoint(ack_coalesce=2)
    ep.receive(0.0, 0, data(0, 0, b"x" * 10, 100))
    assert ep.poll(0.0) == [] and ep.next_wakeup() == pytest.approx(5e-6)
    ep.receive(1e-6, 0, data(1, 10, b"x" * 10, 100))
    assert [type(p) for _, p in ep.poll(1e-6)] == [Sack]
    ep.receive(2e-6, 0, data(2, 20, b"x" * 10, 100))
    assert ep.poll(3e-6) == []
    flushed = ep.poll(8e-6)
    assert [p.cum_psn for _, p in flushed] == [3]
    ep.receive(9e-6, 0, data(3, 30, b"x" * 10, 100, ack_req=True))   # the sender's tail:
    tail = ep.poll(9e-6)                                            # SACKed at once, on two paths
    assert [p.cum_psn for _, p in tail] == [4, 4] and len({p.dst for _, p in tail}) == 2


def test_a_packet_overtaken_by_the_senders_tail_is_sacked_on_two_paths():
    """The tail (A bit) arrives before packets sent ahead of it: no later data will repeat their
    news, so their SACKs go on ack_fanout distinct paths (one lost on a dead path of ours must not
    make the sender take them for lost); once new data passes the tail, one copy again."""
    ep, conn, _ = receiver_endpoint(ack_coalesce=2)
    ep.receive(0.0, 0, data(2, 20, b"x" * 10, 100, ack_req=True))   # the tail, first
    assert len(ep.poll(0.0)) == 2
    ep.receive(1e-6, 0, data(0, 0, b"x" * 10, 100))
    ep.receive(2e-6, 0, data(1, 10, b"x" * 10, 100))               # coalesced with the one before
    stragglers = ep.poll(2e-6)
    assert [p.cum_psn for _, p in stragglers] == [3, 3] and len({p.dst for _, p in stragglers}) == 2
    ep.receive(3e-6, 0, data(3, 30, b"x" * 10, 100))               # past the tail: a later SACK repeats it
    assert ep.poll(3e-6) == [] and len(ep.poll(9e-6)) == 1


def test_the_packet_that_fills_the_last_hole_below_the_tail_is_sacked_at_once():
    """Everything the sender sent is here once the last hole below its tail fills: that SACK ends
    the sender's wait (its message's completion), so it does not wait for the coalescing timer.
    Holes filled before the tail has arrived are coalesced as usual."""
    ep, conn, got = receiver_endpoint(ack_coalesce=4)
    ep.receive(0.0, 0, data(1, 10, b"x" * 10, 40))                 # a hole at 0, no tail yet
    ep.receive(1e-6, 0, data(0, 0, b"x" * 10, 40))                 # fills it: coalesced
    assert ep.poll(1e-6) == []
    ep.receive(2e-6, 0, data(3, 30, b"x" * 10, 40, ack_req=True))  # the tail, over a hole at 2
    assert [p.cum_psn for _, p in ep.poll(2e-6)] == [2, 2]
    ep.receive(3e-6, 0, data(2, 20, b"x" * 10, 40))                # the last hole: at once, not at 3 + 5 us
    last = ep.poll(3e-6)
    assert [p.cum_psn for _, p in last] == [4, 4] and got() == [(0, b"x" * 40)]


def sacks_for_spaced_arrivals(gap, count, **overrides):
    """SACKs a receiver sends for `count` in-order packets arriving `gap` seconds apart (polled at each)."""
    ep, conn, _ = receiver_endpoint(**overrides)
    sent, t = [], 0.0
    for psn in range(count):
        ep.receive(t, 0, data(psn, 10 * psn, b"x" * 10, 10 * count + 10))
        t_next = t + gap
        while (wake := ep.next_wakeup()) is not None and wake < t_next:
            sent += [(wake, p) for _, p in ep.poll(wake) if isinstance(p, Sack)]
        sent += [(t, p) for _, p in ep.poll(t) if isinstance(p, Sack)]
        t = t_next
    return sent, t


def test_receiver_stretches_its_sack_wait_when_data_arrives_slower_than_ack_delay():
    """Packets 20 us apart against a 5 us ack_delay: once the receiver has seen the gap, one SACK
    covers ack_coalesce packets instead of each packet getting its own; never later than half the QP timeout."""
    sacks, end = sacks_for_spaced_arrivals(20e-6, 60, ack_coalesce=4, qp_timeout=10)
    late = [p for t, p in sacks if t >= end / 2]                  # after the gap estimate settled
    assert 30 * 20e-6 <= end and 5 <= len(late) <= 9              # about one per 4 of the last 30
    unstretched, _ = sacks_for_spaced_arrivals(20e-6, 60, ack_coalesce=4, qp_timeout=3)
    assert len(unstretched) >= 55                                 # half of 8.2 us < ack_delay: one per packet


def keepalives_for_arrivals(gap, count, **overrides):
    """Keepalive probes a receive-only connection sends while `count` packets arrive `gap` apart."""
    ep, conn, _ = receiver_endpoint(**overrides)
    probes, t = 0, 0.0
    for psn in range(count):
        ep.receive(t, 0, data(psn, 10 * psn, b"x" * 10, 10 * count + 10))
        t_next = t + gap
        for when in (t, *(w for w in [ep.next_wakeup()] if w is not None and w < t_next)):
            probes += sum(isinstance(p, Probe) for _, p in ep.poll(when))
        t = t_next
    return probes


def test_keepalives_cost_at_most_one_probe_per_keepalive_data_pkts():
    """400 packets 10 us apart while probe rounds come every 50 us: without the bound a keepalive
    would leave every round (80); with it, one per 16 data packets at most."""
    bounded = keepalives_for_arrivals(10e-6, 400, keepalive_data_pkts=16)
    unbounded = keepalives_for_arrivals(10e-6, 400, keepalive_data_pkts=0)
    assert 10 <= bounded <= 400 // 16 + 1
    assert unbounded >= 3 * bounded


def test_receiver_echoes_ce_at_once():
    ep, conn, _ = receiver_endpoint(ack_coalesce=8)
    ep.receive(0.0, 0, data(0, 0, b"x", 100, ecn=constants.ECN_CE))
    (nic, sack), = ep.poll(0.0)
    assert sack.ecn_echo and sack.ev_echo == 0x1234


@pytest.mark.parametrize("dscp,reason", [(constants.DSCP_TRIMMED, constants.NACK_TRIMMED),
                                         (constants.DSCP_TRIMMED_LASTHOP, constants.NACK_TRIMMED_LASTHOP)])
def test_trimmed_header_gets_a_nack_with_the_reason_of_its_dscp(dscp, reason):
    ep, conn, got = receiver_endpoint()
    pkt = data(0, 0, b"", 100, flags=constants.MRCH_FLAG_TRIMMED, dscp=dscp)
    pkt.length = 100
    ep.receive(0.0, 0, pkt)
    nacks = [p for _, p in ep.poll(0.0)]
    for nack in nacks:
        assert isinstance(nack, Nack) and nack.reason == reason and nack.psn == 0 and nack.ev_echo == 0x1234
    assert len(nacks) == 2 and len({n.dst for n in nacks}) == 2      # ack_fanout distinct paths
    assert got() == [] and conn.receiver.expected == 0


def test_packet_beyond_the_bitmap_is_refused():
    ep, conn, _ = receiver_endpoint()
    ep.receive(0.0, 0, data(64, 0, b"x", 100))
    (nic, nack), = ep.poll(0.0)
    assert nack.reason == constants.NACK_PSN_OUT_OF_WINDOW and ep.stats()["out_of_window"] == 1


def test_sender_never_sends_beyond_the_bitmap_window():
    cfg = TransportConfig(**{**CFG.__dict__, "max_cwnd": 1000, "init_cwnd_pkts": 1000, "cc": False,
                             "qp_timeout": 19})
    ep = Endpoint("tx", cfg)
    conn = ep.connect("rx", 1, 2, paths())
    ep.send_message(conn, bytes(200 * 1024))
    sent = [p for t in range(200) for _, p in ep.poll(t * 1e-6)]
    assert len(sent) == 64 and max(p.psn for p in sent) == 63


# --- congestion window -------------------------------------------------------------------------------
def window(**kw):
    cfg = TransportConfig(**{**CFG.__dict__, "base_rtt": 10e-6, "init_cwnd_pkts": 32, **kw})
    rtt = RttEstimator(cfg)
    rtt.sample(12e-6)
    return NsccWindow(cfg, rtt, 1000)


def test_window_quadrants():
    w = window()
    start = w.cwnd
    w.on_ack(1.0, 1000, ecn=False, rtt=10e-6)             # no ECN, no queue: proportional increase
    assert w.cwnd == pytest.approx(start + 1000)
    c = w.cwnd
    w.on_ack(1.0, 1000, ecn=False, rtt=30e-6)             # no ECN, high delay: fair increase
    assert c < w.cwnd < c + 100
    c = w.cwnd
    w.on_ack(1.0, 1000, ecn=True, rtt=11e-6)              # ECN, low delay: hold
    assert w.cwnd == c
    w.on_ack(1.0, 1000, ecn=True, rtt=40e-6)              # ECN, high delay: multiplicative decrease
    assert w.cwnd < c * 0.9
    c = w.cwnd
    w.on_ack(1.0 + 1e-6, 1000, ecn=True, rtt=40e-6)       # at most once per RTT
    assert w.cwnd == c


def test_quick_adapt_on_trim_shrinks_towards_what_was_acknowledged():
    w = window()
    for i in range(10):
        w.on_ack(i * 12e-6, 4000, ecn=True, rtt=11e-6)   # 4000 bytes per RTT acknowledged, window held
    before = w.cwnd
    w.on_trim_or_loss(1e-3)
    assert w.cwnd == pytest.approx(max(4000, before / 2))
    w.on_trim_or_loss(1e-3 + 1e-6)                        # once per RTT
    assert w.cwnd == pytest.approx(max(4000, before / 2))


def _held_window(**kw):
    """A window of 32 packets that has seen 8000 bytes acknowledged over its last RTT (12 us)."""
    w = window(**kw)
    for i in range(10):
        w.on_ack(i * 12e-6, 4000, ecn=True, rtt=11e-6)
    return w


@pytest.mark.parametrize("gate,expected", [(0, 32_000), (1, 16_000), (2, 8_000), (3, 8_000)])
def test_qa_gate_bounds_the_quick_adapt_step(gate, expected):
    w = _held_window(qa_gate=gate)
    w.on_trim_or_loss(1e-3)
    assert w.cwnd == pytest.approx(expected)            # max(acknowledged last RTT, cwnd / 2^qa_gate)


def test_disable_qa_keeps_the_window_on_a_trim():
    w = _held_window(disable_qa=True)
    before = w.cwnd
    w.on_trim_or_loss(1e-3)
    assert w.cwnd == before and w.quick_adapts == 0


def test_qa_threshold_makes_a_long_queue_quick_adapt_without_a_trim():
    plain, gated = _held_window(), _held_window(qa_threshold=20e-6)
    for w in (plain, gated):
        w.on_ack(1e-3, 1000, ecn=False, rtt=40e-6)        # 30 us of queueing, no ECN: fair increase
    assert plain.quick_adapts == 0 and gated.quick_adapts == 1 and gated.cwnd < plain.cwnd / 1.9


def test_target_delay_in_seconds_replaces_the_default_fraction_of_the_base_rtt():
    w = window(target_delay=20e-6)                       # base RTT 10 us: the default target would be 3 us
    start = w.cwnd
    w.on_ack(1.0, 1000, ecn=False, rtt=20e-6)            # q = 10 us, half the target: proportional
    assert w.cwnd == pytest.approx(start + 500)


def test_fi_scale_multiplies_the_fair_increase():
    one, two = window(), window(fi_scale=2.0)
    for w in (one, two):
        w.on_ack(1.0, 1000, ecn=False, rtt=30e-6)
    assert two.cwnd - 32_000 == pytest.approx(2 * (one.cwnd - 32_000))


def test_adjust_bytes_threshold_gathers_increases_until_enough_bytes_were_acknowledged():
    w = window(adjust_bytes_threshold=3000)
    start = w.cwnd
    w.on_ack(1.0, 1000, ecn=False, rtt=10e-6)
    w.on_ack(1.0, 1000, ecn=False, rtt=10e-6)
    assert w.cwnd == start                               # 2000 bytes: still gathered
    w.on_ack(1.0, 1000, ecn=False, rtt=10e-6)
    assert w.cwnd == pytest.approx(start + 3000)


def test_adjust_period_threshold_gathers_increases_for_that_long():
    w = window(adjust_period_threshold=1e-3)
    start = w.cwnd
    w.on_ack(0.5e-3, 1000, ecn=False, rtt=10e-6)
    assert w.cwnd == start
    w.on_ack(1.0e-3, 1000, ecn=False, rtt=10e-6)
    assert w.cwnd == pytest.approx(start + 2000)


@pytest.mark.parametrize("field,value", [("max_md_jump", 0.0), ("max_md_jump", 1.5), ("qa_gate", 17),
                                         ("target_delay", -1.0), ("adjust_bytes_threshold", -1)])
def test_bad_nscc_parameters_are_named(field, value):
    with pytest.raises(ValueError, match=f"TransportConfig.{field}"):
        TransportConfig(**{field: value})


def test_pacing_spaces_packets_by_window_over_rtt():
    w = window(pacing_gain=1.0, cc=False, max_cwnd=10)
    assert w.pacing_rate(1) == pytest.approx(10 * 1000 / 12e-6)
    w.sent(0.0, 1000, 1)
    assert not w.may_send(1.1e-6) and w.may_send(1.3e-6)


def test_pace_at_target_paces_over_the_target_rtt_when_slow_samples_inflate_srtt():
    """Samples of a slow path (70 us, base 10 us) push srtt far above what most packets see: by
    default the pacing follows srtt; with pace_at_target it spreads the window over at most the
    base RTT plus the target delay, and below that over srtt as before."""
    slow, capped = window(pacing_gain=1.0, cc=False, max_cwnd=10), window(
        pacing_gain=1.0, cc=False, max_cwnd=10, pace_at_target=True, target_delay=5e-6)
    for w in (slow, capped):
        for _ in range(8):
            w._rtt.sample(70e-6)
    assert slow._rtt.srtt > 40e-6
    assert slow.pacing_rate(1) == pytest.approx(10 * 1000 / slow._rtt.srtt)
    assert capped.pacing_rtt() == pytest.approx(15e-6)
    assert capped.pacing_rate(1) == pytest.approx(10 * 1000 / 15e-6)
    calm = window(pacing_gain=1.0, cc=False, max_cwnd=10, pace_at_target=True, target_delay=5e-6)
    assert calm.pacing_rtt() == pytest.approx(12e-6)            # srtt below the cap: srtt


def _sent_by_polls(cfg, times, message=bytes(200_000)):
    ep = Endpoint("tx", cfg)
    conn = ep.connect("rx", 1, 2, paths(1, 1))
    ep.send_message(conn, message)
    return [len(ep.poll(t)) for t in times]


def test_pacing_keeps_its_rate_when_polled_late():
    """The agent's select wakes up late on a busy machine (1 ms, while a packet takes 0.45 ms at
    20 Mbit/s): a sender held back only by pacing catches up on the time it missed, up to
    pacing_max_lag, instead of sending one packet per poll."""
    cfg = TransportConfig(line_rate_bps=20e6, cc=False, pacing_gain=1.0)
    packet_time = (1024 + 106) * 8 / 20e6
    polls = [k * 1e-3 for k in range(21)]                         # 20 ms, one poll per ms
    sent = _sent_by_polls(cfg, polls)
    assert sum(sent) >= 0.95 * 20e-3 / packet_time               # the line rate, not 1 packet/ms
    assert max(sent) <= 1e-3 / packet_time + 2                   # bursts no longer than the lag
    one_each = _sent_by_polls(TransportConfig(line_rate_bps=20e6, cc=False, pacing_gain=1.0, pacing_max_lag=0.0),
                              polls)
    assert one_each[1:] == [1] * 20                              # without catching up: 1 per poll


def test_an_idle_sender_saves_up_no_pacing_credit():
    cfg = TransportConfig(line_rate_bps=20e6, cc=False, pacing_gain=1.0, pacing_burst_pkts=1)
    ep = Endpoint("tx", cfg)
    conn = ep.connect("rx", 1, 2, paths(1, 1))
    ep.send_message(conn, bytes(1024))
    (_, first), = ep.poll(0.0)
    ep.receive(1e-3, 0, _sack(1, 0, first))
    assert conn.sender.idle and not ep.poll(5e-3)                # nothing to send for 9 ms
    ep.send_message(conn, bytes(10 * 1024))
    assert len(ep.poll(10e-3)) == 1                               # a new message starts a fresh schedule


def test_base_rtt_comes_from_data_packets_only():
    """Regression (Mininet leaf-spine: MRC slower than RoCE): a probe reply or a trim NACK makes
    a short round trip (small, high priority); taken as the base RTT it turned every data RTT
    into queueing delay, and every ECN mark into a halving of the window."""
    cfg = TransportConfig(**{**CFG.__dict__, "qp_timeout": 6})
    ep = Endpoint("tx", cfg)
    conn = ep.connect("rx", 1, 2, paths())
    ep.send_message(conn, bytes(cfg.mtu_payload))              # one full packet
    (_, first), = ep.poll(0.0)
    ep.receive(40e-6, 0, _sack(1, 0, first))                     # a data round trip: 40 us
    assert conn.rtt.base_rtt == pytest.approx(40e-6)
    from wire.packets import ProbeReply
    probe = conn.prober._probe(50e-6, conn.evset.home_evs()[0], "reinstate")
    ep.receive(55e-6, 0, ProbeReply(src=bytes(16), dst=bytes(16), ev=9, qp=1, probe_id=probe[1].probe_id,
                                    ev_echo=probe[1].ev, ts_echo=probe[1].tsval))
    ep.send_message(conn, bytes(cfg.mtu_payload))
    (_, second), = ep.poll(60e-6)
    ep.receive(64e-6, 0, Nack(src=bytes(16), dst=bytes(16), ev=9, qp=1, psn=1, cum_psn=1, reason=constants.NACK_TRIMMED,
                              ev_echo=second.ev, ts_echo=second.tsval))
    assert conn.stats["probe_replies"] == 1 and conn.stats["trims"] == 1
    assert conn.rtt.base_rtt == pytest.approx(40e-6)             # 5 and 4 us samples: not the base
    assert conn.rtt.srtt < 40e-6                                 # (they do count for the RTO)


def test_probe_is_answered_on_several_distinct_paths():
    ep, conn, _ = receiver_endpoint(probe_reply_fanout=4)      # the connection has 2 paths
    from wire.packets import Probe, ProbeReply
    ep.receive(0.0, 0, Probe(src=bytes(16), dst=bytes(16), ev=77, qp=2, probe_id=5, tsval=9))
    replies = [p for _, p in ep.poll(0.0)]
    assert all(isinstance(p, ProbeReply) and p.probe_id == 5 and p.ev_echo == 77 for p in replies)
    assert len(replies) == 2 and len({p.dst for p in replies}) == 2


def _sack(psn_cum, bitmap, answering):
    return Sack(src=bytes(16), dst=bytes(16), ev=5, qp=1, cum_psn=psn_cum, sack_base=psn_cum, bitmap=bitmap,
                ev_echo=answering.ev, ts_echo=answering.tsval)


def _blamed_once():
    """(endpoint, connection, first transmission, its retransmission) of a packet whose timeout
    retired its first transmission's EV (a packet sent after it had arrived) at 90 us."""
    cfg = TransportConfig(**{**CFG.__dict__, "qp_timeout": 6, "sack_loss_detection": False,
                             "share_fate_by_path": False})
    ep = Endpoint("tx", cfg)
    conn = ep.connect("rx", 1, 2, paths())
    ep.send_message(conn, bytes(1000))
    (_, warmup), = ep.poll(0.0)
    ep.receive(10e-6, 0, _sack(1, 0, warmup))                   # the first RTT sample
    ep.send_message(conn, bytes(1000))
    (_, first), = ep.poll(20e-6)
    ep.send_message(conn, bytes(1000))
    (_, second), = ep.poll(30e-6)
    ep.receive(40e-6, 0, _sack(1, 0b10, second))                # a later packet arrived: evidence
    (resent,) = [p for _, p in ep.poll(90e-6) if isinstance(p, DataPacket)]   # timer: EV retired, resent
    assert resent.psn == first.psn and resent.ev != first.ev
    assert conn.evset.get(first.ev).state is EvState.ASSUMED_BAD
    return ep, conn, first, resent


def test_spurious_timeout_is_taken_back():
    """A SACK answering a packet sent before the retransmission proves the original arrived. (EVs
    judged alone, so that one timeout retires its EV: with fates shared by path, one loss is not yet
    the path's own, tests/host_agent/test_transport_pathloss.py.)"""
    ep, conn, first, _ = _blamed_once()                         # the timer (20 + 65.5 us) fired: EV retired
    retired = [e for e in ep.drain_events() if e.kind == "ev_state" and e.new == "ASSUMED_BAD"]
    assert retired and conn.evset.get(first.ev).state is EvState.ASSUMED_BAD
    rto_before = conn.rtt.rto
    ep.receive(100e-6, 0, _sack(3, 0, first))
    assert ep.stats()["spurious_timeouts"] == 1
    assert conn.evset.get(first.ev).state is EvState.GOOD
    assert conn.rtt.rto > rto_before
    assert conn.sender.idle


def test_an_arrival_after_a_second_retransmission_does_not_take_back_the_first_blame():
    """Regression (the two-server fat-tree under CPU load): a packet lost on a dead path retired
    it; its retransmission's acknowledgement came slower than the RTO, so it was sent a third
    time; the SACK then covering it answered a packet sent after the second transmission, which
    may be the one that arrived. Taking that as proof that the first arrived put the dead path
    back, and the packets resent onto it stalled the all-reduce until its horizon."""
    ep, conn, first, resent = _blamed_once()
    (again,) = [p for _, p in ep.poll(400e-6) if isinstance(p, DataPacket)]   # its timer too (no evidence)
    assert again.psn == first.psn and ep.stats()["timeouts_unattributed"] == 1
    ep.receive(410e-6, 0, _sack(3, 0, resent))                  # answers the second transmission
    assert ep.stats()["spurious_timeouts"] == 1                 # some transmission had arrived ...
    assert conn.evset.get(first.ev).state is EvState.ASSUMED_BAD     # ... not shown to be the first


def test_an_arrival_of_the_first_transmission_does_not_take_back_the_second_blame():
    """A packet blamed twice (its first transmission's EV retired, then its retransmission's):
    the SACK then answering the first transmission shows that one arrived, not the second, whose
    EV stays retired (the first's comes back by its probes)."""
    ep, conn, first, resent = _blamed_once()
    ep.send_message(conn, bytes(1000))
    (_, third), = ep.poll(100e-6)
    ep.receive(110e-6, 0, _sack(1, 0b110, third))               # one sent after the resend arrived
    t, again = 110e-6, []
    while not again and t < 2e-3:                               # the resend's timer: its EV retired too
        t += 5e-6
        again = [p for _, p in ep.poll(t) if isinstance(p, DataPacket) and p.psn == first.psn]
    assert again and conn.evset.get(resent.ev).state is EvState.ASSUMED_BAD
    ep.receive(t + 10e-6, 0, _sack(4, 0, first))                # answers the first transmission
    assert ep.stats()["spurious_timeouts"] == 1
    assert conn.evset.get(resent.ev).state is EvState.ASSUMED_BAD     # not shown to have arrived


def test_timeout_of_a_packet_sent_before_any_rtt_sample_blames_no_path():
    """Its RTO was the initial guess (on the Mininet testbed the first round trips take several
    times initial_rtt): later packets arriving first prove nothing against its path."""
    cfg = TransportConfig(**{**CFG.__dict__, "qp_timeout": 6, "sack_loss_detection": False})   # the timer's case
    ep = Endpoint("tx", cfg)
    conn = ep.connect("rx", 1, 2, paths())
    ep.send_message(conn, bytes(1000))
    (_, first), = ep.poll(0.0)
    ep.send_message(conn, bytes(1000))
    (_, second), = ep.poll(30e-6)
    ep.receive(40e-6, 0, _sack(0, 0b10, second))
    assert [p.psn for _, p in ep.poll(70e-6)] == [0]             # resent (timer at 65.5 us) ...
    assert conn.evset.get(first.ev).state is EvState.GOOD        # ... but its path not blamed
    assert ep.stats()["timeouts_unattributed"] == 1


def test_timeout_with_nothing_delivered_since_retransmits_without_blaming_the_path():
    """A stall of everything (peer or fabric) is no evidence against the packet's path: the packet
    is resent, no EV is retired, and when it turns out to have arrived the RTO is not stretched."""
    cfg = TransportConfig(**{**CFG.__dict__, "qp_timeout": 6, "sack_loss_detection": False})   # the timer's case
    ep = Endpoint("tx", cfg)
    conn = ep.connect("rx", 1, 2, paths())
    ep.send_message(conn, bytes(3000))
    sent = [pkt for t in (0.0, 1e-6, 2e-6) for _, pkt in ep.poll(t)]
    assert [p.psn for p in sent] == [0, 1, 2]
    ep.receive(20e-6, 0, _sack(1, 0, sent[0]))                   # the first arrives; then silence
    out = [pkt for t in (200e-6, 201e-6, 202e-6) for _, pkt in ep.poll(t)]     # the other two time out
    assert {p.psn for p in out} == {1, 2} and all(p.flags & constants.MRCH_FLAG_RETX for p in out)
    assert not [e for e in ep.drain_events() if e.kind == "ev_state"]
    assert all(conn.evset.get(p.ev).state is EvState.GOOD for p in sent)
    stats = ep.stats()
    assert stats["timeouts"] == 2 and stats["timeouts_unattributed"] == 2 and "evs_retired" not in stats
    rto_before = conn.rtt.rto_scale
    ep.receive(210e-6, 0, _sack(3, 0, sent[2]))                  # they had arrived after all
    assert ep.stats()["spurious_timeouts"] == 2 and conn.rtt.rto_scale == rto_before
    assert conn.sender.idle


def test_a_late_probe_reply_still_times_the_path():
    """A probe answered after its timeout is no success, but its round trip is real: the RTO learns
    it, so a connection whose only traffic is probes does not keep an RTO below the path's delay."""
    from wire.packets import ProbeReply
    from host_agent.transport import Endpoint, PathInfo, TransportConfig
    from host_agent.transport.probes import KEEPALIVE

    cfg = TransportConfig(initial_rtt=1e-3, qp_timeout=10)
    conn = Endpoint("a", cfg).connect("b", 1, 2, [PathInfo(0, 0, bytes(16), bytes(16))])
    ev = conn.evset.active_evs()[0]
    _, probe = conn.prober._probe(0.0, ev, KEEPALIVE)
    delay = 10 * conn.rtt.rto
    conn.prober.poll(conn.rtt.rto + 1e-6, [])                      # times out, unanswered
    assert conn.stats["probe_timeouts"] == 1 and conn.rtt.samples == 0
    conn.prober.on_reply(delay, ProbeReply(src=bytes(16), dst=bytes(16), ev=9, qp=1, probe_id=probe.probe_id,
                                           ev_echo=ev.value, ts_echo=probe.tsval))
    assert conn.stats["probe_replies_late"] == 1 and conn.stats["probe_replies"] == 0
    assert conn.rtt.samples == 1 and conn.rtt.rto > delay


def test_a_message_received_out_of_order_or_in_order_is_joined_by_offset():
    from host_agent.transport.receiver import InMessage
    data = bytes(range(256)) * 4
    pieces = [(offset, data[offset:offset + 100]) for offset in range(0, len(data), 100)]
    for order in (pieces, pieces[::-1], pieces[1:] + pieces[:1]):
        msg = InMessage(1, len(data))
        for offset, payload in order:
            msg.place(offset, memoryview(payload))
        assert msg.received == len(data) and msg.data() == data
    overlapping = InMessage(2, 8)
    overlapping.place(0, b"abcdef")
    overlapping.place(4, b"efgh")
    with pytest.raises(ValueError, match="overlap"):
        overlapping.data()


def test_the_send_queue_gives_its_messages_oldest_first_and_empties():
    from host_agent.transport.message import SendQueue
    queue = SendQueue(mtu=4)
    assert not queue and len(queue) == 0
    first, second = queue.add(b"abcdef"), queue.add(b"xy")
    assert queue and len(queue) == 2 and queue.first().msg_id == first
    cut = [queue.cut(seq) for seq in range(3)]
    assert [(s.msg.msg_id, s.offset, s.length) for s in cut] == [(first, 0, 4), (first, 4, 2), (second, 0, 2)]
    assert not queue and list(queue) == []


def test_the_send_queue_keeps_its_order_past_its_head_s_compaction():
    from host_agent.transport.message import SendQueue
    queue = SendQueue(mtu=8)
    ids = [queue.add(bytes([n % 256]) * (1 + n % 20)) for n in range(300)]     # 1-3 packets each
    seen, seq = [], 0
    while queue:
        oldest = queue.first().msg_id
        assert len(queue) == len(ids) - len(seen) and next(iter(queue)).msg_id == oldest
        seg = queue.cut(seq)
        seq += 1
        if seg.msg.fully_segmented:
            seen.append(seg.msg.msg_id)
        if len(seen) == 150:
            ids.append(queue.add(b"late"))      # added while the head is far down the list
    assert seen == ids and len(queue) == 0
