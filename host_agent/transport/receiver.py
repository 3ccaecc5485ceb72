"""MRC receiver: places packets by offset, suppresses duplicates, answers with SACKs and trim NACKs."""
from __future__ import annotations

from typing import Callable, Final

from wire import constants
from wire.packets import DataPacket, Nack, Sack
from host_agent.transport import events
from host_agent.transport.peers import ConnectionId
from host_agent.transport.config import TransportConfig
from host_agent.transport.evset import Ev, EvSet
from host_agent.transport.shares import SenderShares
from host_agent.transport.psn import from_wire, to_wire
from host_agent.transport.tally import Tally

BITMAP_BITS: Final = 64
BITMAP_MASK: Final = (1 << BITMAP_BITS) - 1
ACK_WAIT_RTO_FRACTION: Final = 0.5       # a coalesced SACK never waits longer than this fraction of the QP timeout
GAP_GAIN: Final = 0.125                  # weight of a new sample in the smoothed gap between data packets
_TRIMMED: Final = constants.MRCH_FLAG_TRIMMED
_RETX: Final = constants.MRCH_FLAG_RETX
_ECN_CE: Final = constants.ECN_CE


class InMessage:
    """One message being received: the payloads landed so far by offset, and how many bytes.

    The payloads are kept as they came (a view of the sender's message in the simulator, the
    frame's bytes in an agent) and joined once, when the last one lands: no zeroed buffer to
    copy each packet into and then copy whole again."""

    def __init__(self, msg_id: int, length: int) -> None:
        self.msg_id = msg_id
        self.length = length
        self._offsets: list[int] = []            # of the pieces placed, in the order they landed
        self._pieces: list[bytes | memoryview] = []
        self.received = 0
        self._last_offset = -1                  # of the latest piece placed
        self._in_order = True                   # every piece came after the one before it

    def place(self, offset: int, payload: bytes | memoryview) -> None:
        """Keep `payload`, the message's bytes from `offset` (each offset once)."""
        if offset < self._last_offset:
            self._in_order = False
        self._last_offset = offset
        self._offsets.append(offset)
        self._pieces.append(payload)
        self.received += len(payload)

    def data(self) -> bytes:
        """The message's bytes, once every byte has landed."""
        pieces = self._pieces
        if self._in_order:                      # placed in order (one path): no sort needed
            out = b"".join(pieces)
        else:                                   # the pieces' places in the order of their offsets
            offsets = self._offsets
            out = b"".join([pieces[i] for i in sorted(range(len(offsets)), key=offsets.__getitem__)])
        if len(out) != self.length:
            raise ValueError(f"message {self.msg_id}: its pieces overlap ({len(out)} bytes for {self.length})")
        return out


