"""One logging set-up for every component of the testbed.

Convention
----------
Every component logs through a logger named ``mrc.<component>``, where the component is the
top-level folder (or a well-known part of it)::

    mrc.testbed       bring-up, tear-down, the command line
    mrc.topologies    topology loading, addressing, drawing
    mrc.controller    route computation and P4Runtime installation
    mrc.refswitch     the reference switch model and its P4Runtime server
    mrc.host_agent    the MRC transport, the baseline and the collectives
    mrc.agent         the host agent process running on a Mininet host
    mrc.experiments   scenario runs, results and reports
    mrc.benchmarks    speed measurements

A module gets its logger once, at import time::

    log = logging.getLogger("mrc.controller")      # or: log = component_logger("controller")

and deeper names (``mrc.host_agent.sender``) are fine: they inherit the set-up.

Levels
------
The console shows INFO and above by default; each ``-v`` lowers the threshold one step
(DEBUG), each ``-q`` raises it (WARNING, then ERROR). When a run folder is given, everything
from ``mrc.*`` at DEBUG also goes to ``<run_dir>/testbed.log`` (a process started by the
testbed, such as a switch or a host agent, passes its own ``log_name`` so that each process
writes its own file). Other libraries' loggers reach both outputs from WARNING up only, so
their debug chatter never floods a run's log.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Optional, TextIO

ROOT_LOGGER = "mrc"
LOG_FILE_NAME = "testbed.log"

CONSOLE_FORMAT = "%(name)s: %(message)s"
FILE_FORMAT = "%(asctime)s.%(msecs)03d %(process)d %(levelname)-7s %(name)s: %(message)s"
FILE_DATE_FORMAT = "%Y-%m-%d %H:%M:%S"

# verbosity (number of -v minus number of -q) -> console level
_LEVELS = {-2: logging.ERROR, -1: logging.WARNING, 0: logging.INFO, 1: logging.DEBUG}

_MARK = "_mrc_testbed_handler"   # attribute set on handlers this module installed


def level_for(verbosity: int) -> int:
    """The console log level for a verbosity (count of -v minus count of -q)."""
    return _LEVELS[max(-2, min(1, verbosity))]


def component_logger(component: str) -> logging.Logger:
    """The logger of one component, named ``mrc.<component>``."""
    return logging.getLogger(f"{ROOT_LOGGER}.{component}")


class StderrHandler(logging.StreamHandler):
    """The console: writes each record to whatever `sys.stderr` is when the record comes, not to
    the stream it was when the handler was made. A handler bound at set-up outlives a replaced
    stderr (a test's captured output, closed when the test ends): a record from a thread that
    outlived its test then met a closed file, and logging printed "--- Logging error ---"."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self) -> TextIO:                   # type: ignore[override]
        return sys.stderr


class ConsoleFormatter(logging.Formatter):
    """Short lines for people: ``mrc.x: message``, prefixed by the level from WARNING up."""

    def __init__(self) -> None:
        super().__init__(CONSOLE_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        if record.levelno >= logging.WARNING:
            line = f"{record.levelname.lower()}: {line}"
        return line


def setup_logging(verbosity: int = 0, run_dir: Optional[Path] = None, *,
                  log_name: str = LOG_FILE_NAME, stream: Optional[TextIO] = None) -> Optional[Path]:
    """Send log records to the console (`stream`, else whatever `sys.stderr` is at each record) and,
    when run_dir is given, to a DEBUG file in it.

    Calling it again replaces the handlers installed by an earlier call (a subcommand that
    learns its run folder late calls it a second time). Returns the log file's path, if any.
    """
    console_level = level_for(verbosity)
    root = logging.getLogger()
    _remove_own_handlers(root)

    console = logging.StreamHandler(stream) if stream is not None else StderrHandler()
    console.setLevel(console_level)
    console.setFormatter(ConsoleFormatter())
    _install(root, console)

    log_path = None
    if run_dir is not None:
        log_path = Path(run_dir) / log_name
        log_path.parent.mkdir(parents=True, exist_ok=True)
        to_file = logging.FileHandler(log_path, encoding="utf-8")
        to_file.setLevel(logging.DEBUG)
        to_file.setFormatter(logging.Formatter(FILE_FORMAT, FILE_DATE_FORMAT))
        _install(root, to_file)

    root.setLevel(logging.WARNING)
    logging.getLogger(ROOT_LOGGER).setLevel(logging.DEBUG if log_path else console_level)
    logging.captureWarnings(True)
    return log_path


def _install(root: logging.Logger, handler: logging.Handler) -> None:
    setattr(handler, _MARK, True)
    root.addHandler(handler)


def _remove_own_handlers(root: logging.Logger) -> None:
    for handler in list(root.handlers):
        if getattr(handler, _MARK, False):
            root.removeHandler(handler)
            handler.close()
