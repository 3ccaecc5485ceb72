"""MRC sender: sprays packets over the EV set, recovers by trim NACK, SACK and per-packet timeout.

Which EV a packet takes, what a SACK says and what a loss does to an EV are the policies of
`host_agent.transport.policies`; the sender keeps the sequence space, the timers and the
retransmission queue, and finds untrimmed losses from SACKs by their send times
(`lossdetect.ReorderLossDetector`) before their timers would.
"""
from __future__ import annotations

import heapq
import math
from typing import Callable, Final

from wire import constants
from wire.packets import DATA_OVERHEAD, DataPacket, Nack, Sack
from host_agent.transport import events
from host_agent.transport.peers import ConnectionId
from host_agent.transport.config import TransportConfig
from host_agent.transport.congestion import NsccWindow, RttEstimator
from host_agent.transport.evset import Ev, EvSet
from host_agent.transport.lossdetect import BY_ORDER, BY_TIME, PROBE_SRTTS, TAIL_PROBES, ReorderLossDetector
from host_agent.transport.message import OutMessage, SendQueue, Segment, Unacknowledged, ts_age
from host_agent.transport.nicclock import NicClock
from host_agent.transport.pathcap import PathCapSelector
from host_agent.transport.pathloss import Sampler
from host_agent.transport.policies import (CongestionControl, EvSelector, MrcPathMonitor, MrcSackProcessor,
                                           PathMonitor, RotationSelector, SackProcessor, Timeout)
from host_agent.transport.psn import PSN_MASK, from_wire
from host_agent.transport.tally import Tally
from host_agent.transport.timers import Deadline, Deadlines

TS_SLACK: Final = 2e-6        # echoed timestamps count whole microseconds
_CAUSE_TRIM: Final = events.CAUSE_TRIM
# retransmission queue priorities: a trim resent at once; with window penalties, a trim at the
# receiver's last hop once the window allows; then the rest
_RETX_AT_ONCE: Final = 0
_RETX_LASTHOP_TRIM: Final = 1
_RETX_OTHER: Final = 2
_INF: Final = float("inf")
_AT_ONCE: Final = float("-inf")        # _ready_at of a trim retransmission: it need not wait
_heappush: Final = heapq.heappush     # module functions looked up once, not per call
_heappop: Final = heapq.heappop


def _set_backlogged(cc: NsccWindow | CongestionControl, backlogged: bool) -> None:
    """Tell the window whether the sender's poll ended held back by the pacing clock alone
    (`cc.backlogged`): MRC's window's field set natively when compiled, where an attribute set
    through the union would be set by name."""
    if isinstance(cc, NsccWindow):          # narrowed for mypyc: MRC's window's field set natively
        cc.backlogged = backlogged
    else:
        cc.backlogged = backlogged


