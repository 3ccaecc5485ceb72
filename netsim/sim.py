"""The event queue and the clock."""
from __future__ import annotations

import gc
import random
from typing import Callable, Final

from mypy_extensions import i64

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


class _Entry:
    """An event in the queue: due at `t`, the `seq`-th scheduled (ties run in that order)."""

    __slots__ = ("t", "seq", "event")

    def __init__(self, t: float, seq: i64, event: Event) -> None:
        self.t = t
        self.seq = seq
        self.event = event


class _Nothing(Event):
    """What a spare queue entry holds (it keeps no event, nor what a `Call` refers to, alive)."""

    __slots__ = ()

    def fire(self) -> None:
        raise RuntimeError("a spare entry of the event queue was run")


_NOTHING: Final = _Nothing()


class Simulator:
    """Runs events in time order (seconds, float); ties run in scheduling order.

    The queue is a binary heap of entries (time, scheduling number, `Event`), ordered by time and
    then number: events at equal times run in the order they were scheduled. The compiled build
    sifts it natively, comparing unboxed floats, and a run reuses its entries (a list of spares)
    instead of allocating one per event. Callbacks are scheduled with `at` and `after`; the
    simulator's own hot parts (links, hosts) schedule their events with `schedule`, which skips the
    check of `at`. While `run` runs, the garbage collector's first threshold is at least
    RUN_GC_THRESHOLD.
    """

    def __init__(self, seed: int = 0) -> None:
        self.now = 0.0
        self.rng = random.Random(seed)
        self._heap: list[_Entry] = []       # heap order: heap[i] comes before heap[2i+1] and heap[2i+2]
        self._spare: list[_Entry] = []      # entries run, to be used again
        self._scheduled: i64 = 0            # events ever scheduled: the next one's number
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
        seq = self._scheduled
        self._scheduled = seq + 1
        spare = self._spare
        if spare:
            entry = spare.pop()
            entry.t = t
            entry.seq = seq
            entry.event = event
        else:
            entry = _Entry(t, seq, event)
        heap = self._heap
        heap.append(entry)
        i: i64 = len(heap) - 1
        while i > 0:                        # up while the parent is later: it was scheduled before
            parent = (i - 1) >> 1           # this one, so a parent at the same time stays above it
            above = heap[parent]
            if above.t <= t:
                break
            heap[i] = above
            i = parent
        heap[i] = entry

    def _pop(self) -> _Entry:
        """Take the first entry off the (non-empty) heap: the hole it leaves goes down to a leaf
        along the earlier child at each level, and the heap's last entry fills it from there up
        (it belongs near the bottom: one comparison per level down, few up)."""
        heap = self._heap
        first = heap[0]
        last = heap.pop()
        n: i64 = len(heap)
        if n:
            i: i64 = 0
            child: i64 = 1
            while child < n:
                low = heap[child]
                right = child + 1
                if right < n:
                    other = heap[right]
                    if other.t < low.t or (other.t == low.t and other.seq < low.seq):
                        low = other
                        child = right
                heap[i] = low
                i = child
                child = 2 * i + 1
            t = last.t
            seq = last.seq
            while i > 0:
                parent = (i - 1) >> 1
                above = heap[parent]
                if above.t < t or (above.t == t and above.seq < seq):
                    break
                heap[i] = above
                i = parent
            heap[i] = last
        return first

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
        heap = self._heap
        spare = self._spare
        horizon = float("inf") if until is None else until
        limit = -1 if max_events is None else max(max_events, 1)     # at least one event runs
        count = 0
        while heap:
            t = heap[0].t
            if t > horizon:
                self.now = horizon
                self.events_run += count
                return
            entry = self._pop()
            event = entry.event
            entry.event = _NOTHING
            spare.append(entry)
            self.now = t
            event.fire()
            count += 1
            if self._stopping or count == limit or (stop is not None and stop()):
                break                       # what is left at this time stays first in line
        self.events_run += count
        if until is not None and not heap:
            self.now = max(self.now, until)
