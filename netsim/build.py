"""Build a network: switches, hosts, links, tables and paths.

This module is the one adapter between a topology description and the simulator. Today it
builds multi-plane leaf-spine fabrics itself (`leaf_spine`), following the addressing plan of
docs/design.md; when `topologies` offers its Topology and path API, a `from_topology` builder
belongs here too, and nothing else in netsim changes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from wire import constants as C
from host_agent.transport.config import PathInfo
from netsim.host import Host
from netsim.link import Link
from netsim.sim import Simulator
from netsim.switch import PortConfig, Switch
from pipeline_contract.names import ROUTE_TABLES

HOST_QUEUE_PKTS = 100_000       # a host NIC queues whatever its endpoint emits (pacing keeps it short)


def locator(plane: int) -> int:
    """32-bit locator of `plane`: fc00:<plane>."""
    return (C.LOCATOR_PREFIX << 16) | plane


def usid_address(plane: int, usids: list[int]) -> bytes:
    """fc00:<plane>:<usid>:...:: as 16 bytes."""
    if len(usids) > C.MAX_USIDS:
        raise ValueError(f"uSID path of {len(usids)} uSIDs is longer than {C.MAX_USIDS}")
    value = locator(plane) << 96
    for i, u in enumerate(usids):
        value |= u << (80 - 16 * i)
    return value.to_bytes(16, "big")


def prefix48(plane: int, usid: int) -> int:
    """The 128-bit value of the /48 prefix fc00:<plane>:<usid>::."""
    return (locator(plane) << 96) | (usid << 80)


@dataclass
class Cable:
    """Both directions between two nodes on one plane."""

    a: str
    b: str
    plane: int
    ab: Link
    ba: Link
    fabric: bool = False          # True between two switches

    @property
    def up(self) -> bool:
        """True while the cable carries packets."""
        return self.ab.up

    def set_up(self, up: bool) -> None:
        """Bring both directions up or down."""
        self.ab.set_up(up)
        self.ba.set_up(up)


@dataclass
class Network:
    """Hosts, switches and cables of one simulated fabric, plus the paths between hosts."""

    sim: Simulator
    hosts: dict[str, Host] = field(default_factory=dict)
    switches: dict[str, Switch] = field(default_factory=dict)
    cables: list[Cable] = field(default_factory=list)
    host_leaf: dict[tuple[str, int], str] = field(default_factory=dict)     # (host, plane) -> leaf
    spines: dict[int, list[str]] = field(default_factory=dict)              # plane -> spine names
    planes: list[int] = field(default_factory=list)
    path_finder: object = None          # (src, dst) -> [(plane, switch names, address)], when not leaf_spine
    topo: object = None                 # the topologies.Topology it was built from (from_topology)

    def cable(self, a: str, b: str) -> Cable:
        """The cable between nodes `a` and `b` (in either order)."""
        for c in self.cables:
            if {c.a, c.b} == {a, b}:
                return c
        raise KeyError(f"no cable between {a} and {b}")

    def cables_of(self, node: str) -> list[Cable]:
        """The cables of `node`, in creation order."""
        return [c for c in self.cables if node in (c.a, c.b)]

    def fabric_links(self) -> list[Link]:
        """Every switch-to-switch link direction, in creation order."""
        return [link for c in self.cables if c.fabric for link in (c.ab, c.ba)]

    def down_links(self) -> list[tuple[str, str]]:
        """(node, node) pairs of the cables that are down."""
        return [(c.a, c.b) for c in self.cables if not c.up]

    def reroute(self, programs) -> None:
        """Replace every switch's routing and ECMP tables by those of `programs` ({switch: SwitchProgram}),
        what a converging control plane rewrites; other tables stay."""
        for name, program in programs.items():
            sw = self.switches[name]
            sw.clear_routes()
            sw.install(e for e in program.entries if e.table in ROUTE_TABLES)

    def link(self, a: str, b: str) -> Link:
        """The direction a -> b of the cable between them."""
        c = self.cable(a, b)
        return c.ab if c.a == a else c.ba

    def port(self, switch: str, neighbour: str) -> int:
        """The port of `switch` that faces `neighbour`."""
        link = self.link(switch, neighbour)
        return next(p for p, l in self.switches[switch].links.items() if l is link)

    def mrc_paths(self, src: str, dst: str) -> list[PathInfo]:
        """Every uSID path from host `src` to host `dst`, plane by plane."""
        if self.path_finder is not None:
            return [PathInfo(plane, plane, self.hosts[src].nic_addr[plane], address)
                    for plane, _, address in self.path_finder(src, dst)]
        out = []
        for plane in self.planes:
            for names in self.switch_paths(src, dst, plane):
                usids = [self.switches[n].usid for n in names] + [self.hosts[dst].usid]
                out.append(PathInfo(plane, plane, self.hosts[src].nic_addr[plane], usid_address(plane, usids)))
        return out

    def switch_paths(self, src: str, dst: str, plane: int) -> list[list[str]]:
        """Switch names along each path from `src` to `dst` on `plane`."""
        la, lb = self.host_leaf[(src, plane)], self.host_leaf[(dst, plane)]
        if la == lb:
            return [[la]]
        return [[la, s, lb] for s in self.spines[plane]]

    def baseline_path(self, src: str, dst: str, plane: int = 0) -> list[PathInfo]:
        """The baseline's single 'path': the peer NIC address on `plane`, routed by ECMP."""
        return [PathInfo(plane, plane, self.hosts[src].nic_addr[plane], self.hosts[dst].nic_addr[plane])]

    def baseline_paths(self, src: str, dst: str) -> list[PathInfo]:
        """The peer's NIC address on every plane both hosts are on, by plane: the baseline's 'paths'
        as the agent process builds them (host_agent/agent.py); the baseline sends on the first."""
        dst_nics = self.hosts[dst].nic_addr
        return [PathInfo(plane, plane, addr, dst_nics[plane])
                for plane, addr in sorted(self.hosts[src].nic_addr.items()) if plane in dst_nics]

    def paths(self, src: str, dst: str, mode: str) -> list[PathInfo]:
        """Paths for a connection in `mode` ("mrc" or "roce")."""
        return self.mrc_paths(src, dst) if mode == "mrc" else self.baseline_path(src, dst)

    def path_of_address(self, plane: int, dst: bytes) -> list[str]:
        """Switch names of the uSID path address `dst` (inverse of `mrc_paths`)."""
        by_usid = {sw.usid: name for name, sw in self.switches.items()}
        value = int.from_bytes(dst, "big")
        names = []
        for i in range(C.MAX_USIDS):
            u = (value >> (80 - 16 * i)) & 0xFFFF
            if u in by_usid:
                names.append(by_usid[u])
        return names

    def at(self, t: float, fn, *args) -> None:
        """Schedule an action (a fault, a repair) at time `t`."""
        self.sim.at(t, fn, *args)


