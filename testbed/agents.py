"""Host agents on a running network: each one's job written, its process started in its host,
started together once every one is up (`wait_up`, `begin`: the job's start file), waited for,
stopped with a grace period, and its event log read.

The one way the testbed runs `host_agent.agent` (the experiments' Mininet backend and the CLI's
`transfer` both use it). Jobs are `host_agent.job.Job` objects; logs are JSON lines read with
`host_agent.eventlog`.
"""
from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from host_agent.eventlog import read_log
from host_agent.job import Job
from host_agent.start_file import write_start_file
from testbed import realtime

REPO = Path(__file__).resolve().parent.parent
AGENT_MODULE = "host_agent.agent"
STOP_GRACE_S = 5.0          # SIGTERM lets an agent write its last records; SIGKILL after this
START_FILE = "start_at"     # `begin`'s start file: in the agents' folder here, in the run's folder on a server
UP_POLL_S = 0.02            # how often `wait_up` reads the agents' logs
START_LEAD_S = 0.1          # `start_lead`: from writing the start file here to the common start
SERVER_LEAD_S = 1.5         # ... plus at least this when it must reach cluster servers too (sending it to
                            # two namespace servers took 1.0-1.3 s with the agents starting beside it)
DELIVERY_MARGIN = 2.0       # ... or this many times what sending them their jobs took, when longer


class AgentStartError(RuntimeError):
    """Agents that did not come up (no `start` record in their log); the message names them."""


@dataclass
class AgentProcess:
    """One agent: its name, job, job file and process."""

    name: str
    job: Job
    job_path: Path
    proc: subprocess.Popen

    @property
    def log_path(self) -> Path:
        return Path(self.job.log)

    @property
    def exit_code(self) -> int | None:
        """Its exit status, None while it runs."""
        return self.proc.poll()

    def records(self) -> list[dict]:
        """Every record of its event log so far."""
        return read_log(self.log_path)

    def is_up(self) -> bool:
        """Whether its log has its `start` record: its NICs are open (and, with a start file, it waits for it)."""
        return any(r.get("kind") == "start" for r in self.records())

    def result(self) -> dict | None:
        """Its `result` record, or None (not finished, or killed first)."""
        return next((r for r in reversed(self.records()) if r.get("kind") == "result"), None)

    def failure(self) -> str | None:
        """Why it did not finish its workload cleanly, or None when it did."""
        result = self.result()
        code = self.exit_code
        if result is not None and result.get("ok") and code == 0:
            return None
        detail = (result.get("error") or result.get("detail") or "not ok") if result else "none"
        return f"{self.name}: agent exit {code}, result {detail}"


