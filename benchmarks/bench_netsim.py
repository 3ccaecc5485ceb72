"""Simulator speed: simulated packets per wall-second on the permutation case and a fat-tree all-reduce.

    .venv/bin/python -m benchmarks.bench_netsim [--repeat 2]

Runs, on the netsim backend, every case of experiments/permutation.yaml (a cross-leaf permutation
on leafspine:2x4x4 at 20 Mbit/s: MRC spraying, RoCE ECMP, RoCE with 4 QPs) and a ring all-reduce
of 128 KB per host over MRC on fattree:8 (128 hosts, 100 Mbit/s links). A simulated packet is one
packet received by one switch (a packet crossing four switches counts four); the count is the same
on every run of a case (netsim is deterministic), so packets per wall-second compares the
simulator's speed across versions. Each case runs `--repeat` times and the fastest run counts (the
machine may be shared: its load average is saved with the figures). Wall time covers the whole
case: building the network and the traffic, the run, and checking the results.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from benchmarks.figures import Measurement

NAME = "netsim"
DESCRIPTION = "simulator speed: simulated packets per wall-second (permutation; fat-tree k=8 all-reduce)"
PERMUTATION = Path(__file__).resolve().parent.parent / "experiments" / "permutation.yaml"
FAT_TREE = {"name": "bench-netsim-fattree8", "seed": 1, "horizon_s": 4.0, "sample_interval_s": 0.005,
            "topology": "fattree:8", "link": {"rate_bps": 100_000_000},
            "workload": {"kind": "allreduce", "bytes": 131072, "chunk_bytes": 65536},
            "transports": [{"name": "MRC", "mode": "mrc"}]}


def time_case(case, repeat: int) -> dict:
    """Simulated packets, wall and CPU seconds (fastest of `repeat` runs) and outcome of one case."""
    from experiments.backends.netsim_backend import NetsimBackend
    walls, cpus, record = [], [], None
    for _ in range(repeat):
        wall0, cpu0 = time.perf_counter(), time.process_time()
        record = NetsimBackend().run_case(case)
        walls.append(time.perf_counter() - wall0)
        cpus.append(time.process_time() - cpu0)
    packets = record.switch_stats.get("rx", 0)
    return {"case": case.label, "packets": packets, "wall_s": min(walls), "cpu_s": min(cpus), "walls_s": walls,
            "completed": record.completed, "completion_s": record.completion_time,
            "packets_per_wall_s": packets / min(walls), "load_average": os.getloadavg()}


def permutation_cases() -> list:
    from experiments.scenario import load_scenario
    return load_scenario(PERMUTATION).cases()


def fat_tree_case():
    from experiments.scenario import parse_scenario
    [case] = parse_scenario(FAT_TREE, path="<benchmark netsim>").cases()
    return case


def measure(options: argparse.Namespace) -> Measurement:
    result = Measurement()
    repeat = max(1, getattr(options, "repeat", None) or 2)
    runs = [time_case(case, repeat) for case in permutation_cases()]
    result.details["permutation"] = runs
    for run in runs:
        print(f"   permutation, {run['case']}: {run['packets']} packets in {run['wall_s']:.2f} s "
              f"= {run['packets_per_wall_s']:,.0f} pkt/wall-s", flush=True)
    packets, wall = sum(r["packets"] for r in runs), sum(r["wall_s"] for r in runs)
    result.add("permutation: simulated packets per wall-second", packets / wall, "pkt/s")
    fat = time_case(fat_tree_case(), repeat)
    result.details["fattree8_allreduce"] = fat
    print(f"   fat-tree k=8 all-reduce 128 KB: {fat['packets']} packets in {fat['wall_s']:.2f} s "
          f"= {fat['packets_per_wall_s']:,.0f} pkt/wall-s", flush=True)
    note = "" if fat["completed"] else "did not complete"
    result.add("fat-tree k=8 all-reduce: simulated packets per wall-second", fat["packets_per_wall_s"], "pkt/s",
               note=note)
    result.add("fat-tree k=8 all-reduce: wall time", fat["wall_s"], "s", better="lower", note=note)
    result.details["load_average"] = os.getloadavg()
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeat", type=int, default=2, help="runs of each case; the fastest counts (default 2)")


def main(argv=None) -> int:
    from benchmarks.run import run_standalone
    return run_standalone(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