class MrcReceiver:
    """The receiving half of one MRC connection.

    `expected` is the first sequence number not yet received; `_ooo` has bit i set when
    `expected + i` has been received (up to `ooo_window` bits; a SACK carries 64 of them from a
    base offset, `sack_window`). Each PSN is accepted once: later copies are duplicates,
    answered with a SACK and otherwise ignored.
    """

    def __init__(self, ident: ConnectionId, config: TransportConfig, evset: EvSet, stats: Tally,
                 emit: Callable[[events.TransportEvent], None], shares: SenderShares | None = None) -> None:
        self.ident = ident
        self.cfg = config
        self._qp_timeout = config.base_timeout      # a property of the config: read once
        self._ipsn = config.initial_psn             # read per packet (TransportConfig is not compiled:
        self._ooo_window = config.ooo_window        # each read of it is a generic attribute lookup)
        self._ack_coalesce = config.ack_coalesce
        self._ack_delay = config.ack_delay
        self._ack_fanout = config.ack_fanout
        self.evset = evset
        self.stats = stats
        self._placed = stats.counter("data_received")             # counted per packet: no lookup by name
        self._placed_bytes = stats.counter("payload_bytes_received")
        self.emit = emit
        self.expected = 0
        self._ooo = 0
        self.messages: dict[int, InMessage] = {}
        self._unacked = 0                 # in-order packets not yet acknowledged
        self._ack_deadline: float | None = None
        self._last: DataPacket | None = None
        self._last_ce = False
        self._last_plane: int | None = None
        self._last_seq = 0                # sequence number of `_last`
        self._tail_seq = -1               # the latest sender's tail received (a packet with the BTH A bit)
        self.last_data_at = -1.0
        self.gap = 0.0                    # smoothed time between data packets (each sample at most the QP timeout)
        self._shares = shares             # the endpoint's senders and their shares, for the SACK's window penalty
        if shares is not None:
            shares.join(self, len({p.nic for p in evset.paths}))

    # --- data ---------------------------------------------------------------------------------
    def on_data(self, now: float, plane: int | None, pkt: DataPacket, out: list) -> None:
        """Take one data packet; append any SACK/NACK to send at once to `out`."""
        stats = self.stats
        if self.last_data_at >= 0:
            sample = min(now - self.last_data_at, self._qp_timeout)
            self.gap += GAP_GAIN * (sample - self.gap)
        self.last_data_at = now
        seq = from_wire(pkt.psn, self._ipsn, self.expected)
        if pkt.flags & _TRIMMED:                                    # pkt.trimmed, without the call
            stats.add("trimmed_received")
            reason = (constants.NACK_TRIMMED_LASTHOP if pkt.dscp == constants.DSCP_TRIMMED_LASTHOP
                      else constants.NACK_TRIMMED)
            out.extend(self._trim_nacks(plane, pkt, reason))
            return
        expected = self.expected
        offset = seq - expected
        if offset >= self._ooo_window:
            stats.add("out_of_window")
            out.append(self._nack(plane, pkt, constants.NACK_PSN_OUT_OF_WINDOW)[:2])
            return
        ce = pkt.ecn == _ECN_CE
        if ce:
            stats.add("ce_received")
        if offset < 0 or (self._ooo >> offset) & 1:
            stats.add("duplicates")
            self._remember(pkt, ce, plane, seq)
            self._sacks(now, plane, self._ack_fanout, out)   # our earlier SACK may be lost
            return
        if (self._unacked and (offset >= BITMAP_BITS or self._last_seq - expected >= BITMAP_BITS)
                and offset // BITMAP_BITS != self._block()):
            self._sacks(now, plane, self._copies(), out)   # the pending SACK's block: the next shows only this one's
        self._place(now, pkt)
        ooo = self._ooo | 1 << offset
        if ooo & 1:                             # the in-order point moves past every packet held
            run = (~ooo & (ooo + 1)).bit_length() - 1
            ooo >>= run
            self.expected = expected + run
        self._ooo = ooo
        self._last, self._last_ce, self._last_plane, self._last_seq = pkt, self._last_ce or ce, plane, seq
        self._unacked += 1
        if pkt.ack_req and seq > self._tail_seq:
            self._tail_seq = seq
        if pkt.flags & _RETX or pkt.ack_req:    # a retransmission, or the sender's tail
            self._sacks(now, plane, self._ack_fanout, out)
        elif (ce or self._unacked >= self._ack_coalesce or expected <= self._tail_seq < self.expected
              or (self._shares is not None and self._shares.penalty(now))):
            # ... or the last hole below the sender's tail filled: everything it sent is here; or
            # senders share us: each SACK opens a sender's window held at its share
            self._sacks(now, plane, self._copies(), out)
        elif self._ack_deadline is None:
            self._ack_deadline = now + self.ack_wait()

    def sending(self, now: float, within: float) -> bool:
        """True while the peer is sending to us (what the endpoint's count of senders asks:
        `SenderShares`): data arrived within `within` seconds of `now`, and we do not hold
        everything up to the sender's tail (the A bit: its queue ran empty there) with nothing
        newer after it."""
        if now - self.last_data_at >= within:
            return False
        tail = self._tail_seq
        return tail < 0 or self.expected <= tail or self._last_seq > tail

    def ack_wait(self) -> float:
        """How long a coalesced SACK may wait: `ack_delay`, or, when data arrives more slowly, the
        time `ack_coalesce` packets take at the observed rate, capped at half of the QP timeout (so
        that the wait alone never times a packet out at the sender, whose RTO is at least that)."""
        stretch = min(self._ack_coalesce * self.gap, ACK_WAIT_RTO_FRACTION * self._qp_timeout)
        return stretch if stretch > self._ack_delay else self._ack_delay

    def _remember(self, pkt: DataPacket, ce: bool, plane: int | None, seq: int) -> None:
        self._last, self._last_ce, self._last_plane, self._last_seq = pkt, self._last_ce or ce, plane, seq

    def _block(self) -> int:
        """Which 64-PSN block past the cumulative point the next SACK's bitmap shows (0: the first)."""
        return max(0, self._last_seq - self.expected) // BITMAP_BITS

    def sack_window(self) -> tuple[int, int]:
        """(base, bitmap) of the next SACK: the 64 sequence numbers from `base`, bit i set when
        `base + i` has arrived. The base is the cumulative point while the latest packet lies in
        the first 64; past that (a window beyond one bitmap), the 64-aligned block holding it, so
        every packet is acknowledged by the SACK it triggers."""
        offset = self._last_seq - self.expected
        if offset < BITMAP_BITS:
            return self.expected, self._ooo & BITMAP_MASK
        shift = offset - offset % BITMAP_BITS
        return self.expected + shift, (self._ooo >> shift) & BITMAP_MASK

    def _place(self, now: float, pkt: DataPacket) -> None:
        self._placed.add()
        self._placed_bytes.add(pkt.length)
        msg = self.messages.get(pkt.msg_id)
        if msg is None:
            if pkt.msg_len > self.cfg.max_message_bytes:
                raise ValueError(f"{self.ident.name}: data packet psn {pkt.psn} claims a message of {pkt.msg_len} "
                                 f"bytes, above max_message_bytes {self.cfg.max_message_bytes}")
            msg = self.messages[pkt.msg_id] = InMessage(pkt.msg_id, pkt.msg_len)
        offset = pkt.va
        payload = pkt.payload
        size = len(payload)
        length = msg.length
        if offset + size > length:
            raise ValueError(f"{self.ident.name}: data packet psn {pkt.psn} of message {pkt.msg_id} ends at "
                             f"{offset + size}, past the message length {length}")
        msg.place(offset, payload)
        if msg.received == length:
            del self.messages[pkt.msg_id]
            self.stats.add("messages_received")
            self.emit(events.MessageReceived(now, self.ident, msg.msg_id, msg.data()))

    # --- acknowledgements -----------------------------------------------------------------------
    def next_wakeup(self) -> float | None:
        """When a coalesced SACK is due."""
        return self._ack_deadline

    def poll(self, now: float, out: list) -> None:
        """Send the coalesced SACK when its delay has run out."""
        if self._ack_deadline is not None and now >= self._ack_deadline:
            self._sacks(now, self._last_plane, self._copies(), out)

    def _copies(self) -> int:
        """How many copies the pending SACK goes in: `ack_fanout` when its packet arrived after the
        sender's tail (the A bit) and was sent before it, else 1. Such a straggler's news has no
        later data packet to be repeated in: were its SACK lost (on a dead path of ours), the sender
        would take it for lost and blame the good path it went on."""
        return self._ack_fanout if self._last_seq < self._tail_seq else 1

    def _sacks(self, now: float, plane: int | None, copies: int, out: list) -> None:
        """Append to `out` the current SACK on up to `copies` distinct paths (one that gets through
        is enough), as (NIC, packet) pairs."""
        shares = self._shares
        penalty = 0 if shares is None else shares.penalty(now)
        nic, sack, key = self._sack(plane, penalty)
        out.append((nic, sack))
        if copies > 1:
            sent = 1
            used = {key}
            for ev in self.evset.one_ev_per_path():
                if sent >= copies:
                    break
                if ev.usable and ev.path_key not in used:
                    used.add(ev.path_key)
                    nic, sack, key = self._sack(plane, penalty, ev)
                    out.append((nic, sack))
                    sent += 1
        self._last_ce = False

    def _sack(self, plane: int | None, penalty: int, ev: Ev | None = None) -> tuple[int, Sack, int]:
        """The current SACK on `ev` (None: the next control EV, `plane` preferred): (its NIC, it,
        its path key), a tuple the compiled build returns unboxed."""
        pkt = self._last
        assert pkt is not None                       # a SACK answers the latest data packet
        if ev is None:                               # (typed: its fields read natively when compiled)
            ev = self.evset.next_control_ev(plane)
        path = self.evset.path_of(ev)
        cum = to_wire(self.expected, self._ipsn)
        base, bitmap = self.sack_window()
        # positional: Sack(src, dst, ev, qp, cum_psn, sack_base, bitmap, ev_echo, ts_echo, ecn_echo, window_penalty)
        sack = Sack(path.src, path.dst, ev.value, self.ident.remote_qp, cum, to_wire(base, self._ipsn),
                    bitmap, pkt.ev, pkt.tsval, self._last_ce, penalty)
        self._unacked = 0
        self._ack_deadline = None
        self.stats.add("sacks_sent")
        return path.nic, sack, ev.path_key

    def _trim_nacks(self, plane: int | None, pkt: DataPacket, reason: int) -> list:
        """The NACK of a trimmed packet on up to `ack_fanout` distinct paths.

        A NACK lost on a dead path of ours would leave the sender to time the packet out while
        later packets arrive: it would blame (retire) the path the packet was trimmed on, which
        works. The sender ignores the copies."""
        first = self._nack(plane, pkt, reason)
        out, used = [first[:2]], {first[2]}
        for ev in self.evset.one_ev_per_path():
            if len(out) >= self._ack_fanout:
                break
            if ev.usable and ev.path_key not in used:
                used.add(ev.path_key)
                out.append(self._nack(plane, pkt, reason, ev)[:2])
        return out

    def _nack(self, plane: int | None, pkt: DataPacket, reason: int, ev: Ev | None = None):
        if ev is None:
            ev = self.evset.next_control_ev(plane)
        path = self.evset.path_of(ev)
        self.stats.add("nacks_sent")
        return path.nic, Nack(src=path.src, dst=path.dst, ev=ev.value, qp=self.ident.remote_qp, psn=pkt.psn,
                              cum_psn=to_wire(self.expected, self._ipsn), reason=reason,
                              ev_echo=pkt.ev, ts_echo=pkt.tsval), ev.path_key
