"""Nothing outlives its run: when the process that owns a run dies, even by SIGKILL, every process
it started, every namespace and every veth go with it within seconds, without `mrc-testbed clean`
(the run's supervisor, testbed/supervisor.py). `clean` still removes the conformance labs older
versions left unrecorded.

The SIGKILL tests start the command as a subprocess, poll until its processes exist (no fixed
sleep), take what belongs to the run (processes below it or carrying its marker, the network
namespaces they are in, veths), SIGKILL it, then poll until all of it is gone, with a deadline.
How long that took is printed (not asserted: speed figures are measured, not timed tests).
Namespace and Mininet tests need root; run them under `flock /tmp/mrc-net.lock`.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import requires_mininet, requires_root
from testbed import registry
from testbed.processes import descendants as processes_below
from testbed.registry import RunState, list_runs, marked_processes, process_start_time

REPO = Path(__file__).resolve().parents[2]
GONE_DEADLINE_S = 15.0          # generous: a loaded 2-core machine; the figure printed is what counts
START_DEADLINE_S = 60.0


def report(request, line: str) -> None:
    """Print a measured figure in the pytest output, even without -s."""
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if capture is None:
        print(f"[lifetime] {line}")
        return
    with capture.global_and_fixture_disabled():
        print(f"\n[lifetime] {line}")


def alive(processes: dict[int, int]) -> list[int]:
    """The PIDs of `processes` (pid -> start time) that still run (zombies do not count)."""
    return [pid for pid, start in processes.items() if process_start_time(pid) == start]


def wait_until(condition, deadline_s: float, what: str, proc: subprocess.Popen | None = None,
               output: Path | None = None) -> float:
    """Poll `condition()` until true; return the seconds it took, fail after `deadline_s` or when
    `proc` ends first (showing its `output` file)."""
    began = time.monotonic()
    while not condition():
        if proc is not None and proc.poll() is not None:
            out = output.read_text(errors="replace")[-3000:] if output and output.exists() else ""
            pytest.fail(f"{what}: the command ended first (status {proc.returncode}):\n{out}")
        if time.monotonic() - began > deadline_s:
            pytest.fail(f"{what}: not within {deadline_s:.0f} s")
        time.sleep(0.02)
    return time.monotonic() - began


def netns_in_use() -> set[int]:
    """Every network namespace a task is in or a file descriptor holds (inodes)."""
    found = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            tasks = list((proc / "task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                found.add(os.stat(task / "ns" / "net").st_ino)
            except OSError:
                pass
        try:
            fds = list((proc / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(fd)
            except OSError:
                continue
            if link.startswith("net:["):
                found.add(int(link[5:-1]))
    return found


def root_veths() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show", "type", "veth"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if line.strip()}


def named_netns() -> set[str]:
    return {p.name for p in registry.NETNS_DIR.iterdir()} if registry.NETNS_DIR.is_dir() else set()


def descendants(root: int) -> dict[int, int]:
    """pid -> start time of every process below `root` now."""
    starts = {pid: process_start_time(pid) for pid in processes_below(root)}
    return {pid: start for pid, start in starts.items() if start is not None}


@dataclass
class RunFootprint:
    """What a running command has made: its processes, their network namespaces, veths in them."""

    processes: dict[int, int]
    namespaces: set[int]
    veths: int

    @classmethod
    def of(cls, owner: int, run_ids: list[str]) -> "RunFootprint":
        processes = descendants(owner)
        for run_id in run_ids:
            processes.update({p["pid"]: p["start"] for p in marked_processes(run_id)})
        root = os.stat("/proc/self/ns/net").st_ino        # the namespace the command was started in
        by_ns: dict[int, int] = {}
        for pid in processes:
            try:
                by_ns.setdefault(os.stat(f"/proc/{pid}/ns/net").st_ino, pid)
            except OSError:
                pass
        by_ns.pop(root, None)
        veths = 0
        for pid in by_ns.values():
            out = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", "ip", "-o", "link", "show",
                                  "type", "veth"], capture_output=True, text=True).stdout
            veths += len([line for line in out.splitlines() if line.strip()])
        return cls(processes, set(by_ns), veths)

    def left(self) -> tuple[list[int], set[int]]:
        """The processes and namespaces of the footprint that still exist."""
        return alive(self.processes), self.namespaces & netns_in_use()


def supervisor_of(state: RunState) -> dict[int, int]:
    sup = state.supervisor or {}
    return {sup["pid"]: sup["start"]} if sup.get("pid") else {}


# --- the supervisor, without a network -------------------------------------------------------
OWNER = textwrap.dedent("""\
    import subprocess, sys, threading
    from pathlib import Path
    from testbed.registry import RunRegistry, marked_env
    reg = RunRegistry("lt-{tag}", directory=Path(sys.argv[1]), supervised=True)
    sleep = [sys.executable, "-c", "import time; time.sleep(120)"]
    quiet = dict(stdout=subprocess.DEVNULL)
    marked = subprocess.Popen(sleep, env=marked_env(reg.state.run_id), **quiet)
    def spawn():                       # started from a thread that then ends (PDEATHSIG's trap)
        proc = subprocess.Popen(sleep, **quiet)
        reg.record_process(proc.pid, "sleeper from a thread")
        print(proc.pid, flush=True)
    thread = threading.Thread(target=spawn)
    thread.start(); thread.join()
    print(marked.pid, flush=True)
    print(reg.path, flush=True)
    sys.stdin.read()
    reg.close()
    """)


def start_owner(tmp_path: Path) -> tuple[subprocess.Popen, list[int], Path]:
    owner = subprocess.Popen([sys.executable, "-c", OWNER.format(tag=os.getpid()), str(tmp_path)],
                             cwd=str(REPO), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    lines = [owner.stdout.readline().strip() for _ in range(3)]
    assert all(lines), f"the owner did not start: {lines}"
    return owner, [int(lines[0]), int(lines[1])], Path(lines[2])


def test_a_killed_owner_takes_its_processes_along(tmp_path, request):
    owner, pids, state_path = start_owner(tmp_path)
    try:
        state = RunState.load(state_path)
        started = {pid: process_start_time(pid) for pid in pids}
        supervisor = supervisor_of(state)
        assert alive(started) == pids, "the thread's child died with its thread"
        assert alive(supervisor), "no supervisor is running"
        owner.kill()
        owner.wait(10)
        took = wait_until(lambda: not alive(started) and not state_path.exists(), GONE_DEADLINE_S,
                          "the owner's processes and state file to go")
        wait_until(lambda: not alive(supervisor), GONE_DEADLINE_S, "the supervisor to exit")
        report(request, f"owner SIGKILLed: its 2 processes and state file gone after {took:.2f} s")
    finally:
        owner.kill()
        for pid, start in started.items():
            if process_start_time(pid) == start:
                os.kill(pid, signal.SIGKILL)


def test_a_run_that_ends_cleanly_releases_its_supervisor(tmp_path):
    owner, pids, state_path = start_owner(tmp_path)
    started = {pid: process_start_time(pid) for pid in pids}
    try:
        supervisor = supervisor_of(RunState.load(state_path))
        owner.communicate("", timeout=30)           # end of input: the owner closes its registry
        assert owner.returncode == 0
        assert not alive(supervisor), "the released supervisor is still running"
        assert alive(started) == pids, "a released supervisor must not end anything"
        assert not state_path.exists()
    finally:
        for pid, start in started.items():
            if process_start_time(pid) == start:
                os.kill(pid, signal.SIGKILL)


# --- conformance labs ---------------------------------------------------------------------------
def unused_creator_pid() -> int:
    """A PID whose last four digits no running Python process has (a conformance run long gone)."""
    taken = set()
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and b"python" in (proc / "cmdline").read_bytes():
                taken.add(int(proc.name) % 10000)
        except OSError:
            continue
    return next(n for n in range(9999, 0, -1) if n not in taken)


@requires_root
def test_clean_removes_a_conformance_lab_no_run_recorded(tmp_path, monkeypatch, capsys):
    from cli import clean as clean_cmd
    from conformance.process_targets import lab_prefix
    stale = lab_prefix(unused_creator_pid(), 97) + "sw"            # as an older version left it
    ours = lab_prefix(os.getpid(), 96) + "h"                       # its creator (we) still runs
    recorded = lab_prefix(unused_creator_pid(), 95) + "h"          # a live run of this version's
    assert all(registry.LAB_NETNS.match(name) for name in (stale, ours, recorded))
    monkeypatch.setattr(clean_cmd, "list_runs", lambda: registry.list_runs(tmp_path))
    live = registry.RunRegistry("lt-live", directory=tmp_path)
    live.record_netns(recorded)
    names = (stale, ours, recorded)
    try:
        for name in names:
            subprocess.run(["ip", "netns", "add", name], check=True)
        clean_cmd.run(argparse.Namespace(force=False, dry_run=True, run=None, cluster=None))
        assert stale in capsys.readouterr().out and stale in named_netns()
        clean_cmd.run(argparse.Namespace(force=False, dry_run=False, run=None, cluster=None))
        out = capsys.readouterr().out
        assert f"namespace {stale}: removed" in out
        assert stale not in named_netns()
        assert {ours, recorded} <= named_netns() and ours not in out and recorded not in out
    finally:
        live.close()
        for name in names:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)


CONFORMANCE_OWNER = textwrap.dedent("""\
    import sys
    from conformance import process_targets
    target = getattr(process_targets, sys.argv[1])()
    target.start()
    target.reset(seed=1)
    print(target.registry.path, target.lab.switch_ns, target.lab.host_ns, flush=True)
    sys.stdin.read()
    """)


@requires_root
@pytest.mark.slow
@pytest.mark.parametrize("target", ["ModelProcessTarget", "Bmv2Target"])
def test_a_killed_conformance_run_leaves_no_lab(target, request):
    from conformance import process_targets
    missing = getattr(process_targets, target)().unavailable()
    if missing:
        pytest.skip(f"{target}: {missing}")
    before = named_netns()
    owner = subprocess.Popen([sys.executable, "-c", CONFORMANCE_OWNER, target], cwd=str(REPO),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    state = None
    try:
        line = owner.stdout.readline().split()
        assert len(line) == 3, "the conformance target did not start"
        state = RunState.load(Path(line[0]))
        assert set(state.netns) == set(line[1:]) <= named_netns()
        switches = {p["pid"]: p["start"] for p in state.processes}
        assert alive(switches), "no switch process is running"
        owner.kill()
        owner.wait(10)
        took = wait_until(lambda: not alive(switches) and not set(state.netns) & named_netns()
                          and not state.path.exists(), GONE_DEADLINE_S, "the lab to go")
        assert marked_processes(state.run_id) == []
        assert named_netns() - before == set()
        report(request, f"conformance run ({target}) SIGKILLed: switch and 2 namespaces gone after {took:.2f} s")
    finally:
        owner.kill()
        if state is not None and registry.leftovers(state):
            registry.clean_run(state)


# --- mrc-testbed run / up on Mininet --------------------------------------------------------------
SCENARIO = """\
name: lifetime
seed: 1
horizon_s: 30.0
sample_interval_s: 0.05
topology: leafspine:2x1x1
workload: {kind: allreduce, bytes: 4194304, chunk_bytes: 65536}
transports:
  - {name: MRC, mode: mrc}
