"""Per-port egress queues of the reference switch: strict priority, tail drop, paced by a rate.

Each port has one FIFO per priority (PRIORITY_HIGH served first), each holding at most
`depth` packets, drained no faster than `rate_bps` bits/s and `rate_pps` packets/s (0 = no
limit). `low_lengths[port]` is the number of low-priority packets waiting on a port: the
queue estimate the pipeline reads. A paused queue holds its packets (the conformance suite
uses this to build a standing queue).
"""
from __future__ import annotations

from collections import deque

from wire import constants

DEFAULT_DEPTH = 64          # packets per priority, as BMv2's default queue depth
MAX_PORTS = 512
MAX_LAG = 0.02              # seconds a late event loop may catch up on for a backlogged queue


class EgressQueue:
    """The egress queue of one port."""

    def __init__(self, port: int, low_lengths: list[int], depth: int = DEFAULT_DEPTH,
                 rate_bps: int = 0, rate_pps: int = 0):
        self.port = port
        self.fifos = tuple(deque() for _ in range(constants.NUM_PRIORITIES))
        self.low_lengths = low_lengths
        self.depth = depth
        self.rate_bps = rate_bps
        self.rate_pps = rate_pps
        self.paused = False
        self.next_time = 0.0        # earliest time the next packet may leave
        self.busy_s = 0.0           # service time of the frames sent while backlogged, at the rate
        self.lost_s = 0.0           # time the pacing clock fell behind by more than MAX_LAG while backlogged

    def __len__(self) -> int:
        return sum(len(f) for f in self.fifos)

    def configure(self, depth: int | None = None, rate_bps: int | None = None, rate_pps: int | None = None) -> None:
        """Change depth (packets per priority) and/or rates (0 = unlimited)."""
        if depth is not None:
            if depth < 1:
                raise ValueError(f"port {self.port}: queue depth must be >= 1, got {depth}")
            self.depth = depth
        if rate_bps is not None:
            self.rate_bps = rate_bps
        if rate_pps is not None:
            self.rate_pps = rate_pps

    @property
    def unlimited(self) -> bool:
        """True when the queue is not rate limited."""
        return not (self.rate_bps or self.rate_pps)

    def enqueue(self, frame: bytes, priority: int) -> bool:
        """Queue a frame; False when its priority FIFO is full (tail drop)."""
        fifo = self.fifos[priority]
        if len(fifo) >= self.depth:
            return False
        fifo.append(frame)
        if priority == constants.PRIORITY_LOW:
            self.low_lengths[self.port] += 1
        return True

    def ready_at(self) -> float | None:
        """When the head packet may leave, or None when nothing can leave (empty or paused)."""
        if self.paused or not (self.fifos[1] or self.fifos[0]):
            return None
        return self.next_time

    def dequeue(self, now: float) -> tuple[int, bytes] | None:
        """Take the next (priority, frame), highest priority first, and advance the pacing clock."""
        if self.paused:
            return None
        for priority in range(constants.NUM_PRIORITIES - 1, -1, -1):
            fifo = self.fifos[priority]
            if fifo:
                frame = fifo.popleft()
                if priority == constants.PRIORITY_LOW:
                    self.low_lengths[self.port] -= 1
                self.charge(len(frame), now, backlogged=True)
                return priority, frame
        return None

    def charge(self, length: int, now: float, backlogged: bool = False) -> None:
        """Account for a frame of `length` bytes sent at `now` in the pacing clock.

        A frame that waited in the queue keeps the schedule even when the event loop runs late (timer
        granularity, a busy CPU), up to MAX_LAG behind; a frame sent straight from an idle queue starts
        a fresh schedule, so an idle port never saves up credit for a burst.
        """
        if self.unlimited:
            return
        cost = 0.0
        if self.rate_bps:
            cost = length * 8 / self.rate_bps
        if self.rate_pps:
            cost = max(cost, 1.0 / self.rate_pps)
        floor = now - MAX_LAG if backlogged else now
        if backlogged:
            self.busy_s += cost
            if floor > self.next_time:          # the event loop came too late to catch up: service lost
                self.lost_s += floor - self.next_time
        self.next_time = max(self.next_time, floor) + cost

    def service(self) -> dict | None:
        """How this rate-limited queue was served while backlogged (None: never backlogged):
        its rate, the service time of what it sent, and the time it fell behind beyond catching up."""
        if self.unlimited or not self.busy_s:
            return None
        return {"rate_bps": self.rate_bps, "rate_pps": self.rate_pps, "busy_s": round(self.busy_s, 6),
                "lost_s": round(self.lost_s, 6)}

    def clear(self) -> None:
        """Drop every queued frame."""
        for f in self.fifos:
            f.clear()
        self.low_lengths[self.port] = 0


class EgressQueues:
    """The egress queues of all ports of a switch."""

    def __init__(self):
        self.low_lengths = [0] * MAX_PORTS
        self.ports: dict[int, EgressQueue] = {}

    def queue(self, port: int) -> EgressQueue:
        """The queue of `port`, created with defaults on first use."""
        q = self.ports.get(port)
        if q is None:
            if not 0 <= port < MAX_PORTS:
                raise ValueError(f"port {port} out of range 0..{MAX_PORTS - 1}")
            q = self.ports[port] = EgressQueue(port, self.low_lengths)
        return q

    def configure(self, port: int, depth: int | None = None, rate_bps: int | None = None,
                  rate_pps: int | None = None) -> None:
        """Set depth and rates of one port's queue."""
        self.queue(port).configure(depth, rate_bps, rate_pps)

    def clear(self) -> None:
        """Empty every queue."""
        for q in self.ports.values():
            q.clear()