def leaf_spine(sim: Simulator, hosts: int = 4, planes: int = 1, leaves: int = 2, spines: int = 2,
               rate_bps: float = 10e9, delay: float = 1e-6, queue_pkts: int = 64,
               trim_pkts: int = 16, ecn_pkts: int = 8, host_rate_bps: float | None = None) -> Network:
    """A multi-plane two-tier fabric: per plane, `leaves` leaves each under every one of `spines` spines.

    Hosts are spread over the leaves in order (host i on leaf i % leaves) and have one NIC per
    plane. Switch i (creation order: per plane, leaves then spines) has uSID 0x0100 + i; host i has
    uSID 0x1000 + i. Every switch port trims at `trim_pkts` and marks ECN at `ecn_pkts`
    (not on host-facing ports).
    """
    net = Network(sim, planes=list(range(planes)))
    host_rate = host_rate_bps or rate_bps
    for h in range(hosts):
        host = Host(sim, f"h{h}", h)
        host.usid = C.HOST_USID_BASE + h
        for p in range(planes):
            host.nic_addr[p] = usid_address(p, [host.usid])
        net.hosts[host.name] = host
    index = 0
    for p in range(planes):
        names = []
        for kind, count in (("leaf", leaves), ("spine", spines)):
            for i in range(count):
                sw = Switch(sim, f"p{p}{kind}{i}", C.SWITCH_USID_BASE + index)
                sw.plane = p
                sw.usid_local.add(prefix48(p, sw.usid) >> 80)
                index += 1
                net.switches[sw.name] = sw
                names.append(sw.name)
        net.spines[p] = [n for n in names if "spine" in n]
        leaf_names = [n for n in names if "leaf" in n]

        def wire(a, a_port, b, b_port, rate, host_facing_a=False, host_facing_b=False):
            ab = Link(sim, f"{a.name}->{b.name}", rate, delay, queue_pkts if isinstance(a, Switch) else HOST_QUEUE_PKTS)
            ba = Link(sim, f"{b.name}->{a.name}", rate, delay, queue_pkts if isinstance(b, Switch) else HOST_QUEUE_PKTS)
            ab.connect(b, b_port)
            ba.connect(a, a_port)
            for node, port, link, facing in ((a, a_port, ab, host_facing_b), (b, b_port, ba, host_facing_a)):
                if isinstance(node, Switch):
                    node.links[port] = link
                    node.port_config[port] = PortConfig(trim_pkts, ecn_pkts, facing)
                else:
                    node.nics[port] = link
            net.cables.append(Cable(a.name, b.name, p, ab, ba, isinstance(a, Switch) and isinstance(b, Switch)))

        next_port = {n: 1 for n in names}

        def port_of(name):
            port = next_port[name]
            next_port[name] += 1
            return port

        for h in range(hosts):
            host = net.hosts[f"h{h}"]
            leaf = net.switches[leaf_names[h % leaves]]
            net.host_leaf[(host.name, p)] = leaf.name
            lp = port_of(leaf.name)
            wire(host, p, leaf, lp, host_rate, host_facing_a=True)
            leaf.add_route(prefix48(p, host.usid), 48, ("forward", lp))
        for ln in leaf_names:
            leaf = net.switches[ln]
            uplinks = []
            for sn in net.spines[p]:
                spine = net.switches[sn]
                lp, sp = port_of(ln), port_of(sn)
                wire(leaf, lp, spine, sp, rate_bps)
                uplinks.append(lp)
                leaf.add_route(prefix48(p, spine.usid), 48, ("forward", lp))
                spine.add_route(prefix48(p, leaf.usid), 48, ("forward", sp))
                for h in range(hosts):
                    if net.host_leaf[(f"h{h}", p)] == ln:
                        spine.add_route(prefix48(p, C.HOST_USID_BASE + h), 48, ("forward", sp))
            leaf.ecmp_groups[1] = uplinks
            for h in range(hosts):
                if net.host_leaf[(f"h{h}", p)] != ln:
                    leaf.add_route(prefix48(p, C.HOST_USID_BASE + h), 48, ("ecmp", 1))
    return net
