"""RoCE-style baseline: one fixed path, in-order delivery, go-back-N on loss, RTO with backoff.

This is what MRC is compared with. The connection uses one EV on its first path, whose
destination is the peer NIC address, so switches pick its route by ECMP; data is DSCP NO_TRIM
(tail-dropped, never trimmed). The receiver accepts only the next expected PSN and answers the
first out-of-sequence packet of a gap with a NACK carrying the expected PSN (RoCE's "PSN
sequence error", here reason NACK_PSN_OUT_OF_WINDOW); the sender then resends everything from
there. With no progress for one RTO the sender goes back to the cumulative ack and doubles
the RTO. There is no path failover: a dead path stalls the connection until it returns.
"""
from __future__ import annotations

from typing import Callable

from wire import constants
from wire.packets import DataPacket, Nack, Sack
from host_agent.transport import events
from host_agent.transport.peers import ConnectionId
from host_agent.transport.config import TransportConfig
from host_agent.transport.congestion import RttEstimator
from host_agent.transport.evset import EvSet
from host_agent.transport.message import SendQueue, Segment, ts_age
from host_agent.transport.nicclock import NicClock
from host_agent.transport.policies import CongestionControl
from host_agent.transport.psn import PSN_MASK, from_wire, to_wire
from host_agent.transport.tally import Tally

SEQUENCE_ERROR = constants.NACK_PSN_OUT_OF_WINDOW
_DATA_OVERHEAD = constants.DATA_HEADERS_LEN + constants.ICRC_LEN
_ECN_CE, _TRIMMED = constants.ECN_CE, constants.MRCH_FLAG_TRIMMED


