"""The mrc-testbed command line: help, verbosity, lazy command loading, clear errors."""
from __future__ import annotations

import logging
import re
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

from cli import main as cli
from cli.errors import fail, warn
from cli.main import COMMANDS, Command

PLANNED = {name: f"cli.{name}" for name in
           ("up", "clean", "draw", "routes", "switch", "agent", "conformance", "run", "calibrate", "report", "lab",
            "bench", "sweep", "crosscheck", "schema")}


@pytest.fixture
def fake_commands(tmp_path, monkeypatch):
    """A command table of modules written to a temporary folder; returns a function adding one."""
    package = tmp_path / "fakecmds"
    package.mkdir()
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    table = []
    monkeypatch.setattr(cli, "COMMANDS", table)

    def add(name: str, source: str, module: str | None = None) -> Command:
        module = module or f"fakecmds.{name}"
        if source is not None:
            (package / f"{name}.py").write_text(textwrap.dedent(source))
        command = Command(name, module, f"the {name} command")
        table.append(command)
        return command
    yield add
    for name in [m for m in sys.modules if m.startswith("fakecmds")]:
        del sys.modules[name]


ECHO = """
    import logging
    seen = {}

    def add_arguments(parser):
        parser.add_argument("target")
        parser.add_argument("--count", type=int, default=1)

    def run(args):
        seen["args"] = args
        handler = [h for h in logging.getLogger().handlers if hasattr(h, "_mrc_testbed_handler")][0]
        seen["console_level"] = handler.level
        return 7 if args.target == "fail" else 0
"""


def test_table_holds_every_planned_command_once():
    assert {c.name: c.module for c in COMMANDS} == PLANNED
    assert len({c.name for c in COMMANDS}) == len(COMMANDS)
    assert all(c.help and "\n" not in c.help for c in COMMANDS)


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for command in COMMANDS:
        assert command.name in out
        assert command.help in out


def test_installed_command_help_lists_every_command():
    script = Path(sys.executable).parent / "mrc-testbed"
    if not script.exists():
        pytest.skip(f"no {script}: run scripts/setup.sh")
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    listed = re.findall(r"^    (\S+) {2,}", done.stdout, re.M)
    assert listed == [command.name for command in COMMANDS]


def test_help_imports_no_command_module():
    code = ("import sys; from cli import main as cli\n"
            "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "loaded = [c.module for c in cli.COMMANDS if c.module in sys.modules]\n"
            "print('LOADED', loaded, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "LOADED []" in done.stderr, done.stderr


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"mrc-testbed {cli.installed_version()}"


def test_installed_console_script_is_the_cli():
    scripts = [e for e in metadata.entry_points(group="console_scripts") if e.name == "mrc-testbed"]
    if not scripts:
        pytest.skip("mrc-testbed is not installed in this environment (run scripts/setup.sh)")
    assert scripts[0].value == "cli.main:main"


def test_missing_module_says_which_command_and_why(fake_commands, capsys):
    fake_commands("ghost", None, module="fakecmds.not_written_yet")
    assert cli.main(["ghost"]) == cli.EXIT_UNAVAILABLE
    err = capsys.readouterr().err
    assert "ghost is not available" in err
    assert "No module named 'fakecmds.not_written_yet'" in err


def test_missing_module_does_not_hide_help(fake_commands, capsys):
    fake_commands("ghost", None, module="fakecmds.not_written_yet")
    with pytest.raises(SystemExit) as done:
        cli.main(["--help"])
    assert done.value.code == 0
    assert "ghost" in capsys.readouterr().out


def test_module_without_run_is_reported(fake_commands, capsys):
    fake_commands("half", "def add_arguments(parser):\n    pass\n")
    assert cli.main(["half"]) == cli.EXIT_UNAVAILABLE
    assert "module fakecmds.half has no run()" in capsys.readouterr().err


def test_command_gets_its_own_arguments_and_its_status_is_returned(fake_commands):
    fake_commands("echo", ECHO)
    assert cli.main(["echo", "ok", "--count", "3"]) == 0
    module = sys.modules["fakecmds.echo"]
    assert module.seen["args"].target == "ok"
    assert module.seen["args"].count == 3
    assert module.seen["args"].command == "echo"
    assert cli.main(["echo", "fail"]) == 7


@pytest.mark.parametrize("argv, verbosity, level", [
    ([], 0, logging.INFO),
    (["-v"], 1, logging.DEBUG),
    (["-q"], -1, logging.WARNING),
    (["-qq"], -2, logging.ERROR),
    (["--quiet", "--quiet", "--quiet"], -3, logging.ERROR),
    (["-v", "-q"], 0, logging.INFO),
])
def test_verbosity_options_set_the_console_level(fake_commands, argv, verbosity, level):
    fake_commands("echo", ECHO)
    assert cli.main(argv + ["echo", "ok"]) == 0
    seen = sys.modules["fakecmds.echo"].seen
    assert seen["args"].verbosity == verbosity
    assert seen["console_level"] == level


def test_verbosity_counts_on_both_sides_of_the_command(fake_commands):
    fake_commands("echo", ECHO)
    assert cli.main(["-q", "echo", "ok", "-q"]) == 0
    assert sys.modules["fakecmds.echo"].seen["args"].verbosity == -2


def test_unknown_command_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["frobnicate"])
    assert done.value.code == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


def test_unknown_option_is_an_argparse_error(fake_commands, capsys):
    fake_commands("echo", ECHO)
    with pytest.raises(SystemExit) as done:
        cli.main(["echo", "ok", "--no-such-option"])
    assert done.value.code == 2
    assert "unrecognized arguments: --no-such-option" in capsys.readouterr().err


def test_no_command_is_an_error(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main([])
    assert done.value.code == 2
    assert "required" in capsys.readouterr().err


def test_interrupt_exits_130(fake_commands, capsys):
    fake_commands("stop", "def add_arguments(p):\n    pass\n"
                          "def run(args):\n    raise KeyboardInterrupt\n")
    assert cli.main(["stop"]) == cli.EXIT_INTERRUPTED
    assert "interrupted" in capsys.readouterr().err


def test_a_command_says_why_it_stops_in_one_shape_on_stderr(capsys):
    assert fail("draw", "cannot write x.png: No such file or directory") == 2
    assert fail("run", "a case failed", 1) == 1
    warn("report", "no results folder")
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err.splitlines() == ["mrc-testbed draw: cannot write x.png: No such file or directory",
                                        "mrc-testbed run: a case failed", "mrc-testbed report: no results folder"]


def test_no_command_writes_its_error_line_by_hand():
    """Every `mrc-testbed <command>: ...` line goes through cli.errors (one shape, on stderr)."""
    by_hand = re.compile(r'print\(\s*f?"mrc-testbed [a-z ]+: ')
    folder = Path(cli.__file__).parent
    found = [f"{path.name}:{n}" for path in sorted(folder.glob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), start=1) if by_hand.search(line)]
    assert found == []
