"""Grading a work folder in a process of its own, so that nothing in it can change another folder's
grade or stop the class run.

`grade(lab, folder)` starts `python -m labs.sandbox` in a new session (its own process group), gives
it a nonce on stdin and a pipe for its results, and waits at most the lab's time limit. Only what
arrives on that pipe counts, and only when every record parses, carries the nonce and names the
lab's checks in order; the hints come from this process's own checks, never from the child. A
folder whose code ends the process, crashes it, hangs it past the time limit, writes to the
grader's channel or changes the grader fails the checks it did not finish, with the reason.
The student's stdout is thrown away; the end of its stderr is kept for a crash's reason.
"""
from __future__ import annotations

import json
import os
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from labs import originality
from labs.catalog import LABS_DIR, Lab
from labs.checking import STATUSES, CheckResult

CHANNEL_LIMIT = 1 << 20          # bytes of results a child may send
DETAIL_LIMIT = 4000              # characters of one check's detail
STDERR_TAIL = 400                # characters of a crashed child's stderr quoted in the reason


@dataclass(frozen=True)
class Limits:
    """What one folder's checks may use: wall-clock seconds (all checks), address space (MiB, 0: no limit)."""

    time_s: float
    memory_mb: int

    @classmethod
    def of(cls, lab: Lab, time_s: float | None = None, memory_mb: int | None = None) -> "Limits":
        """The lab's own limits (lab.yaml), or those given."""
        return cls(lab.time_limit_s if time_s is None else time_s,
                   lab.memory_mb if memory_mb is None else memory_mb)


def grade(lab: Lab, folder: Path, limits: Limits | None = None, solution: bool = False) -> list[CheckResult]:
    """Every check of `lab` on `folder`, run in a child process (see the module)."""
    limits = limits or Limits.of(lab)
    checks = lab.checks()
    if not solution:
        copies = originality.copy_of_solution(lab, folder)
        if copies:
            reason = (f"{', '.join(copies)} is the lab's own solution (only comments or layout changed): "
                      "the graded work must be yours")
            return [CheckResult(c.name, "fail", reason, c.hint) for c in checks]
    records, reason = _run_child(lab, Path(folder), limits, solution, [c.name for c in checks])
    results = []
    for index, check in enumerate(checks):
        if index < len(records):
            r = records[index]
            results.append(CheckResult(check.name, r["status"], r["detail"],
                                       check.hint if r["status"] == "fail" else "", r["expected"]))
        else:
            results.append(CheckResult(check.name, "fail", reason, check.hint))
    return results


def _run_child(lab: Lab, folder: Path, limits: Limits, solution: bool, names: list[str]):
    """(valid records, why the rest are missing) of one child run."""
    nonce = secrets.token_hex(16)
    read_end, write_end = os.pipe()
    command = [sys.executable, "-P", "-m", "labs.sandbox", str(lab.folder.resolve()), str(folder.resolve()),
               "--result-fd", str(write_end), "--memory-mb", str(limits.memory_mb)]
    if solution:
        command.append("--solution")
    env = dict(os.environ, MRC_PURE_PYTHON="1",          # the reference code stays patchable Python
               PYTHONPATH=os.pathsep.join([str(LABS_DIR.parent)] + [p for p in os.environ.get(
                   "PYTHONPATH", "").split(os.pathsep) if p]),
               PYTHONDONTWRITEBYTECODE="1")
    with tempfile.TemporaryFile() as stderr, tempfile.TemporaryDirectory(prefix="mrc-lab-") as cwd:
        try:
            child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=stderr,
                                     pass_fds=(write_end,), start_new_session=True, env=env, cwd=cwd)
        finally:
            os.close(write_end)
        try:
            child.stdin.write((nonce + "\n").encode())
            child.stdin.close()
        except OSError:
            pass
        began = time.monotonic()
        try:
            data, timed_out = _read(read_end, child, limits.time_s)
            if not timed_out:              # the channel closed: give the child the rest of its time to end
                try:
                    child.wait(timeout=max(0.1, limits.time_s - (time.monotonic() - began)))
                except subprocess.TimeoutExpired:
                    timed_out = True
        finally:                           # also on Ctrl-C: nothing of the folder's is left running
            _end_group(child)
        stderr.seek(0)
        tail = stderr.read()[-STDERR_TAIL:].decode(errors="replace").strip()
    records, bad = _parse(data, nonce, names)
    if bad:
        return [], (f"the grader's result channel carried what the grader did not write ({bad}): "
                    "your code must not write to it")
    done = bool(records) and "done" in records[-1]
    checks = [r for r in records if "done" not in r]
    if timed_out:
        return checks, (f"not finished within the time limit of {limits.time_s:g} s for this folder's checks "
                        f"(an endless loop, or a very slow one?); the grader stopped it")
    if done:
        return checks, "no result"             # not reached: a done record follows every check
    status = child.returncode
    how = (f"killed by signal {signal.Signals(-status).name}" if status is not None and status < 0
           else f"exit status {status}")
    if status is not None and status < 0 and -status == signal.SIGKILL and limits.memory_mb:
        how += f" (out of memory? the limit is {limits.memory_mb} MiB)"
    said = f"; it said: {tail.splitlines()[-1]}" if tail else ""
    return checks, (f"the process grading this folder ended early ({how}) before this check finished: your code "
                    f"ended it (os._exit, a crash) or ran out of memory{said}")


def _read(fd: int, child: subprocess.Popen, time_s: float) -> tuple[bytes, bool]:
    """What the child writes to `fd` until it closes it (or exits), at most CHANNEL_LIMIT bytes;
    True when the time limit ran out first."""
    deadline = time.monotonic() + time_s
    chunks, size = [], 0
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return b"".join(chunks), True
            ready, _, _ = select.select([fd], [], [], min(left, 0.5))
            if not ready:
                if child.poll() is not None:        # exited; a grandchild may still hold the pipe open
                    ready, _, _ = select.select([fd], [], [], 0)
                    if not ready:
                        return b"".join(chunks), False
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return b"".join(chunks), False
            size += len(chunk)
            if size > CHANNEL_LIMIT:
                return b"".join(chunks) + b"\n<too much>", False
            chunks.append(chunk)
    finally:
        os.close(fd)


def _end_group(child: subprocess.Popen) -> None:
    """Kill what is left of the child's process group, then reap the child."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    child.wait()


def _parse(data: bytes, nonce: str, names: list[str]) -> tuple[list[dict], str]:
    """(records, "") when every line is a record of this run in order, else ([], what is wrong)."""
    records: list[dict] = []
    for number, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            return [], f"line {number} is not JSON"
        if not isinstance(record, dict) or record.get("nonce") != nonce:
            return [], f"line {number} is not a record of this run"
        if records and "done" in records[-1]:
            return [], f"line {number} comes after the last record"
        if "done" in record:
            if set(record) != {"nonce", "done"} or record["done"] != len(names) or len(records) != len(names):
                return [], f"line {number} ends the run at the wrong place"
        else:
            index = len(records)
            if set(record) != {"nonce", "index", "check", "status", "detail", "expected"}:
                return [], f"line {number} has the wrong fields"
            if record["index"] != index or index >= len(names) or record["check"] != names[index]:
                return [], f"line {number} is not the next check"
            if record["status"] not in STATUSES or not all(isinstance(record[k], str) for k in ("detail", "expected")):
                return [], f"line {number} has a wrong status or detail"
            record["detail"] = record["detail"][:DETAIL_LIMIT]
            record["expected"] = record["expected"][:DETAIL_LIMIT]
        records.append(record)
    return records, ""