class BaselineSender:
    """Go-back-N sender over one EV."""

    def __init__(self, ident: ConnectionId, config: TransportConfig, evset: EvSet, rtt: RttEstimator,
                 cc: CongestionControl, nic: NicClock, stats: Tally,
                 emit: Callable[[events.TransportEvent], None]) -> None:
        self.ident = ident
        self.cfg = config
        self.evset = evset
        self.rtt = rtt
        self.cc = cc
        self.nic = nic
        self.stats = stats
        self.emit = emit
        self.pending = SendQueue(self.cfg.mtu_payload)
        self.segments: dict[int, Segment] = {}      # cum_acked <= seq < high_seq
        self.cum_acked = 0
        self.next_seq = 0                           # next seq to (re)transmit
        self.high_seq = 0                           # one past the highest seq ever sent
        self._backoff = 1
        self._timeouts = 0                          # consecutive timeouts without progress
        self._budget = config.retry_budget()
        self.failed: events.ConnectionFailed | None = None    # set when the retries ran out
        self._deadline: float | None = None
        self._cause = events.CAUSE_TIMEOUT
        self._last_nack: tuple[int, float] | None = None

    def send_message(self, data) -> int:
        """Queue a message; return its 16-bit id."""
        return self.pending.add(data)

    @property
    def idle(self) -> bool:
        """True when nothing is queued or unacknowledged."""
        return not self.pending and self.cum_acked == self.high_seq

    @property
    def rto(self) -> float:
        """The current RTO including backoff."""
        return min(self.cfg.rto_max, self.rtt.rto * self._backoff)

    def _may_send(self) -> bool:
        """True when a packet is ready (to resend, or new) and the window allows it."""
        next_seq = self.next_seq
        if next_seq >= self.high_seq and not self.pending:
            return False
        return (next_seq == self.cum_acked
                or (next_seq - self.cum_acked) * (self.cfg.mtu_payload + _DATA_OVERHEAD) < self.cc.cwnd)

    def _ready_time(self) -> float:
        """The pacing clock, or later when our NIC is still busy (line rate known)."""
        evset = self.evset
        free = self.nic.free_at(evset.paths[evset.slots[0].current.path_key].nic)
        ready = self.cc.next_send
        return free if free > ready else ready

    def next_wakeup(self) -> float | None:
        """The RTO deadline, or the pacing clock when a packet may go."""
        if self.failed is not None:
            return None
        t = self._deadline
        if self._may_send():
            ready = self._ready_time()
            if t is None or ready < t:
                t = ready
        return t

    def expire(self, now: float) -> None:
        """No progress for an RTO: go back to the cumulative ack and double the RTO."""
        if self._deadline is None or now < self._deadline:
            return
        if self.cum_acked == self.high_seq:
            self._deadline = None
            return
        self.stats.add("timeouts")
        self._timeouts += 1
        if self._budget.exhausted(self._timeouts):
            self._fail(now)
            return
        self._backoff = min(self._backoff * 2, 1 << 16)
        self._go_back(now, self.cum_acked, events.CAUSE_TIMEOUT)
        self.cc.on_trim_or_loss(now)
        self._deadline = now + self.rto

    def _fail(self, now: float) -> None:
        """No progress through every retry the budget allows (linear_cnt + exp_cnt go-backs; the
        baseline's timeout doubles from the first): the connection fails."""
        self.failed = events.ConnectionFailed(now, self.ident, to_wire(self.cum_acked, self.cfg.initial_psn),
                                              self._timeouts - 1, self.rto)
        self.stats.add("connections_failed")
        self._deadline = None
        self.emit(self.failed)

    def _go_back(self, now: float, seq: int, cause: str) -> None:
        self.emit(events.WentBack(now, self.ident, to_wire(seq, self.cfg.initial_psn), cause))
        self.next_seq = seq
        self._cause = cause

    def poll(self, now: float, out: list) -> None:
        """Append the data packets the window and the pacing clock allow now (none once failed)."""
        if self.failed is not None:
            return
        cc = self.cc
        while self._may_send() and now >= self._ready_time():
            if self.next_seq < self.high_seq:
                seg, cause = self.segments[self.next_seq], self._cause
            else:
                seg, cause = self._new_segment(), None
            self.next_seq += 1
            nic, pkt = self._transmit(now, seg, cause)
            out.append((nic, pkt))
            cc.sent(now, seg.wire, 1)
            self.nic.account(nic, seg.wire, now)
            if self._deadline is None:
                self._deadline = now + self.rto
        cc.backlogged = now < cc.next_send and self._may_send()

    def _new_segment(self) -> Segment:
        seg = self.pending.cut(self.high_seq)
        self.segments[seg.seq] = seg
        self.high_seq += 1
        return seg

    def _transmit(self, now: float, seg: Segment, cause: str | None):
        ev = self.evset.slots[0].current
        path = self.evset.path_of(ev)
        seg.ev, seg.sent_at = ev, now
        seg.transmissions += 1
        retx = cause is not None
        stats = self.stats
        stats.add("data_sent")
        stats.add("data_bytes_sent", seg.length)
        if cause is not None:
            stats.add("retransmitted")
            stats.add(f"retx_{cause}")
            self.emit(events.Retransmitted(now, self.ident, to_wire(seg.seq, self.cfg.initial_psn), cause, ev.value,
                                           ev.value))
        msg = seg.msg
        offset = seg.offset
        remote_qp = self.ident.remote_qp
        tsval = int(now * 1e6) & 0xFFFFFFFF
        if seg.length < self.cfg.mtu_payload:
            self.rtt.sent_short(tsval)
        # positional: DataPacket(src, dst, ev, qp, psn, va, rkey, length, msg_id, msg_len, tsval,
        #                        payload (a view of the message, as MRC's), flags, dscp, ecn, ack_req)
        return path.nic, DataPacket(
            path.src, path.dst, ev.value, remote_qp, (self.cfg.initial_psn + seg.seq) & PSN_MASK, offset, remote_qp,
            seg.length, msg.msg_id, msg.length, tsval, msg.data[offset:offset + seg.length],
            constants.MRCH_FLAG_RETX if retx else 0, constants.DSCP_NO_TRIM, constants.ECN_ECT0,
            seg.seq == self.high_seq - 1 and not self.pending)

    def _advance(self, now: float, cum: int) -> int:
        if not self.cum_acked < cum <= self.high_seq:
            return 0
        acked = 0
        while self.cum_acked < cum:
            seg = self.segments.pop(self.cum_acked)
            self.cum_acked += 1
            acked += seg.wire
            if seg.msg.segment_acked():
                self.stats.add("messages_sent")
                self.emit(events.MessageSent(now, self.ident, seg.msg.msg_id, seg.msg.length))
        self.next_seq = max(self.next_seq, self.cum_acked)
        self._backoff = 1
        self._timeouts = 0
        self._deadline = now + self.rto if self.cum_acked < self.high_seq else None
        return acked

    def on_sack(self, now: float, sack: Sack) -> None:
        """Cumulative acknowledgement."""
        self.stats.add("sacks_received")
        cum = from_wire(sack.cum_psn, self.cfg.initial_psn, self.cum_acked)
        acked = self._advance(now, cum)
        rtt = ts_age(now, sack.ts_echo)
        self.rtt.sample_echo(rtt, sack.ts_echo)
        self.cc.on_ack(now, acked, sack.ecn_echo, rtt)

    def on_nack(self, now: float, nack: Nack) -> None:
        """Out-of-sequence (or trim) NACK: resend everything from the PSN asked for."""
        self.stats.add("nacks_received")
        seq = from_wire(nack.psn, self.cfg.initial_psn, self.cum_acked)
        self._advance(now, seq)
        if not self.cum_acked <= seq < self.next_seq:
            return
        if self._last_nack and self._last_nack[0] == seq and now - self._last_nack[1] < self.rtt.srtt:
            return                       # the rewind for this gap is already under way
        self._last_nack = (seq, now)
        self._go_back(now, seq, events.CAUSE_NACK)
        self.cc.on_trim_or_loss(now)


