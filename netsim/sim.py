"""The event queue and the clock."""
from __future__ import annotations

import gc
import random
from typing import Any, Callable, Final, final

from mypy_extensions import i64

# While events run, the cyclic garbage collector looks at young objects after this many container
# objects more were allocated than freed (Python's default: 700). A run allocates packets, events and
# their arguments by the million, and nearly all die young of their reference counts; at the default,
# the collections it triggers (each tenth of them also through older objects, and some through every
# object of the process) took a quarter of a 1,024-host run's time.
RUN_GC_THRESHOLD: Final = 100_000
# Delays that get a lane of their own (`Simulator.lane`): the next event is looked for among the
# heap's top and the oldest events of such lanes that hold events, one by one; a network has a few
# delays (its links' propagation, each packet size's serialisation at each rate), and those asked
# for past this many wait in the heap (`HeapLane`).
MAX_LANES: Final = 16


class FewerCollections:
    """A `with` block in which the cyclic garbage collector's first threshold is at least
    RUN_GC_THRESHOLD, as while events run (`Simulator.run`); the thresholds before it are back
    after it. Building a large network (tables, endpoints, EV sets: objects that live as long as
    it) triggers collections through every object of the process as well; a caller that closes
    what it built (`Network.close`) turns the collector off instead (`NoCollections`)."""

    def __init__(self) -> None:
        self._saved: tuple[int, int, int] = (0, 0, 0)

    def __enter__(self) -> None:
        saved = gc.get_threshold()
        self._saved = saved
        if saved[0] < RUN_GC_THRESHOLD:
            gc.set_threshold(RUN_GC_THRESHOLD, saved[1], saved[2])

    def __exit__(self, *exc: object) -> None:
        gc.set_threshold(*self._saved)


class NoCollections:
    """A `with` block in which the cyclic garbage collector does not run at all; whether it was
    enabled, and its thresholds, are as before after it, also when the block raises. For a caller
    that lets reference counting free what it made in the block (a closed `Network`, a closed
    transport `Endpoint`): it owes the collector nothing when it ends (the experiments'
    netsim backend runs each case in one)."""

    def __init__(self) -> None:
        self._enabled = True
        self._saved: tuple[int, int, int] = (0, 0, 0)

    def __enter__(self) -> None:
        self._enabled = gc.isenabled()
        self._saved = gc.get_threshold()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        gc.set_threshold(*self._saved)
        if self._enabled:
            gc.enable()


class Event:
    """Something due at a time: `fire(item)` runs it, given the item it was scheduled with (None
    when none: `Simulator.schedule`, `Lane.schedule`). The simulator's own hot parts schedule the
    same events again and again (a host keeps one for its wake-ups; a link is itself the event of
    its serialisations and arrivals, `netsim.link.SimLink`): no callback, arguments or allocation
    per event (a link's arrival carries its packet as the item, held by the simulator where the
    event waits), and a compiled build calls `fire` natively."""

    __slots__ = ()

    def fire(self, item: Any) -> None:
        """Run the event (the simulator's clock is at its time) with its `item`."""
        raise NotImplementedError


class Call(Event):
    """A callback and its arguments (`Simulator.at` and `after`)."""

    __slots__ = ("fn", "args")

    def __init__(self, fn: Callable, args: tuple) -> None:
        self.fn = fn
        self.args = args

    def fire(self, item: Any) -> None:
        self.fn(*self.args)


class TimedEvent(Event):
    """An event scheduled at most once at a time, that holds its own time and scheduling number
    while it waits in an `EventLane` (`Simulator.event_lane`): such a lane keeps the events
    themselves, with no slot per event to read. A link's end of serialisation (one at a time per
    link) is one. Scheduled anywhere else (`Simulator.schedule`, a `HeapLane`) it waits in a slot as
    any event does."""

    __slots__ = ("t", "seq")

    def __init__(self) -> None:
        self.t = 0.0
        self.seq: i64 = 0


class _Slot:
    """One scheduled event: when it is due, its place in the order of scheduling (ties at equal
    times run in that order), the event and the item it is fired with."""

    __slots__ = ("t", "seq", "event", "item")

    def __init__(self, t: float, seq: i64, event: Event | None, item: Any = None) -> None:
        self.t = t
        self.seq = seq
        self.event = event
        self.item = item

    def empty(self) -> tuple[Event, Any]:
        """The event and its item, taken out of the slot (which lets go of them)."""
        event = self.event
        assert event is not None
        item = self.item
        self.event = None
        self.item = None
        return event, item


