"""testbed.processes: descendants, the one walk of a process tree that every caller uses; and
SignalsReachMainThread, which lets a SIGTERM end a command whatever its main thread waits in."""
from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.processes import descendants

REPO = Path(__file__).resolve().parents[2]

# The main thread blocks reading a pipe nobody writes to; once it is in that read, another thread
# takes a SIGTERM (pthread_kill to itself): CPython notes the signal there, and nothing interrupts
# the main thread's read. This is the race of a SIGTERM that comes just before a blocking call.
SIGNAL_ELSEWHERE = """
import contextlib, os, signal, sys, threading
from testbed.processes import SignalsReachMainThread, unwind_on_sigterm

signal.signal(signal.SIGTERM, unwind_on_sigterm)
read_fd, write_fd = os.pipe()

def in_the_read():
    fields = open(f"/proc/self/task/{os.getpid()}/syscall").read().split()
    return len(fields) > 1 and fields[1] == hex(read_fd)        # blocked in a call on read_fd

def signal_elsewhere():
    while not in_the_read():
        threading.Event().wait(0.001)
    print("main thread in its read", flush=True)
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

threading.Thread(target=signal_elsewhere, daemon=True).start()
with SignalsReachMainThread() if sys.argv[1] == "nudged" else contextlib.nullcontext():
    os.read(read_fd, 1)
"""


def test_descendants_are_the_children_and_grandchildren_and_not_the_root_or_others():
    outside = subprocess.Popen(["sleep", "30"])
    # sh starts a sleep in a subshell of its own: a grandchild of the root, beside a child
    # (each echo comes after the fork before it: once both are read, the three processes exist)
    root = subprocess.Popen(["sh", "-c", "(sleep 30 & echo inner; wait) & sleep 30 & echo outer; wait"],
                            stdout=subprocess.PIPE, text=True)
    below = []
    try:
        assert sorted(root.stdout.readline().strip() for _ in range(2)) == ["inner", "outer"]
        below = descendants(root.pid)
        assert len(below) == 3 and root.pid not in below and outside.pid not in below   # subshell, two sleeps
        assert set(descendants(root.pid, outside.pid)) == set(below)        # a sleep has no children
    finally:
        for proc in (root, outside):
            proc.kill()
            proc.wait()
        for pid in below:
            subprocess.run(["kill", "-9", str(pid)], capture_output=True)


def _signalled_elsewhere(how: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", SIGNAL_ELSEWHERE, how], cwd=str(REPO),
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "main thread in its read"
    return proc


def test_a_sigterm_taken_by_another_thread_still_ends_a_main_thread_blocked_in_a_read():
    proc = _signalled_elsewhere("nudged")
    try:
        assert proc.wait(30) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()


def test_without_it_the_read_goes_on_after_the_sigterm():
    """The race the test above relies on is real here: unprotected, the process stays in its read."""
    proc = _signalled_elsewhere("unprotected")
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(1)
    finally:
        proc.kill()
        proc.wait()


# 2,000 blocks in a row, each with a signal that the watcher answers with nudges while the block closes
# (an exit that waited for its watcher hung within some thousands of these); then what they put back
OPEN_AND_CLOSE = """
import signal, threading
from testbed.processes import SignalsReachMainThread

seen = []
signal.signal(signal.SIGUSR1, lambda number, _frame: seen.append(number))
nudge_handler, threads = signal.getsignal(SignalsReachMainThread.NUDGE), threading.active_count()
for _ in range(2000):
    with SignalsReachMainThread():
        signal.raise_signal(signal.SIGUSR1)
assert len(seen) == 2000, len(seen)
assert signal.set_wakeup_fd(-1) == -1, "the wake-up fd was not put back"
assert signal.getsignal(SignalsReachMainThread.NUDGE) == nudge_handler, "the nudge's handler was not put back"
assert threading.active_count() == threads, "a watcher thread is left"
print("ok", flush=True)
"""


def test_blocks_opened_and_closed_with_a_signal_each_put_everything_back_and_never_wait():
    proc = subprocess.Popen([sys.executable, "-c", OPEN_AND_CLOSE], cwd=str(REPO), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("closing a block waited for its watcher (2,000 blocks did not end in 30 s)")
    assert proc.returncode == 0 and out.strip() == "ok", err
