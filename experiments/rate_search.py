"""Calibration: the fastest link rate at which this machine's switches and agents stay faithful, at a
few topology sizes, and the model of it by processes per core.

`find_rate` doubles the rate from a start while a measurement at it is good (judged faithful by
the fidelity monitor, completed, and with goodput at GOOD_SHARE of the link bound or more), or
halves it until one is, then tries once between the last good rate and its double; it only needs a
function that measures one rate, so the search is tested without Mininet. `measure_allreduce` is
that function on the Mininet backend: an all-reduce on a topology, sized to last about MEASURE_S
at the link rate. `calibrate` runs the search on each of TOPOLOGIES (a leaf-spine of 14 processes
and a fat-tree of 36), the larger starting where the smaller predicts, and makes the record
(experiments/calibration.py): a RateModel fitted to the sizes, applied at MARGIN.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

from experiments import conditions, horizons, rate_caps
from experiments.calibration import MARGIN, Calibration, CalibrationError, Machine, RateModel, SizeMeasurement
from experiments.scenario import Case, parse_scenario
from experiments.workloads import variant_topology

START_BPS = 5_000_000            # the first rate tried
CEILING_BPS = 1_000_000_000      # never tried above this
FLOOR_BPS = 250_000              # never tried below this (BMv2 on fattree:4 was distorted at 1.1 Mbit/s under load)
REFINE_STEP = 2 ** 0.5           # the one try between a good rate and its double that was not
RATE_GRAIN_BPS = 10_000          # rates tried are whole multiples of this
GOOD_SHARE = 0.5                 # goodput (link bound over completion time) a good rate reaches
MEASURE_S = 1.0                  # an all-reduce lasts about this long at the link bound
TOPOLOGIES = ("leafspine:4x2x2", "fattree:4")   # 14 and 36 processes (agents and switches)
CHUNK_BYTES = 16384


@dataclass
class RateTrial:
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

    best: Optional[RateTrial]
    tried: list


Measure = Callable[[int], RateTrial]


def find_rate(measure: Measure, start_bps: int = START_BPS, ceiling_bps: int = CEILING_BPS,
              floor_bps: int = FLOOR_BPS, progress: Callable[[str], None] = lambda line: None) -> SearchResult:
    """Double the rate from `start_bps` while measurements are good (up to `ceiling_bps`); when the
    start is not good, halve it until one is (down to `floor_bps`). Between the fastest good rate
    and its double that was not good, try once the rate sqrt(2) times the good one."""
    tried: list[RateTrial] = []

    def at(rate: int) -> RateTrial:
        progress(f"measuring at {rate / 1e6:g} Mbit/s ...")
        m = measure(rate)
        tried.append(m)
        progress(f"{m.describe()} [{m.wall_s:.0f} s]")
        return m

    def between(best: RateTrial) -> RateTrial:
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


def processes(topology: str) -> int:
    """The processes (agents and switches) a calibration's all-reduce on `topology` runs."""
    case = calibration_case(START_BPS, topology)
    return rate_caps.emulated_processes(case, variant_topology(case.variant))


def calibrate(target: str, measure_on: Callable[[str], Measure], topologies: tuple = TOPOLOGIES,
              start_bps: int = START_BPS, margin: float = MARGIN,
              progress: Callable[[str], None] = lambda line: None, **limits) -> Calibration:
    """The calibration of `target` on this machine: a search at each of `topologies` (smallest
    first; `measure_on(topology)` measures one rate there) and the RateModel fitted to the fastest
    good rates. The first size starts at `start_bps`, each next one at what the sizes before
    predict for it. CalibrationError, naming the size, when one finds no good rate down to the floor."""
    machine = Machine.this()
    sizes: list[SizeMeasurement] = []
    ordered = sorted(dict.fromkeys(topologies), key=processes)
    started = time.monotonic()
    for i, topology in enumerate(ordered):
        count = processes(topology)
        start = start_bps
        if sizes:
            predicted = RateModel.fit([(s.processes / machine.cores, s.faithful_rate_bps) for s in sizes])
            start = _on_grain(predicted.faithful_rate(count / machine.cores))
        progress(f"size {i + 1}/{len(ordered)}: {topology} ({count} processes, {count / machine.cores:g} per "
                 f"core), from {start / 1e6:g} Mbit/s{' (predicted by the sizes before)' if sizes else ''}")
        measuring = conditions.Measuring()
        result = find_rate(measure_on(topology), max(start, limits.get("floor_bps", FLOOR_BPS)),
                           progress=progress, **limits)
        measured = measuring.done()
        if result.best is None:
            worst = result.tried[-1]
            before = "; ".join(f"{s.topology}: {s.faithful_rate_bps / 1e6:g} Mbit/s" for s in sizes)
            raise CalibrationError(f"target {target} on {topology} ({count} processes): no rate was faithful with "
                                   f"goodput at {GOOD_SHARE:.0%} of the link bound, down to "
                                   f"{worst.rate_bps / 1e6:g} Mbit/s: {worst.describe()}"
                                   f"{f' (measured before: {before})' if before else ''}")
        sizes.append(SizeMeasurement(topology, count, result.best.rate_bps, [m.as_dict() for m in result.tried],
                                     measured))
        progress(f"{topology}: fastest faithful rate {result.best.rate_bps / 1e6:g} Mbit/s (load average "
                 f"{measured['load_1min_start']:g} -> {measured['load_1min_end']:g}, "
                 f"{time.monotonic() - started:.0f} s so far)")
    model = RateModel.fit([(s.processes / machine.cores, s.faithful_rate_bps) for s in sizes])
    return Calibration(machine, target, model, margin, "", sizes)


def _on_grain(rate: float) -> int:
    return max(RATE_GRAIN_BPS, int(round(rate / RATE_GRAIN_BPS)) * RATE_GRAIN_BPS)


def calibration_case(rate_bps: int, topology: str, measure_s: float = MEASURE_S) -> Case:
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


def measure_allreduce(target: str, topology: str, measure_s: float = MEASURE_S) -> Measure:
    """A function measuring one rate on the Mininet backend with `target` switches."""
    from experiments.backends.mininet_backend import MininetBackend
    from experiments.calibration import LinkRate

    def measure(rate_bps: int) -> RateTrial:
        case = calibration_case(rate_bps, topology, measure_s)
        backend = MininetBackend(target, link_rate=LinkRate(rate_bps))
        started = time.monotonic()
        record = backend.run_case(case)
        topo, _ = rate_caps.target_topology(case, target, LinkRate(rate_bps))
        bound = horizons.estimated_duration(case, topo, "model")[0]      # the links alone
        done = record.completed and record.completion_time
        return RateTrial(rate_bps, record.fidelity.get("verdict") == "faithful", bool(record.completed),
                         (bound / record.completion_time) if done else None, record.completion_time,
                         list(record.fidelity.get("reasons", [])), round(time.monotonic() - started, 1))
    return measure
