"""Clean shutdown: Ctrl-C (SIGINT) or SIGTERM of `mrc-testbed up` / `mrc-testbed run` at several
stages leaves no namespaces, veths or processes; a `run` killed with SIGKILL mid-experiment together
with its supervisor is fully cleaned by `mrc-testbed clean`.

Each test starts the command as a subprocess (model target), waits for the progress line of the
stage it wants to interrupt (no sleeping), records the processes below it, signals it, and then
compares snapshots taken before and after: root-namespace links (`ip -o link`) and named
namespaces (`ip netns`) that look like the testbed's, the processes that were below the command,
the processes carrying the run's marker, and the run's state file. Ctrl-C is sent to the whole
process group, as a terminal does. (tests/testbed/test_integration_testbed.py covers SIGKILL during
bring-up of `up`; here: SIGKILL of a running experiment.) Mininet: root and mnexec; serial.
"""
from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import queue
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import requires_mininet
from testbed.processes import descendants as processes_below
from testbed.registry import RunState, clean_run, leftovers, list_runs, marked_processes, process_start_time

pytestmark = [pytest.mark.integration, pytest.mark.slow, requires_mininet]

REPO = Path(__file__).resolve().parents[2]
TESTBED_LINK = re.compile(r"^[hs]\d+-eth\d+$")        # Mininet's names for host and switch ports
STAGE_TIMEOUT = 60.0

SCENARIO = """\
name: shutdown
seed: 1
horizon_s: 30.0
sample_interval_s: 0.05
topology: leafspine:2x1x1
workload: {kind: allreduce, bytes: 4194304, chunk_bytes: 65536}
transports:
  - {name: MRC, mode: mrc}
"""


def root_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if line.strip()}


def named_netns() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def descendants(root: int) -> dict[int, int]:
    """pid -> start time of `root` and every process below it now."""
    starts = {pid: process_start_time(pid) for pid in [root, *processes_below(root)]}
    return {pid: start for pid, start in starts.items() if start is not None}


def still_running(processes: dict[int, int]) -> list[str]:
    """The recorded processes that still exist (same PID and start time), not zombies."""
    alive = []
    for pid, start in processes.items():
        if process_start_time(pid) != start:
            continue
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if state != "Z":
            alive.append(f"{pid}: {cmd.strip()}")
    return alive


