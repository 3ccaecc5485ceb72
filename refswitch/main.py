"""`mrc-testbed switch`: run one reference switch process (also `python -m refswitch.main`).

    mrc-testbed switch --port 1=s1-eth1 --port 2=s1-eth2 --queue 2:100000000:64 \
        --grpc-addr unix:/tmp/s1.sock --ready-file /tmp/s1.ready

A JSON config (`--config FILE`) gives the same settings:
    {"name": "s1", "device_id": 1, "ports": {"1": "s1-eth1"}, "grpc_address": "127.0.0.1:50001",
     "queues": [{"port": 1, "rate_bps": 100000000, "rate_pps": 0, "depth": 64}],
     "p4info": "p4/build/mrc.p4info.txtpb", "seed": 0, "ready_file": "/tmp/s1.ready"}
Command-line options override the file. The process writes `<pid> <grpc address>` to the ready
file once its ports are open and the P4Runtime server answers, and removes it on exit (SIGTERM).
With `--stats-file`, it writes its counters as JSON at exit, tail drops (`queue_drops`) included:
BMv2 does not count those and P4Runtime cannot read them. With `--control PATH`, egress queue
rates can be changed while it runs (`refswitch.control`, as BMv2's `set_queue_rate`).
"""
from __future__ import annotations

import argparse
import json
import logging
import sys

from pipeline_contract.p4info import P4InfoError, load_p4info
from refswitch.p4runtime_server import AddressError, check_address
from refswitch.ports import PortError
from refswitch.switch import ReferenceSwitch, SwitchConfig

log = logging.getLogger("mrc.refswitch")
MAX_PORT = 510


def parse_port(text: str) -> tuple[int, str]:
    """`N=IFNAME` -> (N, IFNAME)."""
    number, sep, ifname = text.partition("=")
    if not sep or not number.isdigit() or not ifname:
        raise argparse.ArgumentTypeError(f"--port {text!r}: expected N=IFNAME, e.g. 1=s1-eth1")
    if not 1 <= int(number) <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"--port {text!r}: port number must be 1..{MAX_PORT} (bit<9>, 511 drops)")
    return int(number), ifname


def parse_queue(text: str) -> tuple[int, int, int, int]:
    """`PORT:RATE_BPS:DEPTH[:RATE_PPS]` -> (port, rate_bps, depth, rate_pps)."""
    parts = text.split(":")
    if len(parts) not in (3, 4) or not all(p.isdigit() for p in parts):
        raise argparse.ArgumentTypeError(
            f"--queue {text!r}: expected PORT:RATE_BPS:DEPTH[:RATE_PPS] (integers, 0 = unlimited rate)")
    port, rate_bps, depth = (int(p) for p in parts[:3])
    rate_pps = int(parts[3]) if len(parts) == 4 else 0
    if depth < 1:
        raise argparse.ArgumentTypeError(f"--queue {text!r}: depth must be >= 1")
    return port, rate_bps, depth, rate_pps


