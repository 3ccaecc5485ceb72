"""The conditions a figure was measured in: the one record every measurement of the repository keeps
beside its figures (benchmarks, sweeps, calibration, crosschecks). It says when (the date, at the
start, UTC), how long (wall_s), on what (host, cores, Python) and under what load (the 1-minute load
average at the start and at the end), with which build (compiled or pure Python,
`speedups.build_in_use()`).

    measuring = Measuring()          # at the start
    ...
    conditions = measuring.done()    # a dict for a JSON file; `text(conditions)` for people
"""
from __future__ import annotations

import os
import platform
import resource
import time

import speedups

DATE_FORMAT = "%Y-%m-%d %H:%M:%S UTC"


class Measuring:
    """A measurement under way: what `done` says of it, taken at its start and at its end."""

    def __init__(self) -> None:
        self.date = time.strftime(DATE_FORMAT, time.gmtime())
        self.load_start = os.getloadavg()[0]
        self.began = time.monotonic()

    def done(self) -> dict:
        """The conditions, JSON-ready: date (at the start), wall_s, host, cores, python, the 1-min load at
        the start and at the end, and the build this process runs."""
        return {"date": self.date, "wall_s": round(time.monotonic() - self.began, 3), "host": platform.node(),
                "cores": os.cpu_count(), "python": platform.python_version(),
                "load_1min_start": round(self.load_start, 2), "load_1min_end": round(os.getloadavg()[0], 2),
                "build": str(speedups.build_in_use())}


def text(conditions: dict) -> str:
    """'2 cores, 1-min load 1.02 at the start, 1.35 at the end; build: compiled (mypyc 2.4.1)'."""
    return (f"{conditions['cores']} cores, 1-min load {conditions['load_1min_start']:.2f} at the start, "
            f"{conditions['load_1min_end']:.2f} at the end; build: {conditions['build']}")


def busiest_load(conditions: dict) -> float | None:
    """The higher of the 1-min loads at the start and the end (None: the record has neither)."""
    loads = [conditions.get(key) for key in ("load_1min_start", "load_1min_end")]
    numbers = [float(load) for load in loads if isinstance(load, (int, float))]
    return max(numbers) if numbers else None


def children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's finished children so far: a child process's CPU
    time is the difference across its run (htsim_uec's, a netsim case's process of its own)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
