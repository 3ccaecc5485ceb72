"""What a benchmark measures (`Figure`), the machine it ran on, and saved results to compare with.

A benchmark module exposes `NAME`, `DESCRIPTION` and `measure(options) -> Measurement`; it may
also run on its own (`python -m benchmarks.bench_allreduce`). `benchmarks.run` runs them, prints
one table and keeps the last result of each under `benchmarks/results/<name>.json` (and every
run's figures, one line each, in `<name>.history.jsonl`).
"""
from __future__ import annotations

import json
import math
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

import speedups

RESULTS = Path(__file__).resolve().parent / "results"
REGRESSION_SHARE = 0.10          # a figure worse than the previous one by more than this is flagged
# A run is busy when its 1-minute load average, or the previous run's, was above the machine's CPU
# count (more runnable than cores). A figure measured by the wall clock (`Figure.clock` WALL: a wall
# time, a rate per second, anything timed on Mininet) then depends on what else the machine ran: it
# is not flagged, its CPU-time figure is the one to compare. A figure of CPU time (CPU) rises under
# contention too (caches, memory bandwidth and the hypervisor shared with the other jobs: the
# fat-tree all-reduce's CPU time was flagged +11 % at load 2.3 on 2 CPUs with CI running beside it):
# it is flagged only when worse by more than BUSY_CPU_SHARE. That margin is past the scatter of a
# case of a second measured here (2-core KVM guest, compiled build, 2026-12-06 02:12-02:33, a
# sample every 40-50 s at load averages 1.2-3.5): the least CPU of 3 runs of the fat-tree k=8 permutation,
# 1.05-1.26 s over 15 samples (+20 %); a case of 0.1 s scatters more (the least of 7 runs of the
# 4x4x4 permutation, 0.079-0.109 s over 25 samples, +38 %; +32 % at load 2 or less), more than any
# fixed margin that would still catch a regression.
WALL, CPU = "wall", "cpu"        # Figure.clock; "": neither (simulated time, a size, a count)
WALL_MARK = "wall"               # a figure's clock, unless given: WALL_MARK in its name, CPU_MARK in
CPU_MARK = "CPU"                 # its name or unit
BUSY_CPU_SHARE = 0.30
BUSY_WALL = "(busy)"                                        # the change's marks, one per rule
BUSY_CPU = f"(busy: flagged past {BUSY_CPU_SHARE:.0%})"


@dataclass
class Figure:
    """One measured number: `better` says which way is good ("higher", "lower" or "" for neither)."""

    name: str
    value: Optional[float]
    unit: str
    better: str = "higher"
    note: str = ""
    clock: Optional[str] = None    # WALL, CPU or "" (neither); None: WALL_MARK or CPU_MARK say

    def __post_init__(self) -> None:
        if self.clock is None:
            self.clock = WALL if WALL_MARK in self.name else (
                CPU if CPU_MARK in self.name or CPU_MARK in self.unit else "")
        if self.clock not in (WALL, CPU, ""):
            raise ValueError(f"figure {self.name!r}: clock {self.clock!r}, expected {WALL!r}, {CPU!r} or ''")

    def text(self) -> str:
        """The value with its unit, or why there is none."""
        if self.value is None:
            return f"n/a {self.note}".strip()
        value = self.value
        if value == 0 or 0.01 <= abs(value) < 1e6:
            shown = f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"
        else:
            shown = f"{value:.3e}"
        return f"{shown} {self.unit}".strip()


@dataclass
class Measurement:
    """What one benchmark produced: its figures, details for the JSON file, and skipped parts."""

    figures: list[Figure] = field(default_factory=list)
    details: dict = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

    def add(self, name: str, value: Optional[float], unit: str, better: str = "higher",
            note: str = "", clock: Optional[str] = None) -> None:
        """One more figure (`clock`: see Figure; a value that is not finite is kept as none)."""
        if value is not None and not math.isfinite(value):
            value, note = None, note or "not finite"
        self.figures.append(Figure(name, value, unit, better, note, clock))


