"""Shared pytest markers for tests that need something this machine may lack.

Use them as decorators or module marks; the test is skipped with a reason naming what is
missing::

    from tests.conftest import requires_mininet    # or: @pytest.mark.requires_mininet

    @requires_mininet
    def test_bring_up(): ...

    pytestmark = requires_bmv2                      # a whole module

- ``requires_root``    running as root (namespaces, veths, raw sockets)
- ``requires_mininet`` root, ``mnexec`` on PATH (Debian's ``mininet`` package) and the mininet library
- ``requires_bmv2``    ``simple_switch_grpc`` on PATH
- ``requires_p4c``     ``p4c`` on PATH
- ``requires_sshd``   root and ``/usr/sbin/sshd`` (namespace servers, ``testbed.local_servers``)

``missing(name)`` returns the same reason as a string (or None), for fixtures that need to
decide at run time. The markers ``slow`` and ``integration`` are declared in pyproject.toml.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
from typing import Callable, Optional

import pytest


def _missing_root() -> Optional[str]:
    return None if os.geteuid() == 0 else "needs root (run the tests with sudo)"


def _missing_program(program: str, package: str) -> Callable[[], Optional[str]]:
    def check() -> Optional[str]:
        if shutil.which(program):
            return None
        return f"needs {program} on PATH (from {package})"
    return check


def _missing_mininet() -> Optional[str]:
    reasons = []
    if os.geteuid() != 0:
        reasons.append("root")
    if not shutil.which("mnexec"):
        reasons.append("mnexec on PATH (Debian package mininet)")
    if importlib.util.find_spec("mininet") is None:
        reasons.append("the mininet Python library")
    return "Mininet needs " + ", ".join(reasons) if reasons else None


def _missing_sshd() -> Optional[str]:
    if os.geteuid() != 0:
        return "needs root (namespace servers)"
    if not os.access("/usr/sbin/sshd", os.X_OK):
        return "needs /usr/sbin/sshd (Debian package openssh-server; scripts/setup.sh --dev installs it)"
    return None


_CHECKS: dict[str, Callable[[], Optional[str]]] = {
    "requires_root": _missing_root,
    "requires_mininet": _missing_mininet,
    "requires_bmv2": _missing_program("simple_switch_grpc", "p4lang-bmv2"),
    "requires_p4c": _missing_program("p4c", "p4lang-p4c"),
    "requires_sshd": _missing_sshd,
}


def missing(requirement: str) -> Optional[str]:
    """Why a requirement ("requires_root", ...) is not met here, or None when it is."""
    return _CHECKS[requirement]()


requires_root = pytest.mark.requires_root
requires_mininet = pytest.mark.requires_mininet
requires_bmv2 = pytest.mark.requires_bmv2
requires_p4c = pytest.mark.requires_p4c
requires_sshd = pytest.mark.requires_sshd


def pytest_configure(config: pytest.Config) -> None:
    for name in _CHECKS:
        config.addinivalue_line("markers", f"{name}: skip unless the machine meets it (conftest.py)")


def pytest_runtest_setup(item: pytest.Item) -> None:
    for name in _CHECKS:
        if item.get_closest_marker(name) is not None:
            reason = missing(name)
            if reason:
                pytest.skip(reason)


@pytest.fixture(autouse=True)
def restore_logging():
    """Leave the root and mrc loggers as they were, whatever a test did: a command's
    `testbed.logs.setup_logging` installs handlers (a run folder's file among them) and levels for
    the whole process, and later tests would log through them."""
    import logging
    root, mrc = logging.getLogger(), logging.getLogger("mrc")
    saved = (list(root.handlers), root.level, mrc.level)
    yield
    for handler in root.handlers:
        if handler not in saved[0]:
            handler.close()
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    mrc.setLevel(saved[2])
    logging.captureWarnings(False)


@pytest.fixture(autouse=True, scope="session")
def calibration_file(tmp_path_factory):
    """Tests never calibrate and never read this machine's calibration: $MRC_CALIBRATION_FILE names a
    file holding, for this machine, the fixed fallback rates (experiments.rate_caps.MAX_RATE_BPS) for
    every topology size, so `rate_bps: auto` runs as a fixed rate did. Subprocesses inherit it."""
    from experiments import calibration
    from experiments.rate_caps import MAX_RATE_BPS
    path = tmp_path_factory.mktemp("calibration") / "calibration.json"
    machine = calibration.Machine.this()
    for target, rate in MAX_RATE_BPS.items():
        calibration.save(calibration.Calibration.fixed(machine, target, rate, "tests"), path)
    saved = os.environ.get(calibration.ENV_FILE)
    os.environ[calibration.ENV_FILE] = str(path)
    yield path
    if saved is None:
        os.environ.pop(calibration.ENV_FILE, None)
    else:
        os.environ[calibration.ENV_FILE] = saved


@pytest.fixture(autouse=True, scope="session")
def ordinary_scheduling():
    """The tests run the emulation at the fixed rates above (20 Mbit/s), past what a 2-core machine
    sustains faithfully; an emulation that keeps every CPU busy at real-time priority starves the
    kernel's own threads, and a link set down then takes effect 235-290 ms late (the fidelity
    monitor says so). So the tests run switches and agents as ordinary processes
    (MRC_REALTIME=0), as a run at a rate above its calibration should; tests/testbed/test_realtime.py
    sets the variable itself. Subprocesses inherit it."""
    from testbed import realtime
    saved = os.environ.get(realtime.ENV)
    os.environ[realtime.ENV] = "0"
    yield
    if saved is None:
        os.environ.pop(realtime.ENV, None)
    else:
        os.environ[realtime.ENV] = saved
