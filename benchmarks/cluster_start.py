"""How long after the common start the agents of a cluster run began their workload: the fat-tree
failover of tests/testbed/test_cluster_network.py (fat-tree k=4 ring all-reduce, 16 agents, a
switch blackholed at 20 % and a link killed at 45 %) on two namespace servers of this machine.

    sudo flock /tmp/mrc-net.lock .venv/bin/python -m benchmarks.cluster_start [model|bmv2]

Prints one JSON object: the run's wall time, whether it completed bit-exact, the fidelity verdict
with its reasons, each agent's start lateness (`measured.starts_late_ms`) and its maximum. The
backend logs (stderr) how long the agents took to come up and the start file to reach the servers.
Needs root, Mininet and sshd (as the cluster tests).
"""
from __future__ import annotations

import json
import logging
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def fat_tree_case():
    """The fat-tree failover case of the two-server cluster test (tests/testbed/test_cluster_network.py),
    quick: the ring all-reduce on fattree:4 at 1 Mbit/s, a switch blackholed at 20 % and a link
    killed at 45 %."""
    import yaml

    from experiments.scenario import parse_scenario
    doc = yaml.safe_load((ROOT / "experiments" / "failover.yaml").read_text())
    doc.update(topology="fattree:4", link={"rate_bps": 1_000_000}, horizon_s=40.0,
               transports=[{"name": "MRC", "mode": "mrc"}], variants=[{"label": "fat-tree"}],
               faults=[{"kind": "switch_blackhole", "switch": "auto", "at": "20%"},
                       {"kind": "link_kill", "link": "auto", "at": "45%"}])
    (case,) = parse_scenario(doc, "fat-tree failover", quick=True).cases()
    return case


def main(argv: list[str] | None = None) -> int:
    from experiments import metrics
    from experiments.backends.mininet_backend import MininetBackend
    from testbed.local_servers import NamespaceServers
    args = sys.argv[1:] if argv is None else argv
    target = args[0] if args else "model"
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("mrc.experiments.start").setLevel(logging.INFO)
    folder = Path(tempfile.mkdtemp(prefix="cluster-start-"))
    with NamespaceServers(2, folder / "servers") as servers:
        began = time.monotonic()
        record = MininetBackend(target, run_root=folder / "runs", cluster=servers.cluster_file).run_case(fat_tree_case())
        wall = time.monotonic() - began
    summary = metrics.summarise(record)
    late = record.fidelity.get("measured", {}).get("starts_late_ms", {})
    known = [v for v in late.values() if v is not None]
    print(json.dumps({"wall_s": round(wall, 1), "completed": summary.get("completed"),
                      "bit_exact": summary.get("bit_exact"), "verdict": record.fidelity.get("verdict"),
                      "reasons": record.fidelity.get("reasons"), "starts_late_ms_max": max(known, default=None),
                      "starts_late_ms": late, "folder": str(folder)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
