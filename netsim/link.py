"""One direction of a cable: an egress port's queues, its serialisation and its propagation delay."""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Final, Protocol

from mypy_extensions import i64

from wire import constants
from wire.packets import DataPacket, wire_size
from netsim.sim import Lane, Simulator, TimedEvent, doubled_ring

if TYPE_CHECKING:                       # types only: the switch and the host import this module
    from netsim.host import SimHost
    from netsim.switch import SimSwitch

_LOW: Final = constants.PRIORITY_LOW
_HIGH: Final = constants.PRIORITY_HIGH
_COUNTERS = ("offered", "data_offered", "dropped_down", "dropped_queue", "tx", "tx_bytes")


class PacketSink(Protocol):
    """What a link delivers to: a switch, a host, or anything with their `receive`."""

    def receive(self, pkt: Any, port: int) -> None:
        """`pkt` arrived on the node's port `port`."""


class _Unconnected:
    """Where a link delivers before `connect`: nowhere."""

    def receive(self, pkt: Any, port: int) -> None:
        raise RuntimeError("a packet reached the end of a link that is connected to nothing")


_UNCONNECTED: Final = _Unconnected()


class Fifo:
    """Packets in the order they came, the oldest taken first: a link's two queues.

    A ring of slots that doubles when full, not a deque: compiled, its verbs are native calls
    and no memory is allocated or freed per packet (a deque's methods are called by name, and
    a list emptied and filled again reallocates)."""

    __slots__ = ("_ring", "_head", "_size")

    def __init__(self) -> None:
        self._ring: list = [None] * 8
        self._head: i64 = 0                     # the oldest packet's slot
        self._size: i64 = 0                     # packets held

    def __len__(self) -> int:
        return self._size

    def push(self, pkt: Any) -> None:
        """Add `pkt` after the others."""
        ring = self._ring
        size = self._size
        if size == len(ring):
            ring = self._grow()
        i: i64 = self._head + size
        if i >= len(ring):
            i -= len(ring)
        ring[i] = pkt
        self._size = size + 1

    def pop(self) -> Any:
        """Take the oldest packet."""
        if self._size == 0:
            raise IndexError("pop from an empty Fifo")
        ring = self._ring
        head = self._head
        pkt = ring[head]
        ring[head] = None
        head += 1
        if head == len(ring):
            head = 0
        self._head = head
        self._size -= 1
        return pkt

    def clear(self) -> None:
        """Forget every packet."""
        self._ring = [None] * 8
        self._head = 0
        self._size = 0

    def _grow(self) -> list:
        """Twice the ring, its packets in order from the oldest."""
        grown = doubled_ring(self._ring, self._head)
        self._ring = grown
        self._head = 0
        return grown


