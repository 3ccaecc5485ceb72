"""Lab 4: kill a path under a transfer on netsim and watch what your path monitor does to its EVs.
Run it with the testbed's Python:

    python explore.py                      # the cable s1 - s3 dies at 100 us, returns at 600 us
    python explore.py --repair 0.002       # a longer outage
    python explore.py --default            # MRC's own path monitor, for comparison
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from host_agent.transport import Policies                     # noqa: E402
from labs import transfers                                     # noqa: E402
from monitor import DeadPathMonitor                            # noqa: E402

BIN = 50e-6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kill", type=float, default=100e-6, help="when the cable dies (s)")
    parser.add_argument("--repair", type=float, default=600e-6, help="when it comes back (s)")
    parser.add_argument("--size", type=int, default=3_000_000, help="bytes h1 sends to h2")
    parser.add_argument("--default", action="store_true", help="use MRC's path monitor instead of yours")
    args = parser.parse_args()
    net = transfers.fabric(3, planes=2)
    cable = net.cable("s1", "s3")
    cable.ab.trace_data = True
    net.at(args.kill, cable.set_up, False)
    net.at(args.repair, cable.set_up, True)
    policies = None if args.default else Policies(path_monitor=DeadPathMonitor)
    outcome = transfers.run_flows(net, [transfers.Flow("h1", "h2", args.size)], transfers.config(), policies)
    flow = outcome.flows[0]
    print(f"delivered exactly once: {flow.exactly_once}; finished at {flow.finish * 1e6:.0f} us; "
          f"RTO at the end {flow.sender.rtt.rto * 1e6:.0f} us")
    print("EV state changes of h1 (time in us, EV, path, old -> new, cause):")
    for e in outcome.events:
        if e["host"] == "h1" and e["kind"] in ("ev_state", "ev_backup"):
            if e["kind"] == "ev_backup":
                print(f"  {e['t'] * 1e6:8.1f}  backup {e['ev']:#010x} (path {e['path']}, plane {e['plane']}) "
                      f"replaces {e['replaces']:#010x}")
            else:
                print(f"  {e['t'] * 1e6:8.1f}  {e['ev']:#010x} path {e['path']}: {e['old']} -> {e['new']} "
                      f"({e['cause']})")
    per_bin = Counter(int(t / BIN) for t in cable.ab.data_offered_at)
    print(f"data packets offered to s1 -> s3 per {BIN * 1e6:.0f} us:")
    for b in range(0, int(outcome.end / BIN) + 1):
        print(f"  {b * BIN * 1e6:6.0f} us  {per_bin.get(b, 0):4d}  {'#' * (per_bin.get(b, 0) // 2)}")


if __name__ == "__main__":
    main()
