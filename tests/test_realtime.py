"""The emulation's processes run under SCHED_RR when asked and allowed (testbed.realtime)."""
import os
import subprocess

import pytest

from testbed import realtime


def test_switched_off_by_the_environment(monkeypatch):
    for value in ("0", "off", "No", "false"):
        monkeypatch.setenv(realtime.ENV, value)
        assert not realtime.enabled()
        assert realtime.command_prefix() == []


def test_off_by_default_and_on_when_asked(monkeypatch):
    monkeypatch.delenv(realtime.ENV, raising=False)
    assert not realtime.enabled()
    assert realtime.command_prefix() == []
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
