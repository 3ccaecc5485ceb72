"""Placement of a topology's nodes on the servers of a cluster, keeping links between servers few.

A link between two servers is a tunnel (a GRE tunnel in the Mininet cluster mode): it costs CPU per
packet on both servers and adds delay, so `place` keeps together what talks most:

1. The top tier of switches (spines of a leaf-spine, cores of a fat-tree) is set aside; what stays
   connected below it is a *group*: a leaf with its hosts, a fat-tree pod with its hosts, the
   leaves of one index in every plane of a multi-plane fabric with the hosts they share (with one
   tier of switches, a switch with its hosts).
2. Groups go to servers largest first, each to the server with the least work per core so far
   (work: one process per host and per switch).
3. The top-tier switches are spread the same way, each to the least-loaded server.

Nodes pinned by the user (the cluster file's `placement`) stay where they are pinned; a group with
pinned nodes goes where most of its pins are. `Placement.describe()` is what a run prints before it
starts: nodes per server and how many links cross servers.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from topologies.model import Topology


class PlacementError(ValueError):
    """A placement that cannot be made: a pinned node or server that does not exist."""


@dataclass(frozen=True)
class Placement:
    """Which server runs each node of a topology."""

    topology: Topology
    servers: tuple[str, ...]
    server_of: dict

    def nodes_on(self, server: str) -> list[str]:
        """The nodes `server` runs, hosts first, in topology order."""
        order = [h.name for h in self.topology.hosts] + [s.name for s in self.topology.switches]
        return [n for n in order if self.server_of[n] == server]

    def crossing_links(self) -> list:
        """The links whose two ends run on different servers."""
        return [link for link in self.topology.links if self.server_of[link.a] != self.server_of[link.b]]

    def processes(self) -> Counter:
        """Processes per server: one per host (its agent) and one per switch."""
        return Counter(self.server_of[n] for n in self.server_of)

    def describe(self) -> str:
        """Lines for the user: per server its node count and nodes, then the crossing links."""
        lines = []
        processes = self.processes()
        for server in self.servers:
            names = self.nodes_on(server)
            shown = ", ".join(names[:12]) + (f", ... ({len(names) - 12} more)" if len(names) > 12 else "")
            lines.append(f"  {server}: {processes[server]} nodes: {shown or '(none)'}")
        crossing = self.crossing_links()
        lines.append(f"  links crossing servers: {len(crossing)} of {len(self.topology.links)}")
        return "\n".join(lines)


def place(topology: Topology, servers: list[str], cores: dict[str, int] | None = None,
          pinned: dict[str, str] | None = None) -> Placement:
    """Place every node of `topology` on one of `servers` (weighted by `cores`, default 1 each),
    honouring `pinned` (node -> server)."""
    if not servers:
        raise PlacementError("no servers to place the topology on")
    if len(set(servers)) != len(servers):
        raise PlacementError(f"servers named twice: {sorted(s for s, n in Counter(servers).items() if n > 1)}")
    cores = {s: max(1, int((cores or {}).get(s, 1))) for s in servers}
    pinned = dict(pinned or {})
    names = {h.name for h in topology.hosts} | {s.name for s in topology.switches}
    for node, server in pinned.items():
        if node not in names:
            raise PlacementError(f"placement: {node!r} is not a node of {topology.name}")
        if server not in cores:
            raise PlacementError(f"placement: {node!r} is pinned to {server!r}, which is not a server "
                                 f"of the cluster ({', '.join(servers)})")
    load: Counter = Counter()
    server_of: dict[str, str] = {}

    def least_loaded() -> str:
        return min(servers, key=lambda s: ((load[s] + 1) / cores[s], servers.index(s)))

    top, groups = _groups(topology)
    for group in sorted(groups, key=lambda g: (-len(g), sorted(g)[0])):
        pins = Counter(pinned[n] for n in group if n in pinned)
        target = pins.most_common(1)[0][0] if pins else least_loaded()
        for node in sorted(group):
            server_of[node] = pinned.get(node, target)
            load[server_of[node]] += 1
    for switch in top:
        server_of[switch] = pinned.get(switch) or least_loaded()
        load[server_of[switch]] += 1
    return Placement(topology, tuple(servers), server_of)


def _groups(topology: Topology) -> tuple[list[str], list[set[str]]]:
    """(top-tier switches, the groups connected below them). With one tier of switches (a
    dumbbell), nothing is top tier and each switch with its hosts is a group."""
    tiers = topology.tiers()
    one_tier = len(tiers) == 1
    top = [] if one_tier else [s.name for s in topology.switches if s.tier == tiers[-1]]
    below = {h.name for h in topology.hosts} | {s.name for s in topology.switches} - set(top)

    def joined(a: str, b: str) -> bool:
        return b in below and not (one_tier and topology.is_switch(a) and topology.is_switch(b))

    seen: set[str] = set()
    groups = []
    for start in sorted(below):
        if start in seen:
            continue
        group, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node in group:
                continue
            group.add(node)
            todo += [end.node for end in topology.neighbors(node) if joined(node, end.node) and end.node not in group]
        seen |= group
        groups.append(group)
    return top, groups
