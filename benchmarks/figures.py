"""What a benchmark measures (`Figure`), the conditions it ran in (`experiments.conditions`), and saved
results to compare with.

A benchmark module exposes `NAME`, `DESCRIPTION` and `measure(options) -> Measurement`; it may
also run on its own (`python -m benchmarks.bench_allreduce`). `benchmarks.run` runs them, prints
one table and keeps the last result of each under `benchmarks/results/<name>.json` (and every
run's figures, one line each, in `<name>.history.jsonl`).
"""
from __future__ import annotations

import heapq
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from experiments.conditions import busiest_load

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
RATIO_UNITS = ("", "x")          # a ratio of two figures timed in the same run: the machine's speed cancels


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


def result_path(name: str, folder: Path = RESULTS) -> Path:
    return folder / f"{name}.json"


def history_path(name: str, folder: Path = RESULTS) -> Path:
    return folder / f"{name}.history.jsonl"


def load_previous(name: str, folder: Path = RESULTS) -> Optional[dict]:
    """The last saved result of benchmark `name`, its figures completed with the latest value of
    every figure any earlier run measured (a run that skipped a part, e.g. --no-mininet, does not
    hide that part's last figures), and under "measured_on" the conditions (load, reference time) of the
    run each figure comes from; None when nothing was saved or the files are unreadable."""
    try:
        last = json.loads(result_path(name, folder).read_text())
    except (OSError, ValueError):
        return None
    latest: dict[str, dict] = {}
    measured_on: dict[str, dict] = {}
    try:
        for line in history_path(name, folder).read_text().splitlines():
            try:
                run = json.loads(line)
                for figure in run.get("figures", []):
                    if figure.get("value") is not None:
                        latest[figure.get("name")] = figure
                        measured_on[figure.get("name")] = conditions_of(run)
            except ValueError:
                continue
    except OSError:
        pass
    for figure in last.get("figures", []):
        if figure.get("value") is not None or figure.get("name") not in latest:
            latest[figure.get("name")] = figure
            measured_on[figure.get("name")] = conditions_of(last)
    return {**last, "figures": list(latest.values()), "measured_on": measured_on}


def save(name: str, measurement: Measurement, conditions: dict, folder: Path = RESULTS,
         reference_s: Optional[float] = None) -> Path:
    """Write the result of benchmark `name`: the conditions it ran in (`experiments.conditions`, with
    the reference job's time `reference_s` when given), its figures and details."""
    folder.mkdir(parents=True, exist_ok=True)
    path = result_path(name, folder)
    conditions = dict(conditions)
    if reference_s is not None:
        conditions[REFERENCE_KEY] = round(reference_s, 5)
    doc = {"benchmark": name, "conditions": conditions, "figures": [asdict(f) for f in measurement.figures],
           "skipped": measurement.skipped, "details": measurement.details}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    tmp.replace(path)
    with history_path(name, folder).open("a") as history:       # figures only: one line a run
        history.write(json.dumps({"conditions": conditions, "figures": doc["figures"]}, default=str) + "\n")
    return path


def conditions_of(saved: dict) -> dict:
    """The conditions a saved result (or history line) was measured in; results saved before
    `experiments.conditions` kept them under "machine"."""
    return saved.get("conditions") or saved.get("machine") or {}


# --- the machine's own speed ------------------------------------------------------------------
# The machine is a guest on a shared host: the same code's CPU time moves with what the host's other
# guests run (htsim_uec, a program that did not change, took 0.278 s of CPU on the fat-tree k=8
# permutation at 00:27 2026-12-06 and 0.35-0.40 s two hours later). Every benchmark's run also times a
# fixed reference job (`reference_cpu_s`), before and after the benchmark, and saves the least time
# with the machine (REFERENCE_KEY); compared with the previous run's, it says how much slower the
# machine itself is. It sees the machine's speed around the benchmark, not a burst within it, and
# only part of what moves a figure. Sampled a few seconds before htsim_uec's two cases of
# netsim_vs_htsim, every 33 s (71 samples, 2026-12-06 02:42-03:21, load 0.7-5.6): of the 23
# (4x4x4) and 18 (fat-tree) samples where a case's CPU time was more than 15 % over its median, a
# job of this kind explained 8 and 9 (the case's rise, the job's taken out, under 10 %; the
# pure-Python part alone 8 and 3), and it was up more than 10 % in 7 and 9 samples where the case
# was up less than 5 %. Hence the least of its times before and after: an excuse needs both.

REFERENCE_KEY = "reference_cpu_s"
REFERENCE_TURNS = 3              # turns before the benchmark, and as many after
MACHINE_MARK = "(machine "       # how each machine_mark begins (the table's legend looks for it)


