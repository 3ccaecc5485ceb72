"""Loss detection from SACKs (host_agent.transport.lossdetect): the reorder-window rule, the rule of
a path's own order, and what must never trigger them."""
from __future__ import annotations

import random
from collections import deque

from host_agent.transport.evset import Ev
from host_agent.transport.fifo import DROP_AT
from host_agent.transport.lossdetect import BY_ORDER, BY_TIME, ReorderLossDetector
from host_agent.transport.message import Segment, new_message

BASE = 10e-6
MESSAGE = new_message(0, bytes(64), 1)


def detector(window=BASE):
    return ReorderLossDetector(window, lambda: BASE, lambda: BASE)


def sent(det, *times):
    segs = [Segment(i, MESSAGE, i, 1, sent_at=t, transmissions=1, in_flight=True) for i, t in enumerate(times)]
    for s in segs:
        det.sent(s)
    return segs


def test_an_overtaken_packet_is_lost_only_after_the_rtt_and_the_reorder_window():
    det = detector()
    a, b = sent(det, 0.0, 1e-6)
    det.delivered(b.sent_at, BASE)                 # b (sent after a) arrived
    assert det.lost(15e-6) == [] and det.deadline == BASE + BASE   # a may still be reordered
    assert det.lost(20e-6) == [a] and det.deadline is None


def test_a_packet_sent_after_the_newest_delivered_one_is_never_lost():
    det = detector()
    a, b = sent(det, 0.0, 1e-6)
    det.delivered(a.sent_at, BASE)                 # only the older one arrived
    assert det.lost(1.0) == [] and det.deadline is None


def test_a_paused_receiver_declares_nothing():
    det = detector()
    sent(det, 0.0, 1e-6, 2e-6)                     # no acknowledgement at all
    assert det.lost(1.0) == [] and det.deadline is None


def test_trimmed_and_resent_packets_are_not_declared_again():
    det = detector()
    trimmed, waiting, resent, later = sent(det, 0.0, 1e-6, 2e-6, 3e-6)
    trimmed.in_flight = False                      # a trim NACK came: queued for retransmission
    waiting.in_flight = False                      # declared lost already, waiting to go again
    resent.transmissions = 2                       # sent again since: its old transmission is settled
    det.delivered(later.sent_at, BASE)
    assert det.lost(1.0) == []


def test_a_spurious_loss_widens_the_window():
    det = detector()
    a, b = sent(det, 0.0, 1e-6)
    det.delivered(b.sent_at, BASE)
    det.spurious(20e-6)
    assert det.lost(25e-6) == [] and det.deadline == BASE + 2 * BASE


def test_spurious_losses_found_together_widen_the_window_once():
    """The packets of one lost SACK turn out spurious at the same time: one widening, not one each;
    a later spurious loss widens it again."""
    det = detector()
    for _ in range(4):
        det.spurious(20e-6)
    assert det.scale == 2.0
    det.spurious(21e-6)
    assert det.scale == 4.0


PATHS = [Ev(k + 1, 0, k) for k in range(2)]                     # an EV on each of two paths


def sent_on(det, *spec):
    """Packets sent 1 us apart on the paths `spec` names (one path key each), numbered on each path."""
    numbers = [0, 0]
    segs = []
    for i, key in enumerate(spec):
        numbers[key] += 1
        seg = Segment(i, MESSAGE, i, 1, ev=PATHS[key], sent_at=i * 1e-6, transmissions=1, in_flight=True,
                      path_sent=numbers[key])
        det.sent(seg, key)
        segs.append(seg)
    return segs


def acked(*segs):
    for seg in segs:
        seg.acked, seg.in_flight = True, False
    return list(segs)


def test_a_packet_overtaken_on_its_own_path_is_lost_at_once_and_only_there():
    det = detector()
    a, b, c, d = sent_on(det, 0, 1, 0, 1)
    assert det.overtaken(acked(d), 0) == [b]            # d overtook b on path 1: no window to wait for
    assert det.overtaken(acked(c), 0) == [a]            # and c overtook a on path 0
    e, = sent_on(det, 1)
    assert det.overtaken(acked(e), 0) == []             # nothing left behind on path 1


