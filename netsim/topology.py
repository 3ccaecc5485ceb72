"""Build a simulated network from a `topologies.Topology`, with the controller's own table entries.

Switch tables come from `controller.routes.compute_programs`, so the simulated switches run
exactly the entries the controller installs on BMv2 or the reference model; paths come from
`topologies.paths.host_paths`.
"""
from __future__ import annotations

from netsim.build import HOST_QUEUE_PKTS, Cable, Network
from netsim.host import Host
from netsim.link import Link
from netsim.sim import Simulator
from netsim.switch import Switch
from pipeline_contract.names import TRIM_NEVER


def from_topology(topo, sim: Simulator | None = None, delay: float = 1e-6, rate_bps: float | None = None,
                  trimming: bool = True) -> Network:
    """A Network of `topo`: one Link per direction of every topology link, `delay` seconds each.

    `rate_bps` overrides every link's rate (the topology's defaults suit the Python switch
    model; the simulator is happy with faster links). Queue depths and thresholds come from
    the topology's links, tables from the controller; without `trimming`, no port ever trims
    (drop-tail).
    """
    from controller.routes import compute_programs
    from topologies.paths import host_paths

    sim = sim or Simulator()
    net = Network(sim, planes=list(topo.planes), topo=topo)
    for h in topo.hosts:
        host = Host(sim, h.name, h.index)
        host.usid = h.usid
        for nic in topo.host_nics(h.name):
            host.nic_addr[nic.plane] = nic.address.packed
        net.hosts[h.name] = host
    for s in topo.switches:
        sw = Switch(sim, s.name, s.usid)
        sw.plane = s.plane
        net.switches[s.name] = sw
    for link in topo.links:
        a, b = _node(net, link.a), _node(net, link.b)
        rate = rate_bps or link.rate_bps
        plane = a.plane if isinstance(a, Switch) else b.plane
        depth_a = link.queue_depth if isinstance(a, Switch) else HOST_QUEUE_PKTS
        depth_b = link.queue_depth if isinstance(b, Switch) else HOST_QUEUE_PKTS
        ab = Link(sim, f"{link.a}->{link.b}", rate, delay, depth_a)
        ba = Link(sim, f"{link.b}->{link.a}", rate, delay, depth_b)
        ab.connect(b, link.b_port)
        ba.connect(a, link.a_port)
        for node, port, egress in ((a, link.a_port, ab), (b, link.b_port, ba)):
            if isinstance(node, Switch):
                node.links[port] = egress
            else:
                node.nics[port] = egress
        net.cables.append(Cable(link.a, link.b, plane, ab, ba, isinstance(a, Switch) and isinstance(b, Switch)))
    for name, program in compute_programs(topo).items():
        net.switches[name].install(program.entries)
        if not trimming:
            for config in net.switches[name].port_config.values():
                config.trim_threshold = TRIM_NEVER

    def path_finder(src: str, dst: str):
        return [(p.plane, list(p.switches), p.address.packed) for p in host_paths(topo, src, dst)]

    net.path_finder = path_finder
    return net


def _node(net: Network, name: str):
    return net.hosts.get(name) or net.switches[name]