def parse_ingress(text: str) -> tuple[int, int]:
    """`PORT:RATE_BPS` -> (port, rate_bps)."""
    parts = text.split(":")
    if len(parts) != 2 or not all(p.isdigit() for p in parts) or int(parts[1]) < 1:
        raise argparse.ArgumentTypeError(f"--ingress {text!r}: expected PORT:RATE_BPS (integers, rate >= 1)")
    return int(parts[0]), int(parts[1])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the switch subcommand."""
    parser.add_argument("--config", help="JSON file with the switch settings (options override it)")
    parser.add_argument("--name", help="switch name for logs (default s1)")
    parser.add_argument("--device-id", type=int, help="P4Runtime device id (default 1)")
    parser.add_argument("--port", type=parse_port, action="append", default=[], metavar="N=IFNAME",
                        help="P4 port N on interface IFNAME (repeat)")
    parser.add_argument("--queue", type=parse_queue, action="append", default=[],
                        metavar="PORT:RATE_BPS:DEPTH[:RATE_PPS]", help="egress queue of a port (repeat)")
    parser.add_argument("--ingress", type=parse_ingress, action="append", default=[], metavar="PORT:RATE_BPS",
                        help="a port whose incoming link no switch serialises (from a host): frames enter "
                             "once their last bit is in at this rate (repeat)")
    parser.add_argument("--grpc-addr", help="P4Runtime address: unix:/path or 127.0.0.1:PORT "
                                            "(default 127.0.0.1:9559)")
    parser.add_argument("--p4info", help="load this text P4Info at start (otherwise wait for "
                                         "SetForwardingPipelineConfig)")
    parser.add_argument("--seed", type=int, help="seed of the fault-drop RNG (default 0)")
    parser.add_argument("--ready-file", help="write '<pid> <address>' here when ready")
    parser.add_argument("--stats-file", help="write every non-zero counter (queue_drops included) here as JSON "
                                             "at exit")
    parser.add_argument("--control", metavar="PATH",
                        help="serve queue rate changes on this unix socket (refswitch.control: "
                             "set_queue_rate, get_queue_rate in the control protocol of wire.control)")
    parser.add_argument("--log-level", help="level of the mrc.refswitch logger (DEBUG, INFO, WARNING, ...)")


def build_config(args: argparse.Namespace) -> SwitchConfig:
    """Merge the JSON config file and the command-line options."""
    cfg = SwitchConfig()
    if args.config:
        try:
            with open(args.config) as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError) as exc:
            raise SystemExit(f"switch: cannot read config {args.config}: {exc}")
        unknown = set(data) - {"name", "device_id", "ports", "queues", "grpc_address", "p4info", "seed", "ready_file",
                             "stats_file", "control"}
        if unknown:
            raise SystemExit(f"switch: config {args.config}: unknown keys {sorted(unknown)}")
        cfg.name = data.get("name", cfg.name)
        cfg.device_id = int(data.get("device_id", cfg.device_id))
        try:
            cfg.ports = dict(parse_port(f"{k}={v}") for k, v in data.get("ports", {}).items())
        except argparse.ArgumentTypeError as exc:
            raise SystemExit(f"switch: config {args.config}: {exc}")
        for q in data.get("queues", []):
            cfg.queues[int(q["port"])] = (int(q.get("rate_bps", 0)), int(q.get("rate_pps", 0)),
                                          int(q.get("depth", 64)))
        cfg.grpc_address = data.get("grpc_address", cfg.grpc_address)
        cfg.p4info_path = data.get("p4info")
        cfg.seed = int(data.get("seed", 0))
        cfg.ready_file = data.get("ready_file")
        cfg.stats_file = data.get("stats_file")
        cfg.control_path = data.get("control")
    if args.name:
        cfg.name = args.name
    if args.device_id is not None:
        cfg.device_id = args.device_id
    for number, ifname in args.port:
        cfg.ports[number] = ifname
    for port, rate_bps, depth, rate_pps in args.queue:
        cfg.queues[port] = (rate_bps, rate_pps, depth)
    for port, rate_bps in args.ingress:
        cfg.ingress[port] = rate_bps
    if args.grpc_addr:
        cfg.grpc_address = args.grpc_addr
    if args.p4info:
        cfg.p4info_path = args.p4info
    if args.seed is not None:
        cfg.seed = args.seed
    if args.ready_file:
        cfg.ready_file = args.ready_file
    if args.stats_file:
        cfg.stats_file = args.stats_file
    if args.control:
        cfg.control_path = args.control
    if not cfg.ports:
        raise SystemExit("switch: no ports given (use --port N=IFNAME or a config file)")
    return cfg


def run(args: argparse.Namespace) -> int:
    """Run the switch until SIGTERM; return the exit status."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.log_level:
        level = logging.getLevelName(str(args.log_level).upper())
        if not isinstance(level, int):
            raise SystemExit(f"switch: --log-level {args.log_level!r} is not a logging level")
        log.setLevel(level)
    cfg = build_config(args)
    try:
        check_address(cfg.grpc_address)          # before any port is opened
        p4info = load_p4info(cfg.p4info_path) if cfg.p4info_path else None
        switch = ReferenceSwitch(cfg, p4info)
        switch.serve_forever()
    except (P4InfoError, AddressError, PortError, ValueError) as exc:
        log.error("switch %s: %s", cfg.name, exc)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m refswitch.main`."""
    parser = argparse.ArgumentParser(prog="mrc-testbed switch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
