"""Simulator speed: simulated packets per wall-second on the permutation case and a fat-tree all-reduce.

    .venv/bin/python -m benchmarks.bench_netsim [--repeat 2]

Runs, on the netsim backend, every case of experiments/permutation.yaml (a cross-leaf permutation
on leafspine:2x4x4 at 20 Mbit/s: MRC spraying, RoCE ECMP, RoCE with 4 QPs) and a ring all-reduce
of 128 KB per host over MRC on fattree:8 (128 hosts, 100 Mbit/s links). A simulated packet is one
packet received by one switch (a packet crossing four switches counts four); the count is the same
on every run of a case (netsim is deterministic), so packets per wall-second compares the
simulator's speed across versions. Each case runs `--repeat` times and the fastest run counts (the
machine may be shared: its load average is saved with the figures). Wall time covers the whole
case: building the network and the traffic, the run, and checking the results. The process's CPU
time per simulated packet is printed beside it: on a loaded machine it is the steadier figure (wall
time there also counts the other processes' turns on the CPUs).

The build in use (`speedups`: the per-packet modules compiled with mypyc, or pure Python) is
printed first. When it is the compiled one, the permutation cases run again in a child process
as pure Python (MRC_PURE_PYTHON=1), so the gain of compiling is a ratio measured in one run.

A third figure isolates the simulator from the transport: on fattree:8, every host sprays 1 KB
data packets over its uSID paths to the host half the fabric away, paced at 1.2 us, through
trivial endpoints (`Sprayer`) that send and count and nothing else; its packets per CPU-second
are netsim's own forwarding speed (links, queues, switches, event loop).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import speedups
from benchmarks.figures import Measurement

NAME = "netsim"
DESCRIPTION = "simulator speed: simulated packets per wall-second (permutation; fat-tree k=8 all-reduce)"
ROOT = Path(__file__).resolve().parent.parent
PERMUTATION = ROOT / "experiments" / "permutation.yaml"
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
            "cpus_s": cpus, "completed": record.completed, "completion_s": record.completion_time,
            "packets_per_wall_s": packets / min(walls), "packets_per_cpu_s": packets / min(cpus),
            "cpu_us_per_packet": min(cpus) / packets * 1e6 if packets else None,
            "load_average": os.getloadavg()}


def _line(what: str, run: dict) -> str:
    """One printed line: packets, wall and CPU time of a case."""
    return (f"   {what}: {run['packets']} packets in {run['wall_s']:.2f} s wall, {run['cpu_s']:.2f} s CPU "
            f"= {run['packets_per_wall_s']:,.0f} pkt/wall-s, {run['packets_per_cpu_s']:,.0f} pkt/CPU-s "
            f"({run['cpu_us_per_packet']:.1f} us CPU per packet; load average {run['load_average'][0]:.1f})")


class Sprayer:
    """A stand-in endpoint: `count` data packets over `paths` in turn, one every `gap` seconds."""

    def __init__(self, paths: list, count: int, gap: float) -> None:
        self.paths, self.count, self.gap = paths, count, gap
        self.sent, self.received, self._next = 0, 0, 0.0

    def receive(self, now: float, nic: int, pkt) -> None:
        self.received += 1

    def poll(self, now: float) -> list:
        from wire.packets import DataPacket
        out = []
        while self.sent < self.count and self._next <= now:
            path = self.paths[self.sent % len(self.paths)]
            out.append((path.nic, DataPacket(src=path.src, dst=path.dst, ev=self.sent & 0xFFFF, qp=1, psn=self.sent,
                                             va=0, rkey=0, length=1000, msg_id=0, msg_len=1000, tsval=0,
                                             payload=bytes(1000))))
            self.sent += 1
            self._next += self.gap
        return out

    def next_wakeup(self):
        return self._next if self.sent < self.count else None


def forwarding_only(repeat: int, count: int = 300) -> dict:
    """Switch packets per CPU-second of the fat-tree with `Sprayer` endpoints (fastest of `repeat`)."""
    from controller.routes import compute_programs
    from netsim import Simulator, from_topology
    from topologies.builders import fat_tree

    topo = fat_tree(8)
    programs = compute_programs(topo)
    cpus, packets = [], 0
    for _ in range(repeat):
        net = from_topology(topo, programs, Simulator(1), rate_bps=10e9)
        hosts = [h.name for h in topo.hosts]
        for i, host in enumerate(hosts):
            peer = hosts[(i + len(hosts) // 2) % len(hosts)]
            net.hosts[host].attach(Sprayer(net.mrc_paths(host, peer), count, 1.2e-6))
        cpu0 = time.process_time()
        net.sim.run()
        cpus.append(time.process_time() - cpu0)
        packets = sum(sw.counters["rx"] for sw in net.switches.values())
    return {"packets": packets, "cpu_s": min(cpus), "cpus_s": cpus, "packets_per_cpu_s": packets / min(cpus)}


PURE_PERMUTATION = """
import json, sys
from benchmarks import bench_netsim as b
runs = [b.time_case(case, int(sys.argv[1])) for case in b.permutation_cases()]
print(json.dumps({"build": str(__import__("speedups").build_in_use()), "runs": runs}))
"""


def pure_permutation(repeat: int) -> dict:
    """The permutation cases as pure Python, in a child process: build, packets, wall and CPU seconds."""
    env = dict(os.environ, **{speedups.PURE_ENV: "1"})
    done = subprocess.run([sys.executable, "-c", PURE_PERMUTATION, str(repeat)], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the pure-Python run failed: {done.stderr.strip()[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    runs = result["runs"]
    result.update(packets=sum(r["packets"] for r in runs), wall_s=sum(r["wall_s"] for r in runs),
                  cpu_s=sum(r["cpu_s"] for r in runs))
    return result


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
    build = speedups.build_in_use()
    result.details["build"] = str(build)
    print(f"   build: {build}", flush=True)
    runs = [time_case(case, repeat) for case in permutation_cases()]
    result.details["permutation"] = runs
    for run in runs:
        print(_line(f"permutation, {run['case']}", run), flush=True)
    packets = sum(r["packets"] for r in runs)
    wall, cpu = sum(r["wall_s"] for r in runs), sum(r["cpu_s"] for r in runs)
    result.add("permutation: simulated packets per wall-second", packets / wall, "pkt/s")
    result.add("permutation: simulated packets per CPU-second", packets / cpu, "pkt/s")
    if build.compiled:
        pure = pure_permutation(repeat)
        result.details["permutation_pure_python"] = pure
        assert pure["packets"] == packets, "the pure-Python run simulated other packets"
        print(f"   permutation as pure Python: {pure['packets']} packets in {pure['wall_s']:.2f} s wall, "
              f"{pure['cpu_s']:.2f} s CPU = {pure['packets'] / pure['wall_s']:,.0f} pkt/wall-s; compiled / pure: "
              f"{pure['wall_s'] / wall:.2f}x wall, {pure['cpu_s'] / cpu:.2f}x CPU", flush=True)
        result.add("permutation as pure Python: simulated packets per wall-second", pure["packets"] / pure["wall_s"],
                   "pkt/s")
        result.add("permutation: compiled over pure Python, wall time per packet", pure["wall_s"] / wall, "x")
    fat = time_case(fat_tree_case(), repeat)
    result.details["fattree8_allreduce"] = fat
    print(_line("fat-tree k=8 all-reduce 128 KB", fat), flush=True)
    note = "" if fat["completed"] else "did not complete"
    result.add("fat-tree k=8 all-reduce: simulated packets per wall-second", fat["packets_per_wall_s"], "pkt/s",
               note=note)
    result.add("fat-tree k=8 all-reduce: wall time", fat["wall_s"], "s", better="lower", note=note)
    result.add("fat-tree k=8 all-reduce: CPU time", fat["cpu_s"], "s", better="lower", note=note)
    fwd = forwarding_only(repeat)
    result.details["forwarding_only"] = fwd
    print(f"   forwarding only (fat-tree k=8, no transport): {fwd['packets']} packets in {fwd['cpu_s']:.2f} CPU-s "
          f"= {fwd['packets_per_cpu_s']:,.0f} pkt/CPU-s", flush=True)
    result.add("forwarding only, no transport: switch packets per CPU-second", fwd["packets_per_cpu_s"], "pkt/s")
    result.details["load_average"] = os.getloadavg()
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeat", type=int, default=2, help="runs of each case; the fastest counts (default 2)")


def main(argv=None) -> int:
    from benchmarks.run import run_standalone
    return run_standalone(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
