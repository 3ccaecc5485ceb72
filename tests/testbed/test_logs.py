"""testbed.logs: one console + run-file logging set-up for every component."""
from __future__ import annotations

import io
import logging
import sys

import pytest

from testbed.logs import LOG_FILE_NAME, component_logger, level_for, setup_logging


def own_handlers():
    return [h for h in logging.getLogger().handlers if getattr(h, "_mrc_testbed_handler", False)]


@pytest.mark.parametrize("verbosity, level", [
    (-5, logging.ERROR), (-2, logging.ERROR), (-1, logging.WARNING), (0, logging.INFO),
    (1, logging.DEBUG), (4, logging.DEBUG),
])
def test_level_for_verbosity(verbosity, level):
    assert level_for(verbosity) == level


def test_component_logger_follows_the_naming_convention():
    assert component_logger("refswitch").name == "mrc.refswitch"
    assert component_logger("host_agent").name == "mrc.host_agent"


def test_console_shows_info_and_prefixes_warnings():
    console = io.StringIO()
    assert setup_logging(0, stream=console) is None
    log = component_logger("controller")
    log.debug("hidden detail")
    log.info("installed 12 entries")
    log.warning("switch s3 slow to answer")
    lines = console.getvalue().splitlines()
    assert lines == ["mrc.controller: installed 12 entries",
                     "warning: mrc.controller: switch s3 slow to answer"]


def test_quiet_console_drops_info():
    console = io.StringIO()
    setup_logging(-1, stream=console)
    component_logger("testbed").info("progress")
    component_logger("testbed").error("failed")
    assert console.getvalue() == "error: mrc.testbed: failed\n"


def test_run_dir_gets_a_debug_log_without_other_libraries_chatter(tmp_path):
    console = io.StringIO()
    run_dir = tmp_path / "results" / "run1"
    path = setup_logging(0, run_dir, stream=console)
    assert path == run_dir / LOG_FILE_NAME
    component_logger("host_agent").debug("EV 17 -> SKIP")
    logging.getLogger("some.library").debug("library internals")
    logging.getLogger("some.library").warning("library trouble")
    for handler in own_handlers():
        handler.flush()
    text = path.read_text()
    assert "DEBUG   mrc.host_agent: EV 17 -> SKIP" in text
    assert "library trouble" in text
    assert "library internals" not in text
    assert "EV 17" not in console.getvalue()


def test_second_call_replaces_handlers_and_moves_the_file(tmp_path):
    setup_logging(0, tmp_path / "a", stream=io.StringIO())
    path = setup_logging(1, tmp_path / "b", log_name="agent-h1.log", stream=io.StringIO())
    assert len(own_handlers()) == 2
    component_logger("host_agent").debug("second")
    for handler in own_handlers():
        handler.flush()
    assert path == tmp_path / "b" / "agent-h1.log"
    assert "second" in path.read_text()
    assert "second" not in (tmp_path / "a" / LOG_FILE_NAME).read_text()


def test_the_console_follows_stderr_when_it_is_replaced(monkeypatch):
    """The console writes to the stderr of the moment: a test's captured stderr, replaced and closed
    after the set-up (as a test's ends while a switch's stream thread still logs), is not written."""
    first, second = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    setup_logging(0)
    first.close()
    monkeypatch.setattr(sys, "stderr", second)
    component_logger("refswitch").info("P4Runtime: stream 0 arbitration")
    assert second.getvalue() == "mrc.refswitch: P4Runtime: stream 0 arbitration\n"