class BaselineReceiver:
    """In-order receiver: accepts only the expected PSN, NACKs the first packet past a gap."""

    def __init__(self, ident: ConnectionId, config: TransportConfig, evset: EvSet, stats: Tally,
                 emit: Callable[[events.TransportEvent], None]) -> None:
        self.ident = ident
        self.cfg = config
        self.evset = evset
        self.stats = stats
        self.emit = emit
        self.expected = 0
        self._nacked = False
        self._buffers: dict[int, bytearray] = {}
        self._unacked = 0
        self._ack_deadline: float | None = None
        self._last: DataPacket | None = None
        self._last_ce = False
        self.last_data_at = -1.0

    def on_data(self, now: float, plane: int | None, pkt: DataPacket, out: list) -> None:
        """Take one data packet; append any SACK/NACK to send at once to `out`."""
        stats = self.stats
        self.last_data_at = now
        expected = self.expected
        seq = from_wire(pkt.psn, self.cfg.initial_psn, expected)
        self._last = pkt
        ce = pkt.ecn == _ECN_CE
        self._last_ce = self._last_ce or ce
        if seq < expected:
            stats.add("duplicates")
            out.append(self._sack())
            return
        if seq > expected or pkt.flags & _TRIMMED:
            stats.add("out_of_sequence")
            if not self._nacked:
                self._nacked = True
                out.append(self._nack(pkt))
            return
        self._nacked = False
        self.expected = expected + 1
        stats.add("data_received")
        stats.add("payload_bytes_received", pkt.length)
        msg_id = pkt.msg_id
        buf = self._buffers.get(msg_id)
        if buf is None:
            buf = self._buffers[msg_id] = bytearray()
        buf += pkt.payload
        if len(buf) >= pkt.msg_len:
            del self._buffers[msg_id]
            stats.add("messages_received")
            self.emit(events.MessageReceived(now, self.ident, msg_id, bytes(buf)))
        self._unacked += 1
        if self._unacked >= self.cfg.ack_coalesce or pkt.ack_req or ce:
            out.append(self._sack())
        elif self._ack_deadline is None:
            self._ack_deadline = now + self.cfg.ack_delay

    def next_wakeup(self) -> float | None:
        """When a coalesced SACK is due."""
        return self._ack_deadline

    def poll(self, now: float, out: list) -> None:
        """Send the coalesced SACK when its delay has run out."""
        if self._ack_deadline is not None and now >= self._ack_deadline:
            out.append(self._sack())

    def _route(self):
        ev = self.evset.slots[0].current
        return ev, self.evset.path_of(ev)

    def _sack(self):
        ev = self.evset.slots[0].current               # _route, inline: per packet
        path = self.evset.paths[ev.path_key]
        cum = (self.cfg.initial_psn + self.expected) & PSN_MASK
        self._unacked, self._ack_deadline = 0, None
        ce, self._last_ce = self._last_ce, False
        self.stats.add("sacks_sent")
        last = self._last
        # positional: Sack(src, dst, ev, qp, cum_psn, sack_base, bitmap, ev_echo, ts_echo, ecn_echo)
        return path.nic, Sack(path.src, path.dst, ev.value, self.ident.remote_qp, cum, cum, 0, last.ev, last.tsval, ce)

    def _nack(self, pkt: DataPacket):
        ev, path = self._route()
        self.stats.add("nacks_sent")
        cum = to_wire(self.expected, self.cfg.initial_psn)
        reason = constants.NACK_TRIMMED if pkt.trimmed else SEQUENCE_ERROR
        return path.nic, Nack(src=path.src, dst=path.dst, ev=ev.value, qp=self.ident.remote_qp, psn=cum,
                              cum_psn=cum, reason=reason, ev_echo=pkt.ev, ts_echo=pkt.tsval)
