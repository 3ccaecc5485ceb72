"""A record of everything one run creates, so that `mrc-testbed clean` can remove it after a crash.

Each run writes a JSON state file under /run/mrc-testbed/ (or /tmp/mrc-testbed/ when /run is not
writable): the run's own PID, and every process (with its kernel start time, so that a reused PID
is never mistaken for ours), network namespace and interface it creates. Entries are written
*before* the thing is created where possible (interfaces) and right after otherwise (processes),
and the file is replaced atomically on every change. Clean-up acts on recorded PIDs and names only.

Mininet's namespaces are anonymous: each lives as long as a process in it. They are recorded as
the node shells that hold them (process groups: what a user starts from the CLI dies with them)
plus every process the testbed starts inside them; ending those removes the namespaces and the
veths in them. Interfaces and named namespaces in the root namespace can be recorded too.

A process killed between being spawned and being recorded would escape the record, so every process
a run starts also carries `MRC_TESTBED_RUN=<run id>` in its environment (`marked_env`); clean-up
ends recorded processes and processes carrying the run's marker.

A supervised registry (`RunRegistry(supervised=True)`, what every launcher uses) also starts the
run's supervisor (`testbed.supervisor`), which does that clean-up by itself the moment the owner
dies: nothing of a run outlives it, SIGKILL included. `mrc-testbed clean` remains for what older
versions left, and also sweeps the conformance runner's namespaces that older versions did not
record (`stray_netns`).
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

STATE_DIRS = (Path("/run/mrc-testbed"), Path("/tmp/mrc-testbed"))
RUN_ENV = "MRC_TESTBED_RUN"      # environment marker carried by every process a run starts
NETNS_DIR = Path("/run/netns")
# The conformance runner's lab namespaces (conformance/process_targets.py): `rc`, the creating
# process's PID modulo 10000 (4 digits), a lab number (2 digits), then `sw` or `h`. Versions before
# the runner recorded them left them behind when killed; `stray_netns` finds those.
LAB_NETNS = re.compile(r"^rc(?P<pid>\d{4})\d{2}(sw|h)$")


def state_dir() -> Path:
    """The first writable state directory (created if needed)."""
    for candidate in STATE_DIRS:
        try:
            candidate.mkdir(parents=True, exist_ok=True)
            if os.access(candidate, os.W_OK):
                return candidate
        except OSError:
            continue
    raise PermissionError(f"none of {', '.join(map(str, STATE_DIRS))} is writable")


def process_start_time(pid: int) -> int | None:
    """The kernel start time of `pid` (clock ticks since boot), or None if it is not running."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] == "Z":        # a zombie holds nothing any more
        return None
    return int(fields[19])


def is_same_process(pid: int, start_time: int) -> bool:
    """True when `pid` is still the process that was recorded (same start time)."""
    return process_start_time(pid) == start_time


def marked_env(run_id: str, env: dict | None = None) -> dict:
    """An environment (default: ours) with the run's marker added."""
    return {**(os.environ if env is None else env), RUN_ENV: run_id}


def marked_processes(run_id: str) -> list[dict]:
    """Running processes (other than this one) whose environment carries the run's marker."""
    needle = f"{RUN_ENV}={run_id}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if needle in environ:
            start = process_start_time(int(entry.name))
            if start is not None:
                found.append({"pid": int(entry.name), "start": start, "name": comm, "group": False})
    return found


@dataclass
class RunState:
    """What one run has created; the content of its state file."""

    run_id: str
    owner_pid: int
    owner_start: int
    created: float
    processes: list[dict] = field(default_factory=list)    # {pid, start, name, group}
    interfaces: list[str] = field(default_factory=list)   # root-namespace interface names
    netns: list[str] = field(default_factory=list)        # named namespaces (ip netns)
    supervisor: dict | None = None                        # {pid, start} of testbed.supervisor
    path: Path | None = None

    def owner_alive(self) -> bool:
        """True when the run that wrote this state is still running."""
        return is_same_process(self.owner_pid, self.owner_start)

    def to_json(self) -> str:
        data = {k: v for k, v in self.__dict__.items() if k != "path"}
        return json.dumps(data, indent=1)

    @classmethod
    def load(cls, path: Path) -> "RunState":
        data = json.loads(path.read_text())
        return cls(path=path, **data)


