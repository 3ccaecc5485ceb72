"""The steering rule (host_agent.transport.steering): an EV marked again and again stays out of use
longer, and comes back after clean acknowledgements; EVs acknowledged clean are reused."""
from __future__ import annotations

import random

from host_agent.transport import PathInfo, TransportConfig
from host_agent.transport.evset import EvSet
from host_agent.transport.policies import MrcPathMonitor, RotationSelector
from host_agent.transport.steering import Steering, SteeringParams

CFG = TransportConfig(num_evs=32, ev_min_active=4)


def setup(seed=1):
    paths = [PathInfo(0, 0, bytes(16), bytes([0xFC, 0, 0, 0, 1, i]) + bytes(10)) for i in range(4)]
    evset = EvSet(paths, CFG.num_evs, CFG.ev_floor, random.Random(seed), True)
    return evset, RotationSelector(CFG), MrcPathMonitor(CFG)


def gap_after(evset, selector, ev, limit=20_000) -> int:
    """Data packets sent before `ev` is chosen again."""
    for n in range(limit):
        if selector.next_ev(evset, 0.0, None) is ev:
            return n
    raise AssertionError(f"EV {ev.value:#x} never came back within {limit} packets")


def test_an_ev_marked_again_and_again_stays_out_longer_and_clean_acks_bring_it_back():
    evset, selector, monitor = setup()
    ev = selector.next_ev(evset, 0.0, None)
    monitor.on_ecn(evset, ev, 0.0)
    once = gap_after(evset, selector, ev)
    for _ in range(3):                                  # three more marks: 8x the first hold
        monitor.on_ecn(evset, ev, 0.0)
    often = gap_after(evset, selector, ev)
    assert often > 4 * once, (once, often)
    assert evset.steering.strikes[ev.path_key] == 4
    for _ in range(4):                                  # clean acknowledgements take the strikes off
        monitor.on_ack(evset, ev, False, 10e-6, 0.0)
    assert ev.path_key not in evset.steering.strikes
    monitor.on_ecn(evset, ev, 0.0)
    again = gap_after(evset, selector, ev)
    assert again < often / 4, (once, often, again)


def test_a_hold_grows_geometrically_up_to_its_cap():
    steer = Steering(by_path=False)
    evset, selector, _ = setup()
    ev = selector.next_ev(evset, 0.0, None)
    holds = [steer.strike(ev, 32) for _ in range(8)]
    assert holds[:4] == [32, 64, 128, 256]
    assert holds[-1] == steer.params.max_hold_rotations * 32


def test_a_repeated_mark_is_the_paths_own_and_spares_the_window():
    evset, selector, monitor = setup()
    ev = selector.next_ev(evset, 0.0, None)
    assert not monitor.on_ecn(evset, ev, 0.0)           # a first mark: the window hears of it
    assert monitor.on_ecn(evset, ev, 0.0)               # marked again: steering's business


def test_evs_acknowledged_clean_replace_a_struck_paths_evs():
    evset, selector, monitor = setup()
    chosen = [selector.next_ev(evset, 0.0, None) for _ in range(8)]
    bad, good = chosen[0], next(e for e in chosen if e.path_key != chosen[0].path_key)
    for _ in range(3):
        monitor.on_ecn(evset, bad, 0.0)
    monitor.on_ack(evset, good, False, 10e-6, 0.0)
    picks = [selector.next_ev(evset, 0.0, None) for _ in range(64)]
    assert good in picks
    on_bad_path = sum(e.path_key == bad.path_key for e in picks)
    assert on_bad_path < 64 / 4                          # below the path's even share


def test_a_slow_acknowledgement_is_a_strike_a_normal_one_is_clean():
    evset, selector, monitor = setup()
    ev = selector.next_ev(evset, 0.0, None)
    for _ in range(10):
        monitor.on_ack(evset, ev, False, 10e-6, 0.0)
    assert ev.path_key not in evset.steering.strikes
    monitor.on_ack(evset, ev, False, 100e-6, 0.0)
    assert evset.steering.strikes[ev.path_key] == 1


ACK_DELAY = 2e-6


