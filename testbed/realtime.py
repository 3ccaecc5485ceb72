"""Real-time scheduling for the emulation's own processes: switch processes and host agents.

On a shared machine a woken switch or agent waits for the CPU behind whatever else runs: under the
kernel's fair scheduler that wait is a time slice of the other job (milliseconds), whatever the
nice value, and the fidelity monitor then finds the run distorted (late timer wake-ups, long waits
for a CPU). Started under SCHED_RR at a low real-time priority (`chrt --rr 1`), the emulation's
processes preempt ordinary jobs as soon as they wake, the way Mininet-HiFi isolates its nodes.
They still share the CPUs among themselves, and the kernel's real-time throttling
(/proc/sys/kernel/sched_rt_runtime_us, 95 % by default) leaves the rest of the machine a share
if they ever spin.

The testbed's own thread, which times the faults and follows the run, and the shell that cuts
links go one priority higher while a network runs (`ControlPriority`): a run that asks for more
than the machine sustains (a rate above the calibration) keeps the CPUs busy with the emulation,
and before this its link kill "at 30 %" came after the collective had finished. They sleep nearly
all the time, so they take little from the emulation.

On by default where it works (root, `chrt` on PATH, the kernel allows SCHED_RR); MRC_REALTIME=0
turns it off. Calibrate with the setting the runs will use. Above the calibrated rate an
emulation at real-time priority also starves the kernel's own threads: a link set down, which
waits for them, took effect 235-290 ms late (6 ms at the calibrated rate); the fidelity monitor
judges every fault's lateness for that reason.
"""
from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import threading

log = logging.getLogger(__name__)

ENV = "MRC_REALTIME"
PRIORITY = 1                         # the lowest real-time priority: above every ordinary process
CONTROL_PRIORITY = 2                 # the testbed's own thread and link-cutting shell: above the emulation
_OFF = ("0", "no", "off", "false", "")


def enabled() -> bool:
    """Whether the emulation's processes are to run under SCHED_RR (default on; MRC_REALTIME=0 off)."""
    return os.environ.get(ENV, "1").strip().lower() not in _OFF


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


class ControlPriority:
    """The calling thread (and the threads it starts from then on) and some helper processes at
    CONTROL_PRIORITY while a network runs, back to what they were after: the testbed's fault
    timers, progress and tear-down then come on time however busy the emulation keeps the CPUs.
    Does nothing when real-time scheduling is off or refused."""

    def __init__(self) -> None:
        self._saved: list[tuple[int, int, int]] = []      # (thread or process id, policy, priority)

    @property
    def raised(self) -> bool:
        """Whether anything is at CONTROL_PRIORITY now."""
        return bool(self._saved)

    def raise_(self, pids: tuple[int, ...] = ()) -> None:
        """Raise the calling thread and the processes `pids` (each once)."""
        if not (enabled() and available()):
            return
        for tid in (threading.get_native_id(), *pids):
            if any(saved[0] == tid for saved in self._saved):
                continue
            try:
                before = (os.sched_getscheduler(tid), os.sched_getparam(tid).sched_priority)
                os.sched_setscheduler(tid, os.SCHED_RR, os.sched_param(CONTROL_PRIORITY))
            except OSError as err:        # gone already, or refused: it keeps its turn as it is
                log.debug("control priority for %d: %s", tid, err)
                continue
            self._saved.append((tid, *before))

    def lower(self) -> None:
        """Put everything raised back to its own policy and priority (once)."""
        while self._saved:
            tid, policy, priority = self._saved.pop()
            try:
                os.sched_setscheduler(tid, policy, os.sched_param(priority))
            except OSError as err:        # a process that ended has nothing to put back
                log.debug("restoring scheduling of %d: %s", tid, err)
