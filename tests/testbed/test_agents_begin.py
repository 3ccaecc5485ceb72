"""The agents' start barrier in `testbed.agents.AgentLauncher`: each job names the start file its
agent waits for (here, or in the run's folder on a cluster server), `wait_up` waits for every
agent's start record (naming those that never came), and `begin` writes the start time here and
sends it to each server that runs agents, once per server. A fake network stands in for Mininet
and the servers."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from host_agent.job import parse_job
from host_agent.start_file import read_start_file
from testbed.agents import START_FILE, AgentLauncher, AgentStartError
from tests.host_agent.test_agent_job import valid_job


class FakeProc:
    def __init__(self) -> None:
        self.code = None
        self.pid = 0

    def poll(self):
        return self.code


class FakeNet:
    """Hosts in `servers` run on that cluster server, the others here; files sent are kept."""

    def __init__(self, servers: dict[str, str]) -> None:
        self.servers = servers
        self.sent: list[dict[str, list[tuple[str, str]]]] = []     # per put_files: {node: [(name, text)]}

    def is_remote(self, node: str) -> bool:
        return node in self.servers

    def node_servers(self) -> dict[str, str]:
        return dict(self.servers)

    def remote_dir(self) -> str:
        return "/tmp/mrc-cluster/run1"

    def put_files(self, nodes_files):
        self.sent.append({node: [(Path(p).name, Path(p).read_text()) for p in paths]
                          for node, paths in nodes_files.items()})
        return {Path(p): f"{self.remote_dir()}/{Path(p).name}" for paths in nodes_files.values() for p in paths}

    def python(self, node: str) -> str:
        return sys.executable

    def popen(self, host, cmd, **kwargs):
        return FakeProc()

    def stop_process(self, proc, grace):
        proc.code = -15


def launch(tmp_path: Path, net: FakeNet, hosts: list[str]) -> AgentLauncher:
    agents = AgentLauncher(net, tmp_path / "agents")
    jobs = []
    for rank, host in enumerate(hosts):
        data = {**valid_job(rank, world=len(hosts)), "host": host, "log": str(tmp_path / f"{host}.jsonl"),
                "start_file": agents.start_file(host)}
        jobs.append((host, parse_job(data, host)))
    agents.prepare(jobs)
    for name, job in jobs:
        agents.start(name, job)
    return agents


def come_up(tmp_path: Path, *hosts: str) -> None:
    for host in hosts:
        with open(tmp_path / f"{host}.jsonl", "a") as log:
            log.write(json.dumps({"t": 1.0, "kind": "start", "host": host}) + "\n")


def test_each_agent_waits_for_the_start_file_where_it_runs(tmp_path):
    net = FakeNet({"h1": "10.0.0.1"})
    agents = AgentLauncher(net, tmp_path / "agents")
    assert agents.start_file("h0") == str(tmp_path / "agents" / START_FILE)
    assert agents.start_file("h1") == f"/tmp/mrc-cluster/run1/{START_FILE}"


def test_begin_writes_the_start_here_and_once_to_each_server_with_agents(tmp_path):
    net = FakeNet({"h1": "10.0.0.1", "h2": "10.0.0.1", "h3": "10.0.0.2"})
    agents = launch(tmp_path, net, ["h0", "h1", "h2", "h3"])
    jobs_sent = len(net.sent)
    agents.begin(1796543210.5)
    assert read_start_file(tmp_path / "agents" / START_FILE) == 1796543210.5
    (sent,) = net.sent[jobs_sent:]                           # one put_files for the start
    assert len(sent) == 2                                    # one host for each of the two servers
    assert {net.servers[host] for host in sent} == {"10.0.0.1", "10.0.0.2"}
    assert all(files == [(START_FILE, "1796543210.5\n")] for files in sent.values())


def test_begin_on_one_machine_sends_nothing(tmp_path):
    net = FakeNet({})
    agents = launch(tmp_path, net, ["h0", "h1"])
    agents.begin(1796543210.5)
    assert net.sent == [] and read_start_file(tmp_path / "agents" / START_FILE) == 1796543210.5


def test_wait_up_returns_once_every_agent_wrote_its_start_record(tmp_path):
    agents = launch(tmp_path, FakeNet({}), ["h0", "h1", "h2"])
    come_up(tmp_path, "h0", "h1", "h2")
    agents.wait_up(0)


def test_wait_up_names_the_agents_not_up_in_time(tmp_path):
    agents = launch(tmp_path, FakeNet({}), ["h0", "h1", "h2"])
    come_up(tmp_path, "h1")
    with pytest.raises(AgentStartError, match=r"2 of 3 agents not up \(no start record\) after 0 s: h0, h2$"):
        agents.wait_up(0)


def test_wait_up_fails_at_once_naming_an_agent_that_exited_first(tmp_path):
    agents = launch(tmp_path, FakeNet({}), ["h0", "h1"])
    come_up(tmp_path, "h0")
    agents.agents["h1"].proc.code = 2
    with pytest.raises(AgentStartError, match=r"exited before they came up: h1 \(exit 2; see .*h1.stderr\)"):
        agents.wait_up(60)


def test_prepare_measures_what_sending_the_servers_their_jobs_takes(tmp_path):
    assert launch(tmp_path / "here", FakeNet({}), ["h0", "h1"]).delivery_s == 0.0
    assert launch(tmp_path / "there", FakeNet({"h1": "10.0.0.1"}), ["h0", "h1"]).delivery_s > 0.0


def test_the_start_is_set_far_enough_ahead_for_the_start_file_to_reach_every_server(tmp_path):
    from testbed import agents as launcher
    here = launch(tmp_path / "here", FakeNet({}), ["h0", "h1"])
    assert here.start_lead() == launcher.START_LEAD_S                       # no server to reach
    there = launch(tmp_path / "there", FakeNet({"h1": "10.0.0.1"}), ["h0", "h1"])
    assert there.start_lead() >= launcher.START_LEAD_S + launcher.SERVER_LEAD_S
    there.delivery_s = 2.0                                                    # slow servers: twice that
    assert there.start_lead() == pytest.approx(launcher.START_LEAD_S + launcher.DELIVERY_MARGIN * 2.0)
