"""Ending a process the testbed started: one rule for every caller."""
from __future__ import annotations

import os
import signal
import threading
import subprocess

DEFAULT_GRACE_S = 5.0
# A command prefix: the process gets SIGKILL as soon as the process that started it dies (before the
# run's supervisor sweeps). setpriv sets PR_SET_PDEATHSIG and execs the command in the same process,
# so no Python runs between fork and exec, as a preexec_fn would (it can deadlock under threads).
DIE_WITH_PARENT = ["setpriv", "--pdeathsig", "KILL", "--"]


class Terminated(SystemExit):
    """A SIGTERM unwinding this process as Ctrl-C does (`unwind_on_sigterm`): a run stopped by it
    keeps what it has; any other SystemExit is a program's own exit, not an interruption."""


def unwind_on_sigterm(signum, frame) -> None:
    """A signal handler: SIGTERM raises Terminated (status 128 + signal), so clean-up runs."""
    raise Terminated(128 + signum)


class HeldInterruptions:
    """A `with` block that a Ctrl-C or SIGTERM does not cut short: the signal is noted as
    `interruption` (a KeyboardInterrupt, or Terminated) for the caller to raise once what the block
    writes is written whole (a run's results after its last case). Outside the main thread, where
    handlers cannot be set, the block is unprotected."""

    def __init__(self) -> None:
        self._saved: dict[int, object] = {}
        self.interruption: BaseException | None = None

    def _hold(self, signum, frame) -> None:
        if self.interruption is None:
            self.interruption = KeyboardInterrupt() if signum == signal.SIGINT else Terminated(128 + signum)

    def __enter__(self) -> "HeldInterruptions":
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._saved[signum] = signal.signal(signum, self._hold)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._saved.items():
            signal.signal(signum, handler)
        self._saved = {}


def stop_process(proc: subprocess.Popen | None, grace: float = DEFAULT_GRACE_S) -> int | None:
    """End `proc` by its PID: SIGTERM, then SIGKILL if it is still there after `grace` seconds.

    Returns its exit status (None for no process). A process that has already exited is only reaped.
    """
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(grace)
    return proc.returncode


def descendants(*roots: int) -> list[int]:
    """The PIDs of every process below `roots` now (children, their children, ...), not the roots
    themselves; read from /proc once (a process that ends meanwhile is simply missing)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [child for root in roots for child in children.get(root, [])]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found