@dataclass
class RunningCommand:
    """A testbed command running as a subprocess, its output read line by line."""

    argv: list[str]
    cwd: Path
    interactive: bool = False              # keep stdin open (a CLI waiting for its user)
    lines: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._queue: queue.Queue = queue.Queue()
        # PYTHONFAULTHANDLER: a command that hangs prints every thread's stack on SIGABRT (`dump_stacks`)
        self.proc = subprocess.Popen([sys.executable, "-m", "cli", *self.argv], cwd=str(self.cwd),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     stdin=subprocess.PIPE if self.interactive else subprocess.DEVNULL,
                                     start_new_session=True, env=dict(os.environ, PYTHONFAULTHANDLER="1"))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout: float = STAGE_TIMEOUT) -> str:
        """Block until a line matching `pattern` is printed (fail if the command ends first)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"no line matching {pattern!r} within {timeout:.0f} s:\n" + self.output())
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                pytest.fail(f"the command ended (status {self.proc.wait()}) before printing "
                            f"{pattern!r}:\n" + self.output())
            self.lines.append(line)
            if re.search(pattern, line):
                return line

    def finish(self, timeout: float = 60.0) -> int:
        """Wait for the command to exit; drain its output."""
        status = self.proc.wait(timeout)
        if self.proc.stdin:
            self.proc.stdin.close()
        self._drain()
        return status

    def _drain(self) -> None:
        """Read what is left of the output of a command that has ended."""
        while True:
            try:
                line = self._queue.get(timeout=5)
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)

    def output(self, last: int = 40) -> str:
        return "\n".join(self.lines[-last:])

    def dump_stacks(self) -> str:
        """A command that does not stop: every thread's stack (faulthandler, on SIGABRT) and all it
        printed after the lines read so far; the command is killed."""
        if self.proc.poll() is None:
            resource.prlimit(self.proc.pid, resource.RLIMIT_CORE, (0, 0))     # no core file in the checkout
            self.proc.send_signal(signal.SIGABRT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        self.kill_all()
        self._drain()
        return self.output(200)

    def run_state(self) -> RunState | None:
        """The state file of the run this command owns (its registry), once it exists."""
        for state in list_runs():
            if state.owner_pid == self.proc.pid:
                return state
        return None

    def kill_all(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


@dataclass
class Snapshot:
    links: set[str]
    netns: set[str]

    @classmethod
    def take(cls) -> "Snapshot":
        return cls(root_links(), named_netns())


def assert_nothing_left(before: Snapshot, processes: dict[int, int], state: RunState | None,
                        run_dir: Path) -> None:
    after = Snapshot.take()
    assert not {n for n in after.links - before.links if TESTBED_LINK.match(n)}, "veths left in root"
    new_netns = after.netns - before.netns
    if state is not None:
        assert not new_netns & set(state.netns), f"namespaces left: {new_netns}"
        assert leftovers(state) == []
        assert marked_processes(state.run_id) == []
        assert not (state.path and state.path.exists()), "the run's state file remains"
    assert still_running(processes) == []
    mentioning = [p for p in Path("/proc").iterdir() if p.name.isdigit()
                  and str(run_dir).encode() in _cmdline(p)]
    assert mentioning == []


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


READ_SYSCALL = {"x86_64": "0", "aarch64": "63"}.get(platform.machine())   # read(2)'s number, where known


def wait_for_stdin_read(cmd: RunningCommand, timeout: float = STAGE_TIMEOUT) -> None:
    """Until the command's main thread is blocked reading its standard input (the CLI waiting for a
    line): the system call it is in, from /proc (read, where its number is known here, with fd 0 as
    its first argument), polled every 10 ms."""
    pid = cmd.proc.pid
    deadline = time.monotonic() + timeout
    syscall = Path(f"/proc/{pid}/task/{pid}/syscall")
    fields: list[str] = []
    while time.monotonic() < deadline:
        try:
            fields = syscall.read_text().split()
        except OSError:
            pytest.fail(f"the command ended before its CLI waited for a line:\n{cmd.output()}")
        if len(fields) > 1 and fields[1] == "0x0" and fields[0] == (READ_SYSCALL or fields[0]) \
                and fields[0] not in ("running", "-1"):
            return
        threading.Event().wait(0.01)
    pytest.fail(f"the main thread of {pid} never waited on its standard input ({syscall}: {fields})")


def signal_another_thread(pid: int, signum: int) -> None:
    """`signum` to a thread of `pid` other than its main one (tgkill; a thread gone meanwhile is
    passed over)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid):
        if libc.tgkill(pid, tid, signum) == 0:
            return
        if ctypes.get_errno() != errno.ESRCH:
            raise OSError(ctypes.get_errno(), f"tgkill {pid} {tid}: {os.strerror(ctypes.get_errno())}")
    pytest.fail(f"{pid} has no thread but its main one to signal")


def interrupt(cmd: RunningCommand, how: str) -> None:
    if how == "ctrl-c":                       # a terminal's Ctrl-C: the whole foreground group
        os.killpg(cmd.proc.pid, signal.SIGINT)
    elif how == "sigterm-thread":             # a SIGTERM that a thread other than the main one takes
        wait_for_stdin_read(cmd)
        signal_another_thread(cmd.proc.pid, signal.SIGTERM)
    else:
        cmd.proc.send_signal(signal.SIGTERM)


def stopped_in_time(cmd: RunningCommand) -> int:
    try:
        return cmd.finish(90)
    except subprocess.TimeoutExpired:
        pytest.fail("the command did not stop within 90 s of the signal; its output and stacks:\n"
                    + cmd.dump_stacks())


def _cleanup(cmd: RunningCommand, state: RunState | None) -> None:
    cmd.kill_all()
    state = state or cmd.run_state()
    if state is not None and leftovers(state):
        clean_run(state)


# --- mrc-testbed up ---------------------------------------------------------------------------------
UP_STAGES = {
    "bring-up": r"^\[1/5\] hosts",             # signalled while switches and links are being made
    "programming": r"^\[4/5\] start",         # switch processes ready: programming has begun
    "running": r"^network up; Ctrl-C",        # up and idle (--no-cli)
    "cli": r"^logs in ",                      # up, the Mininet CLI waiting for a command
}


# sigterm-thread: the main thread, waiting in the CLI for a line, sees the signal only through
# testbed.processes.SignalsReachMainThread (before it, the command waited for its user; so did one
# that a SIGTERM reached just before it began to wait, as once on CI)
@pytest.mark.parametrize("how, stage", [("ctrl-c", "bring-up"), ("sigterm", "programming"),
                                        ("sigterm", "running"), ("sigterm", "cli"),
                                        ("sigterm-thread", "cli")])