class SimLink(TimedEvent):
    """Carries packets from an egress port to `(node, port)` at `rate_bps` after `delay` seconds.

    Two strict-priority queues (HIGH served first); the LOW queue holds at most `depth`
    packets and the HIGH queue `high_depth`; packets beyond are tail-dropped. A link that is
    down drops what is offered to it and what is on the wire when it goes down. `delay` is fixed
    when the link is made, read-only (its packets arrive in the order they left: one delay for
    all); `rate_bps` may change.
    """

    # The fields in the order the compiled object lays them out (that of the first assignments
    # below), grouped by the verb that reads them per packet, so that each touches few cache lines:
    # `_arrive` the first line, `_done` the next, `send` and `_serialise` the one after; the rest last.
    # The link is also the event of its own that the simulator fires (a `TimedEvent`, its time and
    # number the first fields): with the item it was scheduled with, a packet reaching the far end
    # (`_arrive`); without one, the end of a packet's serialisation (`_done`, one at a time, waiting
    # in its delay's `Simulator.event_lane`). No event object of its own to read per event.
    __slots__ = ("busy", "up", "trace_data", "closed",
                 "_on_cable", "_doomed", "_node", "_dest_port",
                 "_epoch", "_wire_epoch", "_wire_size", "_wire_pkt", "tx", "tx_bytes", "_propagation",
                 "queues", "low_queued", "high_queued", "offered", "data_offered", "depth", "high_depth",
                 "peak_queue", "rate_bps",
                 "_tx_delay", "_tx_lane", "_tx_delay2", "_tx_lane2",
                 "sim", "name", "_delay", "data_offered_at", "dropped_down", "dropped_queue")

    def __init__(self, sim: Simulator, name: str, rate_bps: float, delay: float, depth: int, high_depth: int | None = None):
        super().__init__()
        self.busy = False
        self.up = True
        self.trace_data = False
        self.closed = False                     # by `close`
        self._on_cable: i64 = 0                 # packets propagating (each carried by its arrival event)
        self._doomed: i64 = 0                   # how many of them were on the cable when it went down
        # the node at the far end: typed as a switch, a host or any other (a union), the compiled
        # build calls a switch's or a host's `receive` natively, after a type check
        self._node: SimSwitch | SimHost | PacketSink = _UNCONNECTED
        self._dest_port = 0
        # the numbers read or counted per packet are i64: native arithmetic when compiled
        self._epoch: i64 = 0                    # bumped when the link goes down: packets on the wire die
        self._wire_epoch: i64 = 0               # the packet being serialised (while busy): its epoch, bytes, itself
        self._wire_size: i64 = 0
        self._wire_pkt: Any = None
        self.tx: i64 = 0                        # _COUNTERS, one by one (a compiled class declares them so)
        self.tx_bytes: i64 = 0
        self._propagation: Lane = sim.lane(delay)   # where the arrivals wait (one delay for all)
        # indexed by priority (LOW 0, HIGH 1); typed as a tuple of any length: the compiled build keeps
        # a fixed-length tuple unboxed and would make a new tuple object at every read of it
        self.queues: tuple[Fifo, ...] = (Fifo(), Fifo())
        # their lengths, kept here: read per packet (a switch's trim and ECN marking, the next packet
        # to serialise) without reading the queues' objects, which an idle link's packets never touch
        self.low_queued: i64 = 0
        self.high_queued: i64 = 0
        self.offered: i64 = 0
        self.data_offered: i64 = 0
        self.depth: i64 = depth
        self.high_depth: i64 = high_depth if high_depth is not None else depth
        self.peak_queue: i64 = 0                # most packets ever waiting (both priorities)
        self.rate_bps = rate_bps
        # the lanes of the last two serialisation delays (a packet size at the rate): a link
        # mostly carries two sizes (data, and the acknowledgements of the other direction's flows);
        # -1.0 is no delay yet (no delay is negative), its lane a placeholder never used
        self._tx_delay = -1.0
        self._tx_lane = self._propagation
        self._tx_delay2 = -1.0
        self._tx_lane2 = self._propagation
        self.sim = sim
        self.name = name
        self._delay = delay
        self.data_offered_at: list[float] = []  # time of every data packet offered (when tracing)
        self.dropped_down: i64 = 0
        self.dropped_queue: i64 = 0

    @property
    def delay(self) -> float:
        """Seconds from a packet's last bit out to its arrival at the far end (fixed)."""
        return self._delay

    @property
    def dest(self) -> Any:
        """(node, port) of the far end, None before `connect`."""
        return None if self._node is _UNCONNECTED else (self._node, self._dest_port)

    @property
    def counters(self) -> Counter:
        """A snapshot of the link's counters: offered, data_offered, dropped_down, dropped_queue, tx, tx_bytes."""
        return Counter({name: getattr(self, name) for name in _COUNTERS})

    def connect(self, node, port: int) -> None:
        """Deliver to `node.receive(pkt, port)`."""
        self._node = node
        self._dest_port = port

    def close(self) -> None:
        """End the link, its network closing (`Network.close`): it lets go of the node at its far
        end, so that reference counting frees it. It carries nothing after; closing it again does
        nothing."""
        if self.closed:
            return
        self.closed = True
        self._node = _UNCONNECTED

    @property
    def low_depth_now(self) -> int:
        """Packets waiting in the LOW queue."""
        return self.low_queued

    def set_up(self, up: bool) -> None:
        """Bring the link up or down (down: queued and in-flight packets are lost)."""
        if self.up == up:
            return
        self.up = up
        if not up:
            self._epoch += 1
            self._doomed = self._on_cable
            for q in self.queues:
                self.dropped_down += len(q)
                q.clear()
            self.low_queued = 0
            self.high_queued = 0

    def send(self, pkt, priority: int) -> bool:
        """Offer a packet to the egress queue; return False when it is dropped."""
        self.offered += 1
        if type(pkt) is DataPacket:
            self.data_offered += 1
            if self.trace_data:
                self.data_offered_at.append(self.sim.now)
        if not self.up:
            self.dropped_down += 1
            return False
        depth = self.high_depth if priority == _HIGH else self.depth
        if not self.busy and depth > 0:          # idle: both queues are empty, the packet goes on the wire
            if not self.peak_queue:
                self.peak_queue = 1              # it was queued, for no time, as the only packet
            self.busy = True                     # serialised until its last bit has left
            self._serialise(pkt)
            return True
        queues = self.queues
        q = queues[priority]
        if len(q) >= depth:
            self.dropped_queue += 1
            return False
        q.push(pkt)
        if priority == _HIGH:
            self.high_queued += 1
        else:
            self.low_queued += 1
        queued = self.low_queued + self.high_queued
        if queued > self.peak_queue:
            self.peak_queue = queued
        return True

    def _serialise(self, pkt) -> None:
        """Put `pkt` on the wire now: its last bit leaves in its size over the rate."""
        size = wire_size(pkt)
        self._wire_pkt = pkt
        self._wire_epoch = self._epoch
        self._wire_size = size
        delay = size * 8 / self.rate_bps
        if delay == self._tx_delay:
            lane = self._tx_lane
        elif delay == self._tx_delay2:          # the other one: first from now on
            lane = self._tx_lane2
            self._tx_delay2 = self._tx_delay
            self._tx_lane2 = self._tx_lane
            self._tx_delay = delay
            self._tx_lane = lane
        else:
            lane = self.sim.event_lane(delay)
            self._tx_delay2 = self._tx_delay
            self._tx_lane2 = self._tx_lane
            self._tx_delay = delay
            self._tx_lane = lane
        lane.schedule(self)

    def _done(self) -> None:
        """The last bit left: the packet propagates, the next one starts."""
        if self._wire_epoch == self._epoch and self.up:
            self.tx += 1
            self.tx_bytes += self._wire_size
            self._on_cable += 1
            self._propagation.schedule(self, self._wire_pkt)
        else:
            self.dropped_down += 1
        if self.high_queued:                     # the next packet, HIGH first, goes on the wire
            self.high_queued -= 1
            pkt = self.queues[_HIGH].pop()
        elif self.low_queued:
            self.low_queued -= 1
            pkt = self.queues[_LOW].pop()
        else:
            self.busy = False
            self._wire_pkt = None
            return
        self._serialise(pkt)

    def fire(self, item: Any) -> None:
        """The simulator's call at one of the link's events: `item` a packet reaching the far end,
        or None at the end of a packet's serialisation."""
        if item is None:
            self._done()
        else:
            self._arrive(item)

    def _arrive(self, pkt: Any) -> None:
        """`pkt`, the oldest packet on the cable, reaches the far end (lost if the link went down
        since it left, or is down)."""
        self._on_cable -= 1
        if self._doomed:
            self._doomed -= 1
            self.dropped_down += 1
            return
        if not self.up:
            self.dropped_down += 1
            return
        self._node.receive(pkt, self._dest_port)