def test_a_packet_overtaken_across_paths_waits_for_the_time_rule():
    det = detector()
    a, b = sent_on(det, 0, 1)
    det.delivered(b.sent_at, BASE)
    assert det.overtaken(acked(b), 0) == []             # spraying reorders across paths
    assert det.lost(15e-6) == [] and det.lost(25e-6) == [a]


def test_what_the_sack_does_not_show_or_a_retransmission_acknowledged_is_left_to_the_time_rule():
    det = detector()
    a, b, c = sent_on(det, 0, 0, 0)
    a.seq = 70                                          # beyond the 64 PSNs the SACK's bitmap shows from 0
    assert det.overtaken(acked(c), 0) == [b]
    b.in_flight = False                                 # the sender takes it out of flight
    det.delivered(c.sent_at, BASE)
    assert det.lost(1.0) == [a]                         # still watched by the time rule
    det = detector()
    x, y = sent_on(det, 1, 1)
    y.transmissions = 2                                 # a retransmission acknowledged: which copy arrived?
    assert det.overtaken(acked(y), 0) == []
    det = detector()
    z, w = sent_on(det, 1, 1)
    z.transmissions = 2                                 # sent again since (on another path): settled here
    assert det.overtaken(acked(w), 0) == []


def test_a_retransmission_is_neither_found_lost_by_order_nor_overtakes():
    det = detector()
    again = Segment(5, MESSAGE, 5, 1, ev=PATHS[0], sent_at=0.0, transmissions=2, in_flight=True, path_sent=1)
    first = Segment(6, MESSAGE, 6, 1, ev=PATHS[0], sent_at=1e-6, transmissions=1, in_flight=True, path_sent=2)
    det.sent(again, 0)
    det.sent(first, 0)
    assert det.overtaken(acked(first), 0) == []         # its first copy may yet arrive: left to the time rule
    det.delivered(first.sent_at, BASE)
    assert det.lost(1.0) == [again]


def test_a_loss_declared_by_order_that_arrives_turns_the_rule_off():
    det = detector()
    det.spurious(20e-6, BY_TIME)
    assert det.in_order and det.scale == 2.0            # a time-rule mistake widens the window ...
    det.spurious(30e-6, BY_ORDER)
    assert not det.in_order and det.scale == 2.0        # ... a path-order mistake stops the order rule
    a, b = sent_on(det, 0, 0)
    assert det.overtaken(acked(b), 0) == []


# --- in the MRC sender --------------------------------------------------------------------------------
from wire import constants                                          # noqa: E402
from wire.packets import Nack, Sack                                      # noqa: E402
from host_agent.transport import Endpoint, EvState, PathInfo, Retransmitted, TransportConfig, sizing   # noqa: E402

FAST = dict(qp_timeout=6, initial_rtt=10e-6, ack_delay=5e-6, probe_interval=50e-6, sack_reorder_window=10e-6)


def mrc_sender(**config):
    """An MRC endpoint with FAST's settings (and `config`'s) and its connection over 2 paths of 4 EVs."""
    paths = [PathInfo(p, p, bytes([0xFC, 0, 0, p]) + bytes(12), bytes([0xFC, 0, 0, p, 1, i]) + bytes(10))
             for p in range(2) for i in range(4)]
    ep = Endpoint("tx", TransportConfig(**dict(FAST, **config)))
    return ep, ep.connect("rx", 1, 2, paths)


def sack(cum, bitmap, answering):
    return Sack(src=bytes(16), dst=bytes(16), ev=5, qp=1, cum_psn=cum, sack_base=cum, bitmap=bitmap,
                ev_echo=answering.ev, ts_echo=answering.tsval)


def three_packets(ep, conn):
    """A warm-up packet acknowledged after 10 us, then two packets sent at 20 and 30 us."""
    ep.send_message(conn, bytes(1000))
    (_, warmup), = ep.poll(0.0)
    ep.receive(10e-6, 0, sack(1, 0, warmup))
    ep.send_message(conn, bytes(1000))
    (_, first), = ep.poll(20e-6)
    ep.send_message(conn, bytes(1000))
    (_, second), = ep.poll(30e-6)
    return first, second


