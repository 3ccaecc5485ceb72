"""The event queue and the clock."""
from __future__ import annotations

import heapq
import random
from typing import Callable


class Simulator:
    """Runs callbacks in time order (seconds, float); ties run in scheduling order.

    An event is a heap entry (time, ticket, callback, arguments): the ticket, counted up as events
    are scheduled, breaks ties, so equal times run in the order they were scheduled. The
    simulator's own hot parts (links, hosts) schedule with `push`, which skips the check of `at`.
    """

    def __init__(self, seed: int = 0) -> None:
        self.now = 0.0
        self.rng = random.Random(seed)
        self._heap: list = []
        self._ticket = 1
        self.events_run = 0
        self._stopping = False

    def at(self, t: float, fn: Callable, *args) -> None:
        """Run `fn(*args)` at time `t` (not before now)."""
        self.push(t if t > self.now else self.now, fn, args)

    def after(self, delay: float, fn: Callable, *args) -> None:
        """Run `fn(*args)` `delay` seconds from now."""
        t = self.now + delay
        self.push(t if t > self.now else self.now, fn, args)

    def push(self, t: float, fn: Callable, args: tuple) -> None:
        """Run `fn(*args)` at time `t`, which must not be earlier than now."""
        ticket = self._ticket
        self._ticket = ticket + 1
        heapq.heappush(self._heap, (t, ticket, fn, args))

    def stop(self) -> None:
        """End `run` after the event running now (what a `stop` predicate turning true does, for a
        caller that knows when that happens instead of being asked after every event)."""
        self._stopping = True

    def run(self, until: float | None = None, stop: Callable[[], bool] | None = None,
            max_events: int | None = None) -> None:
        """Run events up to time `until`, until `stop()` is true (or `self.stop()` was called), or
        until nothing is left."""
        self._stopping = False
        q = self._heap
        pop = heapq.heappop
        horizon = float("inf") if until is None else until
        limit = -1 if max_events is None else max(max_events, 1)     # at least one event runs
        count = 0
        while q:
            t, ticket, fn, args = pop(q)
            if t > horizon:
                heapq.heappush(q, (t, ticket, fn, args))   # back: (time, ticket) orders it as before
                self.now = horizon
                self.events_run += count
                return
            self.now = t
            fn(*args)
            count += 1
            if self._stopping or count == limit or (stop is not None and stop()):
                break
        self.events_run += count
        if until is not None and not q:
            self.now = max(self.now, until)
