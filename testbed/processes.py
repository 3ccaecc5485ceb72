"""Ending a process the testbed started: one rule for every caller."""
from __future__ import annotations

import signal
import subprocess

DEFAULT_GRACE_S = 5.0


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
