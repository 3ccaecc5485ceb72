"""The event queue and the clock."""
from __future__ import annotations

import heapq
import random
from typing import Callable


class Simulator:
    """Runs callbacks in time order (seconds, float); ties run in scheduling order."""

    def __init__(self, seed: int = 0) -> None:
        self.now = 0.0
        self.rng = random.Random(seed)
        self._queue: list = []
        self._seq = 0
        self.events_run = 0

    def at(self, t: float, fn: Callable, *args) -> None:
        """Run `fn(*args)` at time `t` (not before now)."""
        self._seq += 1
        heapq.heappush(self._queue, (max(t, self.now), self._seq, fn, args))

    def after(self, delay: float, fn: Callable, *args) -> None:
        """Run `fn(*args)` `delay` seconds from now."""
        self.at(self.now + delay, fn, *args)

    def run(self, until: float | None = None, stop: Callable[[], bool] | None = None,
            max_events: int | None = None) -> None:
        """Run events up to time `until`, until `stop()` is true, or until nothing is left."""
        q = self._queue
        count = 0
        while q:
            t = q[0][0]
            if until is not None and t > until:
                self.now = until
                return
            _, _, fn, args = heapq.heappop(q)
            self.now = t
            fn(*args)
            count += 1
            if stop is not None and stop():
                break
            if max_events is not None and count >= max_events:
                break
        self.events_run += count
        if until is not None and not q:
            self.now = max(self.now, until)
