"""Run experiment cases for a benchmark: a scenario given as a dict, on netsim or on Mininet."""
from __future__ import annotations

import logging
from typing import Optional

from experiments import repeats
from experiments.backends import make_backend, mininet_unavailable
from experiments.record import CaseRecord
from experiments.scenario import Case, parse_scenario
from experiments.workloads import variant_topology

log = logging.getLogger("mrc.benchmarks")

MODEL_RATE_BPS = 20_000_000          # link rate the Python switch model forwards (topologies default)
NETSIM_RATE_BPS = 100_000_000        # link rate on netsim (simulated time: any rate costs the same CPU)


def run_cases(doc: dict, backend: str, target: str = "model",
              transports: Optional[list[str]] = None, repeat: int = 1) -> list[tuple[Case, CaseRecord]]:
    """Every case of the scenario `doc` (only the named transports, when given) on `backend`,
    `repeat` times round by round (experiments.repeats: seed + i on netsim)."""
    scenario = parse_scenario(doc, path=f"<benchmark {doc['name']}>")
    runner = make_backend(backend, target)
    chosen = [case for case in scenario.cases() if not transports or case.transport.name in transports]
    out = []
    for case in repeats.expand(chosen, repeat, backend):
        log.info("%s on %s: %s (run %d/%d)", scenario.name, backend, case.label, case.repetition + 1, repeat)
        record = runner.run_case(case)
        record.repetition = case.repetition
        out.append((case, record))
    return out


def scenario_processes(doc: dict) -> int:
    """Agents and switches of the first case of the scenario `doc` on Mininet (what the calibrated
    rate of `auto` links depends on)."""
    from experiments.rate_caps import emulated_processes
    case = parse_scenario(doc, path=f"<benchmark {doc['name']}>").cases()[0]
    return emulated_processes(case, variant_topology(case.variant))


def host_link_rate(case: Case) -> float:
    """Bit rate of the slowest host link of the case's topology."""
    topo = variant_topology(case.variant)
    return float(min(link.rate_bps for link in topo.links if topo.is_host(link.a) or topo.is_host(link.b)))


def mininet_missing() -> Optional[str]:
    """Why the Mininet model target cannot run here (root, mnexec), or None."""
    return mininet_unavailable()


def mininet_left_out(options) -> Optional[str]:
    """Why this run leaves the Mininet backend out ('mininet: <reason>': --no-mininet, or it cannot
    run here), or None when it runs."""
    why = mininet_missing()
    if getattr(options, "no_mininet", False):
        return "mininet: --no-mininet"
    return f"mininet: {why}" if why else None