@final
class _Numbering:
    """The numbers of one simulator's scheduled events, from 0 in the order they are scheduled
    (events due at equal times run in it), whether they wait in its heap or in a lane."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next: i64 = 0

    def take(self) -> i64:
        """The number of the event being scheduled."""
        number = self._next
        self._next = number + 1
        return number


class Lane:
    """Where the events due a fixed `delay` after they are scheduled wait (a link's propagation,
    the serialisation of one packet size at one rate). `Simulator.lane` gives them; `schedule` is
    their one verb."""

    __slots__ = ("delay",)

    def __init__(self, delay: float) -> None:
        self.delay = delay

    def schedule(self, event: Event, item: Any = None) -> None:
        """Fire `event` with `item` `delay` seconds from now."""
        raise NotImplementedError


def doubled_ring(ring: list, head: int) -> list:
    """A ring buffer twice as long as `ring`, its items in order from the oldest (at `head`)."""
    return ring[head:] + ring[:head] + [None] * len(ring)


class RingLane(Lane):
    """A lane of its own (`Simulator.lane`, `event_lane`): scheduled at times that never go back
    (the clock does not), its events are due in the order they were scheduled, so it is a
    first-in first-out ring, not a heap. It tells its simulator when it starts and stops holding
    events (`Simulator.lane_filled`, `lane_emptied`); while it holds some, `head_t` and `head_seq`
    are the time and scheduling number of its oldest one, which `take_event` takes."""

    __slots__ = ("_sim", "_numbering", "_head", "_size", "head_t", "head_seq")

    def __init__(self, sim: "Simulator", delay: float, numbering: _Numbering) -> None:
        super().__init__(delay)
        self._sim = sim                         # its clock, told when the lane fills and empties
        self._numbering = numbering             # the simulator's
        self._head: i64 = 0                     # the ring's oldest entry
        self._size: i64 = 0                     # events waiting
        self.head_t = 0.0
        self.head_seq: i64 = 0

    def take_event(self) -> tuple[Event, Any]:
        """Take the oldest event (there is one) and the item it was scheduled with; the next
        event, if any, becomes the head."""
        raise NotImplementedError

    def clear(self) -> None:
        """Drop every event waiting (its simulator is closing: `Simulator.close`)."""
        raise NotImplementedError


@final
class FifoLane(RingLane):
    """A ring lane of any events, each with its item, held in a ring of slots (reused: no
    allocation per event)."""

    __slots__ = ("_ring",)

    def __init__(self, sim: "Simulator", delay: float, numbering: _Numbering) -> None:
        super().__init__(sim, delay, numbering)
        self._ring: list[_Slot] = [_Slot(0.0, 0, None) for _ in range(4)]

    def schedule(self, event: Event, item: Any = None) -> None:
        """Fire `event` with `item` `delay` seconds from now."""
        t = self._sim.now + self.delay
        seq = self._numbering.take()
        ring = self._ring
        size = self._size
        if size == len(ring):
            ring = self._grow()
        i = self._head + size
        if i >= len(ring):
            i -= len(ring)
        slot = ring[i]
        slot.t = t
        slot.seq = seq
        slot.event = event
        slot.item = item
        self._size = size + 1
        if size == 0:
            self.head_t = t
            self.head_seq = seq
            self._sim.lane_filled(self)

    def take(self) -> _Slot:
        """Take the oldest event's slot (there is one), which its taker empties (`_Slot.empty`)
        before anything else is scheduled: the ring reuses it; the next event, if any, becomes the
        head."""
        ring = self._ring
        head = self._head
        taken = ring[head]
        head += 1
        if head == len(ring):
            head = 0
        self._head = head
        size = self._size - 1
        self._size = size
        if size:
            slot = ring[head]
            self.head_t = slot.t
            self.head_seq = slot.seq
        else:
            self._sim.lane_emptied(self)
        return taken

    def take_event(self) -> tuple[Event, Any]:
        return self.take().empty()

    def clear(self) -> None:
        self._ring = [_Slot(0.0, 0, None) for _ in range(4)]
        self._head = 0
        self._size = 0

    def _grow(self) -> list[_Slot]:
        """Twice the ring, its slots in order from the oldest."""
        ring = self._ring
        head = self._head
        grown = ring[head:] + ring[:head] + [_Slot(0.0, 0, None) for _ in range(len(ring))]
        self._ring = grown
        self._head = 0
        return grown


@final
class EventLane(RingLane):
    """A ring lane of `TimedEvent`s scheduled without an item (`Simulator.event_lane`): the ring
    holds the events themselves, each with its time and number, so taking one reads the event it
    fires anyway and no slot. An event must not be scheduled again while it waits."""

    __slots__ = ("_ring",)

    def __init__(self, sim: "Simulator", delay: float, numbering: _Numbering) -> None:
        super().__init__(sim, delay, numbering)
        self._ring: list[TimedEvent | None] = [None] * 4

    def schedule(self, event: Event, item: Any = None) -> None:
        """Fire `event` (a `TimedEvent` not waiting, without an item) `delay` seconds from now."""
        if not isinstance(event, TimedEvent) or item is not None:
            raise TypeError(f"an event lane takes a TimedEvent without an item, not {type(event).__name__} "
                            f"with {type(item).__name__}")
        t = self._sim.now + self.delay
        seq = self._numbering.take()
        event.t = t
        event.seq = seq
        ring = self._ring
        size = self._size
        if size == len(ring):
            ring = self._grow()
        i = self._head + size
        if i >= len(ring):
            i -= len(ring)
        ring[i] = event
        self._size = size + 1
        if size == 0:
            self.head_t = t
            self.head_seq = seq
            self._sim.lane_filled(self)

    def take_event(self) -> tuple[Event, Any]:
        # FifoLane.take's steps over a ring of events rather than slots; narrowed for mypyc: each reads
        # its own item class's t and seq natively, once per event (a shared base method would go by name)
        ring = self._ring
        head = self._head
        taken = ring[head]
        assert taken is not None
        ring[head] = None                       # the ring lets go of it (it refers to its link)
        head += 1
        if head == len(ring):
            head = 0
        self._head = head
        size = self._size - 1
        self._size = size
        if size:
            following = ring[head]
            assert following is not None
            self.head_t = following.t
            self.head_seq = following.seq
        else:
            self._sim.lane_emptied(self)
        return taken, None

    def clear(self) -> None:
        self._ring = [None] * 4
        self._head = 0
        self._size = 0

    def _grow(self) -> list[TimedEvent | None]:
        """Twice the ring, its events in order from the oldest."""
        grown = doubled_ring(self._ring, self._head)
        self._ring = grown
        self._head = 0
        return grown


@final
class HeapLane(Lane):
    """A lane of a delay asked for past the simulator's MAX_LANES: its events wait in the
    simulator's heap with those of `Simulator.schedule`."""

    __slots__ = ("_sim",)

    def __init__(self, sim: "Simulator", delay: float) -> None:
        super().__init__(delay)
        self._sim = sim

    def schedule(self, event: Event, item: Any = None) -> None:
        """Fire `event` with `item` `delay` seconds from now."""
        sim = self._sim
        sim.schedule(sim.now + self.delay, event, item)


