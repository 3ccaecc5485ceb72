"""Calibration: the fastest link rate at which this machine's switches and agents stay faithful.

`find_rate` doubles the rate from a start while a measurement at it is good (judged faithful by
the fidelity monitor, completed, and with goodput at GOOD_SHARE of the link bound or more), or
halves it until one is, then tries once between the last good rate and its double; it only needs a function that measures one rate, so the search is tested
without Mininet. `measure_allreduce` is that function on the Mininet backend: an all-reduce on a
leaf-spine sized to last about MEASURE_S at the link rate. `calibrate` runs the search and makes
the record (experiments/calibration.py) at MARGIN of the fastest good rate.
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

from experiments import budget
from experiments.calibration import MARGIN, Calibration, CalibrationError, Machine
from experiments.scenario import Case, parse_scenario

START_BPS = 5_000_000            # the first rate tried
CEILING_BPS = 1_000_000_000      # never tried above this
FLOOR_BPS = 500_000              # never tried below this
REFINE_STEP = 2 ** 0.5           # the one try between a good rate and its double that was not
RATE_GRAIN_BPS = 10_000          # rates tried are whole multiples of this
GOOD_SHARE = 0.5                 # goodput (link bound over completion time) a good rate reaches
MEASURE_S = 1.0                  # an all-reduce lasts about this long at the link bound
TOPOLOGY = "leafspine:4x2x2"     # 4 leaves, 2 spines, 2 hosts per leaf: 8 hosts
CHUNK_BYTES = 16384


@dataclass
class Measurement:
    """One rate tried: was the run faithful, did it complete, at which share of the link bound."""

    rate_bps: int
    faithful: bool
    completed: bool
    goodput_share: Optional[float]         # link bound / completion time (None: never completed)
    completion_s: Optional[float] = None
    reasons: list = field(default_factory=list)   # why it was distorted
    wall_s: float = 0.0

    @property
    def good(self) -> bool:
        return self.faithful and self.completed and (self.goodput_share or 0.0) >= GOOD_SHARE

    def describe(self, most: int = 3) -> str:
        """One line: the rate, the verdict with its first `most` reasons, completion and goodput."""
        share = "-" if self.goodput_share is None else f"{self.goodput_share:.2f}"
        verdict = "faithful" if self.faithful else "distorted"
        done = f"completed in {self.completion_s:.2f} s" if self.completed else "did not complete"
        more = len(self.reasons) - most
        why = (f" ({'; '.join(self.reasons[:most])}{f'; {more} more' if more > 0 else ''})"
               if self.reasons else "")
        return (f"{self.rate_bps / 1e6:g} Mbit/s: {verdict}{why}, {done}, goodput {share} of the link bound "
                f"-> {'good' if self.good else 'too fast'}")

    def as_dict(self) -> dict:
        return {**asdict(self), "good": self.good}


@dataclass
class SearchResult:
    """The fastest good measurement (None: none was good) and every measurement, in order."""

    best: Optional[Measurement]
    tried: list


Measure = Callable[[int], Measurement]


def find_rate(measure: Measure, start_bps: int = START_BPS, ceiling_bps: int = CEILING_BPS,
              floor_bps: int = FLOOR_BPS, progress: Callable[[str], None] = lambda line: None) -> SearchResult:
    """Double the rate from `start_bps` while measurements are good (up to `ceiling_bps`); when the
    start is not good, halve it until one is (down to `floor_bps`). Between the fastest good rate
    and its double that was not good, try once the rate sqrt(2) times the good one."""
    tried: list[Measurement] = []

    def at(rate: int) -> Measurement:
        progress(f"measuring at {rate / 1e6:g} Mbit/s ...")
        m = measure(rate)
        tried.append(m)
        progress(m.describe())
        return m

    def between(best: Measurement) -> Measurement:
        """The better of `best` and the rate halfway (geometrically) to the double that was not good."""
        middle = int(round(best.rate_bps * REFINE_STEP / RATE_GRAIN_BPS)) * RATE_GRAIN_BPS
        m = at(middle)
        return m if m.good else best

    first = at(start_bps)
    if first.good:
        best, rate = first, start_bps
        while rate * 2 <= ceiling_bps:
            rate *= 2
            m = at(rate)
            if not m.good:
                return SearchResult(between(best), tried)
            best = m
        return SearchResult(best, tried)
    rate = start_bps
    while rate // 2 >= floor_bps:
        rate //= 2
        m = at(rate)
        if m.good:
            return SearchResult(between(m), tried)
    return SearchResult(None, tried)


def calibrate(target: str, measure: Measure, start_bps: int = START_BPS, margin: float = MARGIN,
              progress: Callable[[str], None] = lambda line: None, **limits) -> Calibration:
    """The calibration of `target` on this machine from a search with `measure`; CalibrationError
    when no rate down to the floor was good."""
    load_start = os.getloadavg()[0]
    result = find_rate(measure, start_bps, progress=progress, **limits)
    conditions = {"load_1min_start": round(load_start, 2), "load_1min_end": round(os.getloadavg()[0], 2)}
    measurements = [m.as_dict() for m in result.tried]
    if result.best is None:
        worst = result.tried[-1]
        raise CalibrationError(f"target {target}: no rate was faithful with goodput at {GOOD_SHARE:.0%} of "
                               f"the link bound, down to {worst.rate_bps / 1e6:g} Mbit/s: {worst.describe()}")
    fastest = result.best.rate_bps
    return Calibration(Machine.this(), target, int(fastest * margin), fastest, margin, "", measurements, conditions)


def calibration_case(rate_bps: int, topology: str = TOPOLOGY, measure_s: float = MEASURE_S) -> Case:
    """The case a calibration runs at `rate_bps`: an MRC all-reduce lasting about `measure_s` at the
    link bound (at least two chunks per rank)."""
    from topologies import topology_from_spec
    hosts = len(topology_from_spec(topology).hosts)
    per_link = rate_bps * measure_s / 8                       # bytes a host link carries in measure_s
    array = per_link * hosts / (2 * (hosts - 1))              # a ring all-reduce sends 2(n-1)/n of the array
    step = CHUNK_BYTES * hosts
    nbytes = max(2 * step, int(array // step) * step)
    doc = {"name": "calibration", "topology": topology, "link": {"rate_bps": int(rate_bps)},
           "horizon_s": max(10.0, 10 * measure_s),
           "workload": {"kind": "allreduce", "bytes": nbytes, "chunk_bytes": CHUNK_BYTES},
           "transports": [{"name": "MRC", "mode": "mrc"}]}
    return parse_scenario(doc, "<calibration>").cases()[0]


def measure_allreduce(target: str, topology: str = TOPOLOGY, measure_s: float = MEASURE_S) -> Measure:
    """A function measuring one rate on the Mininet backend with `target` switches."""
    from experiments.backends.mininet_backend import MininetBackend
    from experiments.calibration import LinkRate

    def measure(rate_bps: int) -> Measurement:
        case = calibration_case(rate_bps, topology, measure_s)
        backend = MininetBackend(target, link_rate=LinkRate(rate_bps))
        started = time.monotonic()
        record = backend.run_case(case)
        topo, _ = budget.target_topology(case, target, LinkRate(rate_bps))
        bound = budget.estimated_duration(case, topo, "model")[0]      # the links alone
        done = record.completed and record.completion_time
        return Measurement(rate_bps, record.fidelity.get("verdict") == "faithful", bool(record.completed),
                           (bound / record.completion_time) if done else None, record.completion_time,
                           list(record.fidelity.get("reasons", [])), round(time.monotonic() - started, 1))
    return measure
