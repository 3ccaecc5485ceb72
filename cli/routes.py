"""The `mrc-testbed routes` command: print the static tables computed for one or every switch.

    mrc-testbed routes --topo leafspine:4x2x2 --switch s1
    mrc-testbed routes --topo fattree:4 --switch s9 --down s9-s17     # as rerouted around a dead link
"""
from __future__ import annotations

import argparse
import ipaddress

from cli.errors import fail
from controller import routes
from controller.entries import SwitchProgram
from pipeline_contract.entries import TableEntry
from topologies import addressing
from topologies.model import TIER_NAMES, Topology

TABLE_ORDER = (routes.USID_LOCAL, routes.ROUTING, routes.ECMP_MEMBER, routes.PORT_CONFIG)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `mrc-testbed routes`."""
    from topologies.spec import SPEC_HELP
    parser.add_argument("--topo", required=True, metavar="SPEC", help=f"topology: {SPEC_HELP}")
    parser.add_argument("--switch", metavar="NAME", action="append",
                        help="switch to show (repeatable; default: every switch)")
    parser.add_argument("--down", metavar="A-B", action="append", default=[],
                        help="show the tables rerouted around the link between nodes A and B "
                             "(as the converging control plane would; repeatable)")


def run(args: argparse.Namespace) -> int:
    """Print the computed tables; 0 on success, 2 on a bad topology, switch or link."""
    from topologies.spec import topology_from_spec
    try:
        topo = topology_from_spec(args.topo)
        down = [_parse_link(topo, text) for text in args.down]
        programs = routes.rerouted_programs(topo, down) if down else routes.compute_programs(topo)
        names = args.switch or [s.name for s in topo.switches]
        for name in names:
            if not topo.is_switch(name):
                raise ValueError(f"--switch {name}: topology {topo.name!r} has no switch {name!r} "
                                 f"(switches s1..s{len(topo.switches)})")
    except (ValueError, KeyError) as error:
        return fail("routes", str(error.args[0] if error.args else error))
    print("\n\n".join(format_program(topo, programs[name]) for name in names))
    return 0


def _parse_link(topo: Topology, text: str):
    """'s1-s5' -> the pair of node names, checked against the topology."""
    ends = text.split("-")
    if len(ends) != 2:
        raise ValueError(f"--down {text!r}: expected two node names joined by '-', e.g. s1-s5")
    try:
        topo.link_between(*ends)
    except KeyError as error:
        raise ValueError(f"--down {text!r}: {error.args[0]}") from None
    return tuple(ends)


def format_program(topo: Topology, program: SwitchProgram) -> str:
    """A readable listing of one switch's tables and queues, annotated with node names."""
    switch = topo.switch(program.switch)
    names = _node_names(topo, switch.plane)
    lines = [f"{switch.name}  device_id {program.device_id}  plane {switch.plane}  "
             f"tier {switch.tier} ({TIER_NAMES[switch.tier]})  uSID {switch.usid:#06x}"]
    for table in TABLE_ORDER:
        entries = program.entries_of(table)
        lines.append(f"  {table}  ({len(entries)} entries)")
        rows = [(_format_match(entry, names, topo, switch.name), _format_action(entry)) for entry in entries]
        width = max((len(match) for match, _ in rows), default=0)
        lines.extend(f"    {match:<{width}}  -> {action}" for match, action in rows)
    lines.append(f"  queues  ({len(program.queues)} ports)")
    for queue in program.queues:
        far = topo.neighbor(switch.name, queue.port)
        lines.append(f"    port {queue.port:<3} rate {queue.rate_bps / 1e6:g} Mbit/s  depth {queue.depth_pkts} pkts"
                     f"  -> {far.node}:{far.port}")
    return "\n".join(lines)


def _node_names(topo: Topology, plane: int) -> dict[int, str]:
    """48-bit node prefix -> node name, for the nodes addressable on `plane`."""
    names = {addressing.node_prefix(s.plane, s.usid): s.name for s in topo.switches}
    names.update({addressing.node_prefix(plane, h.usid): f"{h.name}-eth{plane}" for h in topo.hosts})
    return names


def _format_match(entry: TableEntry, names: dict[int, str], topo: Topology, switch: str) -> str:
    parts = []
    for key, value in entry.match.items():
        if key == "dst_usid_prefix":
            address = ipaddress.IPv6Address(value << routes.PREFIX_SHIFT)
            parts.append(f"{key}={address}/{addressing.NODE_PREFIX_LEN} [{names.get(value, '?')}]")
        elif key == "dst_addr":
            prefix, length = value
            node = names.get(prefix >> routes.PREFIX_SHIFT, "?") if length == addressing.NODE_PREFIX_LEN else "?"
            parts.append(f"{key}={ipaddress.IPv6Address(prefix)}/{length} [{node}]")
        elif key == "port":
            parts.append(f"port={value} [{topo.neighbor(switch, value).node}]")
        else:
            parts.append(f"{key}={value}")
    return " ".join(parts)


def _format_action(entry: TableEntry) -> str:
    params = ", ".join(f"{name}={value}" for name, value in entry.params.items())
    return f"{entry.action.split('.')[-1]}({params})"
