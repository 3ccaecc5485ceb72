"""The event queue and the clock."""
from __future__ import annotations

import gc
import heapq
import random
from typing import Any, Callable, Final

_heappush: Final = heapq.heappush
_heappop: Final = heapq.heappop
# While events run, the cyclic garbage collector looks at young objects after this many container
# objects more were allocated than freed (Python's default: 700). A run allocates packets, events and
# their arguments by the million, and nearly all die young of their reference counts; at the default,
# the collections it triggers (each tenth of them also through older objects, and some through every
# object of the process) took a quarter of a 1,024-host run's time.
RUN_GC_THRESHOLD: Final = 100_000


class FewerCollections:
    """A `with` block in which the cyclic garbage collector's first threshold is at least
    RUN_GC_THRESHOLD, as while events run (`Simulator.run`); the thresholds before it are back
    after it. Building a large network (tables, endpoints, EV sets: objects that live as long as
    it) triggers collections through every object of the process as well."""

    def __init__(self) -> None:
        self._saved: tuple[int, int, int] = (0, 0, 0)

    def __enter__(self) -> None:
        saved = gc.get_threshold()
        self._saved = saved
        if saved[0] < RUN_GC_THRESHOLD:
            gc.set_threshold(RUN_GC_THRESHOLD, saved[1], saved[2])

    def __exit__(self, *exc: object) -> None:
        gc.set_threshold(*self._saved)


class Event:
    """Something due at a time: `fire()` runs it. The simulator's own hot parts (links, hosts) keep
    one of these per kind of event and schedule it again and again (`Simulator.schedule`): no
    callback, arguments or allocation per event, and a compiled build calls `fire` natively."""

    __slots__ = ()

    def fire(self) -> None:
        """Run the event (the simulator's clock is at its time)."""
        raise NotImplementedError


class Call(Event):
    """A callback and its arguments (`Simulator.at` and `after`)."""

    __slots__ = ("fn", "args")

    def __init__(self, fn: Callable, args: tuple) -> None:
        self.fn = fn
        self.args = args

    def fire(self) -> None:
        self.fn(*self.args)


class Simulator:
    """Runs events in time order (seconds, float); ties run in scheduling order.

    The queue is a heap of the distinct times that have events, each time with the list of its
    events (`Event`s) in scheduling order: events at equal times run in the order they were
    scheduled, and the heap compares bare floats, not entries. Callbacks are scheduled with `at`
    and `after`; the simulator's own hot parts (links, hosts) schedule their events with
    `schedule`, which skips the check of `at`. While `run` runs, the garbage collector's first
    threshold is at least RUN_GC_THRESHOLD.
    """

    def __init__(self, seed: int = 0) -> None:
        self.now = 0.0
        self.rng = random.Random(seed)
        self._times: list[float] = []               # heap of the times in `_due`
        self._due: dict[float, list[Event]] = {}    # time -> its events, in scheduling order
        self.events_run = 0
        self._stopping = False

    def at(self, t: float, fn: Callable, *args) -> None:
        """Run `fn(*args)` at time `t` (not before now)."""
        self.schedule(t if t > self.now else self.now, Call(fn, args))

    def after(self, delay: float, fn: Callable, *args) -> None:
        """Run `fn(*args)` `delay` seconds from now."""
        t = self.now + delay
        self.schedule(t if t > self.now else self.now, Call(fn, args))

    def schedule(self, t: float, event: Event) -> None:
        """Fire `event` at time `t`, which must not be earlier than now."""
        key: Any = t                            # the compiled build boxes the float once, not per use
        events = self._due.get(key)
        if events is None:
            self._due[key] = [event]
            _heappush(self._times, key)
        else:
            events.append(event)

    def stop(self) -> None:
        """End `run` after the event running now (what a `stop` predicate turning true does, for a
        caller that knows when that happens instead of being asked after every event)."""
        self._stopping = True

    def run(self, until: float | None = None, stop: Callable[[], bool] | None = None,
            max_events: int | None = None) -> None:
        """Run events up to time `until`, until `stop()` is true (or `self.stop()` was called), or
        until nothing is left."""
        with FewerCollections():
            self._run(until, stop, max_events)

    def _run(self, until: float | None, stop: Callable[[], bool] | None, max_events: int | None) -> None:
        self._stopping = False
        times = self._times
        due = self._due
        horizon = float("inf") if until is None else until
        limit = -1 if max_events is None else max(max_events, 1)     # at least one event runs
        count = 0
        ended = False
        while times and not ended:
            t = times[0]
            if t > horizon:
                self.now = horizon
                self.events_run += count
                return
            _heappop(times)
            events = due.pop(t)
            self.now = t
            n = len(events)
            i = 0
            while i < n:
                event = events[i]
                i += 1
                event.fire()
                count += 1
                if self._stopping or count == limit or (stop is not None and stop()):
                    ended = True
                    if i < n:                       # the rest of this time's events stay first in line
                        self._put_back(t, events[i:])
                    break
        self.events_run += count
        if until is not None and not times:
            self.now = max(self.now, until)

    def _put_back(self, t: float, events: list[Event]) -> None:
        """Return `events` (not run) to time `t`, ahead of those scheduled there since."""
        later = self._due.get(t)
        if later is None:
            self._due[t] = events
            _heappush(self._times, t)
        else:
            self._due[t] = events + later
