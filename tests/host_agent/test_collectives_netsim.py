"""Collectives over the real transport on the in-process network: 4 ranks, bit-exact results.

Fabric: leaf-spine, 2 planes x 2 leaves x 2 spines, 10 Gbit/s links of 1 us; ranks 0..3 on
h1, h3, h2, h4 (h1, h2 under leaf s1; h3, h4 under leaf s2; spines s3, s4), so ring neighbours
cross the spines.
"""
from __future__ import annotations

import pytest

from host_agent.collectives.simulate import simulate
from host_agent.transport import TransportConfig
from tests.netsim.netsim_transfers import fabric as leaf_spine_fabric

FAST = dict(qp_timeout=6, initial_rtt=10e-6, ack_delay=5e-6, probe_interval=50e-6, line_rate_bps=10e9)
WORKLOADS = {
    "allreduce": dict(elements=40_000, dtype="float32", chunk_bytes=16384, seed=11),
    "alltoall": dict(block_bytes=60_000, chunk_bytes=16384, seed=12),
}


RANKS = ["h1", "h3", "h2", "h4"]


def fabric(seed: int):
    return leaf_spine_fabric(seed, planes=2, leaves=2, spines=2, hosts_per_leaf=2)


def assert_bit_exact(run, kind):
    for rank, res in enumerate(run.results):
        assert res.ok, (rank, res)
        assert res.mismatches == 0 and res.elapsed > 0
    if kind == "allreduce":
        expected = run.collectives[0].expected().tobytes()
        assert all(c.buffer.tobytes() == expected for c in run.collectives)


def data_drops(net) -> int:
    return sum(sw.counters["fault_drops_data"] for sw in net.switches.values())


@pytest.mark.parametrize("kind", sorted(WORKLOADS))
def test_four_ranks_bit_exact_without_loss(kind):
    net = fabric(seed=1)
    run = simulate(net, kind, WORKLOADS[kind], TransportConfig(**FAST), hosts=RANKS, until=0.05)
    assert_bit_exact(run, kind)
    assert sum(ep.stats().get("retransmitted", 0) for ep in run.endpoints) == 0


@pytest.mark.parametrize("kind", sorted(WORKLOADS))
def test_four_ranks_bit_exact_with_one_percent_loss_everywhere(kind):
    net = fabric(seed=2)
    for sw in net.switches.values():
        for port in sw.links:
            sw.set_fault(port, drop_prob=0.01)
    run = simulate(net, kind, WORKLOADS[kind], TransportConfig(**FAST), hosts=RANKS, until=0.5)
    assert data_drops(net) > 0                                     # the loss did hit the collective
    assert_bit_exact(run, kind)
    assert sum(ep.stats().get("retransmitted", 0) for ep in run.endpoints) >= data_drops(net) // 2


@pytest.mark.parametrize("kind", sorted(WORKLOADS))
def test_four_ranks_bit_exact_with_a_link_killed_mid_run(kind):
    clean = simulate(fabric(seed=3), kind, WORKLOADS[kind], TransportConfig(**FAST), hosts=RANKS, until=0.05)
    kill_at = clean.end / 3                                        # a third of the way through
    net = fabric(seed=3)
    cable = net.cable("s1", "s3")
    net.at(kill_at, cable.set_up, False)
    run = simulate(net, kind, WORKLOADS[kind], TransportConfig(**FAST), hosts=RANKS, until=0.5)
    assert run.end > kill_at
    assert cable.ab.counters["dropped_down"] + cable.ba.counters["dropped_down"] > 0   # traffic was lost on it
    assert_bit_exact(run, kind)
    retired = [e for e in run.events if e["kind"] == "ev_state" and e["new"] == "ASSUMED_BAD"
               and e["t"] >= kill_at]
    assert retired, "no EV was retired after the link died"
    assert all("s3" in net.path_of_address(e["plane"], bytes.fromhex(e["dst"])) for e in retired
               if e["plane"] == 0)


def test_baseline_allreduce_bit_exact_without_loss():
    run = simulate(fabric(seed=4), "allreduce", WORKLOADS["allreduce"],
                   TransportConfig(mode="roce", **FAST), hosts=RANKS, until=0.05)
    assert_bit_exact(run, "allreduce")