def machine_info() -> dict:
    """Where and when a measurement ran (figures depend on the machine and its load)."""
    return {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(), "load_average": list(os.getloadavg()),
            "root": os.geteuid() == 0, "build": str(speedups.inspect_build()),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def result_path(name: str, folder: Path = RESULTS) -> Path:
    return folder / f"{name}.json"


def history_path(name: str, folder: Path = RESULTS) -> Path:
    return folder / f"{name}.history.jsonl"


def load_previous(name: str, folder: Path = RESULTS) -> Optional[dict]:
    """The last saved result of benchmark `name`, its figures completed with the latest value of
    every figure any earlier run measured (a run that skipped a part, e.g. --no-mininet, does not
    hide that part's last figures); None when nothing was saved or the files are unreadable."""
    try:
        last = json.loads(result_path(name, folder).read_text())
    except (OSError, ValueError):
        return None
    latest: dict[str, dict] = {}
    try:
        for line in history_path(name, folder).read_text().splitlines():
            try:
                for figure in json.loads(line).get("figures", []):
                    if figure.get("value") is not None:
                        latest[figure.get("name")] = figure
            except ValueError:
                continue
    except OSError:
        pass
    for figure in last.get("figures", []):
        if figure.get("value") is not None or figure.get("name") not in latest:
            latest[figure.get("name")] = figure
    return {**last, "figures": list(latest.values())}


def save(name: str, measurement: Measurement, seconds: float, folder: Path = RESULTS) -> Path:
    """Write the result of benchmark `name` (machine info, time, figures, details)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = result_path(name, folder)
    doc = {"benchmark": name, "machine": machine_info(), "wall_time_s": round(seconds, 2),
           "figures": [asdict(f) for f in measurement.figures], "skipped": measurement.skipped,
           "details": measurement.details}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    tmp.replace(path)
    with history_path(name, folder).open("a") as history:       # figures only: one line a run
        history.write(json.dumps({"machine": doc["machine"], "figures": doc["figures"]}, default=str) + "\n")
    return path


def compare(figure: Figure, previous: Optional[dict], load_now: Optional[float] = None,
            cpus: Optional[int] = None) -> tuple[str, bool]:
    """(change against the previous saved value, True when it is a regression: worse by more than
    REGRESSION_SHARE). When this run's load (`load_now`) or the previous run's was above `cpus`
    (default: this machine's CPU count), a figure by the wall clock is not flagged and its change is
    marked BUSY_WALL; a figure of CPU time is flagged only past BUSY_CPU_SHARE and its change is
    marked BUSY_CPU (`Figure.clock`)."""
    if previous is None or figure.value is None:
        return "", False
    old = next((f.get("value") for f in previous.get("figures", []) if f.get("name") == figure.name), None)
    if old is None:
        return "new", False
    if old == 0:
        return ("same", False) if figure.value == 0 else ("was 0", False)
    change = (figure.value - old) / abs(old)
    text = f"{change:+.0%}"
    limit = cpus or os.cpu_count() or 1
    busy = any(load is not None and load > limit for load in (load_now, previous_load(previous)))
    if busy and figure.clock == WALL:
        return f"{text} {BUSY_WALL}", False
    if busy and figure.clock == CPU:
        return f"{text} {BUSY_CPU}", _worse(figure, change, BUSY_CPU_SHARE)
    return text, _worse(figure, change, REGRESSION_SHARE)


def _worse(figure: Figure, change: float, share: float) -> bool:
    """Whether `change` (a share of the previous value) is worse than `share` in the figure's direction."""
    return (figure.better == "higher" and change < -share) or (figure.better == "lower" and change > share)


def previous_load(previous: Optional[dict]) -> Optional[float]:
    """The 1-minute load average when a saved result was measured, if it says."""
    try:
        return float(previous["machine"]["load_average"][0])     # type: ignore[index]
    except (KeyError, IndexError, TypeError, ValueError):
        return None
