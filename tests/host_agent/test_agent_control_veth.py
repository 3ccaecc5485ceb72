"""The control socket of real agent processes over a veth pair: query, deny, probe, subscribe
while a transfer runs; the socket file is gone after the agent exits. Needs root and `ip`."""
from __future__ import annotations

import os
import signal
import subprocess

import pytest

from host_agent.control import ControlClient, ControlError
from tests.host_agent.test_agent_veth import agent_cmd, records_of, veth, wait_for, write_jobs  # noqa: F401 (fixture)

pytestmark = [pytest.mark.requires_root, pytest.mark.integration]


def connected(path: str):
    """The agent's connections once its control socket answers, else None."""
    if not os.path.exists(path):
        return None
    try:
        with ControlClient(path, timeout=2) as client:
            return client.request("connections")
    except ControlError:
        return None


def test_agents_serve_the_ev_operations_while_they_run(tmp_path, veth):
    workload = {"kind": "transfer", "src": 0, "dst": 1, "bytes": 2_000_000, "chunk_bytes": 100_000, "seed": 3}
    jobs = write_jobs(tmp_path, veth, workload, start_in=1.5)
    socks = [str(tmp_path / f"h{r}.sock") for r in (0, 1)]
    procs = [veth.start(r, *agent_cmd(jobs[r], "--linger", "30", "--control", socks[r]),
                        stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    (conn,) = wait_for(lambda: connected(socks[0]), 20, "h0's control socket")
    assert conn["peer"] == "rank1"
    wait_for(lambda: connected(socks[1]), 20, "h1's control socket")     # h1 answers probes from now on
    with ControlClient(socks[0]) as watcher, ControlClient(socks[0]) as client:
        watcher.subscribe()
        array = client.request("array", peer="rank1")
        assert len(array) == 16 and [r["slot"] for r in array] == list(range(16))
        assert all(r["state"] in ("GOOD", "SKIP", "ASSUMED_BAD") and r["drop_count"] >= 0 for r in array)
        denied = array[0]["ev"]
        assert client.request("deny", peer="rank1", ev=hex(denied))["state"] == "DENIED"
        result = client.request("probe", peer="rank1", ev=array[1]["ev"], timeout_ns=500_000_000)
        assert result["port"] == 0 and result["rtt_ns"] > 0
        client.request("modify", peer="rank1", ev=array[2]["ev"], state="ASSUMED_BAD")
        event = watcher.next_event()
        assert (event["ev"], event["new"], event["cause"]) == (array[2]["ev"], "ASSUMED_BAD", "operator")
        wait_for(lambda: records_of(tmp_path / "h1.jsonl", "result"), 30, "the transfer to finish")
        assert client.request("query", peer="rank1", ev=denied)["state"] == "DENIED"
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for rank, proc in enumerate(procs):
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, f"agent {rank} exited {proc.returncode}: {err}"
        assert not os.path.exists(socks[rank])
    (result,) = records_of(tmp_path / "h1.jsonl", "result")
    assert result["ok"] is True
    changes = [r for r in records_of(tmp_path / "h0.jsonl", "ev_state") if r["ev"] == denied]
    assert changes[0]["new"] == "DENIED" and changes[0]["cause"] == "operator"
