"""One supervisor per run: when the process that owns a run dies, whatever way, the run goes with it.

    python -m testbed.supervisor STATE_FILE RUN_ID        (started by `RunRegistry(supervised=True)`)

The run's owner starts the supervisor first thing, with the read end of a pipe as its standard
input, and keeps the write end. The kernel closes that end when the owner dies, so the supervisor
reads end-of-file the moment the owner is gone, even after a SIGKILL or a crash that ran no
tear-down. It then does what `mrc-testbed clean` would for that run (`testbed.registry.clean_run`):
it ends every process recorded in the run's state file or carrying the run's marker in its
environment (switches, agents, tcpdump, probers, load generators, node shells, and whatever a user
started in a host), which takes Mininet's anonymous namespaces and their veths with them, and
removes the named namespaces and root-namespace interfaces the run recorded. A run that ends cleanly
writes `done` on the pipe first, and the supervisor leaves without touching anything.

Why a supervisor rather than PR_SET_PDEATHSIG in each child: the kernel sends a child's death
signal when the *thread* that forked it exits, not the process, so a process started from a
worker thread (fault timers, a CLI command's thread) would be killed when that thread ends, while a
pipe is closed only when the whole process is gone. The supervisor also reaches processes that
are not the owner's children (node shells detach with setsid; what runs in them is their child).

The supervisor runs in a session of its own and ignores SIGINT and SIGHUP, so a terminal's Ctrl-C
or hang-up, which the owner handles with its own tear-down, does not take the supervisor first.
It carries no run marker: clean-up never ends it. Once the owner is gone it goes to the real-time
priority of the testbed's own thread (testbed.realtime, when on), above the switches and agents it
is about to end, which may keep the CPUs busy at their own real-time priority.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from testbed import realtime
from testbed.registry import RunState, clean_run, end_processes, marked_processes, process_start_time

REPO = Path(__file__).resolve().parent.parent
DONE = b"done\n"               # what the owner writes when its run ended cleanly
GRACE_S = 0.5                  # SIGTERM first, SIGKILL after this: nobody waits for their output
SWEEP_S = 2.0                  # how long stragglers (a child forked as the owner died) are looked for


class Supervisor:
    """The owner's side: start the supervisor of a run, release it when the run ended cleanly."""

    def __init__(self, proc: subprocess.Popen, pipe: int) -> None:
        self.proc = proc
        self._pipe = pipe          # write end; closed by the kernel if this process dies

    @classmethod
    def start(cls, state_path: Path, run_id: str) -> "Supervisor":
        """Start the supervisor of the run recorded in `state_path`."""
        read_end, write_end = os.pipe()           # both close-on-exec: no other child inherits them
        try:
            proc = subprocess.Popen([sys.executable, "-m", "testbed.supervisor", str(state_path), run_id],
                                    stdin=read_end, stdout=subprocess.DEVNULL, cwd=str(REPO),
                                    start_new_session=True)
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        return cls(proc, write_end)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def record(self) -> dict:
        """{pid, start}: how the run's state file names its supervisor."""
        return {"pid": self.proc.pid, "start": process_start_time(self.proc.pid)}

    def release(self, timeout: float = 5.0) -> None:
        """The run ended cleanly: the supervisor exits without acting (waited for up to `timeout` s)."""
        if self._pipe < 0:
            return
        try:
            os.write(self._pipe, DONE)
        except OSError:               # it is gone already
            pass
        os.close(self._pipe)
        self._pipe = -1
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def wait_for_owner(fd: int = 0) -> bool:
    """Block until the owner releases the run (True) or dies (False: end-of-file without `done`)."""
    received = b""
    while True:
        try:
            chunk = os.read(fd, 64)
        except InterruptedError:
            continue
        if not chunk:
            return DONE in received
        received += chunk


def end_run(state_path: Path, run_id: str) -> str:
    """Remove what the run left (its state file as recorded at the owner's death); return a summary."""
    began = time.monotonic()
    try:
        state = RunState.load(state_path)
    except (OSError, ValueError, TypeError):       # gone or unreadable: its marker still names its processes
        state = RunState(run_id=run_id, owner_pid=0, owner_start=0, created=0.0)
    report = clean_run(state, grace=GRACE_S)
    deadline = time.monotonic() + SWEEP_S
    while time.monotonic() < deadline:            # a child the owner was forking as it died
        stragglers = marked_processes(run_id)
        if not stragglers:
            break
        report.killed += end_processes(stragglers, grace=GRACE_S)
    return f"{report.describe()} in {time.monotonic() - began:.2f} s"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m testbed.supervisor STATE_FILE RUN_ID", file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if wait_for_owner():
        return 0
    if realtime.enabled():
        try:
            os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(realtime.CONTROL_PRIORITY))
        except OSError:                  # not allowed here: it competes as an ordinary process
            pass
    summary = end_run(Path(argv[0]), argv[1])
    try:
        print(f"mrc-testbed supervisor: run {argv[1]} ended without releasing its supervisor; {summary}",
              file=sys.stderr, flush=True)
    except OSError:                      # the owner's terminal or pipe is gone: the work is done
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
