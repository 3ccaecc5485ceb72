"""A simulated network and its verbs: the cables, the switches of a uSID path, faults and reroutes.

`netsim.from_topology` builds one; experiments and tests act on it only through these verbs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from netsim.host import SimHost
from netsim.link import SimLink
from netsim.sim import Simulator
from netsim.switch import SimSwitch
from pipeline_contract.names import ROUTE_TABLES
from wire import constants


@dataclass
class Cable:
    """Both directions between two nodes on one plane."""

    a: str
    b: str
    plane: int
    ab: SimLink
    ba: SimLink
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
    """Hosts, switches and cables of one simulated fabric built from `topo`."""

    sim: Simulator
    topo: object                        # the topologies.Topology it was built from
    hosts: dict[str, SimHost] = field(default_factory=dict)
    switches: dict[str, SimSwitch] = field(default_factory=dict)
    cables: list[Cable] = field(default_factory=list)

    # --- what is where ---------------------------------------------------------------------------
    def cable(self, a: str, b: str) -> Cable:
        """The cable between nodes `a` and `b` (in either order)."""
        for c in self.cables:
            if {c.a, c.b} == {a, b}:
                return c
        raise KeyError(f"no cable between {a} and {b}")

    def cables_of(self, node: str) -> list[Cable]:
        """The cables of `node`, in creation order."""
        return [c for c in self.cables if node in (c.a, c.b)]

    def link(self, a: str, b: str) -> SimLink:
        """The direction a -> b of the cable between them."""
        c = self.cable(a, b)
        return c.ab if c.a == a else c.ba

    def port(self, switch: str, neighbour: str) -> int:
        """The port of `switch` that faces `neighbour`."""
        link = self.link(switch, neighbour)
        return next(p for p, l in self.switches[switch].links.items() if l is link)

    def fabric_links(self) -> list[SimLink]:
        """Every switch-to-switch link direction, in creation order."""
        return [link for c in self.cables if c.fabric for link in (c.ab, c.ba)]

    def down_links(self) -> list[tuple[str, str]]:
        """(node, node) pairs of the cables that are down."""
        return [(c.a, c.b) for c in self.cables if not c.up]

    # --- paths -------------------------------------------------------------------------------------
    def path_of_address(self, plane: int, dst: bytes) -> list[str]:
        """Switch names of the uSID path address `dst` (a path of `topologies.paths.host_paths`)."""
        by_usid = {sw.usid: name for name, sw in self.switches.items()}
        value = int.from_bytes(dst, "big")
        names = []
        for i in range(constants.MAX_USIDS):
            u = (value >> (80 - 16 * i)) & 0xFFFF
            if u in by_usid:
                names.append(by_usid[u])
        return names

    # --- the end of it -----------------------------------------------------------------------------
    def close(self) -> None:
        """End the network once its run is over: its simulator drops the events still scheduled
        and its links and hosts let go of what refers back to them (their far ends, their events,
        the hosts' endpoints and handlers), so that reference counting frees the network, and what
        only it holds, as soon as the last reference to it goes: the cyclic garbage collector need
        not look for it. Its counters and tables can still be read; it runs nothing after."""
        self.sim.close()
        for cable in self.cables:
            cable.ab.close()
            cable.ba.close()
        for host in self.hosts.values():
            host.close()

    # --- acting on it --------------------------------------------------------------------------------
    def at(self, t: float, fn, *args) -> None:
        """Schedule an action (a fault, a repair) at time `t`."""
        self.sim.at(t, fn, *args)

    def reroute(self, programs) -> None:
        """Replace every switch's routing and ECMP tables by those of `programs` ({switch: SwitchProgram}),
        what a converging control plane rewrites; other tables stay."""
        for name, program in programs.items():
            sw = self.switches[name]
            sw.clear_routes()
            sw.install(e for e in program.entries if e.table in ROUTE_TABLES)
