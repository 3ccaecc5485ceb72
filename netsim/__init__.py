"""A deterministic discrete-event network for the sans-IO MRC transport.

Links with rate, delay and strict two-priority egress queues; switches that follow the
pipeline contract of docs/design.md on decoded packet objects (uSID shift-and-forward, LPM,
ECMP, trimming, ECN, faults); hosts that drive a `host_agent.transport.Endpoint`.
Everything is seeded: the same scenario gives the same result.
"""
from netsim.sim import Simulator
from netsim.link import Link
from netsim.switch import Switch
from netsim.host import Host
from netsim.build import Network, leaf_spine
from netsim.scenario import Transfer, TransferResult, ScenarioResult, run_transfers
from netsim.topology import from_topology

__all__ = ["Host", "Link", "Network", "ScenarioResult", "Simulator", "Switch", "Transfer", "TransferResult",
           "from_topology", "leaf_spine", "run_transfers"]