class RunRegistry:
    """The state file of the current run: record, forget, and remove it at a clean exit."""

    def __init__(self, run_id: str | None = None, directory: Path | None = None,
                 supervised: bool = False):
        """`supervised`: start the run's supervisor (testbed.supervisor), which removes everything
        recorded or marked as soon as this process dies without `close()`."""
        directory = directory or state_dir()
        run_id = run_id or f"run-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.state = RunState(run_id=run_id, owner_pid=os.getpid(),
                              owner_start=process_start_time(os.getpid()) or 0,
                              created=time.time(), path=directory / f"{run_id}.json")
        self._save()
        self.supervisor = None
        if supervised:
            from testbed.supervisor import Supervisor
            self.supervisor = Supervisor.start(self.path, run_id)
            self.state.supervisor = self.supervisor.record()
            self._save()

    @property
    def path(self) -> Path:
        return self.state.path

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(self.state.to_json())
        os.replace(tmp, self.path)

    def record_process(self, pid: int, name: str, group: bool = False) -> None:
        """Remember a process we started (`group`: it leads a process group to end as a whole)."""
        start = process_start_time(pid)
        if start is None:
            return
        self.state.processes.append({"pid": pid, "start": start, "name": name, "group": group})
        self._save()

    def forget_process(self, pid: int) -> None:
        """A process we ended ourselves."""
        self.state.processes = [p for p in self.state.processes if p["pid"] != pid]
        self._save()

    def record_interface(self, name: str) -> None:
        """Remember an interface about to be created in the root namespace."""
        if name not in self.state.interfaces:
            self.state.interfaces.append(name)
            self._save()

    def record_netns(self, name: str) -> None:
        """Remember a named network namespace about to be created."""
        if name not in self.state.netns:
            self.state.netns.append(name)
            self._save()

    def close(self) -> None:
        """The run ended cleanly: its state file is no longer needed, nor its supervisor."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        if self.supervisor is not None:
            self.supervisor.release()
            self.supervisor = None


def list_runs(directory: Path | None = None) -> list[RunState]:
    """Every recorded run in the state directories (unreadable files are skipped)."""
    dirs = [directory] if directory else [d for d in STATE_DIRS if d.is_dir()]
    runs = []
    for d in dirs:
        for path in sorted(d.glob("*.json")):
            try:
                runs.append(RunState.load(path))
            except (OSError, ValueError, TypeError):
                continue
    return runs


@dataclass
class CleanReport:
    """What a clean-up removed."""

    run_id: str
    killed: list[str] = field(default_factory=list)
    interfaces: list[str] = field(default_factory=list)
    netns: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return (f"{self.run_id}: ended {len(self.killed)} processes, removed "
                f"{len(self.interfaces)} interfaces and {len(self.netns)} namespaces")


def interface_exists(name: str) -> bool:
    """True when a root-namespace interface `name` exists."""
    return Path("/sys/class/net", name).exists()


def _signal(proc: dict, sig: int) -> None:
    try:
        if proc.get("group"):
            os.killpg(proc["pid"], sig)
        else:
            os.kill(proc["pid"], sig)
    except (ProcessLookupError, PermissionError):
        pass


def end_processes(processes: list[dict], grace: float = 2.0) -> list[str]:
    """SIGTERM the recorded processes that are still ours, SIGKILL those left after `grace` s."""
    alive = [p for p in processes if is_same_process(p["pid"], p["start"])]
    for proc in alive:
        _signal(proc, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(is_same_process(p["pid"], p["start"]) for p in alive):
        time.sleep(0.05)
    for proc in alive:
        if is_same_process(proc["pid"], proc["start"]):
            _signal(proc, signal.SIGKILL)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(is_same_process(p["pid"], p["start"]) for p in alive):
        time.sleep(0.05)
    return [f"{p['name']} (pid {p['pid']})" for p in alive]


def clean_run(state: RunState, grace: float = 2.0) -> CleanReport:
    """Remove what one run recorded: its processes (SIGKILL for those left `grace` s after
    SIGTERM), root-namespace interfaces and namespaces."""
    report = CleanReport(state.run_id)
    recorded = {p["pid"] for p in state.processes}
    unrecorded = [p for p in marked_processes(state.run_id) if p["pid"] not in recorded]
    report.killed = end_processes(state.processes + unrecorded, grace)
    for name in state.interfaces:
        if interface_exists(name):
            subprocess.run(["ip", "link", "del", name], capture_output=True, check=False)
            report.interfaces.append(name)
    for name in state.netns:
        if (NETNS_DIR / name).exists():
            remove_netns(name)
            report.netns.append(name)
    if state.path is not None:
        run_dir = state.path.parent / state.run_id       # the run's unix sockets
        if run_dir.is_dir():
            for item in run_dir.iterdir():
                item.unlink(missing_ok=True)
            run_dir.rmdir()
        state.path.unlink(missing_ok=True)
        state.path.with_suffix(".tmp").unlink(missing_ok=True)    # an owner killed while saving
    return report


def _netns_users() -> tuple[set[int], dict[int, str]]:
    """The network namespaces processes are in (inodes), and every process's PID -> command line."""
    inodes, commands = set(), {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            inodes.add(os.stat(entry / "ns" / "net").st_ino)
        except OSError:             # gone, or a process we may not look into
            pass
        try:
            commands[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            pass
    return inodes, commands


def stray_netns(runs: list[RunState]) -> list[str]:
    """Conformance lab namespaces (LAB_NETNS) that no recorded run names, that no process is in, and
    whose creator is gone (no Python process has a PID ending in the name's four digits): what an
    older version's killed conformance run left. A lab whose creator may still run is kept."""
    try:
        names = sorted(p.name for p in NETNS_DIR.iterdir())
    except OSError:
        return []
    recorded = {name for state in runs for name in state.netns}
    in_use, commands = _netns_users()
    stray = []
    for name in names:
        match = LAB_NETNS.match(name)
        if match is None or name in recorded:
            continue
        try:
            if os.stat(NETNS_DIR / name).st_ino in in_use:
                continue
        except OSError:
            continue
        creator = int(match["pid"])
        if any(pid % 10000 == creator and "python" in cmd for pid, cmd in commands.items()):
            continue
        stray.append(name)
    return stray


def remove_netns(name: str) -> bool:
    """Delete named namespace `name` (`ip netns del`); True when it is gone."""
    subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
    return not (NETNS_DIR / name).exists()


def leftovers(state: RunState) -> list[str]:
    """What of a run's record still exists (processes, interfaces, namespaces); empty when clean."""
    recorded = {p["pid"] for p in state.processes}
    found = [f"process {p['name']} (pid {p['pid']})" for p in state.processes
             if is_same_process(p["pid"], p["start"])]
    found += [f"process {p['name']} (pid {p['pid']}, unrecorded)"
              for p in marked_processes(state.run_id) if p["pid"] not in recorded]
    found += [f"interface {n}" for n in state.interfaces if interface_exists(n)]
    found += [f"namespace {n}" for n in state.netns if (NETNS_DIR / n).exists()]
    return found
