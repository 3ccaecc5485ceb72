"""A netsim case as the only case of a fresh process, as htsim_uec runs each of its cases; and the
clock of a case's set-up (`SetupClock`), which every netsim benchmark of a case reads.

    python -m benchmarks.case_alone       (the child: a pickled case on standard input, one JSON line out)

`run_alone(case)` starts that child and returns, for both benchmarks that need a case alone (the
fat-tree k=16's peak memory in `bench_netsim`, a case beside htsim_uec in `netsim_vs_htsim`):

- `wall_s`, `cpu_s`: the case's own time (`NetsimBackend.run_case`; the process's start and imports
  not counted), `setup_cpu_s` the CPU to its first sample (`SetupClock`);
- `packets` (simulated), `completed`, `completion_s`, `build` (the speedups build it ran on);
- `peak_rss_bytes`: the child's peak resident memory, which is the case's;
- `imports_wall_s`: the child's imports, from its `main()` on (reading the case imports what it is
  made of; then the backend); the interpreter's own start is in the process's time below;
- `process_wall_s`, `process_cpu_s`: the whole child, from its start to its exit, as htsim_uec's
  process is timed.

A case that runs long says how far it got every PROGRESS_S seconds, on standard error.
"""
from __future__ import annotations

import json
import pickle
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRESS_S = 30.0


class SetupClock:
    """A case's `progress` callback that notes the CPU time of its first sample, at simulated time 0:
    the set-up (topology, programs, network, endpoints, connections, payload) and the workload's
    start (every host's first poll, the first packets sent). `seconds` is None when the case ended
    before that sample (its first progress report was the end)."""

    def __init__(self) -> None:
        self.started = time.process_time()
        self.seconds: float | None = None
        self._reported = False

    def __call__(self, share: float) -> None:
        if not self._reported:
            self._reported = True
            if share < 1.0:
                self.seconds = time.process_time() - self.started


def run_alone(case) -> dict:
    """Run `case` (an experiments.scenario case) in a fresh process; what it measured (above)."""
    from experiments.conditions import children_cpu_s
    began, cpu_before = time.monotonic(), children_cpu_s()
    done = subprocess.run([sys.executable, "-m", "benchmarks.case_alone"], cwd=ROOT, input=pickle.dumps(case),
                          stdout=subprocess.PIPE)
    process_wall, process_cpu = time.monotonic() - began, children_cpu_s() - cpu_before
    if done.returncode != 0:
        raise RuntimeError(f"netsim's case {case.label!r} in a process of its own failed (exit {done.returncode}; "
                           "its error is above)")
    run = json.loads(done.stdout.decode().strip().splitlines()[-1])
    run.update(process_wall_s=process_wall, process_cpu_s=process_cpu)
    return run


def main() -> int:
    wall0 = time.perf_counter()
    case = pickle.load(sys.stdin.buffer)
    import speedups
    from experiments.backends.netsim_backend import NetsimBackend
    wall1 = time.perf_counter()
    clock = SetupClock()
    reported = [time.monotonic()]

    def progress(share: float) -> None:
        clock(share)
        now = time.monotonic()
        if now - reported[0] >= PROGRESS_S:
            reported[0] = now
            print(f"   ... {share:.0%} delivered, {time.process_time():.0f} s CPU", file=sys.stderr, flush=True)

    record = NetsimBackend().run_case(case, progress)
    wall, cpu = time.perf_counter() - wall1, time.process_time() - clock.started
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "setup_cpu_s": clock.seconds, "imports_wall_s": wall1 - wall0,
                      "packets": record.switch_stats.get("rx", 0), "completed": record.completed,
                      "completion_s": record.completion_time, "build": str(speedups.build_in_use()),
                      "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
