"""Simulated networks and their link defaults, written once: a topology with the controller's routes,
and the small fast leaf-spine (with the transport timers that suit it) of the tests and the labs."""
from __future__ import annotations

from controller.routes import compute_programs
from host_agent.transport import TransportConfig
from netsim import Network, Simulator, from_topology
from topologies.builders import multi_plane
from topologies.model import Topology

CABLE_DELAY_S = 20e-6            # a scenario's cable: a veth pair plus a switch hop (its `link.delay_s` overrides)

# The leaf-spine of the tests and the labs: 10 Gbit/s links of 1 us, shallow queues that trim early ...
LEAF_SPINE_LINK = dict(rate_bps=10_000_000_000, queue_depth=64, trim_threshold=16, ecn_threshold=8)
LEAF_SPINE_DELAY_S = 1e-6
# ... and the transport's timers for it: microseconds (the defaults suit Mininet's millisecond RTTs)
LEAF_SPINE_TIMERS = dict(qp_timeout=6, initial_rtt=10e-6, ack_delay=5e-6, probe_interval=50e-6, line_rate_bps=10e9)


def network(topo: Topology, sim: Simulator | None = None, *, delay: float = CABLE_DELAY_S,
            rate_bps: float | None = None, trimming: bool = True) -> Network:
    """`topo` on netsim (in `sim`, default a new Simulator of seed 0), its switches running the
    controller's static routes, `delay` seconds per cable; `rate_bps` overrides every link's rate;
    without `trimming` no port trims (drop-tail)."""
    return from_topology(topo, compute_programs(topo), sim or Simulator(), delay=delay, rate_bps=rate_bps,
                         trimming=trimming)


def leaf_spine_fabric(seed: int = 0, planes: int = 1, leaves: int = 2, spines: int = 2, hosts_per_leaf: int = 2,
               **link) -> Network:
    """The tests' and labs' leaf-spine (`topologies.builders.multi_plane`): `planes` x `leaves` x
    `spines` of LEAF_SPINE_LINK links (`link` overrides them) and 1 us cables, simulator seed `seed`.

    Hosts h1.. fill the leaves in order; per plane the leaves come first (s1, s2, ...), then the spines."""
    topo = multi_plane(planes, leaves, spines, hosts_per_leaf, **{**LEAF_SPINE_LINK, **link})
    return network(topo, Simulator(seed), delay=LEAF_SPINE_DELAY_S)


def leaf_spine_config(mode: str = "mrc", **overrides) -> TransportConfig:
    """The transport's configuration on `leaf_spine_fabric`: microsecond timers, the NIC line rate, `overrides`."""
    return TransportConfig(mode=mode, **{**LEAF_SPINE_TIMERS, **overrides})
