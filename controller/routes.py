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

ECMP member entries precede the routing entries that use them, so installing in order never leaves a
route pointing at a missing member. `rerouted_programs` recomputes the same programs around failed
links, for the emulated converging control plane (controller/convergence.py).
"""
from __future__ import annotations

from typing import Iterable

from controller.entries import PortQueue, SwitchProgram
from pipeline_contract.entries import TableEntry
from pipeline_contract.names import (ECMP_MEMBER, ECMP_SELECT, FORWARD, PORT_CONFIG, ROUTING,
                                     SET_PORT_CONFIG, USID_LOCAL, USID_SHIFT)
from topologies import addressing
from topologies.graph import PlaneGraph
from topologies.model import HostNic, Switch, Topology

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
    nics = {host.name: routed.host_nics(host.name) for host in routed.hosts}   # asked by every switch
    programs = {}
    for switch in full.switches:
        program = SwitchProgram(switch.name, device_id=switch.index + 1)
        program.entries.append(usid_local_entry(switch))
        program.entries.extend(_routing_entries(routed, graphs[switch.plane], switch, nics))
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


def _routing_entries(topo: Topology, graph: PlaneGraph, switch: Switch,
                     host_nics: dict[str, list[HostNic]]) -> list[TableEntry]:
    """Neighbour-switch and host routes of `switch`, with the ECMP members they use first
    (`host_nics`: `topo.host_nics` of every host)."""
    neighbours, attached, remote, members = [], [], [], []
    groups: dict[tuple[int, ...], int] = {}
    ports_to: dict[str, tuple[int, ...]] = {}        # ECMP ports towards each leaf, asked once per leaf
    for end in graph.adjacent(switch.name):
        neighbour = topo.switch(end.node)
        neighbours.append(_forward(_node_route(neighbour.plane, neighbour.usid), end.port))
    for host in topo.hosts:
        nics = [nic for nic in host_nics[host.name] if nic.plane == switch.plane]
        if not nics:
            continue
        nic = nics[0]
        match = _node_route(switch.plane, host.usid)
        if nic.switch == switch.name:
            attached.append(_forward(match, nic.switch_port))
            continue
        ports = ports_to.get(nic.switch)
        if ports is None:
            ports = ports_to[nic.switch] = graph.ecmp_ports(switch.name, nic.switch)
        if not ports:
            continue                      # unreachable in this plane: default action drops it
        if len(ports) == 1:
            remote.append(_forward(match, ports[0]))
            continue
        if ports not in groups:
            groups[ports] = len(groups) + 1
            members.extend(TableEntry(ECMP_MEMBER, {"group": groups[ports], "index": index},
                                      FORWARD, {"port": port}) for index, port in enumerate(ports))
        remote.append(TableEntry(ROUTING, {"dst_addr": match}, ECMP_SELECT,
                                 {"group": groups[ports], "size": len(ports)}))
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
