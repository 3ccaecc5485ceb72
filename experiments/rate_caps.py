"""The link rates a case runs at on a switch target on this machine.

On the Mininet backend, links whose rate is `auto` (or not given) run at the rate calibrated for
the switch target on this machine and the case's topology size (experiments/calibration.py: by its
agents and switches per core), and a given rate is capped at it. Without a calibration the fixed
caps of MAX_RATE_BPS stand in. `target_topology` returns the case's topology at those rates with a
note for the case's record for every cap, fallback and stretched horizon (`experiments.horizons`).
"""
from __future__ import annotations

import dataclasses

from experiments.calibration import RateSource, rate_source
from experiments.horizons import horizon
from experiments.scenario import AUTO, Case
from experiments.workloads import COLLECTIVES, point_to_point_flows, variant_topology
from topologies.model import DEFAULT_RATE_BPS, Topology

MODEL_MAX_RATE_BPS = DEFAULT_RATE_BPS
# The fallback when this machine has no calibration for a target (`mrc-testbed calibrate`): what each
# target forwarded on a 2-core machine where they were chosen. BMv2 is CPU-bound there
# (experiments.horizons.BMV2_SWITCH_PPS), so 20 Mbit/s is already more than 4 switches forward at
# once; the cap keeps its queue rate limiter (packets/s) in a sane range.
MAX_RATE_BPS = {"model": MODEL_MAX_RATE_BPS, "bmv2": DEFAULT_RATE_BPS}


def asks_auto(case: Case) -> bool:
    """Whether the case's links take the calibrated rate (`rate_bps: auto`, or no rate given)."""
    return case.variant.link.get("rate_bps", AUTO) == AUTO


def emulated_processes(case: Case, topo: Topology) -> int:
    """The processes that emulate `case` on `topo` on Mininet, what shares the CPUs and so what the
    calibrated rate depends on: a switch process per switch, and an agent per host for a
    collective, a pair of agents per flow otherwise (experiments/backends/agent_jobs.py)."""
    w = case.variant.workload
    agents = (len(topo.hosts) if w.kind in COLLECTIVES
              else 2 * len(point_to_point_flows(topo, w, case.scenario.seed)))
    return len(topo.switches) + agents


def machine_rate(target: str) -> RateSource:
    """What `auto` links of `target` run at on this machine: its calibration (a rate per topology
    size), else the fixed cap for every size, with a note."""
    return rate_source(target, MAX_RATE_BPS.get(target, MODEL_MAX_RATE_BPS))


def target_topology(case: Case, target: str, rate: RateSource | None = None) -> tuple[Topology, list[str]]:
    """The case's topology with link rates set to (`auto`) or capped at `rate`'s rate for the
    topology's size (default: what the calibration of `target` says, `machine_rate`), and the notes
    (a cap, a fallback, a stretched horizon) the case's record carries."""
    topo = variant_topology(case.variant)
    rate = (rate or machine_rate(target)).for_processes(emulated_processes(case, topo))
    notes = []
    fastest = max(link.rate_bps for link in topo.links)
    what = "the Python switch model" if target == "model" else "BMv2"
    if asks_auto(case):
        scale = rate.rate_bps / fastest           # a topology's own rate ratios are kept
        topo = _with_rates(topo, lambda r: max(1, int(round(r * scale))))
        if rate.note:
            notes.append(rate.note)
    elif fastest > rate.rate_bps:
        topo = _with_rates(topo, lambda r: min(r, rate.rate_bps))
        notes.append(f"link rates capped at {rate.rate_bps / 1e6:g} Mbit/s for {what} on this machine "
                     f"(the scenario asks for {fastest / 1e6:g} Mbit/s)")
        if rate.note:
            notes.append(rate.note)
    _, stretched = horizon(case, topo, target)
    if stretched:
        notes.append(stretched)
    return topo, notes


def _with_rates(topo: Topology, rate_of) -> Topology:
    links = [dataclasses.replace(link, rate_bps=rate_of(link.rate_bps)) for link in topo.links]
    return Topology(topo.name, topo.hosts, topo.switches, links).validate()
