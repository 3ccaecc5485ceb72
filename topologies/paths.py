"""Paths between hosts: per plane, every shortest switch path with its uSID steering address
(`host_paths`; only the addresses, as bytes: `steering_addresses`), and the one path ECMP gives a
packet sent to a host's own address (`ecmp_path`).

In a Clos (leaf-spine, fat-tree, multi-plane) the shortest paths are exactly the up-down
(valley-free) ones; in any other graph they are simply the shortest paths of the plane's switches.
The agents turn this list into their EV set; the order is deterministic (plane, then switch indices).
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Iterator, NoReturn

from pipeline_contract.ecmp import entropy_member
from topologies import addressing
from topologies.graph import PlaneGraph
from topologies.model import HostNic, Topology


class PathError(ValueError):
    """A host pair with no encodable path (same host, or a path longer than a uSID list holds)."""


@dataclass(frozen=True)
class Path:
    """One uSID path from a source NIC to a destination host on one plane."""

    plane: int
    src_nic: HostNic
    switches: tuple[str, ...]
    address: ipaddress.IPv6Address      # fc00:<plane>:<switch uSIDs...>:<dst host uSID>::
    dst_host: str = ""

    @property
    def hops(self) -> int:
        return len(self.switches)


def host_paths(topo: Topology, src: str, dst: str, graphs: dict[int, PlaneGraph] | None = None) -> list[Path]:
    """Every shortest uSID path from host `src` to host `dst`, on every plane both are on (`graphs`:
    the PlaneGraph of each plane, made on first use and kept there for the next call)."""
    return [Path(nic.plane, nic, switches, ipaddress.IPv6Address(value), dst)
            for nic, switches, value in _shortest_paths(topo, src, dst, graphs)]


def steering_addresses(topo: Topology, src: str, dst: str,
                       graphs: dict[int, PlaneGraph] | None = None) -> dict[int, list[bytes]]:
    """The 16-byte addresses of `host_paths(topo, src, dst, graphs)` by plane, in their order: what a
    connection is given (`host_agent.transport.connection_paths`), without the Path objects (a
    fabric of 1,024 hosts has 64 paths per pair)."""
    addresses: dict[int, list[bytes]] = {}
    for src_nic, graph, dst_switch, dst_usid in _nic_ends(topo, src, dst, graphs):
        plane = src_nic.plane
        count, paths = graph.shortest_path_usids(src_nic.switch, dst_switch)
        if count > addressing.MAX_PATH_SWITCHES:
            _too_long(src, dst, plane, graph.shortest_paths(src_nic.switch, dst_switch)[0])
        addresses.setdefault(plane, []).extend(
            addressing.packed_path_value(plane, count, packed, dst_usid).to_bytes(16, "big") for packed in paths)
    return addresses


def _shortest_paths(topo: Topology, src: str, dst: str,
                    graphs: dict[int, PlaneGraph] | None) -> Iterator[tuple[HostNic, tuple[str, ...], int]]:
    """(source NIC, switches, uSID address as a number) of every shortest path from host `src` to
    host `dst`, plane by plane."""
    for src_nic, graph, dst_switch, dst_usid in _nic_ends(topo, src, dst, graphs):
        for switches in graph.shortest_paths(src_nic.switch, dst_switch):
            if len(switches) > addressing.MAX_PATH_SWITCHES:
                _too_long(src, dst, src_nic.plane, switches)
            yield src_nic, switches, addressing.usid_path_value(src_nic.plane, graph.usids(switches), dst_usid)


def _nic_ends(topo: Topology, src: str, dst: str,
              graphs: dict[int, PlaneGraph] | None) -> Iterator[tuple[HostNic, PlaneGraph, str, int]]:
    """(source NIC, its plane's graph, the destination's switch there, destination host uSID) of
    each NIC of host `src` whose plane host `dst` is on (`graphs`: the PlaneGraph of each plane,
    made on first use and kept there)."""
    if src == dst:
        raise PathError(f"no path from {src} to itself")
    dst_usid = topo.host(dst).usid
    dst_nics = {nic.plane: nic for nic in topo.host_nics(dst)}
    graphs = graphs if graphs is not None else {}
    for src_nic in topo.host_nics(src):
        dst_nic = dst_nics.get(src_nic.plane)
        if dst_nic is None:
            continue
        graph = graphs.get(src_nic.plane)
        if graph is None:
            graph = graphs[src_nic.plane] = PlaneGraph(topo, src_nic.plane)
        yield src_nic, graph, dst_nic.switch, dst_usid


def _too_long(src: str, dst: str, plane: int, switches: tuple[str, ...]) -> NoReturn:
    """Raise the PathError of a shortest path too long for a uSID address."""
    raise PathError(f"{src} -> {dst} on plane {plane}: shortest path {'-'.join(switches)} has "
                    f"{len(switches)} switches, a uSID address holds at most {addressing.MAX_PATH_SWITCHES}")


def all_pairs_paths(topo: Topology) -> dict[tuple[str, str], list[Path]]:
    """`host_paths` for every ordered pair of distinct hosts, in host order."""
    graphs: dict[int, PlaneGraph] = {}
    return {(a.name, b.name): host_paths(topo, a.name, b.name, graphs)
            for a in topo.hosts for b in topo.hosts if a.name != b.name}


def ecmp_path(topo: Topology, src: str, dst: str, plane: int, ev: int,
              graph: PlaneGraph | None = None) -> tuple[str, ...]:
    """The switches a packet from host `src`'s NIC on `plane` to host `dst`'s NIC address there
    (not steered: the baseline's packets) with entropy value `ev` crosses, under the controller's
    static routes: at each switch, the member the pipeline's ECMP hash picks among its shortest
    next hops (`PlaneGraph.ecmp_ports`). Empty when `dst` cannot be reached on `plane`."""
    src_nic, dst_nic = topo.host_nic(src, plane), topo.host_nic(dst, plane)
    graph = graph if graph is not None else PlaneGraph(topo, plane)
    src_addr, dst_addr = src_nic.address.packed, dst_nic.address.packed
    here, switches = src_nic.switch, [src_nic.switch]
    while here != dst_nic.switch:
        ports = graph.ecmp_ports(here, dst_nic.switch)
        if not ports:
            return ()
        port = ports[entropy_member(src_addr, dst_addr, ev, len(ports))] if len(ports) > 1 else ports[0]
        here = topo.neighbor(here, port).node
        switches.append(here)
    return tuple(switches)
