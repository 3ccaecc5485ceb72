"""Loss detection from SACKs (host_agent.transport.lossdetect): the reorder-window rule and what
must never trigger it."""
from __future__ import annotations

from dataclasses import dataclass

from host_agent.transport.lossdetect import ReorderLossDetector

BASE = 10e-6


@dataclass
class Seg:
    seq: int
    sent_at: float
    transmissions: int = 1
    in_flight: bool = True


def detector(window=BASE):
    return ReorderLossDetector(window, lambda: BASE, lambda: BASE)


def sent(det, *times):
    segs = [Seg(i, t) for i, t in enumerate(times)]
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
    det.spurious()
    assert det.lost(25e-6) == [] and det.deadline == BASE + 2 * BASE
