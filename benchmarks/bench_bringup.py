"""Bring-up time of the 8-host leaf-spine network on the model target, of a fat-tree k=4 on one
machine and over two (namespace) servers, and peak memory of a run.

    sudo .venv/bin/python -m benchmarks.bench_bringup

1. Brings `leafspine:4x2x2` (4 leaves, 2 spines, 8 hosts) up on the reference-model target with
   the testbed's own `TestbedNetwork`, and reports every stage (hosts, switches, links, start,
   program), the total and the tear-down time.
2. Runs the quick failover experiment on the Mininet model target (`mrc-testbed run
   experiments/failover.yaml --backend mininet --quick`) as a child process and samples, every
   0.1 s, the resident memory (VmRSS) of that process and all its descendants (host shells,
   switch processes, agents); reports the peak of the sum and the number of processes then.
3. Brings `fattree:4` (16 hosts, 20 switches) up on this machine, then over two namespace servers
   of this machine with their own sshd (testbed/local_servers.py, testbed/cluster.py: every node
   through ssh, links between the servers as tunnels) and reports both and their ratio; skipped
   without Debian's openssh-server.
Needs root and mnexec.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.cases import mininet_missing
from benchmarks.figures import WALL, Measurement
from testbed.processes import descendants as processes_below

NAME = "bringup"
DESCRIPTION = "bring-up time of leafspine:4x2x2 on the model target; peak memory of a quick failover run"
REPO = Path(__file__).resolve().parent.parent
TOPOLOGY = "leafspine:4x2x2"
CLUSTER_TOPOLOGY = "fattree:4"
SAMPLE_S = 0.1


def descendants(root: int) -> list[int]:
    """`root` and every process below it."""
    return [root, *processes_below(root)]


def rss_bytes(pid: int) -> int:
    """Resident memory of one process (0 when it is gone or has none, e.g. a zombie)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class MemorySampler(threading.Thread):
    """Samples the summed RSS of a process tree until stopped; keeps the peak."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.peak_bytes = 0
        self.peak_processes = 0
        self.samples = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(SAMPLE_S):
            pids = descendants(self.root)
            total = sum(rss_bytes(pid) for pid in pids)
            self.samples += 1
            if total > self.peak_bytes:
                self.peak_bytes, self.peak_processes = total, len(pids)

    def stop(self) -> None:
        self._done.set()
        self.join()


def measure_bringup(topology: str = TOPOLOGY, cluster_file: Path | None = None) -> dict:
    """Stage durations of one bring-up of `topology` on the model target (on the servers of
    `cluster_file` when given), and of its tear-down."""
    from experiments.backends.mininet_backend import network
    from topologies.spec import topology_from_spec
    with tempfile.TemporaryDirectory(prefix="mrc-bench-bringup-") as tmp:
        net = network(topology_from_spec(topology), "model", cluster_file, run_dir=tmp, progress=lambda _: None)
        try:
            net.start()
        finally:
            t0 = time.monotonic()
            left = net.stop()
            teardown = time.monotonic() - t0
    if left:
        raise RuntimeError(f"tear-down left {left}")
    return {"stages_s": dict(net.stage_times), "total_s": net.bring_up_s, "teardown_s": teardown}


def measure_cluster_bringup(servers: int = 2) -> dict:
    """CLUSTER_TOPOLOGY brought up on this machine, then over `servers` namespace servers."""
    from testbed.local_servers import NamespaceServers
    alone = measure_bringup(CLUSTER_TOPOLOGY)
    with tempfile.TemporaryDirectory(prefix="mrc-bench-servers-") as tmp, NamespaceServers(servers, tmp) as made:
        spread = measure_bringup(CLUSTER_TOPOLOGY, made.cluster_file)
    return {"one_machine": alone, "servers": servers, "cluster": spread}


def measure_failover_memory(timeout: float = 600.0) -> dict:
    """Peak summed RSS of a whole quick failover run on the Mininet model target."""
    with tempfile.TemporaryDirectory(prefix="mrc-bench-mem-") as tmp:
        cmd = [sys.executable, "-m", "cli", "-q", "run", "experiments/failover.yaml",
               "--backend", "mininet", "--quick", "--out", str(Path(tmp) / "out")]
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        sampler = MemorySampler(proc.pid)
        sampler.start()
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)          # the run tears its network down on Ctrl-C
            out, _ = proc.communicate(timeout=60)
            raise RuntimeError(f"quick failover run took more than {timeout:.0f} s")
        finally:
            sampler.stop()
        if proc.returncode != 0:
            raise RuntimeError(f"quick failover run exited with {proc.returncode}: {out.strip()[-400:]}")
    return {"peak_rss_bytes": sampler.peak_bytes, "processes_at_peak": sampler.peak_processes,
            "samples": sampler.samples, "wall_s": time.monotonic() - t0}


def measure(options: argparse.Namespace) -> Measurement:
    result = Measurement()
    why = mininet_missing()
    if why or getattr(options, "no_mininet", False):
        result.skipped.append(f"everything: {why or '--no-mininet'}")
        return result
    up = measure_bringup()
    result.details["bringup"] = up
    result.add(f"{TOPOLOGY} bring-up", up["total_s"], "s", better="lower", clock=WALL)
    for stage, seconds in up["stages_s"].items():
        result.add(f"  stage {stage}", seconds, "s", better="lower", clock=WALL)
    result.add("tear-down", up["teardown_s"], "s", better="lower", clock=WALL)
    if not os.access("/usr/sbin/sshd", os.X_OK):
        result.skipped.append(f"{CLUSTER_TOPOLOGY} over two namespace servers: no /usr/sbin/sshd (openssh-server)")
    else:
        spread = measure_cluster_bringup()
        result.details["cluster_bringup"] = spread
        one, two = spread["one_machine"]["total_s"], spread["cluster"]["total_s"]
        result.add(f"{CLUSTER_TOPOLOGY} bring-up, one machine", one, "s", better="lower", clock=WALL)
        result.add(f"{CLUSTER_TOPOLOGY} bring-up, two namespace servers", two, "s", better="lower", clock=WALL)
        for stage, seconds in spread["cluster"]["stages_s"].items():
            result.add(f"  stage {stage} (servers)", seconds, "s", better="lower", clock=WALL)
        result.add("  servers over one machine", two / one, "x", better="lower", clock=WALL)
    if getattr(options, "skip_memory", False):
        result.skipped.append("peak memory: --skip-memory")
        return result
    mem = measure_failover_memory()
    result.details["failover_memory"] = mem
    result.add("quick failover run: peak RSS (all processes)", mem["peak_rss_bytes"] / 2**20, "MiB",
               better="lower")
    result.add("  processes at the peak", mem["processes_at_peak"], "", better="")
    result.add("  wall time of the run", mem["wall_s"], "s", better="lower")
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--skip-memory", action="store_true", help="bring-up only")


def main(argv=None) -> int:
    from benchmarks.run import run_standalone
    return run_standalone(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