def _reference_turn(table, picks) -> float:
    """The CPU time of one turn of the reference job, the same in either build: a heap of timers pushed
    and popped in pure Python (an event loop's kind of work), then numpy reading `table` at the random
    places `picks` (memory-bound: it feels the caches and memory the machine shares)."""
    began = time.process_time()
    queue: list = []
    total = 0
    for i in range(100_000):
        heapq.heappush(queue, ((i * 7919) % 1000, i))
        if len(queue) > 64:
            when, n = heapq.heappop(queue)
            total += when ^ n
    table[picks].sum()
    return time.process_time() - began


def reference_cpu_s(turns: int = REFERENCE_TURNS) -> float:
    """The reference job's least CPU time over `turns` turns (the least: a turn the machine was not
    interrupted in): the machine's speed now, to set beside a previous run's."""
    import numpy
    rng = numpy.random.default_rng(1)
    table = rng.random(8_000_000)                            # 64 MB, past the machine's own caches
    picks = rng.integers(0, table.size, 1_500_000)
    return min(_reference_turn(table, picks) for _ in range(turns))


def machine_slowdown(now: Optional[float], then: Optional[float]) -> Optional[float]:
    """How much slower the machine is than it was, from the reference job's times: now / then - 1
    (negative: faster); None when either run has no reference time."""
    if not now or not then:
        return None
    return now / then - 1


def scales_with_machine(figure: Figure) -> bool:
    """Whether a figure moves with the machine's speed: a time or a rate by a clock (wall or CPU), not
    a ratio of two figures timed in the same run (unit in RATIO_UNITS), where the speed cancels."""
    return figure.clock in (WALL, CPU) and figure.unit not in RATIO_UNITS


def without_machine(figure: Figure, change: float, slowdown: float) -> float:
    """A change of a figure that scales with the machine, the machine's `slowdown` taken out: a time
    (better lower) divided by 1 + slowdown, a rate (better higher) multiplied by it."""
    if figure.better == "higher":
        return (1 + change) * (1 + slowdown) - 1
    return (1 + change) / (1 + slowdown) - 1


def machine_mark(slowdown: float) -> str:
    """The mark of a change compared with the machine's slow-down taken out."""
    return f"(machine {slowdown:.0%} slower)"


def compare(figure: Figure, previous: Optional[dict], load_now: Optional[float] = None,
            cpus: Optional[int] = None, reference_now: Optional[float] = None) -> tuple[str, bool]:
    """(change against the previous saved value, True when it is a regression: worse by more than
    REGRESSION_SHARE). When this run's load (`load_now`) or the previous run's was above `cpus`
    (default: this machine's CPU count), a figure by the wall clock is not flagged and its change is
    marked BUSY_WALL; a figure of CPU time is flagged only past BUSY_CPU_SHARE and its change is
    marked BUSY_CPU (`Figure.clock`). A figure that scales with the machine's speed, worse than its
    limit while the reference job (`reference_now`, against the previous run's) says the machine got
    slower, is flagged only when still worse than the limit with that slow-down taken out; its
    change is marked with the slow-down (`machine_mark`)."""
    if previous is None or figure.value is None:
        return "", False
    old = next((f.get("value") for f in previous.get("figures", []) if f.get("name") == figure.name), None)
    if old is None:
        return "new", False
    if old == 0:
        return ("same", False) if figure.value == 0 else ("was 0", False)
    change = (figure.value - old) / abs(old)
    marks = [f"{change:+.0%}"]
    then = previous_conditions(previous, figure.name)
    limit = cpus or os.cpu_count() or 1
    busy = any(load is not None and load > limit for load in (load_now, conditions_load(then)))
    if busy and figure.clock == WALL:
        return f"{marks[0]} {BUSY_WALL}", False
    share = REGRESSION_SHARE
    if busy and figure.clock == CPU:
        share = BUSY_CPU_SHARE
        marks.append(BUSY_CPU)
    worse = _worse(figure, change, share)
    slowdown = machine_slowdown(reference_now, then.get(REFERENCE_KEY))
    if worse and scales_with_machine(figure) and slowdown is not None and slowdown > 0:
        marks.append(machine_mark(slowdown))
        worse = _worse(figure, without_machine(figure, change, slowdown), share)
    return " ".join(marks), worse


def _worse(figure: Figure, change: float, share: float) -> bool:
    """Whether `change` (a share of the previous value) is worse than `share` in the figure's direction."""
    return (figure.better == "higher" and change < -share) or (figure.better == "lower" and change > share)


def previous_conditions(previous: Optional[dict], name: Optional[str] = None) -> dict:
    """The conditions (load, reference time...) a saved result's figure `name` was measured in: its own
    run's (load_previous keeps them), else the saved result's."""
    if not previous:
        return {}
    return (previous.get("measured_on") or {}).get(name) or conditions_of(previous)


def conditions_load(conditions: dict) -> Optional[float]:
    """The busiest 1-minute load average saved conditions say, if they do (`conditions.busiest_load`;
    for results saved before it, the load average they kept)."""
    load = busiest_load(conditions)
    if load is not None:
        return load
    try:
        return float(conditions["load_average"][0])
    except (KeyError, IndexError, TypeError, ValueError):
        return None


