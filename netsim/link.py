"""One direction of a cable: an egress port's queues, its serialisation and its propagation delay."""
from __future__ import annotations

from collections import Counter, deque
from typing import Any, Callable, Final

from wire import constants
from wire.packets import DataPacket, wire_size
from netsim.sim import Simulator

_LOW: Final = constants.PRIORITY_LOW
_HIGH: Final = constants.PRIORITY_HIGH
_COUNTERS = ("offered", "data_offered", "dropped_down", "dropped_queue", "tx", "tx_bytes")


class SimLink:
    """Carries packets from an egress port to `(node, port)` at `rate_bps` after `delay` seconds.

    Two strict-priority queues (HIGH served first); the LOW queue holds at most `depth`
    packets and the HIGH queue `high_depth`; packets beyond are tail-dropped. A link that is
    down drops what is offered to it and what is on the wire when it goes down.
    """

    __slots__ = ("sim", "_on_done", "_on_arrive", "_deliver", "_dest_port", "name", "rate_bps", "delay", "depth", "high_depth",
                 "queues", "busy", "up", "_epoch",
                 "dest", "data_offered_at", "trace_data", "peak_queue",
                 "offered", "data_offered", "dropped_down", "dropped_queue", "tx", "tx_bytes")

    def __init__(self, sim: Simulator, name: str, rate_bps: float, delay: float, depth: int, high_depth: int | None = None):
        self.sim = sim
        self._on_done: Callable = self._done                # bound once: an event per packet holds them
        self._on_arrive: Callable = self._arrive
        self.name = name
        self.rate_bps = rate_bps
        self.delay = delay
        self.depth = depth
        self.high_depth = high_depth if high_depth is not None else depth
        self.queues: tuple[deque, deque] = (deque(), deque())     # indexed by priority (LOW 0, HIGH 1)
        self.busy = False
        self.up = True
        self._epoch = 0                         # bumped when the link goes down: packets on the wire die
        self.dest: Any = None                   # (node, port): node.receive(pkt, port)
        self._deliver: Any = None               # node.receive, bound once: called per packet
        self._dest_port = 0
        self.data_offered_at: list[float] = []  # time of every data packet offered (when tracing)
        self.trace_data = False
        self.peak_queue = 0                     # most packets ever waiting (both priorities)
        self.offered = 0                        # _COUNTERS, one by one (a compiled class declares them so)
        self.data_offered = 0
        self.dropped_down = 0
        self.dropped_queue = 0
        self.tx = 0
        self.tx_bytes = 0

    @property
    def counters(self) -> Counter:
        """A snapshot of the link's counters: offered, data_offered, dropped_down, dropped_queue, tx, tx_bytes."""
        return Counter({name: getattr(self, name) for name in _COUNTERS})

    def connect(self, node, port: int) -> None:
        """Deliver to `node.receive(pkt, port)`."""
        self.dest = (node, port)
        self._deliver = node.receive
        self._dest_port = port

    @property
    def low_depth_now(self) -> int:
        """Packets waiting in the LOW queue."""
        return len(self.queues[_LOW])

    def set_up(self, up: bool) -> None:
        """Bring the link up or down (down: queued and in-flight packets are lost)."""
        if self.up == up:
            return
        self.up = up
        if not up:
            self._epoch += 1
            for q in self.queues:
                self.dropped_down += len(q)
                q.clear()

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
            size = wire_size(pkt)
            self.sim.push(self.sim.now + size * 8 / self.rate_bps, self._on_done, (pkt, self._epoch, size))
            return True
        queues = self.queues
        q = queues[priority]
        if len(q) >= depth:
            self.dropped_queue += 1
            return False
        q.append(pkt)
        queued = len(queues[0]) + len(queues[1])
        if queued > self.peak_queue:
            self.peak_queue = queued
        return True

    def _done(self, pkt, epoch: int, size: int) -> None:
        """The last bit left: the packet propagates, the next one starts."""
        if epoch == self._epoch and self.up:
            self.tx += 1
            self.tx_bytes += size
            self.sim.push(self.sim.now + self.delay, self._on_arrive, (pkt, epoch))
        else:
            self.dropped_down += 1
        queues = self.queues                     # the next packet, HIGH first, goes on the wire
        if queues[_HIGH]:
            pkt = queues[_HIGH].popleft()
        elif queues[_LOW]:
            pkt = queues[_LOW].popleft()
        else:
            self.busy = False
            return
        size = wire_size(pkt)
        self.sim.push(self.sim.now + size * 8 / self.rate_bps, self._on_done, (pkt, self._epoch, size))

    def _arrive(self, pkt, epoch: int) -> None:
        if epoch != self._epoch or not self.up:
            self.dropped_down += 1
            return
        self._deliver(pkt, self._dest_port)
