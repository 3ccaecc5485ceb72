"""Simulator speed: simulated packets per wall-second on the permutation case and a fat-tree all-reduce.

    .venv/bin/python -m benchmarks.bench_netsim [--repeat 2] [--against 091479d [--compile-against] [--interleave N]] [--fat-tree-k16]

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

With `--against REV`, the same cases (permutation and fat-tree) also run on the code of git
revision REV of this checkout, exported to a scratch folder with this benchmark beside it, in a
child process: "before" and "after" in one run, with their ratio (packet counts may differ where
REV's transport behaves otherwise, so the ratio is per simulated packet). REV runs as pure Python
unless `--compile-against` compiles it first (about two minutes), to compare compiled with compiled.
With `--interleave N`, REV and now run in child processes taking turns N times, and CPU time per
case is compared, fastest turn each: on a shared machine whose load moves, the steadier figure.

A third figure isolates the simulator from the transport: on fattree:8, every host sprays 1 KB
data packets over its uSID paths to the host half the fabric away, paced at 1.2 us, through
trivial endpoints (`Sprayer`) that send and count and nothing else; its packets per CPU-second
are netsim's own forwarding speed (links, queues, switches, event loop).

Issue 29's cases, timed per case as uet-htsim's are (benchmarks/netsim_vs_htsim.py: the permutation
of experiments/datacenter.yaml and a fat-tree k=8 permutation of 1 MB flows), then set beside
htsim_uec's time on the same flows (run where it is built, its recorded figures elsewhere), and again
each as the only case of a fresh process, as htsim_uec runs each (`benchmarks.case_alone`: here
they run after the other cases, in the memory those freed, slower for the same instructions); that
line gives the case's own time and its whole process's, start to exit. `--fat-tree-k16` adds the permutation of 1 MiB flows
on fattree:16 (1,024 hosts) in a child process of its own: wall and CPU time, simulated packets
per wall-second and its peak resident memory, against the issue's limits (10 minutes, 4 GiB).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import speedups
from benchmarks.case_alone import SetupClock
from benchmarks.figures import Measurement
from experiments.conditions import Measuring

NAME = "netsim"
DESCRIPTION = ("simulator speed: simulated packets per wall-second (permutation; fat-tree k=8 all-reduce; "
               "data-center and fat-tree k=8 permutations per case)")
ROOT = Path(__file__).resolve().parent.parent
PERMUTATION = ROOT / "experiments" / "permutation.yaml"
FAT_TREE = {"name": "bench-netsim-fattree8", "seed": 1, "horizon_s": 4.0, "sample_interval_s": 0.005,
            "topology": "fattree:8", "link": {"rate_bps": 100_000_000},
            "workload": {"kind": "allreduce", "bytes": 131072, "chunk_bytes": 65536},
            "transports": [{"name": "MRC", "mode": "mrc"}]}


def time_case(case, repeat: int) -> dict:
    """Simulated packets, wall and CPU seconds (fastest of `repeat` runs) and outcome of one case, and
    the CPU seconds to its first sample (`SetupClock`, fastest of the runs)."""
    from experiments.backends.netsim_backend import NetsimBackend
    walls, cpus, setups, record = [], [], [], None
    measuring = Measuring()
    for _ in range(repeat):
        wall0 = time.perf_counter()
        clock = SetupClock()
        record = NetsimBackend().run_case(case, clock)
        walls.append(time.perf_counter() - wall0)
        cpus.append(time.process_time() - clock.started)
        setups.append(clock.seconds)
    packets = record.switch_stats.get("rx", 0)
    return {"case": case.label, "packets": packets, "wall_s": min(walls), "cpu_s": min(cpus), "walls_s": walls,
            "cpus_s": cpus, "setup_cpu_s": None if None in setups else min(setups), "completed": record.completed,
            "completion_s": record.completion_time,
            "packets_per_wall_s": packets / min(walls), "packets_per_cpu_s": packets / min(cpus),
            "cpu_us_per_packet": min(cpus) / packets * 1e6 if packets else None,
            "conditions": measuring.done()}


def _load(run: dict) -> str:
    """The 1-min load while a case ran, as printed: "load 1.2 -> 1.4"."""
    measured = run["conditions"]
    return f"load {measured['load_1min_start']:.1f} -> {measured['load_1min_end']:.1f}"


def _setup(run: dict, digits: int) -> str:
    """A run's set-up CPU as printed ("n/a" when the case ended before its first sample)."""
    return "n/a" if run.get("setup_cpu_s") is None else f"{run['setup_cpu_s']:.{digits}f} s"


