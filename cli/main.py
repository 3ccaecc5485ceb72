"""The ``mrc-testbed`` command line.

The command `X` lives in the module `cli/X.py`, which exposes two functions::

    def add_arguments(parser: argparse.ArgumentParser) -> None: ...
    def run(args: argparse.Namespace) -> int: ...

and is listed once in ``COMMANDS`` below. A command's module is imported only when that
command runs, so ``--help`` lists every command even while one of them cannot be imported;
running such a command says why and exits with status 2. A command says why it stops with
``return cli.errors.fail(name, message, status)``: ``mrc-testbed <name>: <message>`` on stderr.

``run`` receives the parsed options plus ``args.verbosity`` (count of -v minus count of -q);
logging is already set up for the console. The options -v/-q are the command line's own
(accepted before or after the command name): a command must not define them. A command that writes a run folder calls
``testbed.logs.setup_logging(args.verbosity, run_dir)`` to keep that run's log in it.
"""
from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from dataclasses import dataclass
from importlib import metadata
from types import ModuleType
from typing import Optional, Sequence

from cli.errors import PROG
from testbed.logs import setup_logging
from testbed.processes import SignalsReachMainThread, unwind_on_sigterm

# Exit status of a command that cannot be loaded (same as argparse's usage errors).
EXIT_UNAVAILABLE = 2
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, the module implementing it, and a one-line help."""

    name: str
    module: str
    help: str


COMMANDS: tuple[Command, ...] = (
    Command("up", "cli.up", "bring a topology up, program it and open the Mininet CLI"),
    Command("clean", "cli.clean", "remove namespaces, links and processes left by a crashed run"),
    Command("draw", "cli.draw", "draw a topology to a PNG file"),
    Command("routes", "cli.routes", "compute and show the static switch tables"),
    Command("switch", "cli.switch", "run one reference-model switch"),
    Command("agent", "cli.agent", "run an MRC host agent on this host"),
    Command("conformance", "cli.conformance", "run the switch conformance cases on the model and BMv2"),
    Command("run", "cli.run", "run an experiment scenario (YAML) and save its results"),
    Command("crosscheck", "cli.crosscheck", "run a scenario's flows on netsim and uet-htsim side by side"),
    Command("sweep", "cli.sweep", "sweep the load through a bottleneck: trims, ECN, queue depth"),
    Command("calibrate", "cli.calibrate", "measure the link rate this machine runs faithfully"),
    Command("report", "cli.report", "gather results folders into one report"),
    Command("schema", "cli.schema", "write the experiment files' JSON Schemas (for editors)"),
    Command("bench", "cli.bench", "run the benchmarks and print their figures"),
    Command("lab", "cli.lab", "hands-on labs: list them, start one, check a student's work"),
)


class CommandUnavailable(Exception):
    """A command whose module cannot be imported or lacks add_arguments/run."""


def load_command(command: Command) -> ModuleType:
    """Import a command's module and check that it has the two required functions."""
    try:
        module = importlib.import_module(command.module)
    except ImportError as error:
        raise CommandUnavailable(
            f"{command.name} is not available: {type(error).__name__}: {error}") from error
    for function in ("add_arguments", "run"):
        if not callable(getattr(module, function, None)):
            raise CommandUnavailable(
                f"{command.name} is not available: module {command.module} has no {function}()")
    return module


def _add_verbosity_options(parser: argparse.ArgumentParser, prefix: str) -> None:
    """-v/-q, counted into <prefix>verbose/<prefix>quiet (accepted before or after the command)."""
    parser.add_argument("-v", "--verbose", action="count", default=0, dest=f"{prefix}verbose",
                        help="more output (repeat for more)")
    parser.add_argument("-q", "--quiet", action="count", default=0, dest=f"{prefix}quiet",
                        help="less output (repeat for less)")


def installed_version() -> str:
    """The version of the installed mrc-testbed distribution."""
    try:
        return metadata.version("mrc-testbed")
    except metadata.PackageNotFoundError:
        return "(not installed: run scripts/setup.sh)"


def build_parser(commands: Sequence[Command] = COMMANDS
                 ) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser and one (still empty) sub-parser per command, by name."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Mininet + P4 testbed for MRC (Multipath Reliable Connection).",
        epilog=f"Run '{PROG} <command> --help' for the options of one command.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {installed_version()}")
    _add_verbosity_options(parser, "")
    subparsers = parser.add_subparsers(dest="command", metavar="<command>", title="commands")
    subparsers.required = True
    by_name = {}
    for command in commands:
        sub = subparsers.add_parser(command.name, help=command.help, description=command.help)
        _add_verbosity_options(sub, "sub_")
        by_name[command.name] = sub
    return parser, by_name


def _command_name(argv: Sequence[str], names: set[str]) -> Optional[str]:
    """The command named on the line: the first word that is not a global option."""
    for word in argv:
        if word == "--":
            return None
        if word.startswith("-"):
            continue
        return word if word in names else None
    return None


def _catch_sigterm():
    """Install unwind_on_sigterm (SIGTERM raises testbed.processes.Terminated, unwinding the command
    like Ctrl-C does, so its clean-up runs) where SIGTERM still kills outright; return what it replaced."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None
    return signal.signal(signal.SIGTERM, unwind_on_sigterm)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Parse the command line, set up logging, run one command; return its exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {command.name: command for command in COMMANDS}
    parser, subparsers = build_parser(COMMANDS)

    name = _command_name(argv, set(commands))
    module = None
    if name is not None:
        try:
            module = load_command(commands[name])
        except CommandUnavailable as error:
            print(f"{PROG}: error: {error}", file=sys.stderr)
            return EXIT_UNAVAILABLE
        module.add_arguments(subparsers[name])

    args = parser.parse_args(argv)
    args.verbosity = args.verbose + args.sub_verbose - args.quiet - args.sub_quiet
    setup_logging(args.verbosity)
    assert module is not None   # parse_args exits when no known command was given
    replaced = _catch_sigterm()             # a command may still install its own handler
    try:
        with SignalsReachMainThread():      # a Ctrl-C or SIGTERM is acted on, whatever the command waits in
            return int(module.run(args) or 0)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if replaced is not None:
            signal.signal(signal.SIGTERM, replaced)


if __name__ == "__main__":
    sys.exit(main())
