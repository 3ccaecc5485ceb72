"""The EV set of one connection: entropy values, their paths and their states.

Every data packet goes out on the next usable EV of a rotation over `num_evs` slots split
evenly across planes. An EV maps to a path algorithmically: a hash of the EV modulo the number
of paths of its plane. States (docs/transport.md, "EV states"):

- GOOD: in the rotation.
- SKIP: passed over once at its next turn (ECN echo or trim NACK), then GOOD again.
- ASSUMED_BAD: out of the rotation (a timeout without trim); its slot is given a backup EV of the
  same plane on a path not known bad; background probes reinstate it after enough clean replies,
  and it takes its slot back.
- DENIED: set by an operator; never used (no data, acknowledgement or probe) until allowed again.
- UNKNOWN: new (an operator replaced it, or allowed a denied EV); probed before use, and GOOD
  after one clean probe reply.

A floor of `min_active` (the profile's `ev_min_active`) keeps the rotation from shrinking below
that many slots: when fewer slots hold usable EVs, UNKNOWN and then ASSUMED_BAD EVs are used as
well, those with clean probe replies first, then the longest-standing; DENIED ones never. An
operator may not deny an EV when that would leave fewer than `min_active` slots not DENIED.
"""
from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field
from typing import Callable, Final, cast

from mypy_extensions import i64

from host_agent.transport.peers import PathInfo
from host_agent.transport.pathcap import PathLoad
from host_agent.transport.steering import Steering, SteeringParams


class EvState(str, enum.Enum):
    """State of one EV."""

    GOOD = "GOOD"
    SKIP = "SKIP"
    ASSUMED_BAD = "ASSUMED_BAD"
    DENIED = "DENIED"
    UNKNOWN = "UNKNOWN"


_USABLE: Final = (EvState.GOOD, EvState.SKIP)    # the states `Ev.usable` is true in
_SKIP: Final = EvState.SKIP
_DENIED: Final = EvState.DENIED
OPERATOR: Final = "operator"      # the cause of a change an operator asked for
OPERATOR_STATES: Final = (EvState.GOOD, EvState.ASSUMED_BAD, EvState.DENIED, EvState.UNKNOWN)   # MODIFY_EV_STATE


def striped(evs: list[Ev]) -> list[Ev]:
    """`evs` reordered so that consecutive ones take different paths in turn: one EV of each path
    (the paths with the most EVs first, else in the order they first appear), then the next of
    each, and so on. Sprayed in this order, each path gets every P-th packet of a connection, not
    a random share: on a fabric without oversubscription at full load (a permutation), randomly
    ordered EVs make every link's queue a random walk that trimming at one BDP cuts; striped, the
    queues stay a few packets long (docs/transport.md, "Without tuned switches")."""
    by_path: list[list[Ev] | None] = [None] * (max([ev.path_key for ev in evs]) + 1 if evs else 0)
    columns: list[list[Ev]] = []                       # in the order their paths first appear
    for ev in evs:
        column = by_path[ev.path_key]
        if column is None:
            column = by_path[ev.path_key] = []
            columns.append(column)
        column.append(ev)
    columns.sort(key=len, reverse=True)
    out: list[Ev] = []
    depth = len(columns[0]) if columns else 0
    for i in range(depth):
        for column in columns:
            if i < len(column):
                out.append(column[i])
    return out


class FloorError(ValueError):
    """An operator change would leave fewer EVs than the floor (`ev_min_active`) allows."""


def ev_path_index(ev: int, num_paths: int) -> int:
    """Path index (within its plane) of entropy value `ev`: a 32-bit mix, modulo the path count."""
    # 64-bit integers (i64: native in the compiled build): a 32-bit value times the 27-bit constant
    # fits, where mypyc's own int multiplies through Python's big integers past 31 bits
    x: i64 = ev
    x = (x ^ (x >> 16)) * 0x45D9F3B & 0xFFFFFFFF
    x = (x ^ (x >> 16)) * 0x45D9F3B & 0xFFFFFFFF
    return (x ^ (x >> 16)) % num_paths


