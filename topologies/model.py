"""Plain description of a testbed network: hosts, switches, links. Independent of Mininet.

A `Topology` is immutable once built; its lists are in a deterministic order, and the position of
a host or switch in its list is its index (which fixes its uSID, see topologies/addressing.py).
Hosts are named ``h1, h2, ...`` and switches ``s1, s2, ...`` (name number = index + 1).

Link defaults (`DEFAULT_RATE_BPS` and friends below) are sized for the pure-Python switch model:
20 Mbit/s is about 2.5k packets/s of 1 KB, which one Python process forwards comfortably; a queue of
64 packets, trimming from 8 queued packets and ECN marking from 4 give NDP-like short queues.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import NamedTuple, Optional, Union

from topologies import addressing

# --- Link defaults: the one place they are set ----------------------------------------------
DEFAULT_RATE_BPS = 20_000_000      # 20 Mbit/s: ~2.5k pkt/s of 1 KB, forwardable by the Python model
DEFAULT_QUEUE_DEPTH = 64           # packets; tail-drop above this
DEFAULT_TRIM_THRESHOLD = 8         # packets queued (low priority) from which trimmable data is trimmed
DEFAULT_ECN_THRESHOLD = 4          # packets queued from which ECT packets may be marked CE

# --- Switch tiers ----------------------------------------------------------------------------
TIER_LEAF = 0     # leaf / edge / ToR: hosts attach here
TIER_SPINE = 1    # spine / aggregation
TIER_CORE = 2     # core (3-tier fat-tree)
TIER_NAMES = {TIER_LEAF: "leaf", TIER_SPINE: "spine", TIER_CORE: "core"}

_HOST_NAME = re.compile(r"h(\d+)")
_SWITCH_NAME = re.compile(r"s(\d+)")


class TopologyError(ValueError):
    """An inconsistent topology. `kind` ('host', 'switch', 'link', 'topology') and `index` say
    which element is at fault (index into the topology's list of that kind, or None)."""

    def __init__(self, message: str, kind: str = "topology", index: Optional[int] = None):
        super().__init__(message)
        self.kind = kind
        self.index = index


@dataclass(frozen=True)
class Host:
    """An end host; `index` is its 0-based position in the topology."""

    name: str
    index: int

    @property
    def usid(self) -> int:
        return addressing.host_usid(self.index)


@dataclass(frozen=True)
class Switch:
    """A switch of one plane and tier; `usid` is derived from `index` (addressing plan)."""

    name: str
    index: int
    tier: int = TIER_LEAF
    plane: int = 0
    usid: int = -1          # -1: derive from index

    def __post_init__(self):
        if self.usid == -1 and self.index >= 0:
            object.__setattr__(self, "usid", addressing.switch_usid(self.index))


@dataclass(frozen=True)
class Link:
    """A full-duplex link between node `a` port `a_port` and node `b` port `b_port`.

    A host end's port is the plane (NIC) number; a switch end's port is its P4 port (from 1).
    Queue depth and thresholds are in packets and apply to the egress queue at both ends. ECN
    marks with a probability that rises from 0 at `ecn_threshold` to 1 at `ecn_max_threshold`;
    unset (None), the top is `ecn_threshold` itself: a step, every ECT packet marked from there.
    """

    a: str
    a_port: int
    b: str
    b_port: int
    rate_bps: int = DEFAULT_RATE_BPS
    queue_depth: int = DEFAULT_QUEUE_DEPTH
    trim_threshold: int = DEFAULT_TRIM_THRESHOLD
    ecn_threshold: int = DEFAULT_ECN_THRESHOLD
    ecn_max_threshold: Optional[int] = None

    @property
    def ecn_ramp_top(self) -> int:
        """The queue depth from which every ECT packet is marked (the P4 parameter ecn_max_threshold)."""
        return self.ecn_threshold if self.ecn_max_threshold is None else self.ecn_max_threshold

    @property
    def label(self) -> str:
        """Readable name for messages: a:port-b:port."""
        return f"{self.a}:{self.a_port}-{self.b}:{self.b_port}"

    def has(self, node: str) -> bool:
        return node in (self.a, self.b)

    def port_of(self, node: str) -> int:
        """The port of this link at `node`."""
        if node == self.a:
            return self.a_port
        if node == self.b:
            return self.b_port
        raise KeyError(f"link {self.label} does not touch {node}")

    def other(self, node: str) -> "LinkEnd":
        """The far end of this link seen from `node`."""
        if node == self.a:
            return LinkEnd(self.b, self.b_port)
        if node == self.b:
            return LinkEnd(self.a, self.a_port)
        raise KeyError(f"link {self.label} does not touch {node}")

    def joins(self, x: str, y: str) -> bool:
        """True when this link joins nodes x and y (either direction)."""
        return {self.a, self.b} == {x, y}


class LinkEnd(NamedTuple):
    """One end of a link: node name and port."""

    node: str
    port: int


@dataclass(frozen=True)
class HostNic:
    """A host's interface on one plane and where it plugs in."""

    host: str
    plane: int
    switch: str
    switch_port: int
    address: ipaddress.IPv6Address
    mac: str
    ifname: str


Node = Union[Host, Switch]


@dataclass(frozen=True)
class Topology:
    """Hosts, switches and links in a deterministic order, with small query methods."""

    name: str
    hosts: tuple = ()
    switches: tuple = ()
    links: tuple = ()
    _nodes: dict = field(init=False, repr=False, compare=False)
    _links_by_node: dict = field(init=False, repr=False, compare=False)
    _nics: dict = field(init=False, repr=False, compare=False)     # host -> its NICs, made when first asked

    def __post_init__(self):
        object.__setattr__(self, "hosts", tuple(self.hosts))
        object.__setattr__(self, "switches", tuple(self.switches))
        object.__setattr__(self, "links", tuple(self.links))
        nodes: dict[str, Node] = {}
        for node in self.hosts + self.switches:
            nodes.setdefault(node.name, node)
        by_node: dict[str, list[Link]] = {}
        for link in self.links:
            by_node.setdefault(link.a, []).append(link)
            if link.b != link.a:
                by_node.setdefault(link.b, []).append(link)
        object.__setattr__(self, "_nodes", nodes)
        object.__setattr__(self, "_links_by_node", by_node)
        object.__setattr__(self, "_nics", {})

    # --- lookups --------------------------------------------------------------------------
    def node(self, name: str) -> Node:
        """The host or switch called `name`."""
        try:
            return self._nodes[name]
        except KeyError:
            raise KeyError(f"topology {self.name!r} has no node {name!r}") from None

    def host(self, name: str) -> Host:
        node = self.node(name)
        if not isinstance(node, Host):
            raise KeyError(f"{name!r} is a switch, not a host")
        return node

    def switch(self, name: str) -> Switch:
        node = self.node(name)
        if not isinstance(node, Switch):
            raise KeyError(f"{name!r} is a host, not a switch")
        return node

    def is_host(self, name: str) -> bool:
        return isinstance(self._nodes.get(name), Host)

    def is_switch(self, name: str) -> bool:
        return isinstance(self._nodes.get(name), Switch)

    def links_of(self, node: str) -> list[Link]:
        """Links touching `node`, in topology order."""
        return list(self._links_by_node.get(node, ()))

    def ports_of(self, node: str) -> list[int]:
        """Port numbers used at `node`, ascending."""
        return sorted(link.port_of(node) for link in self.links_of(node))

    def link_at(self, node: str, port: int) -> Link:
        """The link plugged into `node` at `port`."""
        for link in self.links_of(node):
            if link.port_of(node) == port:
                return link
        raise KeyError(f"{node} has no link on port {port}")

    def neighbor(self, node: str, port: int) -> LinkEnd:
        """What `node`'s `port` is connected to: (node name, port) at the far end."""
        return self.link_at(node, port).other(node)

    def neighbors(self, node: str) -> list[LinkEnd]:
        """Far ends of every link of `node`, in port order."""
        return [self.neighbor(node, port) for port in self.ports_of(node)]

    def link_between(self, x: str, y: str) -> Link:
        """The link joining x and y."""
        for link in self.links_of(x):
            if link.joins(x, y):
                return link
        raise KeyError(f"no link between {x} and {y}")

    def port_towards(self, node: str, neighbor: str) -> int:
        """The port of `node` on its link to `neighbor`."""
        return self.link_between(node, neighbor).port_of(node)

    def host_nics(self, host: str) -> list[HostNic]:
        """The NICs of `host`, one per plane it is attached to, by plane (made once per host: a
        topology does not change)."""
        nics = self._nics.get(host)
        if nics is None:
            h = self.host(host)
            made = []
            for link in self.links_of(host):
                plane = link.port_of(host)
                far = link.other(host)
                made.append(HostNic(
                    host=host, plane=plane, switch=far.node, switch_port=far.port,
                    address=addressing.nic_address(h.index, plane),
                    mac=addressing.nic_mac(h.index, plane),
                    ifname=addressing.nic_ifname(host, plane)))
            nics = self._nics[host] = tuple(sorted(made, key=lambda nic: nic.plane))
        return list(nics)

    def numbered_nics(self, host: str) -> list[tuple[int, int, bytes]]:
        """The NICs of `host` as (NIC number, plane, 16-byte address), by plane: the form the
        transport takes them in (`connection_paths`). A NIC's number is the host's port on its link,
        which is its plane: NIC i is on plane i. A simulated host numbers its NICs so (netsim's
        `SimHost.nics[port]`); an agent numbers them as its job lists them."""
        return [(nic.plane, nic.plane, nic.address.packed) for nic in self.host_nics(host)]

    def host_nic(self, host: str, plane: int) -> HostNic:
        """The NIC of `host` on `plane`."""
        for nic in self.host_nics(host):
            if nic.plane == plane:
                return nic
        raise KeyError(f"host {host} has no NIC on plane {plane}")

    def host_rate_bps(self, host: str | None = None) -> int:
        """The line rate of `host`'s slowest NIC link, or of the slowest host link of all (the
        rate a host's transport paces its NIC at)."""
        rates = [link.rate_bps for link in self.links
                 if (self.is_host(link.a) or self.is_host(link.b)) and (host is None or link.has(host))]
        if not rates:
            raise KeyError(f"no host link{'' if host is None else ' of ' + host} in topology {self.name}")
        return min(rates)

    @property
    def planes(self) -> list[int]:
        """Plane numbers used by the switches, ascending."""
        return sorted({s.plane for s in self.switches})

    def switches_of_plane(self, plane: int) -> list[Switch]:
        return [s for s in self.switches if s.plane == plane]

    def tiers(self) -> list[int]:
        return sorted({s.tier for s in self.switches})

    def without_links(self, down) -> "Topology":
        """A copy without the given links (Link objects, (node, node) or (switch, port) pairs)."""
        dead = {self._resolve_link(item) for item in down}
        kept = tuple(link for link in self.links if link not in dead)
        return Topology(self.name, self.hosts, self.switches, kept)

    def _resolve_link(self, item) -> Link:
        if isinstance(item, Link):
            if item not in self.links:
                raise KeyError(f"link {item.label} is not in topology {self.name!r}")
            return item
        x, y = item
        if isinstance(y, int) and not isinstance(y, bool):
            return self.link_at(x, y)
        return self.link_between(x, y)

    # --- validation -----------------------------------------------------------------------
    def validate(self) -> "Topology":
        """Check consistency; raise TopologyError naming the offending element. Returns self."""
        self._validate_nodes()
        self._validate_links()
        for position, host in enumerate(self.hosts):
            if not self.links_of(host.name):
                raise TopologyError(f"host {host.name} has no link", "host", position)
        return self

    def _validate_nodes(self) -> None:
        seen: set[str] = set()
        for kind, nodes, pattern, cls in (("host", self.hosts, _HOST_NAME, Host),
                                          ("switch", self.switches, _SWITCH_NAME, Switch)):
            for position, node in enumerate(nodes):
                if not isinstance(node, cls):
                    raise TopologyError(f"{kind} #{position} is a {type(node).__name__}", kind, position)
                if node.name in seen:
                    raise TopologyError(f"duplicate node name {node.name!r}", kind, position)
                seen.add(node.name)
                if node.index != position:
                    raise TopologyError(
                        f"{kind} {node.name}: index {node.index} but it is at position {position}",
                        kind, position)
                match = pattern.fullmatch(node.name)
                if not match or int(match.group(1)) != position + 1:
                    raise TopologyError(
                        f"{kind} {node.name!r}: at position {position} it must be named "
                        f"{pattern.pattern[0]}{position + 1}", kind, position)
        if len(self.hosts) > addressing.MAX_HOSTS:
            raise TopologyError(f"{len(self.hosts)} hosts: at most {addressing.MAX_HOSTS}")
        if len(self.switches) > addressing.MAX_SWITCHES:
            raise TopologyError(f"{len(self.switches)} switches: at most {addressing.MAX_SWITCHES}")
        for position, sw in enumerate(self.switches):
            if sw.tier not in TIER_NAMES:
                raise TopologyError(f"switch {sw.name}: tier {sw.tier} not in {sorted(TIER_NAMES)}",
                                    "switch", position)
            if not 0 <= sw.plane <= 0xFF:
                raise TopologyError(f"switch {sw.name}: plane {sw.plane} outside 0..255", "switch", position)
            if sw.usid != addressing.switch_usid(position):
                raise TopologyError(f"switch {sw.name}: uSID {sw.usid:#x}, the plan gives "
                                    f"{addressing.switch_usid(position):#x}", "switch", position)

    def _validate_links(self) -> None:
        ports: dict[tuple[str, int], str] = {}
        pairs: dict[frozenset, str] = {}
        for position, link in enumerate(self.links):
            def fail(reason: str) -> None:
                raise TopologyError(f"link #{position} {link.label}: {reason}", "link", position)

            for end in (link.a, link.b):
                if end not in self._nodes:
                    fail(f"unknown node {end!r}")
            if link.a == link.b:
                fail("joins a node to itself")
            if self.is_host(link.a) and self.is_host(link.b):
                fail("joins two hosts (hosts attach to switches)")
            for end, port in ((link.a, link.a_port), (link.b, link.b_port)):
                if not isinstance(port, int) or isinstance(port, bool):
                    fail(f"port of {end} is not an integer")
                if self.is_switch(end) and not 1 <= port <= 511:
                    fail(f"switch {end} port {port} outside 1..511")
                if (end, port) in ports and self.is_host(end):
                    fail(f"host {end} already has a NIC on plane {port} (link {ports[(end, port)]})")
                if (end, port) in ports:
                    fail(f"port {port} of {end} already used by link {ports[(end, port)]}")
                ports[(end, port)] = link.label
            pair = frozenset((link.a, link.b))
            if pair in pairs:
                fail(f"parallel to link {pairs[pair]} (uSID paths name switches, not links)")
            pairs[pair] = link.label
            self._validate_link_planes(link, fail)
            self._validate_link_numbers(link, fail)

    def _validate_link_planes(self, link: Link, fail) -> None:
        a, b = self.node(link.a), self.node(link.b)
        if isinstance(a, Switch) and isinstance(b, Switch):
            if a.plane != b.plane:
                fail(f"joins plane {a.plane} ({a.name}) to plane {b.plane} ({b.name})")
            return
        host, host_port, sw = (a, link.a_port, b) if isinstance(a, Host) else (b, link.b_port, a)
        if host_port != sw.plane:
            fail(f"host {host.name} port must be the plane of {sw.name} ({sw.plane}), not {host_port}")

    @staticmethod
    def _validate_link_numbers(link: Link, fail) -> None:
        for name in ("rate_bps", "queue_depth", "trim_threshold", "ecn_threshold", "ecn_max_threshold"):
            value = getattr(link, name)
            if (not isinstance(value, int) or isinstance(value, bool)) and not (
                    name == "ecn_max_threshold" and value is None):
                fail(f"{name} = {value!r} is not an integer")
        if link.rate_bps <= 0:
            fail(f"rate_bps = {link.rate_bps} must be positive")
        if link.queue_depth <= 0:
            fail(f"queue_depth = {link.queue_depth} must be positive")
        if link.ecn_threshold < 0:
            fail(f"ecn_threshold = {link.ecn_threshold} must not be negative")
        if link.ecn_threshold > link.trim_threshold:
            fail(f"ecn_threshold = {link.ecn_threshold} exceeds trim_threshold = {link.trim_threshold}")
        if link.ecn_ramp_top < link.ecn_threshold:
            fail(f"ecn_max_threshold = {link.ecn_ramp_top} is below ecn_threshold = {link.ecn_threshold}")
        if link.ecn_ramp_top > link.queue_depth:
            fail(f"ecn_max_threshold = {link.ecn_ramp_top} exceeds queue_depth = {link.queue_depth}")
        if link.trim_threshold > link.queue_depth:
            fail(f"trim_threshold = {link.trim_threshold} exceeds queue_depth = {link.queue_depth}")
