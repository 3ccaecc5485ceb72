"""One direction of a cable: an egress port's queues, its serialisation and its propagation delay."""
from __future__ import annotations

from collections import Counter, deque

from wire import constants as C
from wire.packets import DataPacket, wire_size


class SimLink:
    """Carries packets from an egress port to `(node, port)` at `rate_bps` after `delay` seconds.

    Two strict-priority queues (HIGH served first); the LOW queue holds at most `depth`
    packets and the HIGH queue `high_depth`; packets beyond are tail-dropped. A link that is
    down drops what is offered to it and what is on the wire when it goes down.
    """

    def __init__(self, sim, name: str, rate_bps: float, delay: float, depth: int, high_depth: int | None = None):
        self.sim = sim
        self.name = name
        self.rate_bps = rate_bps
        self.delay = delay
        self.depth = depth
        self.high_depth = high_depth if high_depth is not None else depth
        self.queues = (deque(), deque())         # indexed by priority (LOW 0, HIGH 1)
        self.busy = False
        self.up = True
        self._epoch = 0                         # bumped when the link goes down: packets on the wire die
        self.dest = None                        # (node, port): node.receive(pkt, port)
        self.counters: Counter = Counter()
        self.data_offered_at: list[float] = []  # time of every data packet offered (when tracing)
        self.trace_data = False
        self.peak_queue = 0                     # most packets ever waiting (both priorities)

    def connect(self, node, port: int) -> None:
        """Deliver to `node.receive(pkt, port)`."""
        self.dest = (node, port)

    @property
    def low_depth_now(self) -> int:
        """Packets waiting in the LOW queue."""
        return len(self.queues[C.PRIORITY_LOW])

    def set_up(self, up: bool) -> None:
        """Bring the link up or down (down: queued and in-flight packets are lost)."""
        if self.up == up:
            return
        self.up = up
        if not up:
            self._epoch += 1
            for q in self.queues:
                self.counters["dropped_down"] += len(q)
                q.clear()

    def send(self, pkt, priority: int) -> bool:
        """Offer a packet to the egress queue; return False when it is dropped."""
        self.counters["offered"] += 1
        if isinstance(pkt, DataPacket):
            self.counters["data_offered"] += 1
            if self.trace_data:
                self.data_offered_at.append(self.sim.now)
        if not self.up:
            self.counters["dropped_down"] += 1
            return False
        q = self.queues[priority]
        if len(q) >= (self.high_depth if priority == C.PRIORITY_HIGH else self.depth):
            self.counters["dropped_queue"] += 1
            return False
        q.append(pkt)
        queued = len(self.queues[0]) + len(self.queues[1])
        if queued > self.peak_queue:
            self.peak_queue = queued
        if not self.busy:
            self._start()
        return True

    def _start(self) -> None:
        high, low = self.queues[C.PRIORITY_HIGH], self.queues[C.PRIORITY_LOW]
        q = high if high else low
        if not q:
            self.busy = False
            return
        pkt = q.popleft()
        self.busy = True
        self.sim.after(wire_size(pkt) * 8 / self.rate_bps, self._done, pkt, self._epoch)

    def _done(self, pkt, epoch: int) -> None:
        if epoch == self._epoch and self.up:
            self.counters["tx"] += 1
            self.counters["tx_bytes"] += wire_size(pkt)
            self.sim.after(self.delay, self._arrive, pkt, epoch)
        else:
            self.counters["dropped_down"] += 1
        self._start()

    def _arrive(self, pkt, epoch: int) -> None:
        if epoch != self._epoch or not self.up:
            self.counters["dropped_down"] += 1
            return
        node, port = self.dest
        node.receive(pkt, port)