@dataclass(eq=False)
class Ev:
    """One entropy value and what the sender knows about it."""

    value: int
    plane: int
    path_key: int                   # index into EvSet.paths
    state: EvState = EvState.GOOD
    home: bool = True               # part of the initial set (False: a backup)
    bad_since: float = 0.0
    probe_successes: int = 0
    drops: int = 0                  # packets sent on it found lost (timeouts and trims)
    load: PathLoad = field(default_factory=PathLoad, repr=False)   # its path's packets in flight (shared)

    def __init__(self, value: int, plane: int, path_key: int, state: EvState = EvState.GOOD, home: bool = True,
                 bad_since: float = 0.0, probe_successes: int = 0, drops: int = 0,
                 load: PathLoad | None = None) -> None:
        # written out, not generated: under mypyc a dataclass's generated __init__ stays interpreted
        # Python, and a connection makes its EVs by the hundred
        self.value = value
        self.plane = plane
        self.path_key = path_key
        self.state = state
        self.home = home
        self.bad_since = bad_since
        self.probe_successes = probe_successes
        self.drops = drops
        self.load = load if load is not None else PathLoad()

    @property
    def usable(self) -> bool:
        """True when GOOD or SKIP: data may be sprayed on it."""
        return self.state is EvState.GOOD or self.state is EvState.SKIP


@dataclass(eq=False)
class Slot:
    """One position of the rotation: its home EV and the EV now standing in it."""

    home: Ev
    current: Ev

    def __init__(self, home: Ev, current: Ev) -> None:
        self.home = home              # written out: see Ev.__init__
        self.current = current



def _keep_better(best: list[Ev | None], ev: Ev) -> None:
    """Keep `ev` as its path's EV in `best` (by path key) when it is the first not DENIED there, or
    usable where the one kept is not (`EvSet._pick_one_per_path`)."""
    if ev.state is _DENIED:
        return
    key = ev.path_key
    have = best[key]
    if have is None or (ev.usable and not have.usable):
        best[key] = ev