def back_to_back(packets: int):
    """A sender and a receiver endpoint wired directly, `packets` full packets queued and sent."""
    from host_agent.transport import Endpoint
    cfg = TransportConfig(num_evs=32, ack_coalesce=4, ack_delay=ACK_DELAY, init_cwnd_pkts=packets, max_cwnd=64,
                          pacing_burst_pkts=packets, initial_rtt=1e-5, qp_timeout=10)
    tx, rx = Endpoint("tx", cfg), Endpoint("rx", cfg)
    paths = [PathInfo(0, 0, bytes(16), bytes([0xFC, 0, 0, 0, 1, i]) + bytes(10)) for i in range(4)]
    conn = tx.connect("rx", 1, 2, paths)
    rx.connect("tx", 2, 1, paths)
    tx.send_message(conn, bytes(cfg.mtu_payload * packets))
    sent, now = [], 0.0
    while len(sent) < packets:                          # paced: a packet at each wake-up
        last = now
        sent += [pkt for _, pkt in tx.poll(now)]
        now = tx.next_wakeup()
    assert len(sent) == packets and last < 10e-6
    return tx, rx, conn, sent


def sacks_for(rx, sent, now):
    """The SACKs the receiver sends for `sent`, arriving at `now` (the coalesced ones included)."""
    for pkt in sent:
        rx.receive(now, 0, pkt)
    return [pkt for _, pkt in rx.poll(now) + rx.poll(now + ACK_DELAY)]


def test_without_a_signal_only_the_echoed_packet_of_a_sack_is_judged():
    tx, rx, conn, sent = back_to_back(8)
    sacks = sacks_for(rx, sent, 15e-6)
    assert 0 < len(sacks) < len(sent)                   # coalesced: fewer SACKs than packets
    for sack in sacks:
        tx.receive(20e-6, 0, sack)
    assert {ev.value for ev in conn.evset.steering.clean} == {s.ev_echo for s in sacks}


def test_while_a_signal_stands_every_packet_a_sack_acknowledges_is_judged():
    tx, rx, conn, sent = back_to_back(8)
    steer = conn.evset.steering
    evs = {conn.evset.get(p.ev) for p in sent}
    elsewhere = next(e for e in conn.evset.by_value.values() if e not in evs)
    steer.held_until[elsewhere.value] = 1e9             # a signal about another EV (no path struck)
    assert steer.signalled
    sacks = sacks_for(rx, sent, 15e-6)
    for sack in sacks:
        tx.receive(20e-6, 0, sack)
    assert {ev.value for ev in steer.clean} == {p.ev for p in sent}   # each packet's EV offered for reuse


def test_a_packet_acknowledged_late_without_an_echo_is_not_offered_for_reuse_nor_struck():
    tx, rx, conn, sent = back_to_back(8)
    steer, evset = conn.evset.steering, conn.evset
    steer.avg_rtt = 15e-6
    evs = {evset.get(p.ev) for p in sent}
    elsewhere = next(e for e in evset.by_value.values() if e not in evs)
    steer.strike(elsewhere, 1_000)                      # a signal that stands (held out a long while)
    late, echoed = next((a, b) for a in sent for b in sent
                        if len({evset.get(a.ev).path_key, evset.get(b.ev).path_key, elsewhere.path_key}) == 3)
    steer.strikes[evset.get(late.ev).path_key] = 1.0    # its path is under suspicion
    for pkt in (late, echoed):                          # both held somewhere, arriving together
        rx.receive(95e-6, 0, pkt)
    sacks = [pkt for _, pkt in rx.poll(rx.next_wakeup())]
    assert [s.ev_echo for s in sacks][:1] == [echoed.ev]    # the SACK echoes the later one only
    for sack in sacks:
        tx.receive(100e-6, 0, sack)
    assert late.ev not in {ev.value for ev in steer.clean}
    assert steer.strikes[evset.get(late.ev).path_key] == 1.0   # a bound on its RTT: neither clean nor a strike


def test_an_ev_acknowledged_clean_waits_for_reuse_one_rotation_at_most():
    evset, selector, monitor = setup()
    chosen = [selector.next_ev(evset, 0.0, None) for _ in range(8)]
    bad, good = chosen[0], next(e for e in chosen if e.path_key != chosen[0].path_key)
    monitor.on_ack(evset, good, False, 10e-6, 0.0)      # clean: offered for reuse
    for _ in range(3):
        monitor.on_ecn(evset, bad, 0.0)
    steer = evset.steering
    assert steer.peek_clean(evset) is good
    steer.sent += int(steer.params.clean_age * len(evset.slots)) + 1   # a rotation later
    assert steer.peek_clean(evset) is None and steer.take_clean(evset, None) is None


