"""The one simulation driver: a connection's paths are the agent's, QPs are numbered one way, flows are
checked against what was sent, and bad requests are refused naming what is wrong."""
from __future__ import annotations

import io

import pytest

from host_agent.agent import Agent
from host_agent.eventlog import LogWriter
from host_agent.job import job_workload
from host_agent.topology_jobs import build_job, peer_spec
from host_agent.transport import QP_BASE, TransportConfig, connection_paths
from simulation import Flow, Simulation, leaf_spine_config, leaf_spine_fabric, run_collective, run_flows


@pytest.mark.parametrize("mode", ["mrc", "roce"])
def test_a_simulated_host_gets_the_paths_the_agent_builds_from_its_job(mode):
    net = leaf_spine_fabric(planes=2, spines=3)
    topo = net.topo
    job = build_job(topo, "h1", 0, 2, [peer_spec(topo, "h1", "h3", 1, 0x11, 0x22)],
                    job_workload("transfer", {"src": 0, "dst": 1, "bytes": 1000}), mode)
    agent = Agent(job, LogWriter(io.StringIO()), linger=0)
    agent.connect()
    simulated = Simulation(net, TransportConfig(mode=mode)).paths("h1", "h3")
    assert agent.endpoint.connections[0x11].paths == simulated
    assert len(simulated) == (6 if mode == "mrc" else 2)          # 3 spines x 2 planes; one peer NIC per plane


def test_a_simulated_hosts_nic_i_is_its_nic_on_plane_i_as_the_topology_numbers_them():
    net = leaf_spine_fabric(planes=3, spines=2)
    for name, host in net.hosts.items():
        numbered = net.topo.numbered_nics(name)
        assert [number for number, _, _ in numbered] == sorted(host.nics) == [0, 1, 2]
        for number, plane, address in numbered:
            switch, _ = host.nics[number].dest
            assert switch.plane == plane and host.nic_addr[plane] == address


def test_the_baseline_gets_the_peer_nic_of_each_plane_both_hosts_are_on_and_sends_on_the_first():
    nics = [(0, 0, b"a" * 16), (1, 1, b"b" * 16), (2, 2, b"c" * 16)]
    peer = {0: b"A" * 16, 2: b"C" * 16}                          # the peer has no NIC on plane 1
    usid = {0: [b"x" * 16, b"y" * 16], 2: [b"z" * 16]}
    assert [(p.plane, p.nic, p.dst) for p in connection_paths("roce", nics, peer, usid)] == [
        (0, 0, b"A" * 16), (2, 2, b"C" * 16)]
    assert [p.dst for p in connection_paths("mrc", nics, peer, usid)] == [b"x" * 16, b"y" * 16, b"z" * 16]
    net = leaf_spine_fabric(planes=2)
    result = run_flows(net, [Flow("h1", "h3", 200_000, message_size=50_000)], leaf_spine_config("roce"),
                       until=0.05, sample_interval=None)
    assert result.all_exactly_once
    plane_1 = [c for c in net.cables if c.plane == 1]
    assert sum(link.counters["tx_bytes"] for c in plane_1 for link in (c.ab, c.ba)) == 0


def test_connections_are_numbered_one_way_and_shared_pairs_open_once():
    run = Simulation(leaf_spine_fabric(), leaf_spine_config("roce", qps=2))
    first_a, first_b = run.connect("h1", "h2")
    shared = run.connections("h3", "h1")
    stride = 0x10000                                                              # QP k: base + k * stride
    assert [(c.local_qp, c.remote_qp) for c in first_a] == [(QP_BASE, QP_BASE + 1), (QP_BASE + stride, QP_BASE + 1 + stride)]
    assert [(c.local_qp, c.remote_qp) for c in first_b] == [(QP_BASE + 1, QP_BASE), (QP_BASE + 1 + stride, QP_BASE + stride)]
    assert [c.local_qp for c in run.connections("h1", "h3")] == [QP_BASE + 2, QP_BASE + 0x10002]   # h1 < h3: the first
    assert run.connections("h3", "h1") is shared and [c.peer for c in shared] == ["h1", "h1"]
    assert run.connect("h1", "h2")[0][0].local_qp == QP_BASE + 4                # a new pair, the next numbers


