"""Static route computation: Topology -> one SwitchProgram per switch. Pure, no I/O.

Each switch gets, per docs/design.md ("Switch pipeline contract"):

- `MrcIngress.usid_local`: its own locator+uSID (48 bits) -> `usid_shift`;
- `MrcIngress.routing` (LPM /48): every neighbour switch's locator+uSID -> `forward(port)`; every
  attached host NIC -> `forward(host port)`; every other host NIC of its plane -> `forward(port)` when
  one shortest next hop exists, else `ecmp_select(group, size)` (the RoCE-style baseline path);
- `MrcIngress.ecmp_member`: (group, index) -> `forward(port)`; one group per distinct set of ports,
  numbered from 1 in order of first use, shared by every destination with that set;
- `MrcIngress.port_config`: per port, trim/ECN thresholds of its link and host_facing;
- a `PortQueue` per port from its link's rate and depth.

Entries are values (frozen): switches with the same routes to a block of hosts (consecutive hosts
behind one leaf, `HostBlock`) hold the same entry objects, made once, so a switch's host routes cost
one lookup per block; each switch still holds one entry per host.
ECMP member entries precede the routing entries that use them, so installing in order never leaves a
route pointing at a missing member. `rerouted_programs` recomputes the same programs around failed
links, for the emulated converging control plane (controller/convergence.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from controller.entries import PortQueue, SwitchProgram
from pipeline_contract.entries import TableEntry
from pipeline_contract.names import (ECMP_MEMBER, ECMP_SELECT, FORWARD, PORT_CONFIG, ROUTING,
                                     SET_PORT_CONFIG, USID_LOCAL, USID_SHIFT)
from topologies import addressing
from topologies.graph import PlaneGraph
from topologies.model import Switch, Topology

PREFIX_SHIFT = addressing.ADDRESS_BITS - addressing.NODE_PREFIX_LEN   # 80: /48 value -> 128-bit address


def compute_programs(topo: Topology) -> dict[str, SwitchProgram]:
    """The static program of every switch, in switch order, device ids from 1."""
    return _programs(topo, topo)


def rerouted_programs(topo: Topology, down_links: Iterable) -> dict[str, SwitchProgram]:
    """Programs recomputed as if `down_links` were absent (Link objects, (node, node) pairs or
    (switch, port) pairs). Port configuration and queues still cover every port of `topo`, so that
    the difference with `compute_programs(topo)` is only in routing and ECMP entries."""
    return _programs(topo, topo.without_links(down_links))


def _programs(full: Topology, routed: Topology) -> dict[str, SwitchProgram]:
    graphs = {plane: PlaneGraph(routed, plane) for plane in routed.planes}
    blocks = _host_blocks(routed)                          # the same for every switch of a plane
    shared: dict[int, dict[tuple, list[TableEntry]]] = {plane: {} for plane in routed.planes}
    programs = {}
    for switch in full.switches:
        program = SwitchProgram(switch.name, device_id=switch.index + 1)
        program.entries.append(usid_local_entry(switch))
        program.entries.extend(_routing_entries(routed, graphs[switch.plane], switch, blocks.get(switch.plane, []),
                                                shared[switch.plane]))
        program.entries.extend(port_config_entries(full, switch))
        program.queues.extend(port_queues(full, switch))
        programs[switch.name] = program
    return programs


def usid_local_entry(switch: Switch) -> TableEntry:
    """The entry that makes `switch` consume its own uSID."""
    return TableEntry(USID_LOCAL, {"dst_usid_prefix": addressing.node_prefix(switch.plane, switch.usid)},
                      USID_SHIFT)


def _node_route(plane: int, usid: int) -> tuple[int, int]:
    """LPM match (value, prefix length) of a node's /48."""
    return addressing.node_prefix(plane, usid) << PREFIX_SHIFT, addressing.NODE_PREFIX_LEN


def _forward(match: tuple[int, int], port: int) -> TableEntry:
    return TableEntry(ROUTING, {"dst_addr": match}, FORWARD, {"port": port})


@dataclass(frozen=True)
class HostBlock:
    """Hosts next to each other in host order whose NICs on one plane plug into the same `leaf`:
    every other switch of the plane routes them all out of the same ports."""

    leaf: str
    matches: tuple[tuple[int, int], ...]      # LPM match of each host's /48 on the plane
    ports: tuple[int, ...]                    # each host's port on the leaf