def test_an_unechoed_packet_on_a_struck_path_is_not_offered_for_reuse():
    evset, selector, monitor = setup()
    ev = selector.next_ev(evset, 0.0, None)
    steer = evset.steering
    steer.avg_rtt = 10e-6
    monitor.on_acked(evset, ev, 5e-6, 0.0)
    assert steer.peek_clean(evset) is ev                # on time, path clean: offered
    steer.take_clean(evset, None)
    steer.strikes[ev.path_key] = 1.0
    monitor.on_acked(evset, ev, 5e-6, 0.0)
    assert steer.peek_clean(evset) is None              # its path is suspect: left to echoed samples


def test_a_suspect_ev_is_replaced_only_by_a_clean_ev_of_a_less_struck_path():
    evset, selector, monitor = setup()
    steer = evset.steering
    chosen = [selector.next_ev(evset, 0.0, None) for _ in range(8)]
    a, b = chosen[0], next(e for e in chosen if e.path_key != chosen[0].path_key)
    monitor.on_ack(evset, b, False, 10e-6, 0.0)         # b acknowledged clean: offered for reuse
    steer.strikes[a.path_key] = steer.strikes[b.path_key] = 2.0
    assert steer.take_clean(evset, None, a) is None     # as suspect as a's path: no better
    steer.strikes[b.path_key] = 1.0
    assert steer.take_clean(evset, None, a) is b        # less struck: takes a's turn


def setup_shared(seed=1):
    paths = [PathInfo(0, 0, bytes(16), bytes([0xFC, 0, 0, 0, 1, i]) + bytes(10)) for i in range(4)]
    evset = EvSet(paths, CFG.num_evs, CFG.ev_floor, random.Random(seed), True,
                  steering=SteeringParams(share_struck=True))
    return evset, RotationSelector(CFG), MrcPathMonitor(CFG)


def test_share_struck_counts_a_paths_strikes_once_per_rotation():
    """With share_struck, the marks of one rotation (about packets sent before the steering
    could react) add one strike; a mark a rotation later adds another. Without it, each adds one."""
    for shared, expected in ((True, 1), (False, 5)):
        evset, selector, monitor = setup_shared() if shared else setup()
        ev = selector.next_ev(evset, 0.0, None)
        for _ in range(5):
            monitor.on_ecn(evset, ev, 0.0)
        assert evset.steering.strikes[ev.path_key] == expected
    evset, selector, monitor = setup_shared()
    ev = selector.next_ev(evset, 0.0, None)
    monitor.on_ecn(evset, ev, 0.0)
    for _ in range(len(evset.slots)):
        selector.next_ev(evset, 0.0, None)
    monitor.on_ecn(evset, ev, 0.0)
    assert evset.steering.strikes[ev.path_key] == 2


def test_share_struck_keeps_a_struck_path_in_use_at_a_share_halved_per_strike():
    """A path struck k times, with EVs acknowledged clean on the others, keeps about 1 / 2^k of its
    slots with share_struck (without it, none while clean EVs last)."""
    counts = {}
    for shared in (True, False):
        evset, selector, monitor = setup_shared() if shared else setup()
        chosen = [selector.next_ev(evset, 0.0, None) for _ in range(8)]
        bad = chosen[0]
        for _ in range(2):                              # two strikes, a rotation apart
            monitor.on_ecn(evset, bad, 0.0)
            for _ in range(len(evset.slots)):
                selector.next_ev(evset, 0.0, None)
        picks = []
        for _ in range(512):
            ev = selector.next_ev(evset, 0.0, None)
            picks.append(ev)
            if ev.path_key != bad.path_key:
                monitor.on_ack(evset, ev, False, 10e-6, 0.0)   # the other paths keep coming back clean
        counts[shared] = sum(e.path_key == bad.path_key for e in picks)
        assert evset.steering.strikes[bad.path_key] == 2
    assert counts[False] == 0, counts
    assert 512 / 4 / 4 / 2 <= counts[True] <= 512 / 4 / 4 * 2, counts    # about a quarter of its 1/4