def sack_retransmissions(ep):
    return [e for e in ep.drain_events() if isinstance(e, Retransmitted) and e.cause in ("sack", "tail_probe")]


def test_the_sender_resends_an_overtaken_packet_before_its_timer_and_judges_its_ev():
    ep, conn = mrc_sender()
    first, second = three_packets(ep, conn)
    ep.receive(40e-6, 0, sack(1, 0b10, second))         # the later packet arrived, `first` did not
    # lost at 20 us + max(rtt 10, srtt + 2 rttvar = 10 + 2 x 5) + window 10 = 50 us; its timer: 85.5 us
    assert ep.poll(49e-6) == []
    (_, again), = ep.poll(50.5e-6)
    assert again.psn == first.psn and again.flags & constants.MRCH_FLAG_RETX and again.ev != first.ev
    assert [e.cause for e in sack_retransmissions(ep)] == ["sack"]
    stats = ep.stats()
    assert stats["sack_timed_losses"] == 1 and "timeouts" not in stats
    lost_on = conn.evset.get(first.ev)
    assert lost_on.drops == 1                          # a loss without trim, laid at its EV's door ...
    assert lost_on.state is EvState.GOOD               # ... but one loss is not yet its path's own (pathloss)


def test_the_sender_declares_a_packet_overtaken_on_its_own_path_at_once():
    """One path: a SACK for the later packet shows the earlier one lost as it arrives, 10 us before
    the time rule would (50 us, above), and counts it as found by order."""
    for in_order, resent_at in ((True, 40e-6), (False, 50.5e-6)):     # on where sizing turns it on
        paths = [PathInfo(0, 0, bytes([0xFC, 0, 0, 0]) + bytes(12), bytes([0xFC, 0, 0, 0, 1, 0]) + bytes(10))]
        ep = Endpoint("tx", TransportConfig(**FAST, path_order_losses=in_order))
        conn = ep.connect("rx", 1, 2, paths)
        first, second = three_packets(ep, conn)
        ep.receive(40e-6, 0, sack(1, 0b10, second))
        if not in_order:
            assert ep.poll(49e-6) == []                     # the time rule's wait (above)
        (_, again), = ep.poll(resent_at)
        assert again.psn == first.psn and again.flags & constants.MRCH_FLAG_RETX
        assert [e.cause for e in sack_retransmissions(ep)] == ["sack"]
        stats = ep.stats()
        assert stats["sack_timed_losses"] == 1 and stats.get("path_order_losses", 0) == int(in_order)
        assert conn.evset.get(first.ev).drops == 1


def test_a_packet_found_lost_by_order_that_arrives_after_all_stops_the_order_rule():
    """The original of a packet its path's order showed lost is SACKed after its resend left:
    this network reorders along a path, and the connection falls back on the time rule."""
    paths = [PathInfo(0, 0, bytes([0xFC, 0, 0, 0]) + bytes(12), bytes([0xFC, 0, 0, 0, 1, 0]) + bytes(10))]
    ep = Endpoint("tx", TransportConfig(**FAST, path_order_losses=True))
    conn = ep.connect("rx", 1, 2, paths)
    first, second = three_packets(ep, conn)
    ep.receive(40e-6, 0, sack(1, 0b10, second))
    (_, again), = ep.poll(40e-6)                          # found lost by order, resent at once
    ep.receive(41e-6, 0, sack(3, 0, first))               # ... yet the original arrived
    assert ep.stats()["spurious_sack_losses"] == 1
    ep.send_message(conn, bytes(1000))
    (_, third), = ep.poll(50e-6)
    ep.send_message(conn, bytes(1000))
    (_, fourth), = ep.poll(51e-6)
    ep.receive(60e-6, 0, Sack(src=bytes(16), dst=bytes(16), ev=5, qp=1, cum_psn=3, sack_base=3, bitmap=0b10,
                             ev_echo=fourth.ev, ts_echo=fourth.tsval))
    assert ep.poll(60e-6) == [] and ep.stats()["path_order_losses"] == 1     # the third waits for the time rule