class Simulator:
    """Runs events in time order (seconds, float); ties run in scheduling order.

    Every scheduled event is numbered in scheduling order, and events run in the order of (time,
    number). Most are due a fixed delay after they are scheduled (a link's serialisation of a
    packet size, its propagation): those wait in the `Lane` of their delay, for the first
    MAX_LANES delays a first-in first-out queue of its own (`RingLane`: a `FifoLane`, or for
    `TimedEvent`s an `EventLane`); the rest (`at`, `after`, `schedule`, the later delays'
    `HeapLane`s) in a heap. The next event is the earliest of the heap's top and the oldest events
    of the ring lanes. Callbacks are scheduled with `at` and
    `after`; the simulator's own hot parts schedule their events with `schedule` (a host's
    wake-up: skips the check of `at`) or through a lane (links). While `run` runs, the garbage
    collector's first threshold is at least RUN_GC_THRESHOLD.
    """

    def __init__(self, seed: int = 0) -> None:
        self.now = 0.0
        self.rng = random.Random(seed)
        self._numbering = _Numbering()              # of the events of the heap and the lanes
        self._heap: list[_Slot] = []                # the events not in a ring lane, a heap by (t, seq)
        self._lanes: dict[float, Lane] = {}         # delay -> its lane (`lane`)
        self._event_lanes: dict[float, Lane] = {}   # delay -> its lane of TimedEvents (`event_lane`)
        self._fifo_lanes = 0                        # how many lanes of their own (ring lanes) were made
        self._active: list[RingLane] = []           # those that hold events
        self.events_run = 0
        self._stopping = False

    def at(self, t: float, fn: Callable, *args) -> None:
        """Run `fn(*args)` at time `t` (not before now)."""
        self.schedule(t if t > self.now else self.now, Call(fn, args))

    def after(self, delay: float, fn: Callable, *args) -> None:
        """Run `fn(*args)` `delay` seconds from now."""
        t = self.now + delay
        self.schedule(t if t > self.now else self.now, Call(fn, args))

    def lane(self, delay: float) -> Lane:
        """The lane of events due `delay` (>= 0) seconds after they are scheduled; the first
        MAX_LANES delays asked for get one of their own (`FifoLane`), the later ones one whose
        events wait in the heap (`HeapLane`)."""
        return self._lane_for(self._lanes, FifoLane, delay)

    def event_lane(self, delay: float) -> Lane:
        """The lane of `TimedEvent`s, each scheduled without an item and at most once at a time, due
        `delay` (>= 0) seconds after they are scheduled: an `EventLane` while fewer than MAX_LANES
        lanes of their own were made (it counts with `lane`'s), else a `HeapLane`. Events run in
        the order of (time, number) wherever they wait: which lane holds them changes no order."""
        return self._lane_for(self._event_lanes, EventLane, delay)

    def _lane_for(self, lanes: dict[float, Lane], ring_lane: type[RingLane], delay: float) -> Lane:
        """The lane of `lanes` for `delay`, made on first use: a `ring_lane` of its own while fewer
        than MAX_LANES were made, else a `HeapLane`."""
        lane = lanes.get(delay)
        if lane is None:
            if not delay >= 0.0:                # NaN too: its events would be due before now
                raise ValueError(f"a lane's delay must be a number of seconds >= 0, got {delay!r}")
            if self._fifo_lanes < MAX_LANES:
                lane = ring_lane(self, delay, self._numbering)
                self._fifo_lanes += 1
            else:
                lane = HeapLane(self, delay)
            lanes[delay] = lane
        return lane

    def lane_filled(self, lane: RingLane) -> None:
        """`lane` (one of this simulator's) got an event when it held none: from now on its oldest
        event is among those the next event is looked for in."""
        self._active.append(lane)

    def lane_emptied(self, lane: RingLane) -> None:
        """`lane`'s last event was taken: no longer look at it for the next event."""
        self._active.remove(lane)

    def schedule(self, t: float, event: Event, item: Any = None) -> None:
        """Fire `event` with `item` at time `t`, which must not be earlier than now (the lanes'
        order assumes the clock never goes back)."""
        if not t >= self.now:                   # NaN too
            raise ValueError(f"an event scheduled at {t!r} s, earlier than now ({self.now!r} s)")
        seq = self._numbering.take()
        heap = self._heap
        slot = _Slot(t, seq, event, item)
        heap.append(slot)
        i: i64 = len(heap) - 1
        while i > 0:                            # up while the parent is later (a tie: it is older)
            parent = (i - 1) >> 1
            above = heap[parent]
            if above.t <= t:
                break
            heap[i] = above
            i = parent
        heap[i] = slot

    def _pop_heap(self) -> _Slot:
        """Take the heap's first event's slot (there is one)."""
        heap = self._heap
        first = heap[0]
        last = heap.pop()
        n: i64 = len(heap)
        if n:
            t = last.t
            seq = last.seq
            i: i64 = 0
            child: i64 = 1
            while child < n:                    # down while a child is earlier
                other = child + 1
                c = heap[child]
                if other < n:
                    o = heap[other]
                    if o.t < c.t or (o.t == c.t and o.seq < c.seq):
                        child = other
                        c = o
                if t < c.t or (t == c.t and seq < c.seq):
                    break
                heap[i] = c
                i = child
                child = 2 * i + 1
            heap[i] = last
        return first

    def close(self) -> None:
        """Drop every event still scheduled and the lanes (their events refer to links and hosts,
        which refer to their lanes and to this simulator): what a closing network does
        (`Network.close`). It runs nothing after."""
        for lane in self._active:
            lane.clear()
        self._active = []
        self._lanes = {}
        self._event_lanes = {}
        self._heap = []

    def stop(self) -> None:
        """End `run` after the event running now (what a `stop` predicate turning true does, for a
        caller that knows when that happens instead of being asked after every event)."""
        self._stopping = True

    def run(self, until: float | None = None, stop: Callable[[], bool] | None = None,
            max_events: int | None = None) -> None:
        """Run events up to time `until`, until `stop()` is true (or `self.stop()` was called), or
        until nothing is left. The clock ends at `until` when it got there; it never goes back (an
        `until` earlier than now runs nothing)."""
        with FewerCollections():
            self._run(until, stop, max_events)

    def _run(self, until: float | None, stop: Callable[[], bool] | None, max_events: int | None) -> None:
        self._stopping = False
        heap = self._heap
        active = self._active
        horizon = float("inf") if until is None else until
        limit = -1 if max_events is None else max(max_events, 1)     # at least one event runs
        count = 0
        while True:
            # the next event: the earliest (time, number) of the heap's top and the active lanes' heads
            first: RingLane | None = None
            if heap:
                top = heap[0]
                t = top.t
                seq = top.seq
            elif active:
                first = active[0]
                t = first.head_t
                seq = first.head_seq
            else:
                break
            for lane in active:
                lt = lane.head_t
                if lt < t or (lt == t and lane.head_seq < seq):
                    first = lane
                    t = lt
                    seq = lane.head_seq
            if t > horizon:
                if horizon > self.now:          # an `until` already past leaves the clock where it is:
                    self.now = horizon          # never back (a lane's order assumes it)
                self.events_run += count
                return
            event, item = self._pop_heap().empty() if first is None else first.take_event()
            self.now = t
            event.fire(item)
            count += 1
            if self._stopping or count == limit or (stop is not None and stop()):
                break
        self.events_run += count
        if until is not None and not heap and not active:
            self.now = max(self.now, until)
