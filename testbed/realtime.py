"""Real-time scheduling for the emulation's own processes: switch processes and host agents.

On a shared machine a woken switch or agent waits for the CPU behind whatever else runs: under the
kernel's fair scheduler that wait is a time slice of the other job (milliseconds), whatever the
nice value, and the fidelity monitor then finds the run distorted (late timer wake-ups, long waits
for a CPU). Started under SCHED_RR at a low real-time priority (`chrt --rr 1`), the emulation's
processes preempt ordinary jobs as soon as they wake, the way Mininet-HiFi isolates its nodes.
They still share the CPUs among themselves, and the kernel's real-time throttling
(/proc/sys/kernel/sched_rt_runtime_us, 95 % by default) leaves the rest of the machine a share
if they ever spin.

Off by default; MRC_REALTIME=1 turns it on where it works (root, `chrt` on PATH, the kernel allows
SCHED_RR). Not on by default because a run that asks for more than the machine sustains (a rate
above the calibration) then keeps the CPUs for the emulation and starves everything else: the
testbed's own process and the node shells that inject faults (a link killed "at 30 %" went down
after the collective had finished), and other users' jobs. Calibrate with the setting the runs
will use.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess

ENV = "MRC_REALTIME"
PRIORITY = 1                         # the lowest real-time priority: above every ordinary process
_OFF = ("0", "no", "off", "false", "")


def enabled() -> bool:
    """Whether the emulation's processes are to run under SCHED_RR (MRC_REALTIME=1; default off)."""
    return os.environ.get(ENV, "0").strip().lower() not in _OFF


@functools.lru_cache(maxsize=None)
def available() -> bool:
    """Whether this machine lets us start a process under SCHED_RR (tried once, with `true`)."""
    chrt = shutil.which("chrt")
    if chrt is None:
        return False
    try:
        return subprocess.run([chrt, "--rr", str(PRIORITY), "true"], capture_output=True,
                              timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def command_prefix() -> list[str]:
    """What to put before a switch's or agent's command line: `chrt --rr 1` when enabled and
    available, else nothing (the process runs as an ordinary one)."""
    if enabled() and available():
        return [shutil.which("chrt") or "chrt", "--rr", str(PRIORITY)]
    return []