class EvSet:
    """EVs of one connection, their rotation and their states.

    State changes are reported through `on_change(ev, old_state, cause, now)` and
    `on_backup(new_ev, replaced_ev, now)` (the connection turns them into events).
    """

    def __init__(self, paths: list[PathInfo], num_evs: int, min_active: int, rng: random.Random,
                 share_fate_by_path: bool = True, on_change=None, on_backup=None,
                 steering: SteeringParams | None = None, path_cap: float | None = None,
                 stripe: bool = False) -> None:
        if not paths:
            raise ValueError("EvSet: a connection needs at least one path")
        self.paths = list(paths)
        self.loads = [PathLoad() if path_cap is None else PathLoad(path_cap) for _ in self.paths]
        self.min_active = min_active
        self.share_fate = share_fate_by_path
        self.steering = Steering(steering or SteeringParams(), by_path=share_fate_by_path)   # holds, clean EVs
        self._draw = rng.getrandbits       # an EV value's bits (bound once: a set's EVs take hundreds of draws)
        self._on_change = on_change or (lambda ev, old, cause, now: None)
        self._on_backup = on_backup or (lambda new, old, now: None)
        self.planes = sorted({p.plane for p in paths})
        self.plane_paths = {pl: [i for i, p in enumerate(paths) if p.plane == pl] for pl in self.planes}
        self._stripe = stripe
        self.by_value: dict[int, Ev] = {}
        self.slots: list[Slot] = []
        per_plane = {pl: num_evs // len(self.planes) for pl in self.planes}
        for pl in self.planes[: num_evs % len(self.planes)]:
            per_plane[pl] += 1
        columns = {pl: self._initial_evs(pl, per_plane[pl]) for pl in self.planes}
        for i in range(max(per_plane.values())):          # interleave planes in the rotation
            for pl in self.planes:
                if i < len(columns[pl]):
                    ev = columns[pl][i]
                    self.slots.append(Slot(ev, ev))
        self._bad_homes: dict[int, Ev] = {}              # id -> home EV that is ASSUMED_BAD (ordered)
        self._unknown: dict[int, Ev] = {}                # id -> EV that is UNKNOWN (ordered)
        self._pos: i64 = 0                               # the rotation's places (i64: native arithmetic)
        self._ctrl_pos: i64 = 0
        self._rotation: list[Ev] | None = None         # the rotation's EVs (`_rotation_evs`), until `_dirty`
        self._per_path: list[Ev] | None = None

    # --- construction ---------------------------------------------------------------
    def _initial_evs(self, plane: int, count: int) -> list[Ev]:
        """`count` random EVs of `plane`, as evenly spread over its paths as the hash allows
        (every path gets count // paths or one more); with `stripe`, in rotation order that visits
        the paths in turn (`striped`)."""
        keys = self.plane_paths[plane]
        quota = -(-count // len(keys))
        load = [0] * len(keys)                 # EVs per path, by its place in `keys`
        below = [True] * len(keys)             # the paths below their quota, by place, kept as loads grow
        open_paths = len(keys)
        evs = []
        for _ in range(count):
            ev = self._draw_ev(plane, True, below if open_paths else None)
            if ev is None and open_paths:
                ev = self._draw_ev(plane, True, None)
            assert ev is not None
            place = ev_path_index(ev.value, len(keys))
            load[place] += 1
            if load[place] == quota:
                below[place] = False
                open_paths -= 1
            evs.append(ev)
        return striped(evs) if self._stripe else evs

    def _new_ev(self, plane: int, home: bool, allowed: set | None = None) -> Ev | None:
        """A fresh random EV of `plane` not already in use, mapping to a path in `allowed`
        (any path of the plane when None); None when none was found."""
        if allowed is None:
            return self._draw_ev(plane, home, None)
        if not allowed:
            return None
        return self._draw_ev(plane, home, [key in allowed for key in self.plane_paths[plane]])

    def _draw_ev(self, plane: int, home: bool, open_places: list[bool] | None) -> Ev | None:
        """A fresh random EV of `plane` not already in use, mapping to a path whose place in the
        plane's paths is True in `open_places` (any path when None), and registered. None when 64
        draws per path found none."""
        candidates = self.plane_paths[plane]
        n = len(candidates)
        by_value = self.by_value
        draw: Callable[[int], object] = self._draw   # what it draws is looked up as it comes: no int object made per draw
        for _ in range(64 * n):
            drawn = draw(32)
            if drawn in by_value:
                continue
            value = cast(int, drawn)
            place = ev_path_index(value, n)
            if open_places is None or open_places[place]:
                key = candidates[place]
                ev = Ev(value, plane, key, home=home, load=self.loads[key])
                by_value[value] = ev
                return ev
        return None

    def _backup_paths(self, plane: int) -> set:
        """Paths of `plane` a backup EV may take: not known bad, and carrying the fewest usable EVs."""
        denied = {e.path_key for e in self.by_value.values() if e.state is EvState.DENIED}
        good = [k for k in self.plane_paths[plane] if not self.path_is_bad(k) and k not in denied]
        if not good:
            return set()
        load = dict.fromkeys(good, 0)
        for slot in self.slots:
            ev = slot.current
            if ev.usable and ev.path_key in load:
                load[ev.path_key] += 1
        least = min(load.values())
        return {k for k, n in load.items() if n == least}

    # --- queries -------------------------------------------------------------------------
    def path_of(self, ev: Ev) -> PathInfo:
        """The path packets on `ev` take."""
        return self.paths[ev.path_key]

    def get(self, value: int) -> Ev | None:
        """The EV with this value, or None when it is not (or no longer) ours."""
        return self.by_value.get(value)

    def path_is_bad(self, key: int) -> bool:
        """True when a home EV on path `key` is ASSUMED_BAD."""
        return any(ev.path_key == key for ev in self._bad_homes.values())

    def home_evs(self) -> list[Ev]:
        """The initial EVs, in rotation order."""
        return [s.home for s in self.slots]

    def active_evs(self) -> list[Ev]:
        """EVs that data is sprayed on now (usable, or kept by the floor)."""
        return list(self._rotation_evs())

    def active_count(self) -> int:
        """How many EVs data is sprayed on now (`len(active_evs())`)."""
        return len(self._rotation_evs())

    def one_ev_per_path(self) -> list[Ev]:
        """One EV on each path (usable EVs first, then bad or unknown ones; never a DENIED one), in
        path order within each group."""
        if self._per_path is None:
            self._per_path = self._pick_one_per_path()
        return self._per_path

    def _pick_one_per_path(self) -> list[Ev]:
        """`one_ev_per_path` worked out: the first usable EV of each path in slot order (each
        slot's current EV, then its home EV), else its first EV not DENIED; by path key, so the
        list is in path order without a sort. Made once per change of the EV set, by each
        connection once at least (its first SACK sent to several paths)."""
        best: list[Ev | None] = [None] * len(self.paths)      # by path key
        for s in self.slots:
            current = s.current
            _keep_better(best, current)
            home = s.home
            if home is not current:
                _keep_better(best, home)
        usable = [e for e in best if e is not None and e.usable]
        return usable + [e for e in best if e is not None and not e.usable]

    def bad_home_evs(self) -> list[Ev]:
        """Home EVs that are ASSUMED_BAD (the ones background probes work on)."""
        return list(self._bad_homes.values()) if self._bad_homes else []

    @property
    def any_bad(self) -> bool:
        """True when some home EV is ASSUMED_BAD."""
        return bool(self._bad_homes)

    def counts(self) -> dict:
        """Number of slots per state of their current EV."""
        out = {st.value: 0 for st in EvState}
        for s in self.slots:
            out[s.current.state.value] += 1
        return out

    # --- rotation ------------------------------------------------------------------------
    def _rotation_evs(self) -> list[Ev]:
        """The current EVs of the slots in rotation, in rotation order: the usable ones, or, below
        the floor, the best of the others as well. Kept until `_dirty` (every change of a slot's
        current EV or of an EV's use calls it): read per packet, a list of the EVs themselves, not
        of their slots, whose objects would be one more read per packet."""
        if self._rotation is None:
            usable = [s for s in self.slots if s.current.usable]
            if len(usable) < self.min_active:
                bad = sorted((s for s in self.slots
                              if not s.current.usable and s.current.state is not EvState.DENIED),
                             key=lambda s: (s.current.state is not EvState.UNKNOWN,
                                            -s.current.probe_successes, s.current.bad_since))
                keep = set(map(id, usable + bad[: self.min_active - len(usable)]))
                usable = [s for s in self.slots if id(s) in keep]
            self._rotation = [s.current for s in usable]
        return self._rotation

    def _dirty(self) -> None:
        self._rotation = None
        self._per_path = None

    def next_data_ev(self, now: float) -> Ev:
        """The EV for the next data packet: the next slot in rotation, passing SKIP EVs over once."""
        rotation = self._rotation if self._rotation is not None else self._rotation_evs()
        n: i64 = len(rotation)
        for _turn in range(n):  # `_turn`, not `_`: mypyc boxes every value of `_`
            pos = self._pos
            ev = rotation[pos % n]
            self._pos = (pos + 1) % n
            if ev.state is _SKIP:
                self._set(ev, EvState.GOOD, "skipped_once", now)
                continue
            return ev
        return rotation[self._pos % n]      # everything was skipped: use the next one anyway

    def peek_data_ev(self) -> Ev:
        """The EV `next_data_ev` would return now, without moving the rotation."""
        rotation = self._rotation_evs()
        n: i64 = len(rotation)
        for i in range(n):
            ev = rotation[(self._pos + i) % n]
            if ev.state is not EvState.SKIP:
                return ev
        return rotation[self._pos % n]

    def next_control_ev(self, plane: int | None = None) -> Ev:
        """An EV for an acknowledgement or probe reply: rotates over usable EVs, preferring `plane`."""
        rotation = self._rotation_evs()
        n: i64 = len(rotation)
        for _turn in range(n):  # `_turn`, not `_`: mypyc boxes every value of `_`
            ev = rotation[self._ctrl_pos % n]
            self._ctrl_pos = (self._ctrl_pos + 1) % n
            if ev.usable and (plane is None or ev.plane == plane):
                return ev
        if plane is not None:
            return self.next_control_ev(None)
        return rotation[self._ctrl_pos % n]

    # --- state changes ---------------------------------------------------------------------
    def _set(self, ev: Ev, state: EvState, cause: str, now: float) -> None:
        if ev.state is state:
            return
        old = ev.state
        ev.state = state
        if ev.home:
            if state is EvState.ASSUMED_BAD:
                self._bad_homes[id(ev)] = ev
            else:
                self._bad_homes.pop(id(ev), None)
        if state is EvState.UNKNOWN:
            self._unknown[id(ev)] = ev
        else:
            self._unknown.pop(id(ev), None)
        if not (old in _USABLE and state in _USABLE):
            self._dirty()                      # GOOD <-> SKIP (every ECN echo) changes neither list
        self._on_change(ev, old, cause, now)

    def skip(self, ev: Ev, cause: str, now: float) -> None:
        """Pass `ev` over at its next turn (ECN echo, trim NACK)."""
        if ev.state is EvState.GOOD:
            self._set(ev, EvState.SKIP, cause, now)

    def note_drop(self, ev: Ev) -> None:
        """Count one packet sent on `ev` found lost (a timeout or a trim NACK)."""
        ev.drops += 1

    def note_probe(self, ev: Ev, answered: bool) -> None:
        """Count a clean probe reply for a bad EV, or reset the count on an unanswered probe."""
        ev.probe_successes = ev.probe_successes + 1 if answered else 0
        if self._rotation is not None and len(self._rotation) < len(self.slots):
            self._dirty()                      # the floor ranks bad EVs by their probe record

    def mark_bad(self, ev: Ev, now: float, cause: str) -> list[Ev]:
        """Retire `ev` (and, when fates are shared, every EV on its path); return the EVs retired.
        Only usable EVs are retired: DENIED and UNKNOWN ones keep their state."""
        if self.share_fate:
            victims = [e for e in self.by_value.values() if e.path_key == ev.path_key and e.usable]
        else:
            victims = [ev] if ev.usable else []
        self._retire(victims, now, cause)
        return victims

    def _retire(self, victims: list[Ev], now: float, cause: str) -> None:
        for e in victims:
            e.bad_since = now
            e.probe_successes = 0
            self._set(e, EvState.ASSUMED_BAD, cause, now)
        for e in victims:
            self._replace(e, now)
        for e in victims:                      # backups that failed are forgotten, not probed
            if not e.home:
                del self.by_value[e.value]

    def _replace(self, ev: Ev, now: float) -> None:
        for slot in self.slots:
            if slot.current is ev:
                backup = self._new_ev(ev.plane, False, self._backup_paths(ev.plane))
                if backup is not None:
                    slot.current = backup
                    self._dirty()
                    self._on_backup(backup, ev, now)

    def reinstate(self, ev: Ev, cause: str, now: float) -> list[Ev]:
        """Make `ev` (and, when fates are shared, its path's home EVs) GOOD if ASSUMED_BAD; return
        them. DENIED and UNKNOWN EVs are left as they are."""
        if self.share_fate:
            evs = [s.home for s in self.slots
                   if s.home.path_key == ev.path_key and s.home.state is EvState.ASSUMED_BAD]
        else:
            evs = [ev] if ev.state is EvState.ASSUMED_BAD else []
        for e in evs:
            self._make_good(e, cause, now)
        self._dirty()
        return evs

    def _make_good(self, ev: Ev, cause: str, now: float) -> None:
        """`ev` becomes GOOD and, when it is a home EV, takes its slot back from a backup."""
        self._set(ev, EvState.GOOD, cause, now)
        for slot in self.slots:
            if slot.home is ev and slot.current is not ev:
                self.by_value.pop(slot.current.value, None)      # the backup steps down
                slot.current = ev
                self._dirty()

    # --- EVs awaiting their first probe (UNKNOWN) --------------------------------------------------
    @property
    def any_unknown(self) -> bool:
        """True when some EV is UNKNOWN (waiting for a probe reply before use)."""
        return bool(self._unknown)

    def unknown_evs(self) -> list[Ev]:
        """EVs that are UNKNOWN, the ones to probe before use."""
        return list(self._unknown.values()) if self._unknown else []

    def confirm(self, ev: Ev, cause: str, now: float) -> bool:
        """A clean probe reply on UNKNOWN `ev`: it becomes GOOD (and takes its slot back). False
        when `ev` is no longer ours or no longer UNKNOWN."""
        if ev.state is not EvState.UNKNOWN or self.by_value.get(ev.value) is not ev:
            return False
        self._make_good(ev, cause, now)
        return True

    # --- operator changes (MODIFY_EV_STATE, REPLACE_EV) -----------------------------------------
    def slot_index(self, ev: Ev) -> int | None:
        """The index of the slot `ev` is the home or current EV of, or None."""
        for i, slot in enumerate(self.slots):
            if slot.home is ev or slot.current is ev:
                return i
        return None

    def not_denied(self) -> int:
        """Slots whose current EV is not DENIED (what the floor on denials counts)."""
        return sum(1 for s in self.slots if s.current.state is not EvState.DENIED)

    def deny(self, ev: Ev, now: float, cause: str = OPERATOR) -> None:
        """`ev` is DENIED: never used again until allowed. Raises FloorError when that would leave
        fewer than `min_active` slots not DENIED."""
        if ev.state is EvState.DENIED:
            return
        left = sum(1 for s in self.slots if s.current.state is not EvState.DENIED and s.current is not ev)
        if left < self.min_active:
            raise FloorError(f"deny EV {ev.value:#x}: would leave {left} EVs not denied, below "
                             f"ev_min_active {self.min_active}")
        ev.probe_successes = 0
        self._set(ev, EvState.DENIED, cause, now)

    def set_state(self, ev: Ev, state: EvState, now: float, cause: str = OPERATOR) -> None:
        """Set `ev` to `state` as an operator asks (MODIFY_EV_STATE):

        - DENIED: `deny` (the floor applies);
        - UNKNOWN: out of use until a probe reply (how a DENIED EV is allowed again);
        - GOOD: in use at once, taking its slot back from a backup;
        - ASSUMED_BAD: retired alone (no fate sharing), its slot given a backup; probes reinstate it.
        SKIP is the transport's own and is refused."""
        if state is EvState.DENIED:
            self.deny(ev, now, cause)
        elif state is EvState.UNKNOWN:
            ev.probe_successes = 0
            self._set(ev, EvState.UNKNOWN, cause, now)
        elif state is EvState.GOOD:
            self._make_good(ev, cause, now)
        elif state is EvState.ASSUMED_BAD:
            if ev.state is not EvState.ASSUMED_BAD:
                self._retire([ev], now, cause)
        else:
            raise ValueError(f"state: {state.value} is not one an operator sets "
                             f"(one of {', '.join(s.value for s in OPERATOR_STATES)})")

    def replace(self, ev: Ev, now: float, value: int | None = None) -> Ev:
        """Put a new EV (`value`, or a random one) in the slot whose home EV is `ev` (REPLACE_EV);
        it is UNKNOWN until a probe answers. `ev` is forgotten. Returns the new EV."""
        slot = next((s for s in self.slots if s.home is ev), None)
        if slot is None:
            raise ValueError(f"ev: {ev.value:#x} is a backup, not an EV of the array; replace the "
                             f"array's EV whose slot it stands in")
        if value is None:
            new = self._new_ev(ev.plane, True)
            if new is None:
                raise ValueError(f"ev: found no free EV value to replace {ev.value:#x} with")
        else:
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 0xFFFFFFFF:
                raise ValueError(f"new_ev: {value!r} is not a 32-bit EV value")
            if value in self.by_value:
                raise ValueError(f"new_ev: {value:#x} is already an EV of this connection")
            keys = self.plane_paths[ev.plane]
            key = keys[ev_path_index(value, len(keys))]
            new = Ev(value, ev.plane, key, load=self.loads[key])
            self.by_value[value] = new
        new.state = EvState.UNKNOWN
        self._unknown[id(new)] = new
        self._bad_homes.pop(id(ev), None)
        self._unknown.pop(id(ev), None)
        del self.by_value[ev.value]
        slot.home = new
        if slot.current is ev:
            slot.current = new
        self._dirty()
        return new
