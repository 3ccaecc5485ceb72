"""One transfer between two hosts of a running network, with the host agents; and EV states.

Used by the `transfer` and `evs` commands of the `mrc-testbed up` CLI. The jobs are built by
`host_agent.topology_jobs.build_job` and run by `testbed.agents.AgentLauncher`; the agents' event logs land
in `<run_dir>/agents/`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from host_agent.eventlog import read_log
from host_agent.job import Job, job_workload
from host_agent.topology_jobs import build_job, peer_spec
from testbed.agents import AgentLauncher

TRANSFER_QP = 1


def transfer_jobs(topo, src: str, dst: str, size: int, mode: str = "mrc", log_dir: Path = Path("."),
                  timeout: float = 60.0, config: dict | None = None, qp: int = TRANSFER_QP) -> list[Job]:
    """The two jobs (rank 0 = `src` sends `size` bytes to rank 1 = `dst`, both on QP `qp`)."""
    hosts = [src, dst]
    workload = job_workload("transfer", {"src": 0, "dst": 1, "bytes": size})
    return [build_job(topo, host, rank, 2, [peer_spec(topo, host, hosts[1 - rank], 1 - rank, qp, qp)],
                      workload, mode, config, timeout=timeout, log=Path(log_dir) / f"{host}.jsonl")
            for rank, host in enumerate(hosts)]


@dataclass
class AgentTransferResult:
    """Outcome of one transfer between two host agents on the testbed."""

    src: str
    dst: str
    bytes: int
    seconds: float
    exit_codes: dict
    logs: dict
    errors: list = field(default_factory=list)     # why agents failed (e.g. a connection out of retries)

    @property
    def ok(self) -> bool:
        return all(code == 0 for code in self.exit_codes.values())

    @property
    def goodput_bps(self) -> float:
        return 8 * self.bytes / self.seconds if self.seconds > 0 else 0.0

    def describe(self) -> str:
        status = "ok" if self.ok else f"FAILED (exit codes {self.exit_codes})"
        if self.errors:
            status += ": " + "; ".join(self.errors)
        return (f"{self.src} -> {self.dst}: {self.bytes} bytes in {self.seconds:.3f} s, "
                f"goodput {self.goodput_bps / 1e6:.2f} Mbit/s, {status}")


def run_transfer(net, src: str, dst: str, size: int, mode: str = "mrc",
                 timeout: float = 60.0) -> AgentTransferResult:
    """Run the two agents in their hosts, wait for both, measure the goodput at the receiver."""
    log_dir = net.run_dir / "agents"
    jobs = transfer_jobs(net.topology, src, dst, size, mode, log_dir, timeout)
    began = time.monotonic()
    with AgentLauncher(net, log_dir) as agents:
        for job in reversed(jobs):                 # receiver first
            agents.start(job.host, job)
        agents.wait(time.time() + timeout + 10)
    wall = time.monotonic() - began
    codes = agents.exit_codes()
    errors = [why for agent in agents.agents.values() if (why := agent.failure())]
    logs = {job.host: Path(job.log) for job in jobs}
    seconds = _receive_time(read_log(logs[dst])) or wall
    return AgentTransferResult(src, dst, size, seconds, codes, logs, errors)


def _receive_time(records: list[dict]) -> float | None:
    """Seconds from the receiver's start to its message completion, from its event log."""
    start = next((r["t"] for r in records if r.get("kind") == "start"), None)
    done = next((r["t"] for r in records if r.get("kind") == "recv_complete"), None)
    if start is None or done is None:
        return None
    return done - start


def ev_states(log_path: Path) -> dict[int, str]:
    """The last state of every EV in an agent's event log: {ev: state}."""
    states = {}
    for record in read_log(log_path):
        if record.get("kind") == "ev_state" and record.get("ev") is not None:
            states[int(record["ev"])] = str(record.get("new"))
    return states