def _line(what: str, run: dict) -> str:
    """One printed line: packets, wall and CPU time of a case."""
    return (f"   {what}: {run['packets']} packets in {run['wall_s']:.2f} s wall, {run['cpu_s']:.2f} s CPU "
            f"= {run['packets_per_wall_s']:,.0f} pkt/wall-s, {run['packets_per_cpu_s']:,.0f} pkt/CPU-s "
            f"({run['cpu_us_per_packet']:.1f} us CPU per packet; {_load(run)})")


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
    from simulation import Simulation
    from topologies.builders import fat_tree

    topo = fat_tree(8)
    programs = compute_programs(topo)
    cpus, packets = [], 0
    for _ in range(repeat):
        net = from_topology(topo, programs, Simulator(1), rate_bps=10e9)
        hosts = [h.name for h in topo.hosts]
        paths = Simulation(net).paths
        for i, host in enumerate(hosts):
            peer = hosts[(i + len(hosts) // 2) % len(hosts)]
            net.hosts[host].attach(Sprayer(paths(host, peer, "mrc"), count, 1.2e-6))
        cpu0 = time.process_time()
        net.sim.run()
        cpus.append(time.process_time() - cpu0)
        packets = sum(sw.counters["rx"] for sw in net.switches.values())
    return {"packets": packets, "cpu_s": min(cpus), "cpus_s": cpus, "packets_per_cpu_s": packets / min(cpus)}


CHILD = """
import json, sys
from benchmarks import bench_netsim
repeat, fat_tree = int(sys.argv[1]), sys.argv[2] == "fat-tree"
runs = [bench_netsim.time_case(case, repeat) for case in bench_netsim.permutation_cases()]
fat = bench_netsim.time_case(bench_netsim.fat_tree_case(), repeat) if fat_tree else None
cases = bench_netsim.htsim_case_runs(repeat) if fat_tree else None
print(json.dumps({"build": str(__import__("speedups").build_in_use()), "runs": runs, "fat_tree": fat,
                  "htsim_cases": cases}))
"""


def run_child(tree: Path, repeat: int, fat_tree: bool, env: dict, what: str) -> dict:
    """The permutation cases (and the fat-tree) run by the code under `tree`, in a child process:
    build, runs, and the permutation's packets, wall and CPU seconds summed."""
    done = subprocess.run([sys.executable, "-c", CHILD, str(repeat), "fat-tree" if fat_tree else "-"], cwd=tree,
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the run of {what} failed: {done.stderr.strip()[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    runs = result["runs"]
    result.update(packets=sum(r["packets"] for r in runs), wall_s=sum(r["wall_s"] for r in runs),
                  cpu_s=sum(r["cpu_s"] for r in runs))
    return result


def pure_permutation(repeat: int) -> dict:
    """The permutation cases as pure Python, in a child process."""
    return run_child(ROOT, repeat, False, dict(os.environ, **{speedups.PURE_ENV: "1"}), "pure Python")


def export_revision(rev: str, into: Path) -> None:
    """The files of git revision `rev` of this checkout in `into`, with this benchmark (and
    `benchmarks.case_alone`, which it imports), the record of its conditions (`experiments.conditions`)
    and the `speedups` package of now beside them (what the child process imports)."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", "--end-of-options",
                             f"{rev}^{{commit}}"], capture_output=True, text=True)
    if commit.returncode != 0:
        raise ValueError(f"--against {rev}: not a commit of the git checkout {ROOT}")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit.stdout.strip()],
                             capture_output=True)
    if archive.returncode != 0:
        raise ValueError(f"--against {rev}: {archive.stderr.decode(errors='replace').strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        files = [m for m in tar.getmembers() if m.isfile() or m.isdir()]     # no links: none is code
        try:
            tar.extractall(into, members=files, filter="data")
        except TypeError:                         # Python before 3.11.4: no extraction filters
            tar.extractall(into, members=files)
    if not (into / "experiments" / "backends").is_dir():
        raise ValueError(f"--against {rev}: that revision has no netsim backend to run the cases on")
    (into / "benchmarks").mkdir(exist_ok=True)
    shutil.copy2(Path(__file__).resolve(), into / "benchmarks" / "bench_netsim.py")
    shutil.copy2(ROOT / "benchmarks" / "case_alone.py", into / "benchmarks" / "case_alone.py")
    shutil.copy2(ROOT / "experiments" / "conditions.py", into / "experiments" / "conditions.py")
    shutil.copytree(ROOT / "speedups", into / "speedups", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("*.json", "*.so", "__pycache__"))


@contextlib.contextmanager
def revision_tree(rev: str, compiled: bool = False):
    """A scratch folder with the code of git revision `rev` (`export_revision`), compiled with
    `python -m speedups build` first when `compiled` (else it runs as pure Python)."""
    with tempfile.TemporaryDirectory(prefix="bench-netsim-") as tmp:
        export_revision(rev, Path(tmp))
        if compiled:
            print(f"   compiling revision {rev} (python -m speedups build) ...", flush=True)
            built = subprocess.run([sys.executable, "-m", "speedups", "build"], cwd=tmp, capture_output=True, text=True)
            if built.returncode != 0:
                raise RuntimeError(f"compiling revision {rev} failed: {(built.stdout + built.stderr).strip()[-2000:]}")
        yield Path(tmp)


def run_at_revision(rev: str, repeat: int, fat_tree: bool = True, compiled: bool = False) -> dict:
    """The permutation cases (and the fat-tree) on the code of git revision `rev` (compiled first
    when `compiled`, else pure Python)."""
    with revision_tree(rev, compiled) as tree:
        env = {k: v for k, v in os.environ.items() if k != speedups.PURE_ENV}
        return run_child(tree, repeat, fat_tree, env, f"revision {rev}")


def _case_cpu(result: dict) -> dict:
    """{case: CPU seconds} of one child's run (the permutation cases summed)."""
    out = {"permutation": result["cpu_s"], "fat-tree k=8 all-reduce 128 KB": result["fat_tree"]["cpu_s"]}
    out.update({what: run["cpu_s"] for what, run in (result.get("htsim_cases") or {}).items()})
    return out


def compare_interleaved(result: Measurement, rev: str, rounds: int, compiled: bool) -> None:
    """Revision `rev` and now, each in child processes taking turns `rounds` times (one run of every
    case a turn): on a shared machine whose load moves, turns see the same load. Prints and adds now
    over `rev` in CPU time per case, fastest turn of each."""
    env = {k: v for k, v in os.environ.items() if k != speedups.PURE_ENV}
    best: dict[str, dict[str, float]] = {"then": {}, "now": {}}
    with revision_tree(rev, compiled) as tree:
        for turn in range(rounds):
            for side, where in (("then", tree), ("now", ROOT)):
                for what, cpu in _case_cpu(run_child(where, 1, True, env, f"{side} ({rev})")).items():
                    best[side][what] = min(cpu, best[side].get(what, cpu))
            print(f"   turn {turn + 1} of {rounds} done (load average {os.getloadavg()[0]:.1f})", flush=True)
    for what, then in best["then"].items():
        now = best["now"].get(what)
        if now is None:
            continue
        print(f"   {what}: {then:.3f} s CPU at {rev}, {now:.3f} s now: now over {rev} {then / now:.2f}x "
              f"(fastest of {rounds} interleaved turns)", flush=True)
        result.add(f"{what}: now over {rev}, CPU time per case, interleaved", then / now, "x")


def _compare_with_revision(result: Measurement, rev: str, repeat: int, now: dict, fat: dict,
                           compiled: bool = False) -> None:
    """Add the figures of revision `rev` and now's speed over them, per simulated packet."""
    then = run_at_revision(rev, repeat, compiled=compiled)
    result.details[f"at_{rev}"] = then
    ratio = (now["packets"] / now["wall_s"]) / (then["packets"] / then["wall_s"])
    print(f"   permutation at {rev}: {then['packets']} packets in {then['wall_s']:.2f} s wall = "
          f"{then['packets'] / then['wall_s']:,.0f} pkt/wall-s ({then['build']}); now over {rev}: {ratio:.2f}x "
          f"per packet", flush=True)
    result.add(f"permutation at {rev}: simulated packets per wall-second", then["packets"] / then["wall_s"], "pkt/s")
    result.add(f"permutation: now over {rev}, wall time per packet", ratio, "x")
    old = then["fat_tree"]
    fat_ratio = fat["packets_per_wall_s"] / old["packets_per_wall_s"]
    print(_line(f"fat-tree k=8 all-reduce 128 KB at {rev}", old) + f"; now over {rev}: {fat_ratio:.2f}x per packet",
          flush=True)
    result.add(f"fat-tree k=8 all-reduce at {rev}: wall time", old["wall_s"], "s", better="lower")
    result.add(f"fat-tree k=8 all-reduce: now over {rev}, wall time per packet", fat_ratio, "x")
    _compare_cases_with_revision(result, rev, then.get("htsim_cases") or {})


# --- the cases of issue 29 (item 5): netsim against uet-htsim's wall time per case ---------------

K16_LIMITS = {"wall_s": 600.0, "rss_bytes": 4 << 30}      # issue 29: on one core, <= 10 min and <= 4 GiB


def fat_tree_permutation_scenario(k: int) -> dict:
    """A permutation of 1 MiB flows on fattree:k at data-center speed (datacenter.yaml's links:
    100 Gbit/s, 1 us cables, 4 KB packets, its queue, trim and ECN thresholds), MRC, seed 1."""
    link = {"rate_bps": 100_000_000_000, "delay_s": 1.0e-6, "mtu_payload": 4096, "queue_depth": 64,
            "trim_threshold": 48, "ecn_threshold": 24, "ecn_max_threshold": 48}
    return {"name": f"bench-netsim-fattree{k}-permutation", "seed": 1, "horizon_s": 0.05,
            "sample_interval_s": 0.00002, "topology": f"fattree:{k}", "link": link,
            "workload": {"kind": "permutation", "bytes": 1 << 20, "chunk_bytes": 262144},
            "transports": [{"name": "MRC", "mode": "mrc"}]}


def fat_tree_permutation_case(k: int):
    """The case of `fat_tree_permutation_scenario(k)`."""
    from experiments.scenario import parse_scenario
    [case] = parse_scenario(fat_tree_permutation_scenario(k), path="<benchmark netsim>").cases()
    return case


def htsim_case_runs(repeat: int) -> dict:
    """{label: time_case(...)} of the cases set beside uet-htsim (benchmarks.netsim_vs_htsim.cases:
    the 4x4x4 data-center permutation and the fat-tree k=8 permutation of 1 MB flows)."""
    from benchmarks.netsim_vs_htsim import cases
    return {label: time_case(case, repeat) for label, case in cases()}


def _compare_cases_with_revision(result: Measurement, rev: str, then: dict) -> None:
    """Print and add now over revision `rev`, CPU time per case, for issue 29's cases both ran."""
    for what, old in then.items():
        now = result.details.get(what)
        if now is None:
            continue
        ratio = old["cpu_s"] / now["cpu_s"]
        print(_line(f"{what} at {rev}", old) + f"; now over {rev}: {ratio:.2f}x CPU time per case", flush=True)
        result.add(f"{what}: now over {rev}, CPU time per case", ratio, "x")


def measure_htsim_cases(result: Measurement, repeat: int) -> None:
    """The 4x4x4 data-center permutation and the fat-tree k=8 permutation of 1 MiB flows, timed per case."""
    for what, run in htsim_case_runs(repeat).items():
        result.details[what] = run
        print(_line(what, run) + f"; to its first sample (set-up) {_setup(run, 3)} CPU of it", flush=True)
        note = "" if run["completed"] else "did not complete"
        result.add(f"{what}: wall time per case", run["wall_s"], "s", better="lower", note=note)
        result.add(f"{what}: CPU time per case", run["cpu_s"], "s", better="lower", note=note)
        result.add(f"{what}: simulated packets per wall-second", run["packets_per_wall_s"], "pkt/s", note=note)
        if run["setup_cpu_s"] is not None:
            result.add(f"{what}: set-up CPU time (to the first sample)", run["setup_cpu_s"], "s", better="lower",
                       note=note)


def fat_tree_permutation_alone(k: int) -> dict:
    """The fat-tree permutation of `fat_tree_permutation_scenario(k)` in a child process of its own,
    so that its peak resident memory is the case's: packets, wall and CPU time, peak RSS."""
    from benchmarks.case_alone import run_alone
    measuring = Measuring()
    run = run_alone(fat_tree_permutation_case(k))
    run.update(packets_per_wall_s=run["packets"] / run["wall_s"], packets_per_cpu_s=run["packets"] / run["cpu_s"],
               conditions=measuring.done())
    return run


def measure_k16(result: Measurement) -> None:
    """Run, print and add the fat-tree k=16 figures, against issue 29's limits."""
    print("   fat-tree k=16 permutation, 1,024 hosts, 1 MiB flows at 100 Gbit/s (one process) ...", flush=True)
    run = fat_tree_permutation_alone(16)
    result.details["fattree16_permutation"] = run
    rss = run["peak_rss_bytes"]
    fits = run["wall_s"] <= K16_LIMITS["wall_s"] and rss <= K16_LIMITS["rss_bytes"]
    print(f"   fat-tree k=16 permutation ({run['build']}): {run['packets']} packets in {run['wall_s']:.1f} s wall, "
          f"{run['cpu_s']:.1f} s CPU (to its first sample {_setup(run, 1)}) = "
          f"{run['packets_per_wall_s']:,.0f} simulated pkt/wall-s, peak RSS {rss / 2**30:.2f} GiB; completed {run['completed']} at {run['completion_s']}; "
          f"{'within' if fits else 'OUTSIDE'} 10 min and 4 GiB ({_load(run)})",
          flush=True)
    note = "" if run["completed"] else "did not complete"
    result.add("fat-tree k=16 permutation: wall time", run["wall_s"], "s", better="lower", note=note)
    result.add("fat-tree k=16 permutation: simulated packets per wall-second", run["packets_per_wall_s"], "pkt/s",
               note=note)
    result.add("fat-tree k=16 permutation: peak RSS", rss / 2**20, "MiB", better="lower", note=note)
    if run["setup_cpu_s"] is not None:
        result.add("fat-tree k=16 permutation: set-up CPU time (to the first sample)", run["setup_cpu_s"], "s",
                   better="lower", note=note)


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
    measure_htsim_cases(result, repeat)
    against = getattr(options, "against", None)
    compiled_against = getattr(options, "compile_against", False)
    if against and getattr(options, "interleave", None):
        compare_interleaved(result, against, options.interleave, compiled_against)
    elif against:
        _compare_with_revision(result, against, repeat, {"packets": packets, "wall_s": wall}, fat,
                               compiled=compiled_against)
    fwd = forwarding_only(repeat)
    result.details["forwarding_only"] = fwd
    print(f"   forwarding only (fat-tree k=8, no transport): {fwd['packets']} packets in {fwd['cpu_s']:.2f} CPU-s "
          f"= {fwd['packets_per_cpu_s']:,.0f} pkt/CPU-s", flush=True)
    result.add("forwarding only, no transport: switch packets per CPU-second", fwd["packets_per_cpu_s"], "pkt/s")
    from benchmarks.netsim_vs_htsim import measure_side_by_side
    # beside uet-htsim's htsim_uec, where it is built: netsim's times of those cases, timed above
    # and each case in a process of its own, as htsim_uec runs it (both figures printed)
    measure_side_by_side(result, repeat, timed=result.details, alone=True)
    if getattr(options, "fat_tree_k16", False):
        measure_k16(result)
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeat", type=int, default=2, help="runs of each case; the fastest counts (default 2)")
    parser.add_argument("--against", metavar="REV",
                        help="also run the cases on the code of git revision REV (e.g. 091479d, when issue 16 "
                             "was filed) and print now over REV per simulated packet")
    parser.add_argument("--compile-against", action="store_true",
                        help="compile revision REV of --against with mypyc first (python -m speedups build), "
                             "to compare compiled with compiled")
    parser.add_argument("--interleave", type=int, metavar="N",
                        help="with --against: run REV and now in child processes taking turns N times and "
                             "compare CPU time per case (steadier on a loaded machine)")
    add_k16_argument(parser)


def add_k16_argument(parser: argparse.ArgumentParser) -> None:
    """--fat-tree-k16, the option of this module run on its own and of `mrc-testbed bench` (cli/bench.py)."""
    parser.add_argument("--fat-tree-k16", action="store_true",
                        help="also run the fat-tree k=16 permutation (1,024 hosts, 1 MiB flows at 100 Gbit/s, in "
                             "a process of its own; about 10 s and 0.4 GiB of memory compiled, longer as "
                             "pure Python): wall time, simulated packets per wall-second, peak RSS, against issue "
                             "29's limits (10 minutes, 4 GiB)")


def main(argv=None) -> int:
    from benchmarks.run import run_standalone
    return run_standalone(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
