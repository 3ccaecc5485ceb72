"""The RoCE-style baseline with several queue pairs per pair of hosts (TransportConfig.qps).

Each QP is a connection of its own with its own EV, so the switches' ECMP hash spreads the QPs of
a pair over the paths; messages take the QPs in turn. A dead path stalls the QPs hashed onto it
(there is no failover) and the collective waits for them. Runs on netsim through the
experiments' netsim backend, as the experiments do.
"""
from __future__ import annotations

import pytest

from experiments.backends.netsim_backend import NetsimBackend, NetsimTarget
from experiments.backends.netsim_traffic import Traffic
from experiments.scenario import ScenarioError, parse_scenario
from experiments.transport_sizing import transport_config
from experiments.workloads import variant_topology
from host_agent.job import JobError, parse_job
from host_agent.transport import Endpoint, PathInfo, TransportConfig
from host_agent.transport.endpoint import QP_STRIDE
from netsim import Simulator
from simulation import network
from topologies.paths import ecmp_path

FAST = {"qp_timeout": 6, "initial_rtt": 10e-6, "ack_delay": 5e-6, "probe_interval": 50e-6}


def allreduce(qps: int, horizon_s: float = 0.05):
    """A ring all-reduce on 4 hosts (2 leaves, 2 spines) with the baseline on `qps` QPs per peer."""
    return parse_scenario({
        "name": "qps", "topology": "leafspine:2x2x2", "horizon_s": horizon_s, "sample_interval_s": 0.0005,
        "link": {"rate_bps": 1_000_000_000},
        "workload": {"kind": "allreduce", "bytes": 262144, "chunk_bytes": 8192},
        "transports": [{"name": f"RoCE {qps} QPs", "mode": "roce", "params": {"qps": qps, **FAST}}]}).cases()[0]


def live(case):
    """The case's fabric and traffic, attached and started (not yet run)."""
    topo = variant_topology(case.variant)
    fab = network(topo, Simulator(case.scenario.seed))
    traffic = Traffic(fab, case, transport_config(case, topo))
    traffic.attach()
    fab.sim.at(0.0, traffic.start)
    return fab, traffic


def crossings(fab, traffic):
    """For QP k of every pair: its two connections (one each way; the SACKs of one ride the
    other's path) and the switch-to-switch links either crosses."""
    out = []
    for (a, b), (conns_a, conns_b) in traffic.pairs.items():
        for ca, cb in zip(conns_a, conns_b):
            links = set()
            for host, conn in ((a, ca), (b, cb)):
                hops = ecmp_path(fab.topo, host, conn.peer, conn.evset.paths[0].plane, conn.evset.slots[0].current.value)
                links |= {frozenset(link) for link in zip(hops, hops[1:])}
            out.append(((ca, cb), links))
    return out


def test_several_qps_deliver_everything_exactly_once_and_spread_over_the_paths():
    spread = {}
    for qps in (1, 4):
        record = NetsimBackend().run_case(allreduce(qps))
        assert record.completed and record.bit_exact and record.app_duplicates == 0, qps
        spread[qps] = sum(link.tx_bytes > 0 for link in record.links)
        _, traffic = live(allreduce(qps))
        assert {len(a) for a, _ in traffic.pairs.values()} == {len(b) for _, b in traffic.pairs.values()} == {qps}
    assert spread[4] > spread[1]                          # more QPs, more of the fabric carries data


def test_a_dead_path_stalls_only_its_qps_and_the_collective_waits_for_them():
    fab, traffic = live(allreduce(4, horizon_s=0.02))
    qps = crossings(fab, traffic)
    links = {link for _, crossed in qps for link in crossed}
    victim = max(links, key=lambda link: (sum(link in crossed for _, crossed in qps), sorted(link)))
    doomed = [conn for pair, crossed in qps if victim in crossed for conn in pair]
    spared = [conn for pair, crossed in qps if victim not in crossed for conn in pair]
    assert doomed and spared
    a, b = sorted(victim)
    target = NetsimTarget(fab, None)
    fab.sim.at(20e-6, target.set_link, a, b, False)
    fab.sim.run(until=0.01, stop=traffic.done)
    assert not traffic.done()                                        # the collective waits ...
    assert any(not conn.sender.idle for conn in doomed)              # ... for the QPs on the dead link
    assert all(conn.sender.idle for conn in spared)                  # the others delivered all they had
    assert sum(conn.stats["data_sent"] for conn in spared) > 0
    fab.sim.at(fab.sim.now, target.set_link, a, b, True)            # the path comes back
    fab.sim.run(until=0.5, stop=traffic.done)
    assert traffic.done() and traffic.outcome()[0]                   # bit-exact once it returned


def test_qp_numbers_of_a_peer_step_by_the_stride_on_both_ends():
    cfg = TransportConfig(mode="roce", qps=3)
    path = [PathInfo(0, 0, bytes(16), bytes(15) + b"\x01")]
    conns = Endpoint("h0", cfg).connect_qps("h1", 0x101, 0x102, path)
    assert [(c.local_qp, c.remote_qp) for c in conns] == [(0x101 + k * QP_STRIDE, 0x102 + k * QP_STRIDE)
                                                          for k in range(3)]
    assert len({c.evset.slots[0].current.value for c in conns}) == 3          # an EV (ECMP hash) each
    with pytest.raises(ValueError, match="24-bit"):
        Endpoint("h0", TransportConfig(mode="roce", qps=64)).connect_qps("h1", 0xFF0000, 0x1, path)


@pytest.mark.parametrize("qps,why", [(0, "outside 1..64"), (65, "outside 1..64"), (2.5, "outside 1..64"),
                                     (True, "outside 1..64")])
def test_a_bad_qps_is_refused_naming_the_field(qps, why):
    with pytest.raises(ValueError, match=f"TransportConfig.qps: .*{why}"):
        TransportConfig(mode="roce", qps=qps)
    job = {"rank": 0, "world_size": 2, "nics": [{"name": "eth0", "mac": "02:00:00:00:00:01",
                                                 "address": "fc00::1", "plane": 0}],
           "peers": [], "workload": {"kind": "transfer", "src": 0, "dst": 1, "bytes": 10},
           "transport": {"mode": "roce", "config": {"qps": qps}}}
    with pytest.raises(JobError, match="transport.config"):
        parse_job(job)


def test_qps_are_for_the_baseline_only():
    with pytest.raises(ValueError, match="qps: 2 queue pairs is for mode 'roce'"):
        TransportConfig(mode="mrc", qps=2)
    with pytest.raises(ScenarioError, match="qps"):
        parse_scenario({"name": "x", "topology": "leafspine:2x2x2", "link": {"rate_bps": 10**9},
                        "workload": {"kind": "allreduce", "bytes": 4096},
                        "transports": [{"name": "MRC", "mode": "mrc", "params": {"qps": 2}}]})
