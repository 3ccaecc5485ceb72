"""Fault actions of a case on the live testbed, run by timers in real time (the mininet backend)."""
from __future__ import annotations

import threading
import time

from experiments.faults import FaultAction, FaultTarget, apply_action
from experiments.record import CaseRecord


class FaultTimers:
    """Fault actions run by timers in real time, each recorded when it has taken effect (a failure
    as a note), with how long after it was due that was (`late`: what, target, seconds)."""

    def __init__(self, target: FaultTarget, record: CaseRecord, start_at: float) -> None:
        self.target = target
        self.record = record
        self.start_at = start_at
        self.timers: list[threading.Timer] = []
        self.late: list[tuple[str, str, float]] = []

    def start(self, actions: list[FaultAction], begin: float) -> None:
        """Run `actions` at their offsets from the UNIX time `begin`."""
        for action in actions:
            due = begin + action.offset
            timer = threading.Timer(max(0.0, due - time.time()), self._fire, (action, max(due, time.time())))
            timer.daemon = True
            timer.start()
            self.timers.append(timer)

    def _fire(self, action: FaultAction, due: float) -> None:
        try:
            t = apply_action(action, self.target, self.record, lambda: time.time() - self.start_at)
            self.late.append((action.what, action.target, t + self.start_at - due))
        except Exception as error:        # noqa: BLE001 - reported in the record
            self.record.notes.append(f"fault {action.what} on {action.target} failed: {error!r}")

    def cancel(self) -> None:
        for timer in self.timers:
            timer.cancel()