"""


def runs_of(owner: int) -> list[RunState]:
    return [state for state in list_runs() if state.owner_pid == owner]


def running(owner: int, needle: bytes) -> bool:
    """Whether a process of `owner`'s runs (by marker) has `needle` in its command line."""
    for state in runs_of(owner):
        for p in marked_processes(state.run_id):
            try:
                if needle in Path(f"/proc/{p['pid']}/cmdline").read_bytes():
                    return True
            except OSError:
                continue
    return False


STARTED = {"agents": b"-m\0host_agent.agent\0",
           "model switches": b"-m\0refswitch.main\0", "bmv2 switches": b"simple_switch_grpc\0"}


@requires_mininet
@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("command, target, stage", [("run", "model", "agents"), ("up", "model", "switches"),
                                                    ("up", "bmv2", "switches")])
def test_a_sigkilled_command_leaves_nothing_without_clean(command, target, stage, tmp_path, request):
    """SIGKILL of `run` while its agents run, or of `up` while its switches start: within the
    deadline 0 processes of the run, 0 of its namespaces and 0 veths, and `clean` is never run."""
    from testbed.nodes import target_unavailable
    if target_unavailable(target):
        pytest.skip(target_unavailable(target))
    scenario = tmp_path / "lifetime.yaml"
    scenario.write_text(SCENARIO)
    argv = (["run", str(scenario), "--backend", "mininet", "--target", target, "--out", str(tmp_path / "out")]
            if command == "run" else
            ["up", "--topo", "leafspine:2x2x1", "--target", target, "--run-dir", str(tmp_path / "up"), "--no-cli"])
    veths_before, netns_before = root_veths(), named_netns()
    output = tmp_path / "command.log"
    with open(output, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "cli", *argv], cwd=str(tmp_path),
                                env={**os.environ, "PYTHONPATH": str(REPO)}, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    states: list[RunState] = []
    try:
        needle = STARTED[stage if stage == "agents" else f"{target} {stage}"]
        wait_until(lambda: running(proc.pid, needle), START_DEADLINE_S, f"{command}'s {stage} to start",
                   proc, output)
        states = runs_of(proc.pid)
        footprint = RunFootprint.of(proc.pid, [s.run_id for s in states])
        supervisors = {pid: start for s in states for pid, start in supervisor_of(s).items()}
        footprint.processes = {p: s for p, s in footprint.processes.items() if p not in supervisors}
        assert footprint.processes and footprint.namespaces, "nothing of the run was found running"
        during = root_veths() - veths_before
        proc.kill()                                      # SIGKILL: no tear-down runs
        proc.wait(10)
        took = wait_until(lambda: footprint.left() == ([], set()), GONE_DEADLINE_S,
                          f"the processes and namespaces of the killed {command} to go")
        assert all(marked_processes(s.run_id) == [] for s in states)
        assert root_veths() - veths_before == set(), "veths left in the root namespace"
        assert named_netns() - netns_before == set(), "named namespaces left"
        wait_until(lambda: not any(s.path.exists() for s in states) and not alive(supervisors),
                   GONE_DEADLINE_S, "the run's state file and supervisor to go")
        assert "ended without releasing its supervisor" in output.read_text(errors="replace")
        report(request, f"{command} ({target}) SIGKILLed during {stage}: {len(footprint.processes)} processes, "
                        f"{len(footprint.namespaces)} namespaces, {footprint.veths} veths in them, "
                        f"{len(during)} veths in the root namespace; all gone after {took:.2f} s, no clean")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        for state in runs_of(proc.pid):
            registry.clean_run(state)
