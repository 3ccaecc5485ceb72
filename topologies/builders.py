"""Builders of the standard topologies, and `BUILDERS`, the table of them by kind.

Ports are numbered from 1 in link order at every switch; every builder adds host links first, then
links upwards tier by tier, so a leaf's host ports come before its uplinks. Switch order: plane by
plane, tier by tier (leaves first). Link parameters default to the values in topologies/model.py.
"""
from __future__ import annotations

from topologies.addressing import MAX_HOSTS, MAX_SWITCHES
from topologies.model import (DEFAULT_ECN_THRESHOLD, DEFAULT_QUEUE_DEPTH, DEFAULT_RATE_BPS,
                              DEFAULT_TRIM_THRESHOLD, TIER_CORE, TIER_LEAF, TIER_SPINE, Host, Link,
                              Switch, Topology)


class TopologyBuilder:
    """Accumulates hosts, switches and links, numbering switch ports from 1 in link order."""

    def __init__(self, name: str, rate_bps: int = DEFAULT_RATE_BPS, queue_depth: int = DEFAULT_QUEUE_DEPTH,
                 trim_threshold: int = DEFAULT_TRIM_THRESHOLD, ecn_threshold: int = DEFAULT_ECN_THRESHOLD):
        self.name = name
        self.link_params = dict(rate_bps=rate_bps, queue_depth=queue_depth,
                                trim_threshold=trim_threshold, ecn_threshold=ecn_threshold)
        self.hosts: list[Host] = []
        self.switches: list[Switch] = []
        self.links: list[Link] = []
        self._next_port: dict[str, int] = {}

    def add_host(self) -> str:
        if len(self.hosts) >= MAX_HOSTS:          # fail before a huge count exhausts memory
            raise ValueError(f"more than {MAX_HOSTS} hosts: the addressing plan has no uSID for more")
        host = Host(f"h{len(self.hosts) + 1}", len(self.hosts))
        self.hosts.append(host)
        return host.name

    def add_switch(self, tier: int, plane: int = 0) -> str:
        if len(self.switches) >= MAX_SWITCHES:
            raise ValueError(f"more than {MAX_SWITCHES} switches: the addressing plan has no uSID for more")
        switch = Switch(f"s{len(self.switches) + 1}", len(self.switches), tier, plane)
        self.switches.append(switch)
        self._next_port[switch.name] = 1
        return switch.name

    def attach_host(self, host: str, switch: str, **overrides) -> Link:
        """Plug `host`'s NIC of the switch's plane into the switch's next free port."""
        plane = self._switch(switch).plane
        return self._add_link(host, plane, switch, self._take_port(switch), overrides)

    def connect(self, lower: str, upper: str, **overrides) -> Link:
        """Join two switches on their next free ports."""
        return self._add_link(lower, self._take_port(lower), upper, self._take_port(upper), overrides)

    def build(self) -> Topology:
        return Topology(self.name, self.hosts, self.switches, self.links).validate()

    def _add_link(self, a: str, a_port: int, b: str, b_port: int, overrides: dict) -> Link:
        params = {**self.link_params, **{k: v for k, v in overrides.items() if v is not None}}
        link = Link(a, a_port, b, b_port, **params)
        self.links.append(link)
        return link

    def _take_port(self, switch: str) -> int:
        port = self._next_port[switch]
        self._next_port[switch] = port + 1
        return port

    def _switch(self, name: str) -> Switch:
        return next(s for s in self.switches if s.name == name)


def _positive(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def dumbbell(hosts_per_side: int = 2, bottleneck_rate_bps: int | None = None, **link_params) -> Topology:
    """Two leaf switches joined by one bottleneck link, `hosts_per_side` hosts on each."""
    _positive("hosts_per_side", hosts_per_side)
    b = TopologyBuilder(f"dumbbell:{hosts_per_side}", **link_params)
    left, right = b.add_switch(TIER_LEAF), b.add_switch(TIER_LEAF)
    for switch in (left, right):
        for _ in range(hosts_per_side):
            b.attach_host(b.add_host(), switch)
    b.connect(left, right, rate_bps=bottleneck_rate_bps)
    return b.build()


def leaf_spine(leaves: int = 4, spines: int = 2, hosts_per_leaf: int = 2, **link_params) -> Topology:
    """Two-tier Clos: every leaf joined to every spine, `hosts_per_leaf` hosts on each leaf."""
    return multi_plane(1, leaves, spines, hosts_per_leaf,
                       name=f"leafspine:{leaves}x{spines}x{hosts_per_leaf}", **link_params)


def multi_plane(planes: int = 2, leaves: int = 2, spines: int = 2, hosts_per_leaf: int = 2,
                name: str | None = None, **link_params) -> Topology:
    """`planes` independent leaf-spine planes; every host has one NIC on leaf i of every plane."""
    for label, value in (("planes", planes), ("leaves", leaves), ("spines", spines),
                         ("hosts_per_leaf", hosts_per_leaf)):
        _positive(label, value)
    b = TopologyBuilder(name or f"multiplane:{planes}x{leaves}x{spines}x{hosts_per_leaf}", **link_params)
    hosts = [[b.add_host() for _ in range(hosts_per_leaf)] for _ in range(leaves)]
    for plane in range(planes):
        plane_leaves = [b.add_switch(TIER_LEAF, plane) for _ in range(leaves)]
        plane_spines = [b.add_switch(TIER_SPINE, plane) for _ in range(spines)]
        for leaf, leaf_hosts in zip(plane_leaves, hosts):
            for host in leaf_hosts:
                b.attach_host(host, leaf)
        for leaf in plane_leaves:
            for spine in plane_spines:
                b.connect(leaf, spine)
    return b.build()


def fat_tree(k: int = 4, **link_params) -> Topology:
    """Three-tier k-ary fat-tree: k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 cores,
    k^3/4 hosts. Edge switches come first, then aggregation, then core."""
    if not isinstance(k, int) or isinstance(k, bool) or k < 2 or k % 2:
        raise ValueError(f"fat-tree k must be an even integer >= 2, got {k!r}")
    half = k // 2
    b = TopologyBuilder(f"fattree:{k}", **link_params)
    edges = [[b.add_switch(TIER_LEAF) for _ in range(half)] for _ in range(k)]
    aggs = [[b.add_switch(TIER_SPINE) for _ in range(half)] for _ in range(k)]
    cores = [b.add_switch(TIER_CORE) for _ in range(half * half)]
    for pod in range(k):
        for edge in edges[pod]:
            for _ in range(half):
                b.attach_host(b.add_host(), edge)
    for pod in range(k):
        for edge in edges[pod]:
            for agg in aggs[pod]:
                b.connect(edge, agg)
    for pod in range(k):
        for position, agg in enumerate(aggs[pod]):
            for core in cores[position * half:(position + 1) * half]:
                b.connect(agg, core)
    return b.build()


# kind -> (builder, the names of its positional numbers): read by topologies.spec and topologies.yamlfile
BUILDERS = {
    "dumbbell": (dumbbell, ("hosts_per_side",)),
    "leafspine": (leaf_spine, ("leaves", "spines", "hosts_per_leaf")),
    "fattree": (fat_tree, ("k",)),
    "multiplane": (multi_plane, ("planes", "leaves", "spines", "hosts_per_leaf")),
}
