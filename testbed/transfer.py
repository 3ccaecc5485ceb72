"""One transfer between two hosts of a running network, with the host agents; and EV states.

Used by the `transfer` and `evs` commands of the `mrc-testbed up` CLI. The jobs follow
host_agent/job.py; the agents' event logs (JSON lines, host_agent/eventlog.py) land in
`<run_dir>/agents/`.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from topologies.paths import host_paths

REPO = Path(__file__).resolve().parent.parent


def nic_json(nic, own: bool) -> dict:
    """A NIC as a job lists it (own NICs carry their interface name)."""
    data = {"plane": nic.plane, "mac": nic.mac, "address": str(nic.address)}
    if own:
        data["name"] = nic.ifname
    return data


def transfer_jobs(topo, src: str, dst: str, size: int, mode: str = "mrc", log_dir: Path = Path("."),
                  timeout: float = 60.0, config: dict | None = None) -> list[dict]:
    """The two jobs (rank 0 = `src` sends `size` bytes to rank 1 = `dst`)."""
    hosts = [src, dst]
    jobs = []
    for rank, host in enumerate(hosts):
        peer = hosts[1 - rank]
        paths: dict[str, list[str]] = {}
        for path in host_paths(topo, host, peer):
            paths.setdefault(str(path.plane), []).append(str(path.address))
        jobs.append({
            "rank": rank, "world_size": 2, "host": host,
            "nics": [nic_json(n, own=True) for n in topo.host_nics(host)],
            "peers": [{"rank": 1 - rank, "qp": 1, "remote_qp": 1,
                       "nics": [nic_json(n, own=False) for n in topo.host_nics(peer)],
                       "paths": paths}],
            "transport": {"mode": mode, "config": dict(config or {})},
            "workload": {"kind": "transfer", "src": 0, "dst": 1, "bytes": size},
            "timeout": timeout, "log": str(log_dir / f"{host}.jsonl"),
        })
    return jobs


@dataclass
class TransferResult:
    """Outcome of one transfer."""

    src: str
    dst: str
    bytes: int
    seconds: float
    exit_codes: dict
    logs: dict

    @property
    def ok(self) -> bool:
        return all(code == 0 for code in self.exit_codes.values())

    @property
    def goodput_bps(self) -> float:
        return 8 * self.bytes / self.seconds if self.seconds > 0 else 0.0

    def describe(self) -> str:
        status = "ok" if self.ok else f"FAILED (exit codes {self.exit_codes})"
        return (f"{self.src} -> {self.dst}: {self.bytes} bytes in {self.seconds:.3f} s, "
                f"goodput {self.goodput_bps / 1e6:.2f} Mbit/s, {status}")


def read_events(path: Path) -> list[dict]:
    """The records of one agent event log (missing file: none)."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def run_transfer(net, src: str, dst: str, size: int, mode: str = "mrc",
                 timeout: float = 60.0) -> TransferResult:
    """Run the two agents in their hosts, wait for both, measure the goodput at the receiver."""
    log_dir = net.run_dir / "agents"
    log_dir.mkdir(exist_ok=True)
    jobs = transfer_jobs(net.topology, src, dst, size, mode, log_dir, timeout)
    procs = {}
    began = time.monotonic()
    try:
        for job in reversed(jobs):                 # receiver first
            path = log_dir / f"{job['host']}.job.json"
            path.write_text(json.dumps(job, indent=1))
            Path(job["log"]).unlink(missing_ok=True)
            with open(log_dir / f"{job['host']}.stderr", "wb") as err:
                procs[job["host"]] = net.popen(
                    job["host"], [sys.executable, "-m", "host_agent.agent", "--job", str(path)],
                    stdout=subprocess.DEVNULL, stderr=err, cwd=str(REPO))
        codes = {host: proc.wait(timeout + 10) for host, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
    wall = time.monotonic() - began
    logs = {job["host"]: Path(job["log"]) for job in jobs}
    seconds = _receive_time(read_events(logs[dst])) or wall
    return TransferResult(src, dst, size, seconds, codes, logs)


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
    for record in read_events(log_path):
        if record.get("kind") == "ev_state":
            ev = record.get("ev")
            state = record.get("state") or record.get("new") or record.get("to")
            if ev is not None:
                states[int(ev)] = str(state)
    return states
