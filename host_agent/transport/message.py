"""Messages and their packets on the sending side."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final, Iterator

from wire.packets import DATA_OVERHEAD
from host_agent.transport.fifo import FifoList

View = memoryview      # a name of this module's: mypyc resolves a compiled dataclass's annotations here


@dataclass(eq=False)
class OutMessage:
    """One message being sent: its bytes, how far it is cut into packets, how much is acknowledged."""

    msg_id: int
    data: View
    num_segments: int
    length: int = -1           # message length in bytes (set from data)
    next_offset: int = 0
    segments_made: int = 0
    segments_acked: int = 0
    done: bool = False

    def __post_init__(self) -> None:
        self.length = len(self.data)

    @property
    def fully_segmented(self) -> bool:
        """True when every packet of the message has a PSN."""
        return self.segments_made == self.num_segments

    def segment_acked(self) -> bool:
        """Count one packet of this message acknowledged (each once); True when that was the
        last: the message is complete."""
        self.segments_acked += 1
        if self.segments_acked == self.num_segments and not self.done:
            self.done = True
            return True
        return False


class SendQueue(FifoList):
    """Messages (`OutMessage`) not yet fully cut into packets, a `fifo.FifoList`: the oldest (`first`)
    is the one the next packet is cut from, and leaves when its last packet is. Gives each message
    its 16-bit id. A FifoList itself, not one held: asked per packet whether it is empty and for its
    oldest message, it answers in one native call."""

    def __init__(self, mtu: int) -> None:
        super().__init__()
        self.mtu = mtu
        self._next_id = 0

    def add(self, data) -> int:
        """Queue a message (bytes-like, not copied); return its id."""
        msg_id = self._next_id
        self.append(new_message(msg_id, data, self.mtu))
        self._next_id = (msg_id + 1) & 0xFFFF
        return msg_id

    def cut(self, seq: int) -> "Segment":
        """The next packet of the oldest message, numbered `seq`; a message leaves the queue
        with its last packet."""
        msg: OutMessage = self.first()
        offset = msg.next_offset
        left = msg.length - offset
        length = self.mtu if self.mtu < left else left
        seg = Segment(seq, msg, offset, length, length + DATA_OVERHEAD)
        msg.next_offset = offset + length
        msg.segments_made += 1
        if msg.segments_made == msg.num_segments:      # fully_segmented: it leaves the queue
            self.pop_first()
        return seg


@dataclass(eq=False, slots=True)
class Segment:
    """One data packet (one PSN) of a message, across all its transmissions."""

    seq: int
    msg: OutMessage
    offset: int
    length: int
    wire: int = 0              # bytes of the packet on the wire
    ev: Any = None             # Ev of the latest transmission
    sent_at: float = 0.0       # time of the latest transmission
    transmissions: int = 0
    timeouts: int = 0
    in_flight: bool = False
    acked: bool = False
    queued: bool = False       # waiting in the retransmission queue
    trimmed: bool = False      # the latest transmission came back as a trim NACK
    blamed: Any = None         # the EV its latest timeout retired (taken back if the timeout was spurious)
    declared_lost: int = 0     # SACKs showed a transmission lost: 0 no, else lossdetect's BY_TIME or BY_ORDER (taken back if it arrives)
    path_sent: int = 0         # the latest transmission's number among the packets sent on its path (PathLoad.sent)
    blamed_sent: float = 0.0   # when the blamed transmission left
    blamed_until: float = math.inf   # when the transmission after the blamed one left (inf: not yet)

    def __init__(self, seq: int, msg: OutMessage, offset: int, length: int, wire: int = 0, ev: Any = None,
                 sent_at: float = 0.0, transmissions: int = 0, timeouts: int = 0, in_flight: bool = False,
                 acked: bool = False, queued: bool = False, trimmed: bool = False, blamed: Any = None,
                 declared_lost: int = 0, path_sent: int = 0, blamed_sent: float = 0.0,
                 blamed_until: float = math.inf) -> None:
        # written out, not generated: under mypyc a dataclass's generated __init__ stays interpreted
        # Python, and one of these is made per packet
        self.seq = seq
        self.msg = msg
        self.offset = offset
        self.length = length
        self.wire = wire if wire else length + DATA_OVERHEAD
        self.ev = ev
        self.sent_at = sent_at
        self.transmissions = transmissions
        self.timeouts = timeouts
        self.in_flight = in_flight
        self.acked = acked
        self.queued = queued
        self.trimmed = trimmed
        self.blamed = blamed
        self.declared_lost = declared_lost
        self.path_sent = path_sent
        self.blamed_sent = blamed_sent
        self.blamed_until = blamed_until

    def payload(self) -> bytes:
        """The payload bytes of this packet."""
        return bytes(self.msg.data[self.offset:self.offset + self.length])


class Unacknowledged:
    """A sender's segments from its oldest not yet acknowledged in order (sequence number `base`,
    the sender's `cum_acked`) to its latest, by sequence number: a `fifo.FifoList` read by position
    (the compiled build indexes it natively, where a dict boxed and hashed every sequence number)."""

    __slots__ = ("_segments", "base")

    def __init__(self) -> None:
        self._segments = FifoList()                  # of Segment: sequence numbers base, base + 1, ...
        # the sequence number of the oldest segment held: every one below was taken off. Read it, never
        # set it (pop_oldest moves it on): a field, not a property, as it is read per packet
        self.base = 0

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[Segment]:
        """The segments, oldest first."""
        return iter(self._segments)

    def get(self, seq: int) -> Segment | None:
        """The segment numbered `seq`, or None when it is not held."""
        i = seq - self.base
        segments = self._segments
        if i < 0 or i >= len(segments):
            return None
        return segments.get(i)

    def __getitem__(self, seq: int) -> Segment:
        seg = self.get(seq)
        if seg is None:
            raise KeyError(seq)
        return seg

    def append(self, seg: Segment) -> None:
        """Hold `seg`, the next sequence number after the latest held."""
        if seg.seq != self.base + len(self._segments):
            raise ValueError(f"segment {seg.seq} does not follow the {len(self)} held from {self.base}")
        self._segments.append(seg)

    def oldest(self) -> Segment:
        """The segment numbered `base` (there must be one)."""
        return self._segments.first()

    def pop_oldest(self) -> Segment:
        """Take the segment numbered `base` off (there must be one); `base` moves on by one."""
        seg: Segment = self._segments.pop_first()
        self.base += 1
        return seg


MAX_MESSAGE_BYTES: Final = 0xFFFFFFFF          # MRCH message length is 32 bits


def new_message(msg_id: int, data, mtu: int) -> OutMessage:
    """An OutMessage over the bytes of `data` (any contiguous bytes-like object, not copied)."""
    view = memoryview(data)
    if not view.contiguous:
        raise ValueError(f"message {msg_id}: data must be contiguous (got a strided {type(data).__name__})")
    view = view.cast("B") if view.format != "B" or view.ndim != 1 else view
    if len(view) > MAX_MESSAGE_BYTES:
        raise ValueError(f"message {msg_id}: {len(view)} bytes is more than the {MAX_MESSAGE_BYTES} "
                         f"a 32-bit message length can carry")
    return OutMessage(msg_id, view, segment_count(len(view), mtu))


def segment_count(length: int, mtu: int) -> int:
    """Packets needed for a message of `length` bytes (a zero-length message still takes one)."""
    return max(1, -(-length // mtu))


def ts_now(now: float) -> int:
    """Microsecond timestamp, modulo 2**32, as carried in MRCH and echoed in control packets."""
    return int(now * 1e6) & 0xFFFFFFFF


def ts_age(now: float, ts_echo: int) -> float:
    """Seconds since the echoed timestamp `ts_echo` was taken."""
    return (((int(now * 1e6) & 0xFFFFFFFF) - ts_echo) & 0xFFFFFFFF) / 1e6       # ts_now(now) - ts_echo
