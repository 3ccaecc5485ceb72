"""Lab 3 (solution): selective repeat from MRC's SACK, with evidence against reordering.

A SACK says: every sequence number below `cum` has arrived, and bit i of the 64-bit `bitmap`
says `base + i` has arrived. A hole (a number in flight, not covered) is lost only when enough
packets sent after it have arrived: spraying over paths of unequal delay reorders packets, so
a hole by itself is no evidence.
"""
from __future__ import annotations

from host_agent.transport.config import TransportConfig

BITMAP_BITS = 64
REORDER_THRESHOLD = 3      # packets sent after a hole that must have arrived before it counts as lost


class SelectiveRepeat:
    """A SackProcessor (host_agent.transport.policies): the holes a SACK proves lost."""

    def __init__(self, config: TransportConfig) -> None:
        self.config = config

    def lost(self, cum, base, bitmap, window, now):
        """The sequence numbers to retransmit now: in flight, not SACKed, and overtaken by at
        least REORDER_THRESHOLD packets that were sent after them and have arrived."""
        arrived_sent_at = sorted(self._arrived_send_times(base, bitmap, window), reverse=True)
        if len(arrived_sent_at) < REORDER_THRESHOLD:
            return []
        top = base + bitmap.bit_length()          # nothing at or beyond this is known to have arrived
        lost = []
        for seq in range(max(cum, window.cum_acked), min(top, window.next_seq)):
            if bitmap >> (seq - base) & 1 if seq >= base else False:
                continue
            seg = window.segment(seq)
            if seg is None or not seg.in_flight or seg.acked:
                continue
            overtaken = sum(1 for t in arrived_sent_at[:REORDER_THRESHOLD] if t > seg.sent_at)
            if overtaken >= REORDER_THRESHOLD:
                lost.append(seq)
        return lost

    @staticmethod
    def _arrived_send_times(base, bitmap, window):
        """When each packet the bitmap shows arrived was (last) sent, for those still known."""
        bits = bitmap
        while bits:
            low = bits & -bits
            seg = window.segment(base + low.bit_length() - 1)
            bits ^= low
            if seg is not None:
                yield seg.sent_at