def test_sizing_finds_losses_by_a_paths_order_at_data_center_speed_only():
    assert sizing.for_network(100e9, 9e-6, 4096)["path_order_losses"] is True
    assert "path_order_losses" not in sizing.for_network(100e9, 9e-6, 4096, spraying=False)
    assert TransportConfig().path_order_losses is False          # the Mininet testbed may reorder a path


def test_a_trimmed_packet_is_left_to_its_nack():
    ep, conn = mrc_sender()
    first, second = three_packets(ep, conn)
    ep.receive(35e-6, 0, Nack(bytes(16), bytes(16), 5, 1, first.psn, 1, constants.NACK_TRIMMED, first.ev, first.tsval))
    (_, again), = ep.poll(35e-6)
    assert again.psn == first.psn
    ep.receive(40e-6, 0, sack(1, 0b10, second))
    assert [p for _, p in ep.poll(60e-6)] == [] and "sack_timed_losses" not in ep.stats()


def test_a_lost_tail_is_probed_then_found_from_the_probes_sack():
    ep, conn = mrc_sender()
    first, second = three_packets(ep, conn)
    ep.receive(35e-6, 0, sack(2, 0, first))              # `first` arrived; `second`, the tail, did not
    # nothing acknowledged for 2 srtt (about 20 us) after that SACK: the newest packet goes again
    assert ep.poll(50e-6) == []
    (_, probe), = ep.poll(56e-6)
    assert probe.psn == second.psn and probe.flags & constants.MRCH_FLAG_RETX
    assert [e.cause for e in sack_retransmissions(ep)] == ["tail_probe"]
    assert ep.poll(80e-6) == []
    ep.receive(85e-6, 0, sack(2, 0b1, probe))            # the probe's SACK: `second` is in
    assert ep.poll(200e-6) == [] and ep.stats()["tail_probes"] == 1
    assert conn.evset.get(second.ev).state is EvState.GOOD and "timeouts" not in ep.stats()


def test_a_lost_tail_probe_is_followed_by_one_more_then_the_timer():
    ep, conn = mrc_sender(qp_timeout=8)                  # RTO 262 us: room for more probes than two
    first, second = three_packets(ep, conn)
    ep.receive(35e-6, 0, sack(2, 0, first))
    (_, probe), = ep.poll(56e-6)                         # 2 srtt (srtt about 10.6 us) after the SACK
    assert ep.poll(95e-6) == []
    (_, again), = ep.poll(100e-6)                        # the probe lost too: one more, 4 srtt after it
    assert again.psn == probe.psn == second.psn
    assert [e.cause for e in sack_retransmissions(ep)] == ["tail_probe", "tail_probe"]
    assert [p for t in range(101, 355) for _, p in ep.poll(t * 1e-6)] == []     # no third probe
    timed = [p for t in range(355, 370) for _, p in ep.poll(t * 1e-6)]      # the timer's, an RTO after the second
    assert [p.psn for p in timed] == [second.psn] and ep.stats()["timeouts"] == 1
    assert ep.stats()["tail_probes"] == 2


def test_probes_start_again_after_an_acknowledgement():
    ep, conn = mrc_sender()
    first, second = three_packets(ep, conn)
    ep.receive(35e-6, 0, sack(2, 0, first))
    (_, probe), = ep.poll(56e-6)
    ep.send_message(conn, bytes(1000))
    (_, third), = ep.poll(60e-6)
    ep.receive(85e-6, 0, sack(3, 0, probe))              # the probe brought `second` in; `third` is lost
    for t in range(86, 130):
        ep.poll(t * 1e-6)
    assert ep.stats()["tail_probes"] == 2                # a fresh spell: `third` probed 2 srtt after that SACK
    for t in range(130, 200):
        ep.poll(t * 1e-6)
    assert ep.stats()["tail_probes"] == 3                # and, lost too, once more


