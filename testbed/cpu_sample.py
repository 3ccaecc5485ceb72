"""CPU samples read from /proc: of processes (time on a CPU, time waiting for one, wake-ups) and
of the whole machine. The fidelity monitor's `CpuWatch` takes them on this machine; on a cluster
server this file runs as a sampler program of its own (`python -c <this file> FOLDER INTERVAL
[NODE ...]`), which needs nothing of the testbed there: only the standard library.

As a program it prints one JSON line per `INTERVAL` seconds until it is ended (on a server, by
the watchdog when its ssh connection closes): the server's monotonic time, its CPUs' busy and
total ticks, its load average, its CPU count, and the samples of every process named by a PID
file in `FOLDER` (`NAME.pid` holding "PID START", as testbed.cluster's watchdog writes them; with
NODEs, only names that are a NODE or begin with "NODE-": servers that share a folder, as
namespace servers share /tmp, see their own)::

    {"t": 1234.5, "machine": [busy, total], "load": 3.2, "cpus": 2, "processes": {"s1": [run_ns, wait_ns, wakeups]}}
"""
from __future__ import annotations

import json
import os
import sys
import time


def process_sched(pid: int) -> tuple[int, int, int] | None:
    """(ns on a CPU, ns waiting for a CPU, wake-ups) summed over a process's threads
    (/proc/PID/task/*/schedstat); None once it is gone."""
    run = wait = slices = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat", "rb") as f:
                a, b, c = f.read().split()[:3]
        except (OSError, ValueError):
            continue                         # a thread that ended between the listing and the read
        run, wait, slices = run + int(a), wait + int(b), slices + int(c)
    return run, wait, slices


def machine_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks of all CPUs since boot."""
    with open("/proc/stat", "rb") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)        # idle + iowait
    total = sum(values[:8])                                          # guest time is counted in user
    return total - idle, total


def folder_sample(folder: str, nodes: frozenset = frozenset()) -> dict:
    """One sample of the machine and of the processes of `folder`'s PID files (of `nodes` only,
    when given), this one's own excepted."""
    processes = {}
    for entry in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
        name = entry[:-len(".pid")]
        if not entry.endswith(".pid") or (nodes and name.split("-")[0] not in nodes):
            continue
        try:
            with open(os.path.join(folder, entry)) as f:
                pid = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue                         # being written, or gone
        sched = process_sched(pid) if pid != os.getpid() else None
        if sched is not None:
            processes[name] = list(sched)
    return {"t": time.monotonic(), "machine": list(machine_ticks()), "load": os.getloadavg()[0],
            "cpus": os.cpu_count() or 1, "processes": processes}


def main(argv: list[str]) -> int:
    folder, interval, nodes = argv[0], float(argv[1]), frozenset(argv[2:])
    while True:
        print(json.dumps(folder_sample(folder, nodes)), flush=True)
        time.sleep(interval)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (KeyboardInterrupt, BrokenPipeError):
        sys.exit(0)