class AgentLauncher:
    """Starts agents in the hosts of a `testbed.network.TestbedNetwork` and stops them again.

    Use it as a context manager: leaving it stops every agent still running.
    """

    def __init__(self, net, log_dir: Path) -> None:
        self.net = net
        self.log_dir = Path(log_dir)
        self.agents: dict[str, AgentProcess] = {}
        self._pushed: dict[str, str] = {}       # agent name -> its job file on its server (`prepare`)
        self.delivery_s = 0.0                   # how long `prepare` took to send the servers their jobs

    def __enter__(self) -> "AgentLauncher":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def prepare(self, jobs: list[tuple[str, Job]]) -> None:
        """Write the job files of agents about to start, by name, and on a network over servers
        send each server its agents' jobs in one go (`put_files`): `start` is then one ssh session
        per agent, not two, and agents launched one after the other come up closer together."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        remote: dict[str, list[Path]] = {}
        paths: dict[str, Path] = {}
        for name, job in jobs:
            paths[name] = job.write(self.log_dir / f"{name}.job.json")
            if self.net.is_remote(job.host):
                remote.setdefault(job.host, []).append(paths[name])
        if remote:
            sending = time.monotonic()
            placed = self.net.put_files(remote)
            self.delivery_s = time.monotonic() - sending
            self._pushed.update({name: placed[path] for name, path in paths.items() if path in placed})

    def start_file(self, host: str) -> str:
        """The start file an agent in `host` waits for (its job's `start_file`), which `begin`
        writes: in the agents' folder here; on a cluster server, in the run's folder there (where
        `prepare` puts the jobs)."""
        if self.net.is_remote(host):
            return f"{self.net.remote_dir()}/{START_FILE}"
        return str(self.log_dir / START_FILE)

    def wait_up(self, timeout: float) -> None:
        """Until every agent started has written its `start` record (`AgentProcess.is_up`);
        AgentStartError naming those that did not within `timeout` seconds, or at once when one
        exited without it."""
        deadline = time.monotonic() + timeout
        waiting = dict(self.agents)
        while waiting:
            waiting = {name: agent for name, agent in waiting.items() if not agent.is_up()}
            exited = sorted(name for name, agent in waiting.items() if agent.exit_code is not None)
            if exited:
                raise AgentStartError("agents exited before they came up: " + ", ".join(
                    f"{name} (exit {waiting[name].exit_code}; see {self.log_dir / (name + '.stderr')})"
                    for name in exited))
            if waiting and time.monotonic() >= deadline:
                names = sorted(waiting)
                raise AgentStartError(f"{len(names)} of {len(self.agents)} agents not up (no start record) after "
                                      f"{timeout:g} s: {', '.join(names[:10])}{' ...' if len(names) > 10 else ''}")
            if waiting:
                time.sleep(UP_POLL_S)

    def start_lead(self) -> float:
        """How far ahead of now `begin` should set the common start, so that the start file reaches
        every agent before it: here at once; on cluster servers, what sending them their jobs took
        (`delivery_s`) twice over, and at least SERVER_LEAD_S (a start set closer came after the
        short quick failover's workload had run, and its fault timers with it)."""
        if not any(self.net.is_remote(agent.job.host) for agent in self.agents.values()):
            return START_LEAD_S
        return START_LEAD_S + max(SERVER_LEAD_S, DELIVERY_MARGIN * self.delivery_s)

    def begin(self, start_at: float) -> None:
        """Start every agent waiting for its start file at `start_at` (UNIX time): the file written
        here, and sent to each cluster server that runs agents (one `put_files`, one session a
        server: about as long as `prepare` took to send the jobs, `delivery_s`)."""
        local = write_start_file(self.log_dir / START_FILE, start_at)
        servers = self.net.node_servers()
        remote: dict[str, list[Path]] = {}
        reached: set[str] = set()
        for agent in self.agents.values():
            host = agent.job.host
            if self.net.is_remote(host) and servers.get(host, host) not in reached:
                reached.add(servers.get(host, host))
                remote[host] = [local]
        if remote:
            self.net.put_files(remote)

    def start(self, name: str, job: Job, *agent_args: str) -> AgentProcess:
        """Write `job` to `<log_dir>/<name>.job.json` and start its agent in `job.host` (with
        `agent_args`, e.g. "--control", path); the agent's standard error goes to `<name>.stderr`.
        An old log of the same path is removed first."""
        if name in self.agents:
            raise ValueError(f"an agent called {name!r} was started already")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        path = job.write(self.log_dir / f"{name}.job.json")
        if job.log:
            Path(job.log).unlink(missing_ok=True)
        if self.net.is_remote(job.host):
            # On a cluster server: the job goes there first (unless `prepare` sent it), and the
            # agent's event log comes back on its standard output, as it is written, into the same
            # local file.
            job_arg = self._pushed.pop(name, None) or self.net.put_files({job.host: [path]})[path]
            python, log_args = self.net.python(job.host), ("--log", "/dev/stdout")
            stdout = open(job.log, "wb") if job.log else subprocess.DEVNULL
        else:
            job_arg, python, log_args, stdout = str(path), sys.executable, (), subprocess.DEVNULL
        with open(self.log_dir / f"{name}.stderr", "wb") as stderr:
            cmd = [*realtime.command_prefix(), python, "-m", AGENT_MODULE, "--job", job_arg, *log_args, *agent_args]
            proc = self.net.popen(job.host, cmd, stdout=stdout, stderr=stderr, cwd=str(REPO))
        if stdout is not subprocess.DEVNULL:
            stdout.close()
        agent = AgentProcess(name, job, path, proc)
        self.agents[name] = agent
        return agent

    def running(self) -> bool:
        """Whether any agent has not exited yet."""
        return any(a.exit_code is None for a in self.agents.values())

    def wait(self, deadline: float, tick: Callable[[], None] | None = None, tick_s: float = 0.05) -> bool:
        """Until every agent has exited or the UNIX time `deadline`, calling `tick` about every
        `tick_s` seconds; True when all exited."""
        while self.running():
            left = deadline - time.time()
            if left <= 0:
                return False
            if tick is not None:
                tick()
            waiting = next((a for a in self.agents.values() if a.exit_code is None), None)
            if waiting is None:               # the last one exited while `tick` ran
                break
            try:
                waiting.proc.wait(min(tick_s, max(left, 0.001)))
            except subprocess.TimeoutExpired:
                pass
        return True

    def stop(self, grace: float = STOP_GRACE_S) -> None:
        """Stop every agent still running (SIGTERM, then SIGKILL after `grace` seconds)."""
        for agent in self.agents.values():
            self.net.stop_process(agent.proc, grace)

    def exit_codes(self) -> dict[str, int | None]:
        return {name: agent.exit_code for name, agent in self.agents.items()}
