"""The start file: how the agents of a run learn their common start once every one of them is up.

A job's `start_file` names it. The agent opens its NICs, writes its `start` record, then waits
for the file; the launcher (`testbed.agents.AgentLauncher.begin`) writes it once every agent's
log has its `start` record. The file holds one UNIX time, in decimal, ended by a newline: a file
without its newline yet is still being written (a copy to a cluster server may land in pieces),
a whole line that is not a number is an error naming the file.
"""
from __future__ import annotations

import math
import os
import select
import time
from pathlib import Path
from typing import Callable

POLL_S = 0.005          # how often the agent looks for the file while waiting
WAIT_LIMIT_S = 600.0    # an agent whose launcher never writes the file gives up after this long


class StartFileError(ValueError):
    """A start file that holds no start time, or one that did not come in time; names the file."""


def write_start_file(path: str | Path, start_at: float) -> Path:
    """Write the start time `start_at` (UNIX time) to `path`, whole at once (a rename): a reader
    never sees part of it. Returns the path."""
    path = Path(path)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(f"{start_at!r}\n")
    os.replace(partial, path)
    return path


def read_start_file(path: str | Path) -> float | None:
    """The start time (UNIX time) in the file `path`; None while it is absent or still being
    written (no newline yet). StartFileError naming the file when it holds no usable time."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise StartFileError(f"start file {path}: cannot read it: {error}") from None
    if not text.endswith("\n"):
        return None
    line = text.strip()
    try:
        start_at = float(line)
    except ValueError:
        raise StartFileError(f"start file {path}: {line[:40]!r} is not a UNIX time") from None
    if not math.isfinite(start_at) or start_at < 0:
        raise StartFileError(f"start file {path}: {line[:40]!r} is not a UNIX time")
    return start_at


def wait_for_start_file(path: str | Path, wake_fd: int, stopped: Callable[[], bool], timeout: float,
                        poll_s: float = POLL_S) -> float | None:
    """Wait until `path` holds the start time and return it (UNIX time); None as soon as `stopped()`
    says so (checked whenever `wake_fd`, the signal wake-up fd, becomes readable: it is drained).
    StartFileError naming the file when it holds no time, or none came within `timeout` seconds."""
    give_up = time.monotonic() + timeout
    while True:
        if stopped():
            return None
        start_at = read_start_file(path)
        if start_at is not None:
            return start_at
        left = give_up - time.monotonic()
        if left <= 0:
            raise StartFileError(f"start file {path}: no start time after {timeout:g} s")
        if select.select([wake_fd], [], [], min(poll_s, left))[0]:
            drain_fd(wake_fd)


def drain_fd(fd: int) -> None:
    """Read all that waits on the non-blocking file descriptor `fd` (a signal wake-up fd's bytes)."""
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass
