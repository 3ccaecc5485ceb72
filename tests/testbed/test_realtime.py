"""The emulation's processes run under SCHED_RR when asked and allowed (testbed.realtime)."""
import os
import subprocess
import sys
import threading
import time

import pytest

from testbed import realtime


def test_switched_off_by_the_environment(monkeypatch):
    for value in ("0", "off", "No", "false"):
        monkeypatch.setenv(realtime.ENV, value)
        assert not realtime.enabled()
        assert realtime.command_prefix() == []


def test_on_by_default(monkeypatch):
    monkeypatch.delenv(realtime.ENV, raising=False)
    assert realtime.enabled()
    monkeypatch.setenv(realtime.ENV, "1")
    assert realtime.enabled()


def test_no_prefix_when_the_machine_refuses(monkeypatch):
    monkeypatch.setenv(realtime.ENV, "1")
    monkeypatch.setattr(realtime, "available", lambda: False)
    assert realtime.command_prefix() == []


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_RR needs root")
def test_a_prefixed_command_runs_round_robin(monkeypatch):
    monkeypatch.setenv(realtime.ENV, "1")
    if not realtime.available():
        pytest.skip("this kernel or container refuses SCHED_RR")
    prefix = realtime.command_prefix()
    assert prefix[1:] == ["--rr", str(realtime.PRIORITY)]
    out = subprocess.run([*prefix, "python3", "-c", "import os; print(os.sched_getscheduler(0))"],
                         capture_output=True, text=True, check=True).stdout
    assert int(out) == os.SCHED_RR


def _needs_sched_rr():
    if os.geteuid() != 0:
        pytest.skip("SCHED_RR needs root")
    if not realtime.available():
        pytest.skip("this kernel or container refuses SCHED_RR")


def test_control_priority_raises_the_thread_and_puts_it_back(monkeypatch):
    monkeypatch.setenv(realtime.ENV, "1")
    _needs_sched_rr()
    shell = subprocess.Popen(["sleep", "30"])
    seen = {}
    try:
        before = os.sched_getscheduler(0)
        control = realtime.ControlPriority()
        control.raise_((shell.pid,))
        assert control.raised
        assert os.sched_getscheduler(0) == os.SCHED_RR
        assert os.sched_getparam(0).sched_priority == realtime.CONTROL_PRIORITY
        assert os.sched_getscheduler(shell.pid) == os.SCHED_RR
        started = threading.Thread(target=lambda: seen.update(policy=os.sched_getscheduler(0)))
        started.start()
        started.join()
        assert seen["policy"] == os.SCHED_RR           # a timer thread started now inherits it
        control.lower()
        assert not control.raised
        assert os.sched_getscheduler(0) == before
        assert os.sched_getscheduler(shell.pid) == before
    finally:
        shell.kill()
        shell.wait()


def test_control_priority_does_nothing_when_switched_off(monkeypatch):
    monkeypatch.setenv(realtime.ENV, "0")
    before = os.sched_getscheduler(0)
    control = realtime.ControlPriority()
    control.raise_()
    assert not control.raised
    assert os.sched_getscheduler(0) == before


HOG = "import time\nend = time.monotonic() + 3\nwhile time.monotonic() < end: pass\n"


@pytest.mark.slow
def test_a_raised_timer_fires_on_time_beside_real_time_hogs(monkeypatch):
    """Every CPU kept busy by real-time processes at the emulation's priority: a fault timer of the
    raised controller still fires within a few ms (as an ordinary thread it waits for the kernel's
    real-time throttling, up to 950 ms of every second)."""
    monkeypatch.setenv(realtime.ENV, "1")
    _needs_sched_rr()
    control = realtime.ControlPriority()
    hogs = [subprocess.Popen([*realtime.command_prefix(), sys.executable, "-c", HOG])
            for _ in range((os.cpu_count() or 1) + 1)]
    fired = threading.Event()
    late = []
    try:
        control.raise_()
        due = time.monotonic() + 0.5
        timer = threading.Timer(0.5, lambda: (late.append(time.monotonic() - due), fired.set()))
        timer.start()
        assert fired.wait(10)
        hogs_running = all(h.poll() is None for h in hogs)
    finally:
        control.lower()
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert hogs_running, "the hogs ended before the timer fired: the test proves nothing"
    assert late[0] < 0.05, f"the raised timer fired {late[0] * 1000:.0f} ms late"
