"""`mrc-testbed calibrate --target model|bmv2`: measure the fastest link rate this machine's switches
and agents sustain faithfully at a few topology sizes, fit how it falls with the processes per core,
and record it for `rate_bps: auto` (experiments/rate_search.py).

    sudo mrc-testbed calibrate --target model                 # leafspine:4x2x2 and fattree:4
    sudo mrc-testbed calibrate --target bmv2 --topology leafspine:2x2x2 --topology fattree:4 --start-mbps 2
    mrc-testbed calibrate --show                              # what is recorded for this machine
    sudo mrc-testbed calibrate --target model --cluster cluster.yaml   # each server of a cluster, one after the other
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cli.errors import fail
from experiments import calibration, rate_search
from experiments.backends import TARGETS, mininet_unavailable

BUSY_LOAD = 0.5                  # load average per core above which the machine is said to be busy


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `mrc-testbed calibrate`."""
    parser.add_argument("--target", choices=TARGETS, default="model", help="switch target (default: model)")
    parser.add_argument("--topology", action="append", default=None, metavar="SPEC",
                        help="a topology the all-reduce measures on (repeatable; the rate model is fitted to "
                             f"them; default: {' and '.join(rate_search.TOPOLOGIES)})")
    parser.add_argument("--start-mbps", type=float, default=rate_search.START_BPS / 1e6,
                        help=f"first rate tried on the smallest topology, Mbit/s (default: "
                             f"{rate_search.START_BPS / 1e6:g}); doubled while faithful, halved until faithful, "
                             "then one try between; larger topologies start where the smaller predict")
    parser.add_argument("--margin", type=float, default=calibration.MARGIN,
                        help=f"share of the fastest faithful rate recorded (default: {calibration.MARGIN:g})")
    parser.add_argument("--show", action="store_true", help="print the calibration file's records and exit")
    parser.add_argument("--cluster", metavar="FILE", type=Path,
                        help="measure each server of this cluster file instead (the same calibration run on the "
                             "server over ssh, one server after the other), kept per server for `run --cluster`")


def run(args: argparse.Namespace) -> int:
    """Entry point of `mrc-testbed calibrate`."""
    path = calibration.calibration_file()
    if args.show:
        return _show(path)
    if not 0 < args.margin <= 1:
        return fail("calibrate", f"--margin {args.margin:g} must lie in (0, 1]")
    if args.start_mbps <= 0:
        return fail("calibrate", f"--start-mbps {args.start_mbps:g} must be positive")
    topologies = args.topology or list(rate_search.TOPOLOGIES)
    try:
        sizes = {spec: rate_search.processes(spec) for spec in topologies}
    except ValueError as error:
        return fail("calibrate", f"--topology: {error}")
    if args.cluster is not None:
        return _calibrate_servers(args, topologies, path)
    why = mininet_unavailable()
    if why is None:
        from testbed.nodes import target_unavailable
        why = target_unavailable(args.target)
    if why:
        return fail("calibrate", why)
    machine = calibration.Machine.this()
    load = os.getloadavg()[0]
    if load > BUSY_LOAD * machine.cores:
        print(f"note: the machine is busy (load average {load:.1f} on {machine.cores} cores): the calibration "
              "measures what it sustains now, beside that load", flush=True)
    listed = ", ".join(f"{spec} ({n} processes)" for spec, n in sorted(sizes.items(), key=lambda kv: kv[1]))
    print(f"calibrating target {args.target} on {machine.describe()}: an all-reduce on {listed}, at doubling "
          f"rates from {args.start_mbps:g} Mbit/s on the first (Ctrl-C stops; nothing is recorded then)", flush=True)
    try:
        record = rate_search.calibrate(args.target, lambda spec: rate_search.measure_allreduce(args.target, spec),
                                       tuple(topologies), start_bps=int(args.start_mbps * 1e6), margin=args.margin,
                                       progress=lambda line: print(f"  {line}", flush=True))
        saved = calibration.save(record, path)
    except calibration.CalibrationError as error:
        return fail("calibrate", str(error), 1)
    except KeyboardInterrupt:
        return fail("calibrate", "interrupted; nothing recorded", 130)
    print(f"target {args.target}: fastest faithful rate {record.model.describe()} ({machine.cores} cores)")
    _print_sizes(record)
    print(f"recorded in {saved}")
    return 0


