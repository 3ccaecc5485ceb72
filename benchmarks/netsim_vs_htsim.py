"""netsim's wall time per case beside uet-htsim's, on the same flows (part of `bench --only netsim`).

Two cases, MRC on netsim and htsim_uec (its default balancer, mixed) on the exported topology and
flows, the scenario's switch settings on both: the 4x4x4 leaf-spine permutation of
experiments/datacenter.yaml (2 MiB flows at 100 Gbit/s) and a fat-tree k=8 permutation of 1 MB
flows (128 hosts, 100 Gbit/s, 1 us cables, datacenter.yaml's thresholds). Each runs `repeat`
times and the fastest counts. netsim's wall time covers the whole case (building the network and
traffic, the run, the checks); htsim's is its process from start to exit. CPU seconds are printed
beside (netsim's process time, htsim_uec's user + system time): on a loaded machine they are the
steadier figure. Skipped, with the
reason, where htsim_uec is not built (scripts/build-htsim.sh).
"""
from __future__ import annotations

import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATACENTER = ROOT / "experiments" / "datacenter.yaml"
FAT_TREE_PERMUTATION = {
    "name": "bench-netsim-vs-htsim-fattree8", "seed": 1, "horizon_s": 0.05, "sample_interval_s": 0.0001,
    "topology": "fattree:8",
    "link": {"rate_bps": 100_000_000_000, "delay_s": 1.0e-6, "mtu_payload": 4096, "queue_depth": 64,
             "trim_threshold": 48, "ecn_threshold": 24, "ecn_max_threshold": 48},
    "workload": {"kind": "permutation", "bytes": 1_000_000, "chunk_bytes": 250_000},
    "transports": [{"name": "MRC", "mode": "mrc"}]}


def cases() -> list:
    """(label, case) of the two cases compared."""
    from experiments.scenario import load_scenario, parse_scenario
    leaf_spine = next(c for c in load_scenario(DATACENTER).cases()
                      if c.variant.label == "permutation" and c.transport.mode == "mrc")
    [fat_tree] = parse_scenario(FAT_TREE_PERMUTATION, path="<benchmark netsim vs htsim>").cases()
    return [("4x4x4 permutation 2 MiB", leaf_spine), ("fat-tree k=8 permutation 1 MB", fat_tree)]


def measure_side_by_side(result, repeat: int) -> None:
    """Add netsim's and htsim's wall time per case, and their ratio, to `result` (and print them)."""
    from experiments.backends.htsim import HtsimBackend, htsim_unavailable
    from experiments.backends.netsim_backend import NetsimBackend
    why = htsim_unavailable()
    if why:
        print(f"   netsim beside htsim: skipped ({why})", flush=True)
        result.details["netsim_vs_htsim"] = {"skipped": why}
        return
    htsim = HtsimBackend()
    rows = []
    for label, case in cases():
        netsim_walls, netsim_cpus, htsim_walls, htsim_cpus, done = [], [], [], [], True
        for _ in range(repeat):
            began, cpu = time.monotonic(), time.process_time()
            record = NetsimBackend().run_case(case)
            netsim_walls.append(time.monotonic() - began)
            netsim_cpus.append(time.process_time() - cpu)
            done = done and record.completed
            htsim_record = htsim.run_case(case)
            htsim_walls.append(htsim.last_run.wall_s)
            htsim_cpus.append(htsim.last_run.cpu_s)
            done = done and htsim_record.completed
        netsim_s, htsim_s = min(netsim_walls), min(htsim_walls)
        netsim_cpu, htsim_cpu = min(netsim_cpus), max(min(htsim_cpus), 1e-3)
        rows.append({"case": label, "netsim_wall_s": netsim_s, "htsim_wall_s": htsim_s, "netsim_cpu_s": netsim_cpu,
                     "htsim_cpu_s": htsim_cpu, "completed": done})
        note = "" if done else "a flow did not finish"
        print(f"   {label}: netsim {netsim_s:.3f} s, htsim {htsim_s:.3f} s wall per case = netsim / htsim "
              f"{netsim_s / htsim_s:.1f}x; CPU {netsim_cpu:.3f} s / {htsim_cpu:.3f} s = {netsim_cpu / htsim_cpu:.1f}x"
              f"{' (' + note + ')' if note else ''}", flush=True)
        result.add(f"{label}: netsim over htsim, wall time per case", netsim_s / htsim_s, "x", better="lower",
                   note=note)
        result.add(f"{label}: netsim over htsim, CPU time per case", netsim_cpu / htsim_cpu, "x", better="lower",
                   note=note)
    result.details["netsim_vs_htsim"] = {"htsim_uec": htsim.binary, "cases": rows}