def test_up_interrupted_leaves_nothing(how, stage, tmp_path):
    before = Snapshot.take()
    run_dir = tmp_path / "up"
    cli = stage == "cli"
    cmd = RunningCommand(["up", "--topo", "leafspine:2x1x1", "--target", "model", "--run-dir", str(run_dir)]
                         + ([] if cli else ["--no-cli"]), REPO, interactive=cli)
    state = None
    try:
        cmd.wait_for(UP_STAGES[stage])
        state = cmd.run_state()
        processes = descendants(cmd.proc.pid)
        interrupt(cmd, how)
        status = stopped_in_time(cmd)
        assert status in (0, 130, 128 + signal.SIGTERM, 128 + signal.SIGINT), cmd.output()
        assert "Traceback" not in "\n".join(cmd.lines), cmd.output()
        assert_nothing_left(before, processes, state, run_dir)
    finally:
        _cleanup(cmd, state)


# --- mrc-testbed run --------------------------------------------------------------------------------
def agents_running(runs_root: Path) -> bool:
    """True once an agent of the experiment has received data (the collective is under way)."""
    for log in runs_root.glob("experiments/*/agents/*.jsonl"):
        try:
            lines = log.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:                 # a line still being written
                continue
            if record.get("kind") == "goodput" and record.get("rx_bytes", 0) > 0:
                return True
    return False


def start_experiment(tmp_path: Path, until: str = "agents") -> tuple[RunningCommand, Path]:
    """`mrc-testbed run` of a small all-reduce on the mininet backend, run from tmp_path (its run
    folders land under tmp_path/runs); returns once its agents are exchanging data, or (until=
    "bring-up") once its network's switches are being made."""
    scenario = tmp_path / "shutdown.yaml"
    scenario.write_text(SCENARIO)
    cmd = RunningCommand(["run", str(scenario), "--backend", "mininet", "--target", "model",
                          "--out", str(tmp_path / "results")], tmp_path)
    if until == "bring-up":
        cmd.wait_for(r"\[1/5\] hosts")
        return cmd, tmp_path / "runs"
    cmd.wait_for(r"network \S+ up on model")
    deadline = time.monotonic() + STAGE_TIMEOUT
    while not agents_running(tmp_path / "runs"):
        if cmd.proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail("the agents never logged goodput:\n" + cmd.output())
        time.sleep(0.05)                       # polling a condition with a deadline
    return cmd, tmp_path / "runs"


@pytest.mark.parametrize("how, stage", [("ctrl-c", "agents"), ("sigterm", "agents"), ("sigterm", "bring-up")])
def test_run_interrupted_leaves_nothing(how, stage, tmp_path):
    before = Snapshot.take()
    cmd, runs = start_experiment(tmp_path, until=stage)
    state = None
    try:
        state = cmd.run_state()
        assert state is not None, "the experiment's network has no state file"
        processes = descendants(cmd.proc.pid)
        if stage == "agents":
            assert any("host_agent.agent" in line for line in still_running(processes)), \
                "no agent was running when the signal was sent"
        interrupt(cmd, how)
        status = stopped_in_time(cmd)
        assert status != 0, "an interrupted run must not report success"
        assert_nothing_left(before, processes, state, runs)
    finally:
        _cleanup(cmd, state)


def test_run_killed_mid_experiment_is_cleaned_by_clean(tmp_path):
    """As an older version (no supervisor) or a run whose supervisor was killed as well leaves it:
    `clean` removes everything. (tests/testbed/test_process_lifetime.py: with its supervisor, a SIGKILLed
    run needs no `clean`.)"""
    before = Snapshot.take()
    cmd, runs = start_experiment(tmp_path)
    state = None
    try:
        state = cmd.run_state()
        assert state is not None, "the experiment's network has no state file"
        assert state.supervisor, "the run has no supervisor"
        processes = descendants(cmd.proc.pid)
        processes.pop(state.supervisor["pid"], None)
        os.kill(state.supervisor["pid"], signal.SIGKILL)   # first: it would clean up at once
        cmd.proc.kill()                                   # SIGKILL: no tear-down runs
        cmd.proc.wait(10)
        state = RunState.load(state.path)                 # everything recorded up to the kill
        assert leftovers(state), "a SIGKILLed experiment should leave processes behind"
        clean = subprocess.run([sys.executable, "-m", "cli", "clean", "--run", state.run_id],
                               cwd=str(REPO), capture_output=True, text=True, timeout=60)
        assert clean.returncode == 0, clean.stdout + clean.stderr
        assert state.run_id in clean.stdout
        processes.pop(cmd.proc.pid, None)
        assert_nothing_left(before, processes, state, runs)
    finally:
        _cleanup(cmd, state)