def _calibrate_servers(args: argparse.Namespace, topologies: list[str], path) -> int:
    """`calibrate --cluster FILE`: this command run on each server (testbed.cluster.run_testbed_command),
    its record brought back and kept with the server's address."""
    from testbed.cluster import ClusterError, run_testbed_command
    from testbed.clusterfile import ClusterFileError, load_cluster_file
    try:
        cluster = load_cluster_file(args.cluster)
    except ClusterFileError as error:
        return fail("calibrate", str(error))
    argv = ["calibrate", "--target", args.target, "--start-mbps", f"{args.start_mbps:g}",
            "--margin", f"{args.margin:g}"]
    for spec in topologies:
        argv += ["--topology", spec]
    records = []
    for number, server in enumerate(cluster.servers, start=1):
        print(f"server {number}/{len(cluster.servers)}: {server.address}: calibrating target {args.target} there",
              flush=True)
        try:
            code, texts = run_testbed_command(
                server, argv, files=("record",),
                env={calibration.ENV_FILE: "{record}", "PATH": os.environ.get("PATH", "")},
                progress=lambda line, at=server.address: print(f"  {at}: {line}", flush=True))
        except ClusterError as error:
            return fail("calibrate", str(error), 1)
        except KeyboardInterrupt:
            return fail("calibrate", "interrupted; the servers measured before are recorded", 130)
        try:
            found = [r for r in calibration.parse_records(texts["record"] or '{"records": []}',
                                                          Path(f"{server.address}:calibration"))
                     if r.target == args.target]
        except calibration.CalibrationError as error:
            found, code = [], code or 1
            print(f"  {server.address}: {error}", file=sys.stderr)
        if code != 0 or not found:
            return fail("calibrate", f"server {server.address}: the calibration failed (exit status {code}); "
                                     "nothing recorded for it", 1)
        record = found[0]
        record.server = server.address
        calibration.save(record, path)
        records.append(record)
        print(f"server {server.address} ({record.machine.describe()}): fastest faithful rate "
              f"{record.model.describe()}")
    print(f"recorded per server in {path}; `run --cluster {args.cluster}` runs `auto` links at the lowest rate "
          "any server sustains for its share of the processes")
    return 0


def _print_sizes(record: calibration.Calibration, indent: str = "  ") -> None:
    """Per measured size: the fastest faithful rate, the load it was measured beside, and what `auto` gives."""
    for size in record.sizes:
        load = size.conditions
        beside = (f", load average {load['load_1min_start']:g} -> {load['load_1min_end']:g}"
                  if "load_1min_start" in load and "load_1min_end" in load else "")
        print(f"{indent}{size.topology} ({size.processes} processes): faithful up to "
              f"{size.faithful_rate_bps / 1e6:g} Mbit/s{beside}; `auto` links run at "
              f"{record.rate_bps(size.processes) / 1e6:.3g} Mbit/s ({record.margin:g} of the model)")


def _show(path) -> int:
    try:
        records = calibration.read_records(path)
    except calibration.CalibrationError as error:
        return fail("calibrate", str(error), 1)
    if not records:
        print(f"{path}: no calibration recorded")
        return 0
    here = calibration.Machine.this()
    print(f"{path}:")
    for r in records:
        mark = f" (cluster server {r.server})" if r.server else " (this machine)" if r.machine == here else ""
        print(f"  {r.target:5} {r.machine.describe()}{mark}  {r.date}")
        print(f"        fastest faithful rate {r.model.describe()}; `auto` at {r.margin:g} of it")
        _print_sizes(r, indent="        ")
        if r.note:
            print(f"        note: {r.note}")
    return 0
