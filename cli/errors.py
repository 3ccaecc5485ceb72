"""How a command of the ``mrc-testbed`` command line says what went wrong.

Every such line has one shape, ``mrc-testbed <command>: <message>``, and goes to stderr (stdout
keeps what the command produces). A command that stops on it returns ``fail(...)``::

    if args.repeat < 1:
        return fail("run", f"--repeat {args.repeat}: expected 1 or more")     # exit status 2

and a command that goes on after it (a warning) calls ``warn(...)``.
"""
from __future__ import annotations

import sys

PROG = "mrc-testbed"

# Exit status of a command given input it cannot use (as argparse's usage errors).
EXIT_USAGE = 2


def warn(command: str, message: str) -> None:
    """Print ``mrc-testbed <command>: <message>`` to stderr."""
    print(f"{PROG} {command}: {message}", file=sys.stderr)


def fail(command: str, message: str, status: int = EXIT_USAGE) -> int:
    """Say why the command stops (as ``warn``) and return its exit status, ``status``."""
    warn(command, message)
    return status