def _host_blocks(topo: Topology) -> dict[int, list[HostBlock]]:
    """Per plane, the hosts with a NIC on it (their first there) in host order, cut into `HostBlock`s."""
    runs: dict[int, list[tuple[str, list, list]]] = {}
    for host in topo.hosts:
        seen = set()
        for nic in topo.host_nics(host.name):
            if nic.plane in seen:
                continue
            seen.add(nic.plane)
            plane_runs = runs.setdefault(nic.plane, [])
            if not plane_runs or plane_runs[-1][0] != nic.switch:
                plane_runs.append((nic.switch, [], []))
            plane_runs[-1][1].append(_node_route(nic.plane, host.usid))
            plane_runs[-1][2].append(nic.switch_port)
    return {plane: [HostBlock(leaf, tuple(matches), tuple(ports)) for leaf, matches, ports in plane_runs]
            for plane, plane_runs in runs.items()}


def _routing_entries(topo: Topology, graph: PlaneGraph, switch: Switch, blocks: list[HostBlock],
                     shared: dict[tuple, list[TableEntry]]) -> list[TableEntry]:
    """Neighbour-switch and host routes of `switch`, with the ECMP members they use first
    (`blocks`: the `_host_blocks` of its plane). `shared` holds the routes of each block another
    switch of the plane already has, by (block number, action, parameters): a switch with the same
    routes takes the same entries (TableEntry is frozen), one lookup per block instead of one
    entry per host."""
    neighbours, attached, remote, members = [], [], [], []
    groups: dict[tuple[int, ...], int] = {}
    ports_to: dict[str, tuple[int, ...]] = {}        # ECMP ports towards each leaf, asked once per leaf
    for end in graph.adjacent(switch.name):
        neighbour = topo.switch(end.node)
        neighbours.append(_forward(_node_route(neighbour.plane, neighbour.usid), end.port))
    for number, block in enumerate(blocks):
        if block.leaf == switch.name:
            attached.extend(_forward(match, port) for match, port in zip(block.matches, block.ports))
            continue
        ports = ports_to.get(block.leaf)
        if ports is None:
            ports = ports_to[block.leaf] = graph.ecmp_ports(switch.name, block.leaf)
        if not ports:
            continue                      # unreachable in this plane: default action drops it
        if len(ports) == 1:
            key: tuple = (number, FORWARD, ports[0])
            routes = shared.get(key)
            if routes is None:
                routes = shared[key] = [_forward(match, ports[0]) for match in block.matches]
            remote.extend(routes)
            continue
        if ports not in groups:
            groups[ports] = len(groups) + 1
            members.extend(TableEntry(ECMP_MEMBER, {"group": groups[ports], "index": index},
                                      FORWARD, {"port": port}) for index, port in enumerate(ports))
        key = (number, ECMP_SELECT, groups[ports], len(ports))
        routes = shared.get(key)
        if routes is None:
            routes = shared[key] = [TableEntry(ROUTING, {"dst_addr": match}, ECMP_SELECT,
                                               {"group": groups[ports], "size": len(ports)})
                                    for match in block.matches]
        remote.extend(routes)
    return members + neighbours + attached + remote


def port_config_entries(topo: Topology, switch: Switch) -> list[TableEntry]:
    """Trim/ECN thresholds of every port of `switch`, from its link; host_facing towards hosts."""
    entries = []
    for port in topo.ports_of(switch.name):
        link = topo.link_at(switch.name, port)
        host_facing = int(topo.is_host(link.other(switch.name).node))
        entries.append(TableEntry(PORT_CONFIG, {"port": port}, SET_PORT_CONFIG,
                                  {"trim_threshold": link.trim_threshold,
                                   "ecn_threshold": link.ecn_threshold,
                                   "host_facing": host_facing,
                                   "ecn_max_threshold": link.ecn_ramp_top}))
    return entries


def port_queues(topo: Topology, switch: Switch) -> list[PortQueue]:
    """Egress queue (rate, depth) of every port of `switch`, from its link."""
    return [PortQueue(port, topo.link_at(switch.name, port).rate_bps, topo.link_at(switch.name, port).queue_depth)
            for port in topo.ports_of(switch.name)]
