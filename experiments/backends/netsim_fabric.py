"""A netsim network built from a `topologies.Topology` and the controller's switch programs.

The in-process network gets exactly the tables the controller would install on BMv2 or the
reference model (`controller.routes.compute_programs`), so both backends forward alike. The
emulated converging control plane re-applies `controller.routes.rerouted_programs` after a delay.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from controller import routes as R
from controller.entries import SwitchProgram
from host_agent.transport.config import PathInfo
from netsim.host import Host
from netsim.link import Link
from netsim.sim import Simulator
from netsim.switch import PortConfig, Switch
from topologies import host_paths
from topologies.model import Topology

HOST_QUEUE_PKTS = 100_000        # a host NIC queues whatever its endpoint emits (pacing keeps it short)
LINK_DELAY_S = 20e-6             # propagation delay of every cable (a veth pair plus a switch hop)
NEVER = 1 << 30                  # a trim threshold no queue reaches: trimming off (drop-tail)


@dataclass
class Cable:
    """Both directions of one topology link."""

    a: str
    b: str
    a_port: int
    b_port: int
    ab: Link
    ba: Link
    fabric: bool                  # True between two switches

    @property
    def up(self) -> bool:
        return self.ab.up

    def set_up(self, up: bool) -> None:
        """Bring both directions up or down."""
        self.ab.set_up(up)
        self.ba.set_up(up)

    def joins(self, x: str, y: str) -> bool:
        return {self.a, self.b} == {x, y}


@dataclass
class Fabric:
    """Hosts, switches and cables of one simulated network built from a topology."""

    topo: Topology
    sim: Simulator
    hosts: dict[str, Host] = field(default_factory=dict)
    switches: dict[str, Switch] = field(default_factory=dict)
    cables: list[Cable] = field(default_factory=list)
    dead_switches: set = field(default_factory=set)

    # --- lookups ------------------------------------------------------------------------------
    def cable(self, x: str, y: str) -> Cable:
        """The cable between nodes `x` and `y`."""
        for c in self.cables:
            if c.joins(x, y):
                return c
        raise KeyError(f"topology {self.topo.name}: no link between {x} and {y}")

    def cables_of(self, node: str) -> list[Cable]:
        return [c for c in self.cables if node in (c.a, c.b)]

    def egress(self, node: str, port: int) -> Link:
        """The link leaving `node` by `port`."""
        for c in self.cables_of(node):
            if c.a == node and c.a_port == port:
                return c.ab
            if c.b == node and c.b_port == port:
                return c.ba
        raise KeyError(f"{node} has no port {port}")

    def fabric_links(self) -> list[Link]:
        """Every switch-to-switch link direction, in topology order."""
        return [link for c in self.cables if c.fabric for link in (c.ab, c.ba)]

    def down_links(self) -> list[tuple[str, str]]:
        """(node, node) pairs of the cables that are down."""
        return [(c.a, c.b) for c in self.cables if not c.up]

    # --- paths ---------------------------------------------------------------------------------
    def mrc_paths(self, src: str, dst: str) -> list[PathInfo]:
        """Every uSID path from host `src` to host `dst` on every plane."""
        return [PathInfo(p.plane, p.plane, p.src_nic.address.packed, p.address.packed)
                for p in host_paths(self.topo, src, dst)]

    def baseline_paths(self, src: str, dst: str) -> list[PathInfo]:
        """The baseline's 'paths': the peer's NIC address on every plane both hosts are on, by plane.

        The baseline uses the first one only (one path per connection, routed by ECMP), exactly as
        the agent process builds it (host_agent/agent.py), so both backends pin the same plane.
        """
        dst_nics = {n.plane: n for n in self.topo.host_nics(dst)}
        return [PathInfo(n.plane, n.plane, n.address.packed, dst_nics[n.plane].address.packed)
                for n in self.topo.host_nics(src) if n.plane in dst_nics]

    def paths(self, src: str, dst: str, mode: str) -> list[PathInfo]:
        return self.mrc_paths(src, dst) if mode == "mrc" else self.baseline_paths(src, dst)

    # --- tables ----------------------------------------------------------------------------------
    def install(self, programs: dict[str, SwitchProgram], trimming: bool = True) -> None:
        """Load every switch's routing, ECMP and port tables from the controller's programs."""
        for name, program in programs.items():
            sw = self.switches[name]
            sw.usid_local = {e.match["dst_usid_prefix"] for e in program.entries_of(R.USID_LOCAL)}
            load_routes(sw, program)
            for e in program.entries_of(R.PORT_CONFIG):
                trim = e.params["trim_threshold"] if trimming else NEVER
                sw.port_config[e.match["port"]] = PortConfig(trim, e.params["ecn_threshold"],
                                                             bool(e.params["host_facing"]))

    def reroute(self, programs: dict[str, SwitchProgram]) -> None:
        """Replace routing and ECMP tables (what the converging control plane rewrites)."""
        for name, program in programs.items():
            load_routes(self.switches[name], program)


def load_routes(sw: Switch, program: SwitchProgram) -> None:
    """Routing (LPM) and ECMP member tables of `program` into the netsim switch `sw`."""
    groups: dict[int, dict[int, int]] = {}
    for e in program.entries_of(R.ECMP_MEMBER):
        groups.setdefault(e.match["group"], {})[e.match["index"]] = e.params["port"]
    sw.ecmp_groups = {g: [members[i] for i in sorted(members)] for g, members in groups.items()}
    sw.routes = {}
    sw._lengths = []
    for e in program.entries_of(R.ROUTING):
        value, length = e.match["dst_addr"]
        if e.action == R.FORWARD:
            sw.add_route(value, length, ("forward", e.params["port"]))
        else:
            sw.add_route(value, length, ("ecmp", e.params["group"]))


def build_fabric(topo: Topology, sim: Simulator, trimming: bool = True) -> Fabric:
    """Hosts, switches and cables of `topo` in `sim`, programmed with the static routes."""
    fab = Fabric(topo, sim)
    for h in topo.hosts:
        host = Host(sim, h.name, h.index)
        host.usid = h.usid
        for nic in topo.host_nics(h.name):
            host.nic_addr[nic.plane] = nic.address.packed
        fab.hosts[h.name] = host
    for s in topo.switches:
        sw = Switch(sim, s.name, s.usid)
        sw.plane = s.plane
        fab.switches[s.name] = sw
    for link in topo.links:
        a, b = _node(fab, link.a), _node(fab, link.b)
        ab = Link(sim, f"{link.a}->{link.b}", link.rate_bps, LINK_DELAY_S,
                  link.queue_depth if isinstance(a, Switch) else HOST_QUEUE_PKTS)
        ba = Link(sim, f"{link.b}->{link.a}", link.rate_bps, LINK_DELAY_S,
                  link.queue_depth if isinstance(b, Switch) else HOST_QUEUE_PKTS)
        ab.connect(b, link.b_port)
        ba.connect(a, link.a_port)
        for node, port, out in ((a, link.a_port, ab), (b, link.b_port, ba)):
            if isinstance(node, Switch):
                node.links[port] = out
            else:
                node.nics[port] = out
        fab.cables.append(Cable(link.a, link.b, link.a_port, link.b_port, ab, ba,
                                isinstance(a, Switch) and isinstance(b, Switch)))
    fab.install(R.compute_programs(topo), trimming)
    return fab


def _node(fab: Fabric, name: str):
    return fab.hosts.get(name) or fab.switches[name]
