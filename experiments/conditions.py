"""The conditions a wall time was measured in: the date, the machine's cores and 1-minute load
at the start and the end, and the build (compiled or pure Python, `speedups.build_in_use()`).

    measuring = Measuring()          # at the start
    ...
    conditions = measuring.done()    # a dict for a JSON file; `text(conditions)` for people
"""
from __future__ import annotations

import os
import time

import speedups


class Measuring:
    """A measurement under way: what `done` says of it, taken at its start and at its end."""

    def __init__(self) -> None:
        self.date = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        self.load_start = os.getloadavg()[0]
        self.began = time.monotonic()

    def done(self) -> dict:
        """The conditions, JSON-ready: date (at the start), wall_s, cores, 1-min load at the start and
        the end, and the build this process runs."""
        return {"date": self.date, "wall_s": round(time.monotonic() - self.began, 3), "cores": os.cpu_count(),
                "load_1min_start": round(self.load_start, 2), "load_1min_end": round(os.getloadavg()[0], 2),
                "build": str(speedups.build_in_use())}


def text(conditions: dict) -> str:
    """'2 cores, 1-min load 1.02 at the start, 1.35 at the end; build: compiled (mypyc 2.4.1)'."""
    return (f"{conditions['cores']} cores, 1-min load {conditions['load_1min_start']:.2f} at the start, "
            f"{conditions['load_1min_end']:.2f} at the end; build: {conditions['build']}")
