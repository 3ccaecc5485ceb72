"""`mrc-testbed draw`: draw a topology to a PNG file (topologies.draw)."""
from __future__ import annotations

import argparse

from cli.errors import fail
from topologies.draw import draw


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `mrc-testbed draw`."""
    from topologies.spec import SPEC_HELP
    parser.add_argument("--topo", required=True, metavar="SPEC", help=f"topology: {SPEC_HELP}")
    parser.add_argument("-o", "--output", default="topology.png", metavar="FILE.png",
                        help="PNG file to write (default: %(default)s)")
    parser.add_argument("--ports", action="store_true", help="write switch port numbers on the links")
    parser.add_argument("--dpi", type=int, default=120, help="resolution (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    """Draw the topology named by --topo to --output; 0 on success, 2 on a bad spec or file."""
    from topologies.spec import topology_from_spec
    try:
        topo = topology_from_spec(args.topo)
    except ValueError as error:
        return fail("draw", str(error))
    try:
        path = draw(topo, args.output, show_ports=args.ports, dpi=args.dpi)
    except OSError as error:
        return fail("draw", f"cannot write {args.output}: {error.strerror or error}")
    print(f"wrote {path} ({topo.name}: {len(topo.hosts)} hosts, {len(topo.switches)} switches)")
    return 0
