"""The start file (`host_agent.start_file`): the agents of a run wait for it once up, and start at
the time it holds; a file without its newline is still being written, one that holds no time is
an error naming the file, and a stop signal ends the wait at once."""
from __future__ import annotations

import os
import signal
import socket
import threading

import pytest

from host_agent.start_file import StartFileError, read_start_file, wait_for_start_file, write_start_file


@pytest.fixture
def wake():
    """A signal wake-up pair as the agent makes it: (read end, write end), non-blocking."""
    r, w = socket.socketpair()
    r.setblocking(False)
    w.setblocking(False)
    yield r, w
    r.close()
    w.close()


def test_written_file_reads_back_the_time(tmp_path):
    path = write_start_file(tmp_path / "start_at", 1796543210.123456)
    assert read_start_file(path) == 1796543210.123456
    assert [p.name for p in tmp_path.iterdir()] == ["start_at"]          # no partial file left


def test_absent_or_unfinished_file_means_wait(tmp_path):
    path = tmp_path / "start_at"
    assert read_start_file(path) is None
    path.write_text("17965")                       # a copy still landing: no newline yet
    assert read_start_file(path) is None
    path.write_text("1796543210.5\n")
    assert read_start_file(path) == 1796543210.5


@pytest.mark.parametrize("text", ["soon\n", "\n", "nan\n", "-3\n", "12 34\n"])
def test_a_file_that_holds_no_time_is_an_error_naming_it(tmp_path, text):
    path = tmp_path / "start_at"
    path.write_text(text)
    with pytest.raises(StartFileError, match=f"start file {path}: .* is not a UNIX time"):
        read_start_file(path)


def test_wait_returns_the_time_once_the_file_holds_it(tmp_path, wake):
    path = tmp_path / "start_at"
    seen = []

    def stopped():                                 # called on every look: write the file on the third
        seen.append(1)
        if len(seen) == 3:
            write_start_file(path, 1796543210.25)
        return False

    assert wait_for_start_file(path, wake[0].fileno(), stopped, timeout=30, poll_s=0.001) == 1796543210.25
    assert len(seen) >= 3


def test_wait_refuses_a_bad_file_naming_it(tmp_path, wake):
    path = tmp_path / "start_at"
    path.write_text("tomorrow\n")
    with pytest.raises(StartFileError, match=f"start file {path}: 'tomorrow' is not a UNIX time"):
        wait_for_start_file(path, wake[0].fileno(), lambda: False, timeout=30)


def test_wait_gives_up_naming_the_file_when_none_comes(tmp_path, wake):
    path = tmp_path / "start_at"
    with pytest.raises(StartFileError, match=f"start file {path}: no start time after 0.01 s"):
        wait_for_start_file(path, wake[0].fileno(), lambda: False, timeout=0.01, poll_s=0.001)


def test_a_stop_signal_ends_the_wait_and_its_wake_up_is_drained(tmp_path, wake):
    """A signal (SIGUSR1 here, SIGTERM in the agent) wakes the wait through the wake-up fd; with
    no start file ever written, the wait returns None long before its timeout."""
    r, w = wake
    got = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: got.append(signum))
    old_fd = signal.set_wakeup_fd(w.fileno(), warn_on_full_buffer=False)
    sender = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGUSR1))
    try:
        sender.start()
        assert wait_for_start_file(tmp_path / "start_at", r.fileno(), lambda: bool(got), timeout=60) is None
    finally:
        sender.cancel()
        signal.set_wakeup_fd(old_fd)
        signal.signal(signal.SIGUSR1, previous)
    assert got == [signal.SIGUSR1]
    with pytest.raises(BlockingIOError):           # the wake-up byte was read
        r.recv(1)