def test_no_second_probe_after_the_probes_own_timeout():
    """An srtt so long that 4 of them pass the RTO: the probe's own timer resends it first, and a
    second probe would only repeat that."""
    ep, conn = mrc_sender()

    def send_one(t: float):
        ep.send_message(conn, bytes(1000))
        while not (sent := ep.poll(t)):                  # as soon as the window and pacing let it go
            t += 1e-6
        return t, sent[0][1]

    t, n = 0.0, 0
    for _ in range(30):                                  # srtt about 50 us; the RTO about 3 of them
        t, p = send_one(t)
        n += 1
        ep.receive(t + 50e-6, 0, sack(n, 0, p))
        t += 60e-6
    t, before = send_one(t)
    _, last = send_one(t + 1e-6)
    ep.receive(t + 50e-6, 0, sack(n + 1, 0, before))     # `before` arrived; `last`, the tail, never does
    ep.drain_events()
    causes = []
    for us in range(51, 1000):
        ep.poll(t + us * 1e-6)
        causes += [e.cause for e in ep.drain_events() if isinstance(e, Retransmitted)]
    assert causes[:2] == ["tail_probe", "timeout"] and causes.count("tail_probe") == 1, causes


def reference_lost(order: deque, now: float, xmit: float, wait: float) -> tuple[list, float | None]:
    """The reorder-window rule over a deque of (segment, transmission number): the losses and the deadline."""
    out = []
    while order:
        seg, tx = order[0]
        if seg.transmissions != tx or not seg.in_flight:
            order.popleft()
            continue
        if seg.sent_at >= xmit:
            return out, None
        if seg.sent_at + wait > now:
            return out, seg.sent_at + wait
        out.append(order.popleft()[0])
    return out, None


def reference_newest(order: deque):
    return next((seg for seg, tx in reversed(order) if seg.transmissions == tx and seg.in_flight), None)


def test_the_watch_list_keeps_the_send_order_of_a_deque_and_forgets_what_it_took_off():
    """About 200 packets sent, settled in and out of order, some sent again, the rule asked now and
    then: its losses, deadline, watch list and newest packet in flight are a deque's; once cleared,
    the packets sent next are all watched."""
    rng = random.Random(5)
    det, order = detector(), deque()
    in_flight: list[Segment] = []
    xmit, now, seq, most_watched = float("-inf"), 0.0, 0, 0

    def send(seg: Segment) -> None:
        seg.sent_at, seg.in_flight = now, True
        seg.transmissions += 1
        det.sent(seg)
        order.append((seg, seg.transmissions))
        in_flight.append(seg)

    while seq < 200:
        now += 1e-6
        roll = rng.random()
        if roll < 0.5 or not in_flight:
            send(Segment(seq, MESSAGE, 0, 1))
            seq += 1
        elif roll < 0.85:                                 # settled: the oldest, or one overtaking it
            seg = in_flight.pop(0 if rng.random() < 0.6 else rng.randrange(len(in_flight)))
            seg.in_flight = False
            det.delivered(seg.sent_at, BASE)
            xmit = max(xmit, seg.sent_at)
        elif roll < 0.9:                                  # timed out and sent again
            seg = in_flight.pop(rng.randrange(len(in_flight)))
            send(seg)
        else:
            expected, deadline = reference_lost(order, now, xmit, 2 * BASE)
            assert det.lost(now) == expected and det.deadline == deadline
            for seg in expected:                          # the sender takes them out of flight
                seg.in_flight = False
                in_flight.remove(seg)
        assert det.watched == len(order) and det.newest_in_flight() is reference_newest(order)
        most_watched = max(most_watched, det.watched)
        assert det._order.backing_size - det.watched <= max(DROP_AT - 1, det.watched)
    assert most_watched > 20 and det.watched > 0
    det.clear()
    assert det.watched == 0 and det.newest_in_flight() is None and det.deadline is None
    first, second = sent(det, now, now + 1e-6)
    det.delivered(second.sent_at, BASE)
    assert det.watched == 2 and det.newest_in_flight() is second
    assert det.lost(now + 1.0) == [first]                 # watched from the first sent after the clear
