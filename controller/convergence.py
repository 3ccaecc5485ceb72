"""An emulated converging control plane ("routing protocol" mode), for comparisons only.

MRC's fabric is static: nothing reacts to a failure. The RoCE-style baseline, in a real fabric,
relies on BGP/ECMP convergence, which takes seconds. This module emulates that: after a link-down
or link-up notification it waits a configurable delay (default 1 s), then recomputes the routes
around the links that are down (`controller.routes.rerouted_programs`) and writes only the entries
that changed, on every switch.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Hashable, Mapping

from p4.v1 import p4runtime_pb2

from controller.entries import SwitchProgram
from pipeline_contract.entries import TableEntry
from pipeline_contract.client import P4RuntimeClient

DEFAULT_DELAY_S = 1.0

INSERT = p4runtime_pb2.Update.INSERT
MODIFY = p4runtime_pb2.Update.MODIFY
DELETE = p4runtime_pb2.Update.DELETE


def program_changes(old: SwitchProgram, new: SwitchProgram) -> list[tuple[int, TableEntry]]:
    """Updates turning `old` into `new`: inserts first, then modifies, then deletes.

    That order never leaves a route pointing at an ECMP member that is not there yet.
    """
    before = {e.key(): e for e in old.entries}
    after = {e.key(): e for e in new.entries}
    inserts = [(INSERT, e) for k, e in after.items() if k not in before]
    modifies = [(MODIFY, e) for k, e in after.items()
                if k in before and (before[k].action, before[k].params) != (e.action, e.params)]
    deletes = [(DELETE, e) for k, e in before.items() if k not in after]
    return inserts + modifies + deletes


@dataclass(frozen=True)
class Reconvergence:
    """One completed reprogramming: when it was notified, when it finished, what changed."""

    notified_at: float            # time.monotonic() of the notification that scheduled it
    done_at: float
    down_links: frozenset
    updates: dict                 # switch name -> number of updates written


class ConvergingControlPlane:
    """Reprograms routes around dead links `delay` seconds after each notification."""

    def __init__(self, topology, clients: Mapping[str, P4RuntimeClient],
                 programs: Mapping[str, SwitchProgram],
                 reroute: Callable | None = None, delay: float = DEFAULT_DELAY_S):
        if delay < 0:
            raise ValueError(f"convergence delay must be >= 0 s, got {delay}")
        if reroute is None:
            from controller.routes import rerouted_programs as reroute
        self.topology = topology
        self.clients = dict(clients)
        self.programs = dict(programs)        # what each switch holds now
        self.reroute = reroute
        self.delay = delay
        self.history: list[Reconvergence] = []
        self._down: set = set()
        self._lock = threading.Lock()
        self._timers: list[threading.Timer] = []
        self._apply_lock = threading.Lock()      # one reprogramming at a time
        self._dead: set[str] = set()             # switches whose process is gone: never written again
        self.errors: list[str] = []

    # --- notifications --------------------------------------------------------------
    def link_down(self, link: Hashable) -> None:
        """A link failed: reroute around it after the delay."""
        with self._lock:
            self._down.add(link)
        self._schedule()

    def link_up(self, link: Hashable) -> None:
        """A link came back: restore routes through it after the delay."""
        with self._lock:
            self._down.discard(link)
        self._schedule()

    def switch_down(self, switch: str, links: list[Hashable]) -> None:
        """A switch stopped (its process ended): its `links` are down, and it is not
        reprogrammed any more (there is nothing left to write to)."""
        with self._lock:
            self._dead.add(switch)
            self._down.update(links)
        self._schedule()

    @property
    def down_links(self) -> frozenset:
        """Links the control plane currently believes are down."""
        with self._lock:
            return frozenset(self._down)

    def _schedule(self) -> None:
        notified = time.monotonic()
        timer = threading.Timer(self.delay, self._converge, args=(notified,))
        timer.daemon = True
        with self._lock:
            self._timers = [t for t in self._timers if t.is_alive()] + [timer]
        timer.start()

    # --- reprogramming ------------------------------------------------------------------
    def _converge(self, notified_at: float) -> None:
        with self._apply_lock:
            with self._lock:
                down = frozenset(self._down)
            try:
                updates = self.apply(self.reroute(self.topology, down))
                record = Reconvergence(notified_at, time.monotonic(), down, updates)
            except Exception as exc:          # noqa: BLE001 - reported through self.errors
                record = None
                self.errors.append(f"reconvergence with down links {sorted(map(str, down))} "
                                   f"failed: {exc}")
        if record is not None:
            with self._lock:
                self.history.append(record)

    def apply(self, programs: Mapping[str, SwitchProgram]) -> dict[str, int]:
        """Write the difference between what each switch holds and `programs`; return counts."""
        counts = {}
        with self._lock:
            dead = set(self._dead)
        for name, new in programs.items():
            if name in dead:
                continue
            changes = program_changes(self.programs[name], new)
            if changes:
                self.clients[name].write(changes)
            self.programs[name] = new
            counts[name] = len(changes)
        return counts

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every scheduled reprogramming has run; False if `timeout` passed first."""
        deadline = time.monotonic() + timeout
        with self._lock:
            timers = list(self._timers)
        for timer in timers:
            timer.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in timers)

    def stop(self) -> None:
        """Cancel reprogramming that has not started yet and wait for any that has."""
        with self._lock:
            timers, self._timers = self._timers, []
        for timer in timers:
            timer.cancel()
        for timer in timers:
            timer.join(timeout=10)
