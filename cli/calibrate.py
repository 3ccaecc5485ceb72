"""`mrc-testbed calibrate --target model|bmv2`: measure the fastest link rate this machine's switches
and agents sustain faithfully, and record it for `rate_bps: auto` (experiments/rate_search.py).

    sudo mrc-testbed calibrate --target model                 # records into the calibration file
    sudo mrc-testbed calibrate --target bmv2 --topology leafspine:2x2x2 --start-mbps 2
    mrc-testbed calibrate --show                              # what is recorded for this machine
"""
from __future__ import annotations

import argparse
import os
import sys

from experiments import calibration, rate_search
from experiments.backends import TARGETS, mininet_unavailable

BUSY_LOAD = 0.5                  # load average per core above which the machine is said to be busy


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `mrc-testbed calibrate`."""
    parser.add_argument("--target", choices=TARGETS, default="model", help="switch target (default: model)")
    parser.add_argument("--topology", default=rate_search.TOPOLOGY,
                        help=f"topology of the measuring all-reduce (default: {rate_search.TOPOLOGY})")
    parser.add_argument("--start-mbps", type=float, default=rate_search.START_BPS / 1e6,
                        help=f"first rate tried, Mbit/s (default: {rate_search.START_BPS / 1e6:g}); "
                             "doubled while faithful, halved until faithful, then one try between")
    parser.add_argument("--margin", type=float, default=calibration.MARGIN,
                        help=f"share of the fastest faithful rate recorded (default: {calibration.MARGIN:g})")
    parser.add_argument("--show", action="store_true", help="print the calibration file's records and exit")


def run(args: argparse.Namespace) -> int:
    """Entry point of `mrc-testbed calibrate`."""
    path = calibration.calibration_file()
    if args.show:
        return _show(path)
    if not 0 < args.margin <= 1:
        print(f"mrc-testbed calibrate: --margin {args.margin:g} must lie in (0, 1]", file=sys.stderr)
        return 2
    if args.start_mbps <= 0:
        print(f"mrc-testbed calibrate: --start-mbps {args.start_mbps:g} must be positive", file=sys.stderr)
        return 2
    why = mininet_unavailable()
    if why is None:
        from testbed.nodes import target_unavailable
        why = target_unavailable(args.target)
    if why:
        print(f"mrc-testbed calibrate: {why}", file=sys.stderr)
        return 2
    machine = calibration.Machine.this()
    load = os.getloadavg()[0]
    if load > BUSY_LOAD * machine.cores:
        print(f"note: the machine is busy (load average {load:.1f} on {machine.cores} cores): the calibration "
              "measures what it sustains now, beside that load", flush=True)
    print(f"calibrating target {args.target} on {machine.describe()}: an all-reduce on {args.topology} at "
          f"doubling rates from {args.start_mbps:g} Mbit/s (Ctrl-C stops; nothing is recorded then)", flush=True)
    try:
        record = rate_search.calibrate(args.target, rate_search.measure_allreduce(args.target, args.topology),
                                       start_bps=int(args.start_mbps * 1e6), margin=args.margin,
                                       progress=lambda line: print(f"  {line}", flush=True))
        saved = calibration.save(record, path)
    except calibration.CalibrationError as error:
        print(f"mrc-testbed calibrate: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("mrc-testbed calibrate: interrupted; nothing recorded", file=sys.stderr)
        return 130
    print(f"target {args.target}: fastest faithful rate {record.faithful_rate_bps / 1e6:g} Mbit/s; "
          f"`rate_bps: auto` links run at {record.rate_bps / 1e6:g} Mbit/s ({record.margin:g} of it)")
    print(f"recorded in {saved} (load average {record.conditions['load_1min_start']:g} at the start, "
          f"{record.conditions['load_1min_end']:g} at the end)")
    return 0


def _show(path) -> int:
    try:
        records = calibration.read_records(path)
    except calibration.CalibrationError as error:
        print(f"mrc-testbed calibrate: {error}", file=sys.stderr)
        return 1
    if not records:
        print(f"{path}: no calibration recorded")
        return 0
    here = calibration.Machine.this()
    print(f"{path}:")
    for r in records:
        mark = " (this machine)" if r.machine == here else ""
        print(f"  {r.target:5} {r.rate_bps / 1e6:8.3g} Mbit/s  (faithful up to {r.faithful_rate_bps / 1e6:g}, "
              f"margin {r.margin:g})  {r.machine.describe()}{mark}  {r.date}")
    return 0
