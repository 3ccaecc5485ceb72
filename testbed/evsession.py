"""Live EV control of a host pair on a running testbed (the `evs`, `ev` and `probe` CLI commands).

A session runs the two host agents of a pair with their control sockets
(`<run_dir>/agents/<host>.sock`, host_agent.control): a small transfer, then the agents linger,
keeping the connection and its EV set alive for the operator until the session is stopped (or
the CLI exits). `EvSessions` keeps one session per unordered host pair.
"""
from __future__ import annotations

import time
from pathlib import Path

from wire.control import ControlClient, ControlError
from testbed.agents import AgentLauncher
from testbed.transfer import transfer_jobs

SESSION_LINGER_S = 86400.0     # agents of a session stay until stopped
SESSION_BYTES = 4096           # the transfer that opens the connection
READY_TIMEOUT_S = 20.0
SESSION_QP = 0x5E              # not the `transfer` command's QP: a transfer may run beside a session


class EvSession:
    """The two agents of `hosts` (rank 0, rank 1), reachable on their control sockets."""

    def __init__(self, net, hosts: tuple[str, str], mode: str = "mrc") -> None:
        self.hosts = hosts
        log_dir = Path(net.run_dir).resolve() / "agents"      # agents run in the repository folder
        self.sockets = {h: str(log_dir / f"{h}.sock") for h in hosts}
        jobs = transfer_jobs(net.topology, hosts[0], hosts[1], SESSION_BYTES, mode, log_dir,
                             timeout=READY_TIMEOUT_S + 30, qp=SESSION_QP)
        self.launcher = AgentLauncher(net, log_dir)
        try:
            for job in reversed(jobs):
                self.launcher.start(f"ev-{job.host}", job, "--linger", str(SESSION_LINGER_S),
                                    "--control", self.sockets[job.host])
            self._wait_ready()
        except BaseException:
            self.launcher.stop()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        for host in self.hosts:
            while True:
                if not self.launcher.running():
                    raise RuntimeError(f"the agents of {' '.join(self.hosts)} exited; see "
                                       f"{self.launcher.log_dir}/ev-{host}.stderr")
                try:
                    with ControlClient(self.sockets[host], timeout=2) as client:
                        client.request("connections")
                    break
                except ControlError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{host}'s agent did not open its control socket "
                                           f"within {READY_TIMEOUT_S:.0f} s") from None
                    time.sleep(0.05)

    def peer_of(self, host: str) -> str:
        """The name `host`'s agent gives the other end ("rank0" or "rank1")."""
        return f"rank{1 - self.hosts.index(host)}"

    def request(self, host: str, op: str, **fields):
        """One control operation on `host`'s connection to the other host."""
        if host not in self.hosts:
            raise ValueError(f"host: {host} is not in the session {' '.join(self.hosts)}")
        with ControlClient(self.sockets[host], timeout=10) as client:
            return client.request(op, peer=self.peer_of(host), **fields)

    def stop(self) -> None:
        """Stop both agents (their sockets go with them)."""
        self.launcher.stop()


class EvSessions:
    """At most one session per host pair, started on first use."""

    def __init__(self, net) -> None:
        self.net = net
        self.sessions: dict[frozenset, EvSession] = {}

    def get(self, a: str, b: str) -> EvSession:
        """The session of `a` and `b`, started now (with `a` as rank 0) when there is none."""
        if a == b:
            raise ValueError(f"hosts: {a} twice; name two different hosts")
        for host in (a, b):
            if host not in {h.name for h in self.net.topology.hosts}:
                raise ValueError(f"host: {host} is not a host of the topology")
        key = frozenset((a, b))
        if key not in self.sessions:
            self.sessions[key] = EvSession(self.net, (a, b))
        return self.sessions[key]

    def stop(self, a: str | None = None, b: str | None = None) -> int:
        """Stop the session of `a` and `b` (every session when None); return how many stopped."""
        keys = list(self.sessions) if a is None else [frozenset((a, b))]
        stopped = 0
        for key in keys:
            session = self.sessions.pop(key, None)
            if session is not None:
                session.stop()
                stopped += 1
        return stopped


def format_array(rows: list[dict]) -> list[str]:
    """The lines `evs H1 H2` prints: one per slot, with the backup standing in when there is one."""
    lines = [f"{'slot':>4}  {'EV':<10}  {'state':<11}  {'port':>4}  {'plane':>5}  {'path':>4}  {'drops':>5}"]
    for r in rows:
        line = (f"{r['slot']:>4}  {r['ev']:#010x}  {r['state']:<11}  {r['port']:>4}  {r['plane']:>5}  "
                f"{r['path']:>4}  {r['drop_count']:>5}")
        use = r.get("in_use")
        if use:
            line += f"  in use: backup {use['ev']:#010x} {use['state']} path {use['path']}"
        lines.append(line)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    lines.append("  ".join(f"{state} {n}" for state, n in sorted(counts.items())))
    return lines
