"""Fast loss detection from SACKs: a time-based rule in the spirit of RACK (RFC 8985).

A packet still in flight is declared lost when a packet sent after it has been acknowledged
and it has been outstanding longer than that acknowledgement's RTT (or the smoothed RTT plus
twice its variation, when larger) plus a reorder window. The
rule asks about send times, not sequence numbers, so spraying (every packet on its own path)
and ECN queues, which reorder packets by up to a queue's delay, cost nothing below the window:
a packet overtaken by one on a faster path is still given a round trip and a window to arrive.
Without acknowledgements (a paused receiver) nothing newer is delivered and nothing is declared.

The detector keeps the packets in the order they were (re)transmitted. A scan starts at the
oldest and stops at the first packet in flight that is not yet lost (every later one was sent
later still), so its cost per acknowledgement is the packets it declares or finds settled.
When the oldest packet in flight is overtaken but not yet old enough, `deadline` says when it
will be. A loss at the very tail of a burst leaves no later packet to be acknowledged: as RACK's
companion TLP does, the sender then sends its newest packet again once nothing has been
acknowledged for PROBE_SRTTS smoothed RTTs (`newest_in_flight`), and the SACK of that probe is
the evidence this rule needs, long before the per-packet timeout (at least 10 base RTTs). A probe
can be lost too (1 % random loss loses one in a hundred): then, still with nothing acknowledged,
one more follows, 4 srtt after it (6 after the last acknowledgement; TAIL_PROBES in all) when that
comes before the probe's own timeout, which would resend it anyway
(loss-sweep --quick's all-to-all at 1 %, seeds 301-1000: 5 runs of 700 waited a 262 us timeout
after a lost probe, taking 350-437 us against a median 140; none with the second probe).

One path keeps order: packets sent on the same path (the EVs of one `PathLoad`) go through the same
queues, so a first transmission acknowledged while one sent before it on its path is still missing
shows that one lost at once, a round trip after it left, with no reorder window (`overtaken`):
spraying reorders packets across paths, never along one. Only first transmissions are compared:
which transmission of a packet sent again arrived is not known, and a retransmission found lost
this way whose first copy arrives after all would look like reordering along a path (letting
retransmissions be found by order too, as the switches queue both alike, retired a path at 1 %
uniform loss in loss-sweep --quick's all-to-all, seed 59, where first transmissions alone retire
none in seeds 1-100). Only packets the acknowledgement shows missing (in its bitmap's range) are
declared. A packet declared lost this way that arrives after all says the network reorders along
a path: the connection then stops using the rule (`in_order` off) and keeps the time rule.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Final

from mypy_extensions import i64

from host_agent.transport.fifo import FifoList
from host_agent.transport.message import Segment

if TYPE_CHECKING:                       # the sender's EVs: types only (evset imports nothing of this)
    from host_agent.transport.evset import Ev

REORDER_BASE_RTTS: Final = 2.0        # the reorder window when none is configured, in base RTTs
PROBE_SRTTS: Final = 2.0              # a tail probe goes out when nothing was acknowledged for this many srtt
TAIL_PROBES: Final = 2                # tail probes while nothing is acknowledged, each twice as long after the last
REORDER_SCALE_MAX: Final = 8.0        # a reorder window widened by spurious losses grows to at most this many times
REORDER_CALM_LOSSES: Final = 16       # declared losses without a spurious one that halve a widened window
SACK_BITS: Final = 64                 # PSNs a SACK's bitmap shows from its base
BY_TIME: Final = 1                    # Segment.declared_lost: by the time rule (`lost`)
BY_ORDER: Final = 2                   # ... by its own path's order (`overtaken`)


class ReorderLossDetector:
    """Which packets a connection's acknowledgements show lost (`lost`), and when to look again.

    `window` is the reorder window in seconds; `in_order`: `overtaken` applies (the sender's
    `path_order_losses`); `base_rtt`, called when `window` is 0, gives the
    base RTT, of which the window is then REORDER_BASE_RTTS. `srtt` gives the round trip the wait
    never goes below (the sender: srtt + 2 rttvar), since a latest sample from a path with an
    empty queue says little about one with a full queue. Packets are `message.Segment`s
    (`sent_at`, `transmissions`, `in_flight`)."""

    __slots__ = ("window", "base_rtt", "srtt", "scale", "xmit", "rtt", "deadline", "probe_at", "probes",
                 "in_order", "_order", "_paths", "_calm", "_widened_at")

    def __init__(self, window: float, base_rtt, srtt, in_order: bool = True) -> None:
        self.window = window
        self.base_rtt = base_rtt
        self.srtt = srtt
        self.scale = 1.0               # > 1 after spurious losses
        self.xmit = float("-inf")      # send time of the newest packet known delivered
        self.rtt = 0.0                 # the RTT of that packet
        self.deadline: float | None = None   # when the oldest overtaken packet becomes lost
        self.probe_at: float | None = None   # when the sender's tail probe is due (it sets and clears it)
        self.probes = 0                # tail probes sent since something was last acknowledged (the sender counts)
        self.in_order = in_order       # each path keeps order: `overtaken` applies (off after it erred)
        # (segment, its transmission number), in the order sent; and per path (`Ev.path_key`), first
        # transmissions only
        self._order = FifoList()
        self._paths: list[FifoList] = []
        self._calm = 0
        self._widened_at = float("-inf")   # when a spurious loss last widened the window

    def sent(self, seg: Segment, path_key: int = -1) -> None:
        """`seg` was (re)transmitted just now, on path `path_key` (`Ev.path_key`; -1: not said, the
        packet is left to the time rule)."""
        tx = seg.transmissions
        self._order.append((seg, tx))
        if tx == 1 and path_key >= 0 and self.in_order:
            paths = self._paths
            while len(paths) <= path_key:
                paths.append(FifoList())
            paths[path_key].append(seg)

    def overtaken(self, acked: list[Segment], base: int) -> list[Segment]:
        """The first transmissions still in flight that a first transmission among `acked` (just
        acknowledged by an acknowledgement whose bitmap starts at sequence number `base`; those below
        its cumulative point are in `acked` too) overtook on its own path: lost (oldest first on each
        path), taken off the watch. Packets sent before it on its path that the acknowledgement does
        not show (beyond its bitmap's range) are left to the time rule."""
        out: list[Segment] = []
        if not self.in_order:
            return out
        paths = self._paths
        top = base + SACK_BITS
        for ack in acked:
            if ack.transmissions != 1:
                continue                         # which transmission arrived is not known
            ev: Ev = ack.ev                      # typed here: a segment holds its EV untyped
            key = ev.path_key
            if key >= len(paths):
                continue
            fifo = paths[key]
            number = ack.path_sent
            while True:
                seg: Segment | None = fifo.first()
                if seg is None:
                    break
                if seg.transmissions == 1 and seg.in_flight:
                    if seg.path_sent >= number:
                        break                    # sent on the path after `ack` (or `ack` itself)
                    if base <= seg.seq < top:
                        out.append(seg)          # the acknowledgement shows it missing: lost
                fifo.pop_first()                 # settled, sent again, overtaken, or not shown
        return out

    def delivered(self, sent_at: float, rtt: float) -> None:
        """An acknowledgement answered a packet sent at `sent_at` (at the latest) after `rtt`."""
        if sent_at > self.xmit:
            self.xmit = sent_at
            self.rtt = rtt

    def lost(self, now: float) -> list[Segment]:
        """The packets in flight now shown lost (oldest first), taken off the watch; sets `deadline`."""
        order = self._order
        out: list[Segment] = []
        xmit = self.xmit
        wait = None
        self.deadline = None
        while True:
            entry: tuple[Segment, int] | None = order.first()
            if entry is None:
                break
            seg, tx = entry
            if seg.transmissions != tx or not seg.in_flight:
                order.pop_first()                # acknowledged, trimmed, timed out or sent again since
                continue
            sent = seg.sent_at
            if sent >= xmit:
                break                            # nothing sent after it is known to have arrived
            if wait is None:
                srtt = self.srtt()
                wait = ((self.rtt if self.rtt > srtt else srtt)
                        + (self.window or REORDER_BASE_RTTS * self.base_rtt()) * self.scale)
            if sent + wait > now:
                self.deadline = sent + wait
                break
            order.pop_first()
            out.append(seg)
        if out and self.scale > 1.0:
            self._calm += len(out)
            if self._calm >= REORDER_CALM_LOSSES:
                self.scale = max(1.0, self.scale / 2)
                self._calm = 0
        return out

    def newest_in_flight(self) -> Segment | None:
        """The most recently sent packet still in flight, or None."""
        order = self._order
        i: i64 = len(order) - 1
        while i >= 0:
            entry: tuple[Segment, int] = order.get(i)
            seg, tx = entry
            if seg.transmissions == tx and seg.in_flight:
                return seg
            i -= 1
        return None

    def spurious(self, now: float, how: int = BY_TIME) -> None:
        """A packet declared lost (`how`: BY_TIME or BY_ORDER) had arrived. Declared by its path's
        order, the network reorders along a path: `overtaken` is off from now on. By time, the
        reordering is wider than the window; double it,
        once for all the packets found spurious at the same instant (one acknowledgement). The
        packets one lost SACK would have acknowledged (`ack_coalesce` of them, in a row) are found
        spurious together: counted one by one, a single lost SACK widened the window eightfold,
        and the next real losses were found 90-140 us late (loss-sweep --quick at 400 Gbit/s,
        docs/transport.md "Without tuned switches")."""
        if how == BY_ORDER:
            self.in_order = False
            self._paths.clear()
            return
        if now > self._widened_at:
            self.scale = min(REORDER_SCALE_MAX, self.scale * 2)
            self._widened_at = now
        self._calm = 0

    def clear(self) -> None:
        """Forget every packet (the connection failed)."""
        self._order.clear()
        self._paths.clear()
        self.deadline = self.probe_at = None
        self.probes = 0

    @property
    def watched(self) -> int:
        """Transmissions still on the watch list (some may be settled already)."""
        return len(self._order)