def test_flows_are_checked_and_counted_once_each():
    net = leaf_spine_fabric(seed=2)
    net.at(20e-6, net.cable("s1", "s3").set_up, False)
    result = run_flows(net, [Flow("h1", "h3", 300_000, message_size=100_000), Flow("h3", "h1", 1, start=10e-6)],
                       leaf_spine_config(), until=0.05)
    big, small = result.flows
    assert (big.messages, small.messages) == (3, 1)
    assert big.exactly_once and small.exactly_once and result.all_exactly_once
    assert big.received_bytes == 300_000 and big.finish is not None and small.duration < big.duration
    assert result.goodput and all(len(rates) == 2 for _, rates in result.goodput)


def test_a_collective_runs_over_the_shared_connections():
    result = run_collective(leaf_spine_fabric(seed=1), "allreduce",
                            dict(elements=4000, dtype="float32", chunk_bytes=4096, seed=3), leaf_spine_config())
    assert result.ok and len(result.collectives) == 4
    qps = {(host, c.local_qp, c.remote_qp) for host, ep in result.endpoints.items() for c in ep.connections.values()}
    assert {(r, l) for _, l, r in qps} == {(l, r) for _, l, r in qps}       # every QP has its other end


def test_bad_requests_are_refused_naming_what_is_wrong():
    run = Simulation(leaf_spine_fabric(), leaf_spine_config())
    run.endpoint("h1")
    with pytest.raises(ValueError, match="host h1: one transport mode per host"):
        run.connect("h1", "h2", mode="roce")
    with pytest.raises(KeyError, match="h9 is not a host"):
        run.endpoint("h9")
    with pytest.raises(ValueError, match="3 bytes given for a flow of 4"):
        run.add_flow(Flow("h1", "h2", 4), payload=b"abc")
    with pytest.raises(ValueError, match="message_size 0 is not positive"):
        run.add_flow(Flow("h1", "h2", 4, message_size=0))
    given = run.add_flow(Flow("h1", "h2", 5, message_size=2), payload=b"abcde", schedule=False)
    assert given.messages == 3
    run.send(given)
    with pytest.raises(ValueError, match="h1 -> h2: already sent"):
        run.send(given)


def test_flows_given_as_views_are_checked_byte_for_byte():
    from host_agent.collectives.data import block_view
    from host_agent.transport import MessageReceived
    run = Simulation(leaf_spine_fabric(), leaf_spine_config())
    first, second = block_view(5, 0, 2, 6000), block_view(5, 1, 2, 6000)   # two flows' bytes, as views
    a = run.add_flow(Flow("h1", "h3", 6000, message_size=3000), payload=first, shared=True, schedule=False)
    b = run.add_flow(Flow("h2", "h3", 6000, message_size=3000), payload=second, shared=True, schedule=False)
    run.send(a)
    run.send(b)
    conn_a, conn_b = a.receiver.ident, b.receiver.ident
    run.on_event("h3", MessageReceived(0.0, conn_a, 0, bytes(first[:3000])))       # intact
    run.on_event("h3", MessageReceived(0.0, conn_a, 1, bytes(second[3000:])))      # the other flow's bytes
    shifted = bytes(first[3001:]) + bytes(first[:1])                               # its own, one byte off
    run.on_event("h3", MessageReceived(0.0, conn_b, 0, shifted[:3000]))
    run.on_event("h3", MessageReceived(0.0, conn_b, 1, bytes(second[3000:5999])))  # one byte short
    assert (a.delivered, a.corrupted, b.delivered, b.corrupted) == (1, 1, 0, 2)
