"""The labs' transfers on netsim (labs 3 and 4): the simulation driver (`simulation`) with the labs'
fabric, timers and message size, and a student's transport policies.

`fabric(...)` is the small leaf-spine (`simulation.leaf_spine_fabric`, one host per leaf unless asked);
`run_flows(...)` gives every host one transport `Endpoint` with the `Policies` given, sends each
`Flow` (re-exported from `simulation`) as messages of MESSAGE_SIZE unless it names its own, runs the
simulator until every message has been delivered and acknowledged (or `until`) and says what the
application received (`simulation.SimulationResult`). Everything is deterministic for a given fabric seed.
"""
from __future__ import annotations

from dataclasses import replace

import simulation
from host_agent.transport import QP_BASE, Policies, TransportConfig
from netsim import Network
from simulation import Flow, SimulationResult

__all__ = ["Flow", "MESSAGE_SIZE", "QP_BASE", "config", "fabric", "pause", "run_flows"]

MESSAGE_SIZE = 100_000          # a lab's flow goes as messages of this many bytes unless it says otherwise


def fabric(seed: int, planes: int = 1, leaves: int = 2, spines: int = 2, hosts_per_leaf: int = 1) -> Network:
    """The leaf-spine of 10 Gbit/s links and 1 us cables; hosts h1.. fill the leaves in order, and per
    plane the leaves come first (s1, s2, ...), then the spines."""
    return simulation.leaf_spine_fabric(seed, planes, leaves, spines, hosts_per_leaf)


def config(mode: str = "mrc", **overrides) -> TransportConfig:
    """The endpoints' configuration on the fabric: microsecond timers, the NIC line rate."""
    return simulation.leaf_spine_config(mode, **overrides)


def run_flows(net: Network, flows: list[Flow], cfg: TransportConfig, policies: Policies | None = None,
              until: float = 0.05, seed: int = 0) -> SimulationResult:
    """Run `flows` on `net` (faults scheduled beforehand with `net.at`) until all are delivered and
    acknowledged, or `until`; every host's endpoint uses `policies` (None: MRC's)."""
    flows = [flow if flow.message_size else replace(flow, message_size=MESSAGE_SIZE) for flow in flows]
    return simulation.run_flows(net, flows, cfg, policies, until=until, sample_interval=None, seed=seed)


def pause(net: Network, host: str, start: float, end: float) -> list:
    """From `start` to `end` the process of `host` does not run (a descheduled agent): what arrives
    waits, as in a socket buffer, and its timers fire only at `end`. Returns the held packets' list."""
    return net.hosts[host].pause(start, end)