class MrcSender:
    """The sending half of one MRC connection.

    Sequence numbers are unbounded integers (`seq`); the wire carries them as 24-bit PSNs.
    Invariants: every seq below `cum_acked` is acknowledged; no seq at or beyond
    `cum_acked + ooo_window` is ever sent (the receiver would refuse it as out of window).
    """

    # Keep at most 30 instance attributes: CPython 3.11 shares the keys of instance dicts up to
    # that many, and past it every attribute access is slower (two more cost ~1 us per packet).
    def __init__(self, ident: ConnectionId, config: TransportConfig, evset: EvSet, rtt: RttEstimator,
                 cc: CongestionControl, nic: NicClock, stats: Tally, emit: Callable[[events.TransportEvent], None],
                 selector: EvSelector, sack: SackProcessor, monitor: PathMonitor) -> None:
        self.ident = ident
        self.cfg = config
        self.evset = evset
        self.rtt = rtt
        # The window and the EV selector typed as MRC's own or any other (a union): the compiled
        # build reads and calls MRC's natively, after a type check, and a lab's policy as Python does.
        self.cc: NsccWindow | CongestionControl = cc
        self.nic = nic
        self.stats = stats
        # counted per packet: their counters, no lookup by name
        self._tx_counts = (stats.counter("data_sent"), stats.counter("data_bytes_sent"))
        self.emit = emit
        self.selector: PathCapSelector | RotationSelector | EvSelector = selector
        self.monitor = monitor
        self._sack: MrcSackProcessor | SackProcessor = sack     # MRC's called natively when compiled
        self._on_ack = getattr(monitor, "on_ack", None)  # optional PathMonitor hook (policies)
        self._nics = tuple(sorted({p.nic for p in evset.paths}))  # the NICs the EVs use
        self._ipsn = config.initial_psn                   # read per packet (TransportConfig is not compiled:
        self._ooo_window = config.ooo_window              # each read of it is a generic attribute lookup)
        self.pending = SendQueue(config.mtu_payload)      # messages not yet fully cut into packets (its `mtu`)
        self.segments = Unacknowledged()                 # by seq, for cum_acked <= seq < next_seq
        self.next_seq = 0
        self.inflight_bytes = 0
        self._retx: list[tuple[int, int]] = []           # heap of (priority, seq); trims before timeouts
        self._retx_cause: dict[int, str] = {}
        self._timers = Deadlines()                        # one per transmission, earliest first (timers.Deadline)
        self.delivered_sent_at = float("-inf")           # send time of the latest packet known to have arrived
        self.first_rtt_at = float("inf")                 # when the first RTT sample came (RTOs before: a guess)
        self._trim_at = 0.0                              # when the latest trim retransmission was queued
        self._budget = config.retry_budget()             # MRC's linear-then-exponential retries
        self._detector = (ReorderLossDetector(config.sack_reorder_window, lambda: rtt.base_rtt,
                                              lambda: rtt.srtt + 2 * rtt.rttvar, config.path_order_losses)
                          if config.sack_loss_detection else None)
        self.failed: events.ConnectionFailed | None = None    # set when a packet ran out of retries
        self._sampler = Sampler()                        # more packets on a path suspected of losing its own (`pathloss`)

    # --- application side ------------------------------------------------------------------
    def send_message(self, data) -> int:
        """Queue a message; return its 16-bit id."""
        return self.pending.add(data)

    def segment(self, seq: int) -> Segment | None:
        """The packet numbered `seq`, while unacknowledged below `next_seq` (policies.SendWindow)."""
        return self.segments.get(seq)

    @property
    def cum_acked(self) -> int:
        """Every sequence number below this is acknowledged: the oldest unacknowledged segment's
        (`segments.base`, which moves as they are taken off; not a counter of its own; the sender's
        own code reads `segments.base`, a field, where this is a call)."""
        return self.segments.base

    @property
    def idle(self) -> bool:
        """True when nothing is queued or unacknowledged."""
        return not self.pending and self.segments.base == self.next_seq

    # --- timers ---------------------------------------------------------------------------------
    def next_wakeup(self) -> float | None:
        """Earliest per-packet deadline, or the pacing clock when a packet is ready to go."""
        t = self.wakeup_at()
        return None if t == _INF else t

    def wakeup_at(self) -> float:
        """`next_wakeup` as a float, inf for none (a time at inf counts as none): what the
        connection compares, natively when compiled, where a time or None would be a boxed object."""
        if self.failed is not None:
            return _INF
        # the earliest so far as a float (inf: none yet; a time at inf counts as none), compared natively
        first = self._live_timer()
        t: float = first.at if first is not None else _INF
        detector = self._detector
        if detector is not None:
            due = detector.deadline
            if due is not None and due < t:
                t = due
            due = detector.probe_at
            if due is not None and due < t:
                t = due
        ready = self._ready_at()
        if ready == _AT_ONCE:                        # a trim resend: ready since the trim
            ready = self._trim_at
        if ready < t:
            t = ready
        return t

    def _live_timer(self) -> Deadline | None:
        """The earliest timer of a transmission still in flight, or None; the earlier timers, of
        transmissions no longer in flight (an acknowledged packet, removed from `segments`, is not
        in flight either), are popped."""
        timers = self._timers
        while True:
            first = timers.first()
            if first is None:
                return None
            seg = first.segment
            if seg.in_flight and seg.transmissions == first.tx:
                return first
            timers.pop()

    def _timeout_for(self, seg: Segment) -> float:
        """The wait of the next transmission of `seg`: the RTO, doubled per retry past the linear ones."""
        return self._budget.timeout(self.rtt.rto, seg.timeouts)

    def expire(self, now: float) -> None:
        """Handle every per-packet timeout due by `now`: queue a retransmission, and let the path
        monitor judge the EV (`policies.MrcPathMonitor.on_timeout`: a timeout blames its path only
        when a later packet got through). A timeout that blames no usable EV of ours counts as
        `timeouts_unattributed`. A loss the SACKs show once its reorder window has passed
        (`lossdetect`) is declared first."""
        detector = self._detector
        if detector is not None:
            if detector.deadline is not None and detector.deadline <= now:
                lost = detector.lost(now)
                if lost:
                    self._declare_lost(lost, now, BY_TIME)
            if detector.probe_at is not None and detector.probe_at <= now:
                self._tail_probe(now)
        timers = self._timers
        first = timers.first()
        if first is None or first.at > now:
            return                               # nothing due (a stale timer on top is not due either)
        while True:
            first = self._live_timer()
            if first is None or first.at > now:
                return
            timers.pop()
            self._timed_out(first.segment, now)
            if self.failed is not None:
                return

    def _fail(self, seg: Segment, now: float) -> None:
        """The retry budget of `seg` is spent: the connection fails, dropping everything queued."""
        last = self._budget.timeout(self.rtt.rto, seg.timeouts - 1)
        self.failed = events.ConnectionFailed(now, self.ident, (self._ipsn + seg.seq) & PSN_MASK,
                                              seg.timeouts - 1, last)
        self.stats.add("connections_failed")
        self._timers.clear()
        self._retx.clear()
        self._retx_cause.clear()
        if self._detector is not None:
            self._detector.clear()
        self.emit(self.failed)

    def _timed_out(self, seg: Segment, now: float) -> None:
        seg.in_flight = False
        seg.ev.load.inflight -= 1
        self.inflight_bytes -= seg.wire
        seg.timeouts += 1
        self.stats.add("timeouts")
        if self._budget.exhausted(seg.timeouts):
            self._fail(seg, now)
            return
        retired = self._blame(seg, now)
        if retired:
            self._resend_stranded(retired)
        elif retired is not None:
            self.stats.add("timeouts_unattributed")
        self.cc.on_trim_or_loss(now)
        self._queue_retx(seg.seq, events.CAUSE_TIMEOUT)

    def _blame(self, seg: Segment, now: float, overtaken: bool = False) -> list | None:
        """Let the path monitor judge the EV `seg` was lost on (`PathMonitor.on_timeout`, with the
        evidence the sender has; `overtaken`: a packet sent after it on its own path arrived): the
        EVs it retired, or None when that EV is no longer ours or usable."""
        ev: Ev = seg.ev
        self.evset.note_drop(ev)
        if self.evset.get(ev.value) is not ev or not ev.usable:
            return None
        retired = self.monitor.on_timeout(
            self.evset, Timeout(ev, seg.sent_at, self.delivered_sent_at, self.first_rtt_at, self.rtt.srtt,
                               seg.path_sent, overtaken), now)
        if retired:
            seg.blamed = ev
            seg.blamed_sent = seg.sent_at
            seg.blamed_until = math.inf
        self._sampler.after_loss(ev, overtaken)
        return retired

    def _tail_probe(self, now: float) -> None:
        """Nothing was acknowledged for PROBE_SRTTS srtt since the latest SACK that acknowledged
        something (none before the first): send the newest packet in flight again
        (cause "tail_probe"), so that its SACK shows what is missing before it (`lossdetect`); while
        nothing is acknowledged, once more, twice as long after (a probe lost too), TAIL_PROBES in all,
        unless the probe's own timeout would come first (it resends the packet itself).
        Nothing is blamed and the window is not touched: a probe is no loss."""
        detector = self._detector
        assert detector is not None                  # scheduled only by the detector
        detector.probe_at = None
        if self._retx or not self.inflight_bytes:
            return                                   # something is being resent already, or nothing is out
        seg = detector.newest_in_flight()
        if seg is None:
            return
        seg.in_flight = False
        seg.ev.load.inflight -= 1
        self.inflight_bytes -= seg.wire
        self.stats.add("tail_probes")
        self._queue_retx(seg.seq, events.CAUSE_TAIL_PROBE)
        detector.probes += 1
        wait = (1 << detector.probes) * PROBE_SRTTS * self.rtt.srtt    # twice as long as this one waited
        if detector.probes < TAIL_PROBES and wait < self._timeout_for(seg):
            detector.probe_at = now + wait             # not after the probe's own timeout, which resends it anyway

    def _declare_lost(self, lost: list[Segment], now: float, how: int) -> None:
        """Packets the SACKs show lost (`lossdetect`, `how`: BY_TIME or BY_ORDER, a later packet
        on their own path arrived): a loss without a trim, so the path monitor
        judges each one's EV as it judges a timeout (MRC: a failed path, retired at once for a
        backup), and each is queued for retransmission now (cause "sack"). Packets still in
        flight on a retired EV are left to the same rule: a lost one is found within its window."""
        stats = self.stats
        for seg in lost:
            seg.in_flight = False
            seg.ev.load.inflight -= 1
            self.inflight_bytes -= seg.wire
            seg.declared_lost = how
            stats.add("sack_timed_losses")
            if how == BY_ORDER:
                stats.add("path_order_losses")
            self._blame(seg, now, how == BY_ORDER)
            self._queue_retx(seg.seq, events.CAUSE_SACK)
        self.cc.on_trim_or_loss(now)

    def _resend_stranded(self, retired: list) -> None:
        """Queue for retransmission every packet still in flight on an EV just retired.

        They went out on the path that lost the timed-out packet, after it: waiting for each
        one's own timer would take another RTO, with their bytes holding the window shut."""
        gone = set(map(id, retired))
        for seg in self.segments:
            if seg.in_flight and id(seg.ev) in gone:
                seg.in_flight = False
                seg.ev.load.inflight -= 1
                self.inflight_bytes -= seg.wire
                self.stats.add("stranded_resent")
                self._queue_retx(seg.seq, events.CAUSE_TIMEOUT)

    # --- transmission -------------------------------------------------------------------------
    def _queue_retx(self, seq: int, cause: str, priority: int = _RETX_OTHER) -> None:
        seg = self.segments[seq]
        if seg.queued or seg.acked:
            return
        seg.queued = True
        self._retx_cause[seq] = cause
        _heappush(self._retx, (priority, seq))

    def _pop_stale_retx(self) -> None:
        while self._retx:
            seq = self._retx[0][1]
            seg = self.segments.get(seq)
            if seg is not None and seg.queued and not seg.acked:
                return
            _heappop(self._retx)
            self._retx_cause.pop(seq, None)
            if seg is not None:
                seg.queued = False

    def _window_allows(self, nbytes: int) -> bool:
        """True when `nbytes` more may be in flight (always when nothing is; inline on the per-packet paths)."""
        return self.inflight_bytes == 0 or self.inflight_bytes + nbytes <= self.cc.cwnd

    def _ready_at(self) -> float:
        """When the next packet may go (the top of the retransmission queue, else new data):
        `_AT_ONCE` for a trim retransmission, `_INF` while the window holds it back (a pacing clock is
        finite: policies.CongestionControl.next_send).

        A trim retransmission always may (it takes the place of the trimmed packet, whose
        payload has left the network), except that with `window_penalty` one trimmed at the
        receiver's last hop waits for the window: the receiver shares its link out by window, and
        every path ends on that link (resent at once, it would only join the queue that trimmed
        it). Neither waits for the pacing clock. Anything else needs the window (new data also the
        out-of-order bound) and waits until its ready time: the pacing clock and, when the line
        rate is known, the time the NIC of the next EV is free."""
        retx = self._retx
        if retx:
            self._pop_stale_retx()
        inflight = self.inflight_bytes
        # The window's floats read into typed locals: read through the union (`cc`), the compiled
        # build would compare them as objects.
        cwnd: float = self.cc.cwnd
        if retx:
            prio, seq = retx[0]
            wire = self.segments[seq].wire
            if prio != _RETX_OTHER:                                  # a trim resend
                if prio == _RETX_LASTHOP_TRIM and inflight and inflight + wire > cwnd:
                    return _INF
                return _AT_ONCE
            if inflight and inflight + wire > cwnd:          # not _window_allows(wire)
                return _INF
        else:
            pending = self.pending
            if not pending or self.next_seq >= self.segments.base + self._ooo_window:
                return _INF
            if inflight:
                msg: OutMessage = pending.first()
                mtu = pending.mtu
                left = msg.length - msg.next_offset
                if inflight + (mtu if mtu < left else left) + DATA_OVERHEAD > cwnd:
                    return _INF
        ready: float = self.cc.next_send
        nic = self.nic
        if nic.rate:
            nics = self._nics
            if len(nics) == 1:
                index = nics[0]
            else:                                # which NIC depends on the EV the packet would take
                index = self.evset.path_of(self.selector.peek_ev(self.evset)).nic
            free = nic.free_at(index)
            if free > ready:
                ready = free
        return ready

    def poll(self, now: float, out: list) -> None:
        """Append the data packets the window and the pacing clock allow now (none once failed)."""
        if self.failed is not None:
            return
        cc = self.cc
        nic = self.nic
        nics = len(self._nics)
        rate = None                                      # the pacing rate: fixed while nothing is acknowledged
        while True:
            next_send: float = cc.next_send             # typed, as in _ready_at
            if not self._retx and now < next_send:
                inflight = self.inflight_bytes          # ... and _window_allows(mtu_payload)
                cwnd: float = cc.cwnd
                _set_backlogged(cc, bool(self.pending) and self.next_seq < self.segments.base + self._ooo_window
                                and (not inflight or inflight + self.pending.mtu <= cwnd))
                return                                   # fast path: the pacing clock says not yet
            ready = self._ready_at()
            if now < ready:                              # held back by the window (inf) or a clock
                _set_backlogged(cc, now < next_send and ready != _INF)
                return
            retx = self._retx
            cause: str | None
            if retx:                                     # the queue's top, as _ready_at found it
                prio, seq = _heappop(retx)
                seg = self.segments[seq]
                seg.queued = False
                cause = _CAUSE_TRIM if prio != _RETX_OTHER else self._retx_cause[seq]
                del self._retx_cause[seq]
            else:
                seg = self.pending.cut(self.next_seq)
                self.segments.append(seg)
                self.next_seq += 1
                cause = None
            nic_index, pkt = self._transmit(now, seg, cause)
            out.append((nic_index, pkt))
            if cause is not _CAUSE_TRIM or self.cfg.pace_trim_resends:   # else paced as the packet it replaces
                if rate is None:
                    rate = cc.pacing_rate(nics)
                cc.sent(now, seg.wire, nics, rate)
            if nic.rate:
                nic.account(nic_index, seg.wire, now)

    def _transmit(self, now: float, seg: Segment, cause: str | None) -> tuple[int, DataPacket]:
        old_ev = seg.ev
        ev = self.selector.next_ev(self.evset, now, None if cause is None else old_ev)
        sampler = self._sampler
        if sampler.ev is not None and cause is None:
            ev = sampler.choose(self.evset, ev)     # a path suspected of losing its own: more samples
        path = self.evset.paths[ev.path_key]
        seg.ev = ev
        seg.sent_at = now
        seg.in_flight = True
        load = ev.load
        load.inflight += 1
        load.sent += 1
        seg.path_sent = load.sent                     # its number on its path (`pathloss`)
        seg.trimmed = False
        seg.transmissions += 1
        self.inflight_bytes += seg.wire
        detector = self._detector
        if detector is not None:
            detector.sent(seg, ev.path_key)           # its send-ordered lists (`lossdetect`)
        timeout = self.rtt.rto if seg.timeouts <= self._budget.linear_cnt else self._timeout_for(seg)
        self._timers.push(now + timeout, seg)
        packets, data_bytes = self._tx_counts
        packets.add()
        data_bytes.add(seg.length)
        psn = (self._ipsn + seg.seq) & PSN_MASK
        if cause is None:
            flags, dscp = 0, constants.DSCP_TRIMMABLE
        else:
            flags, dscp = constants.MRCH_FLAG_RETX, constants.DSCP_TRIMMABLE_RETX
            if seg.blamed is not None and seg.blamed_until == math.inf:
                seg.blamed_until = now                # from now on an arrival may be this one's, not the blamed one's
            stats = self.stats
            stats.add("retransmitted")
            stats.add("retx_" + cause)
            self.emit(events.Retransmitted(now, self.ident, psn, cause, ev.value, old_ev.value if old_ev else None,
                                           self.rtt.srtt, self.rtt.rto))
        msg = seg.msg
        offset = seg.offset
        tsval = int(now * 1e6) & 0xFFFFFFFF
        if seg.length < self.pending.mtu:
            self.rtt.sent_short(tsval)
        # positional: DataPacket(src, dst, ev, qp, psn, va, rkey, length, msg_id, msg_len, tsval,
        #                        payload, flags, dscp, ecn, ack_req)
        remote_qp = self.ident.remote_qp
        pkt = DataPacket(path.src, path.dst, ev.value, remote_qp, psn, offset, remote_qp,
                         seg.length, msg.msg_id, msg.length, tsval,
                         msg.data[offset:offset + seg.length], flags, dscp, constants.ECN_ECT0,
                         seg.seq == self.next_seq - 1 and not self.pending)
        return path.nic, pkt

    # --- feedback -------------------------------------------------------------------------------
    def _ack(self, seg: Segment, now: float, trigger: float | None) -> int:
        """Acknowledge `seg` (once); return its bytes newly acknowledged. `trigger`: when the packet
        the SACK answers was sent (None: not a SACK), which tells a spurious loss."""
        if seg.acked:
            return 0
        seg.acked = True
        if ((seg.timeouts or seg.declared_lost) and trigger is not None
                and (seg.queued or trigger < seg.sent_at - TS_SLACK)):
            self._spurious(seg, now, trigger)
        if seg.in_flight:
            seg.in_flight = False
            ev: Ev = seg.ev                           # typed here: a segment holds its EV untyped
            ev.load.inflight -= 1
            self.inflight_bytes -= seg.wire
        if seg.msg.segment_acked():
            self._message_sent(seg.msg, now)
        return seg.wire

    def _message_sent(self, msg: OutMessage, now: float) -> None:
        self.stats.add("messages_sent")
        self.emit(events.MessageSent(now, self.ident, msg.msg_id, msg.length))

    def _advance_cum(self, cum: int, now: float, newly: list | None = None, trigger: float | None = None) -> int:
        """Acknowledge everything below `cum`; return the bytes newly acknowledged (the packets
        themselves appended to `newly` when given; `trigger` as for `_ack`)."""
        acked = 0
        cum = min(cum, self.next_seq)
        segments = self.segments
        while segments.base < cum:
            seg = segments.pop_oldest()               # the segment numbered cum_acked: it moves on by one
            if newly is not None and not seg.acked:
                newly.append(seg)
            acked += self._ack(seg, now, trigger)
        while segments.base < self.next_seq and segments.oldest().acked:
            segments.pop_oldest()
        return acked

    def _spurious(self, seg: Segment, now: float, trigger: float) -> None:
        """The packet timed out (or was declared lost from SACKs) although it had arrived: take
        back the blame, and stretch the RTO or widen the reorder window.

        Seen when the SACK covering it answers a packet sent before the retransmission (or the
        retransmission has not even left yet). The RTO is stretched only when the timeout had
        retired an EV: its path was slower than the RTO while later packets got through, the
        variance the RTO must cover. An unattributed timeout (a stall of everything) says nothing
        about that, and a long RTO would only delay the detection of a real failure. A loss
        declared from SACKs that was not one widens the reorder window instead (`lossdetect`).

        The blame is taken back only when the blamed transmission is the one that arrived: the
        packet the SACK answers (sent at `trigger`) left no earlier than it and before the
        transmission after it. When a later one had left too, which one arrived is not known; when
        an earlier one is answered (a packet blamed twice), the blamed one did not arrive: either
        way the blame stands (a retired EV comes back by its probes). On the two-server fat-tree under CPU load, a retransmission's
        acknowledgement slower than the RTO put back two dead paths this way, and the packets
        resent onto them kept the all-reduce stuck until its horizon."""
        ev, seg.blamed = seg.blamed, None
        if seg.declared_lost:
            how, seg.declared_lost = seg.declared_lost, 0
            self.stats.add("spurious_sack_losses")
            detector = self._detector
            assert detector is not None              # only the detector declares losses from SACKs
            detector.spurious(now, how)
        else:
            self.stats.add("spurious_timeouts")
            if ev is not None:
                self.rtt.spurious()
        if ev is not None and seg.blamed_sent - TS_SLACK <= trigger < seg.blamed_until - TS_SLACK:
            self.monitor.on_spurious(self.evset, ev, now)

    def on_sack(self, now: float, sack: Sack) -> None:
        """Acknowledge what a SACK covers; retransmit what the SACK processor finds lost; feed
        ECN and delay to the path monitor and the window."""
        self.stats.add("sacks_received")
        rtt = ts_age(now, sack.ts_echo)
        trigger = now - rtt                           # when the packet this SACK answers was sent
        if trigger > self.delivered_sent_at:
            self.delivered_sent_at = trigger
        if self.first_rtt_at == _INF:
            self.first_rtt_at = now
        ipsn = self._ipsn
        cum_acked = self.segments.base
        cum = from_wire(sack.cum_psn, ipsn, cum_acked)
        if cum < cum_acked or cum > self.next_seq:
            cum = cum_acked                         # stale or bogus: only the bitmap may help
        base = from_wire(sack.sack_base, ipsn, cum)
        acked = 0
        newly = []                                       # packets this SACK acknowledges first
        bits = sack.bitmap
        while bits:
            low = bits & -bits
            seq = base + low.bit_length() - 1
            bits ^= low
            seg = self.segments.get(seq)
            if seg is not None:
                if not seg.acked:
                    newly.append(seg)
                acked += self._ack(seg, now, trigger)
        acked += self._advance_cum(cum, now, newly, trigger)
        lost = self._sack.lost(cum, base, sack.bitmap, self, now)
        if lost:
            self._sack_losses(lost, now)
        detector = self._detector
        if detector is not None:
            if newly:                                 # what a packet acknowledged overtook on its own path
                overtaken = detector.overtaken(newly, base)
                if overtaken:
                    self._declare_lost(overtaken, now, BY_ORDER)
            if trigger - TS_SLACK > detector.xmit:       # detector.delivered, inline: this is per SACK
                detector.xmit = trigger - TS_SLACK        # surely sent no earlier than this
                detector.rtt = rtt
            overdue = detector.lost(now)
            if overdue:
                self._declare_lost(overdue, now, BY_TIME)
            if acked:                                 # the tail probe waits from the latest progress
                detector.probe_at = now + PROBE_SRTTS * self.rtt.srtt if self.inflight_bytes else None
                detector.probes = 0
        self.rtt.sample_echo(rtt, sack.ts_echo)
        ev = self.evset.get(sack.ev_echo)
        ecn = sack.ecn_echo
        if ecn:
            self.stats.add("ecn_echoes")
            if ev is not None and self.monitor.on_ecn(self.evset, ev, now):
                ecn = False                         # the path's own congestion: steering avoids it
                self.stats.add("ecn_steered")
        if ev is not None and self._on_ack is not None:
            monitor = self.monitor
            if isinstance(monitor, MrcPathMonitor):      # narrowed for mypyc: MRC's hook called natively
                monitor.on_ack(self.evset, ev, sack.ecn_echo, rtt, now)
            else:
                self._on_ack(self.evset, ev, sack.ecn_echo, rtt, now)
        selector = self.selector
        if newly and isinstance(selector, PathCapSelector):    # there with path_cap_pkts (`kinds`)
            selector.open_caps(newly, now, self.rtt.base_rtt)
        if newly and self.evset.steering.signalled:     # steering learns from them only then
            self._judge_unechoed(newly, ev, now)
        self.cc.on_ack(now, acked, ecn, rtt)
        if self.cfg.window_penalty:                    # the latest SACK to arrive says what is asked
            self.cc.on_window_penalty(now, sack.window_penalty)

    def _judge_unechoed(self, segments: list[Segment], echoed, now: float) -> None:
        """Tell the path monitor (`on_acked`) of every packet a SACK acknowledged without echoing
        it, with the time since it was sent (asked only while the EV set's steering has a signal
        standing: `steering.Steering.signalled`). Retransmissions are left out: which
        transmission arrived is not known."""
        on_acked = getattr(self.monitor, "on_acked", None)     # optional PathMonitor hook (policies)
        if on_acked is None:
            return
        evset = self.evset
        by_value = evset.by_value
        for seg in segments:
            other = seg.ev
            if other is echoed or seg.transmissions != 1 or by_value.get(other.value) is not other:
                continue
            on_acked(evset, other, now - seg.sent_at, now)

    def _sack_losses(self, lost, now: float) -> None:
        """Queue for retransmission the packets a SACK processor declared lost (still in flight)."""
        queued = False
        for seq in lost:
            seg = self.segments.get(seq)
            if seg is not None and seg.in_flight and not seg.acked:
                seg.in_flight = False
                seg.ev.load.inflight -= 1
                self.inflight_bytes -= seg.wire
                self.stats.add("sack_losses")
                self._queue_retx(seq, events.CAUSE_SACK)
                queued = True
        if queued:
            self.cc.on_trim_or_loss(now)

    def on_nack(self, now: float, nack: Nack) -> None:
        """A trim NACK: queue the packet for immediate retransmission on another EV."""
        self.stats.add("nacks_received")
        header_sent = now - ts_age(now, nack.ts_echo)      # that packet's header arrived
        if header_sent > self.delivered_sent_at:
            self.delivered_sent_at = header_sent
        ipsn = self._ipsn
        cum = from_wire(nack.cum_psn, ipsn, self.segments.base)
        if self.segments.base <= cum <= self.next_seq:
            self._advance_cum(cum, now)
        if nack.reason not in (constants.NACK_TRIMMED, constants.NACK_TRIMMED_LASTHOP):
            return
        seq = from_wire(nack.psn, ipsn, self.segments.base)
        seg = self.segments.get(seq)
        if seg is None or seg.acked or not seg.in_flight or seg.ev is None or seg.ev.value != nack.ev_echo:
            return                                   # answered already, or about an older transmission
        seg.in_flight = False
        seg.ev.load.inflight -= 1
        seg.trimmed = True
        self.inflight_bytes -= seg.wire
        self.stats.add("trims")
        self.evset.note_drop(seg.ev)
        self.emit(events.TrimNack(now, self.ident, nack.psn, nack.reason, nack.ev_echo, self.rtt.srtt))
        self.monitor.on_trim(self.evset, seg.ev, nack.reason == constants.NACK_TRIMMED_LASTHOP, now)
        self.rtt.sample(ts_age(now, nack.ts_echo), full_size=False)
        self.cc.on_trim_or_loss(now)
        self._trim_at = now
        last_hop = nack.reason == constants.NACK_TRIMMED_LASTHOP and self.cfg.window_penalty
        self._queue_retx(seq, events.CAUSE_TRIM, _RETX_LASTHOP_TRIM if last_hop else _RETX_AT_ONCE)
