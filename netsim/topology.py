"""Build a simulated network from a `topologies.Topology` and the switch programs it is given.

The programs are the controller's (`controller.routes.compute_programs(topo)`), so the simulated
switches run exactly the entries the controller installs on BMv2 or the reference model; paths
come from `topologies.paths`.
"""
from __future__ import annotations

from netsim.host import SimHost
from netsim.link import SimLink
from netsim.network import Cable, Network
from netsim.sim import Simulator
from netsim.switch import SimSwitch
from pipeline_contract.names import TRIM_NEVER

HOST_QUEUE_PKTS = 100_000       # a host NIC queues whatever its endpoint emits (pacing keeps it short)


def from_topology(topo, programs: dict, sim: Simulator | None = None, delay: float = 1e-6,
                  rate_bps: float | None = None, trimming: bool = True) -> Network:
    """A Network of `topo`, its switches running `programs` ({switch name: program with `.entries`}).

    One link per direction of every topology link, `delay` seconds each. `rate_bps` overrides
    every link's rate (the topology's defaults suit the Python switch model; the simulator is happy
    with faster links). Queue depths come from the topology's links, tables and thresholds from the
    programs; without `trimming`, no port ever trims (drop-tail).
    """
    missing = [s.name for s in topo.switches if s.name not in programs]
    if missing:
        raise ValueError(f"topology {topo.name}: no switch program for {', '.join(missing)}")
    sim = sim or Simulator()
    net = Network(sim, topo)
    _add_hosts(net, topo)
    for s in topo.switches:
        net.switches[s.name] = SimSwitch(sim, s.name, s.usid, s.plane)
    for link in topo.links:
        _add_cable(net, link, rate_bps or link.rate_bps, delay)
    for name, program in programs.items():
        if name not in net.switches:
            raise ValueError(f"topology {topo.name}: a switch program names {name}, which is not a switch")
        net.switches[name].install(program.entries)
        if not trimming:
            for config in net.switches[name].port_config.values():
                config.trim_threshold = TRIM_NEVER
    return net


def _add_hosts(net: Network, topo) -> None:
    for h in topo.hosts:
        host = SimHost(net.sim, h.name, h.index)
        host.usid = h.usid
        for nic in topo.host_nics(h.name):
            host.nic_addr[nic.plane] = nic.address.packed
        net.hosts[h.name] = host


def _add_cable(net: Network, link, rate: float, delay: float) -> None:
    """Both directions of topology link `link`, plugged into its ends' ports."""
    a, b = _node(net, link.a), _node(net, link.b)
    ab = SimLink(net.sim, f"{link.a}->{link.b}", rate, delay, _depth(a, link))
    ba = SimLink(net.sim, f"{link.b}->{link.a}", rate, delay, _depth(b, link))
    ab.connect(b, link.b_port)
    ba.connect(a, link.a_port)
    for node, port, egress in ((a, link.a_port, ab), (b, link.b_port, ba)):
        node.plug(port, egress)
    both_switches = isinstance(a, SimSwitch) and isinstance(b, SimSwitch)
    plane = a.plane if isinstance(a, SimSwitch) else b.plane
    net.cables.append(Cable(link.a, link.b, plane, ab, ba, both_switches))


def _depth(node, link) -> int:
    """Egress queue depth of `node`'s end of `link`: the topology's for a switch, unbounded for a NIC."""
    return link.queue_depth if isinstance(node, SimSwitch) else HOST_QUEUE_PKTS


def _node(net: Network, name: str):
    return net.hosts.get(name) or net.switches[name]
