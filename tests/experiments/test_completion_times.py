"""A flow's completion as its receiver and as its sender see it, and the ideal it is divided by
(`metrics.flows_over_ideal`): what `crosscheck` compares netsim and htsim_uec on."""
from __future__ import annotations

from pathlib import Path

import pytest

from experiments import metrics
from experiments.record import CaseRecord, FlowRecord
from experiments.scenario import load_scenario

DATACENTER = Path(__file__).resolve().parents[2] / "experiments" / "datacenter.yaml"


def two_into_one() -> CaseRecord:
    record = CaseRecord("s", "incast", "MRC", "mrc", "netsim", 1, "t", 3, "incast")
    record.flows = [FlowRecord("a", "r", 1000, finish=2e-6, acked=3e-6),
                    FlowRecord("b", "r", 1000, finish=4e-6, acked=5e-6)]
    return record


def test_the_ideal_counts_every_byte_into_the_receiver_plus_a_latency():
    # 2,000 bytes at 8 Gbit/s take 2 us; with a 1 us latency the ideal is 3 us
    assert metrics.flows_over_ideal(two_into_one(), 8e9, 1e-6) == pytest.approx([2 / 3, 4 / 3])


def test_a_receivers_ideal_takes_the_shortest_latency_of_its_senders():
    one_way = {("a", "r"): 2e-6, ("b", "r"): 1e-6}
    # 2 us of bytes plus the nearer sender's 1 us: 3 us, not 4
    assert metrics.flows_over_ideal(two_into_one(), 8e9, lambda s, d: one_way[s, d]) == pytest.approx([2 / 3, 4 / 3])


def test_one_way_delays_follow_each_flows_own_path():
    from experiments.transport_sizing import line_rate_and_one_way_delay
    from experiments.workloads import leaf_of, variant_topology
    case = next(c for c in load_scenario(DATACENTER, quick=True).cases() if c.variant.label == "permutation")
    rate, one_way = line_rate_and_one_way_delay(case)
    topo = variant_topology(case.variant)
    hosts = [h.name for h in topo.hosts]
    same = next(h for h in hosts[1:] if leaf_of(topo, h) == leaf_of(topo, hosts[0]))
    other = next(h for h in hosts if leaf_of(topo, h) != leaf_of(topo, hosts[0]))
    assert rate(hosts[0]) == 100e9
    assert one_way(hosts[0], same) == pytest.approx(2 * case.variant.delay_s)       # up to its leaf and down
    assert one_way(hosts[0], other) == pytest.approx(4 * case.variant.delay_s)      # and over a spine


@pytest.mark.slow
def test_no_flow_of_a_permutation_beats_its_last_byte_ideal():
    # the last byte's arrival over the one-way ideal: 256 KB flows went under 1 when the ideal held
    # a whole base RTT (0.987)
    from experiments.backends.netsim_backend import NetsimBackend
    from experiments.transport_sizing import line_rate_and_one_way_delay
    case = next(c for c in load_scenario(DATACENTER, quick=True, seed=1).cases()
                if c.variant.label == "permutation" and c.transport.mode == "mrc")
    ratios = metrics.flows_over_ideal(NetsimBackend().run_case(case), *line_rate_and_one_way_delay(case))
    assert ratios is not None and ratios[0] >= 1.0


def test_acked_divides_the_senders_completion_and_wire_bytes_lengthen_the_ideal():
    record = two_into_one()
    assert metrics.flows_over_ideal(record, 8e9, 1e-6, acked=True) == pytest.approx([1.0, 5 / 3])
    # headers of half the payload: 3,000 wire bytes, 3 us, plus the base RTT
    assert metrics.flows_over_ideal(record, 8e9, 1e-6, acked=True, wire_factor=1.5) == pytest.approx([0.75, 1.25])
    record.flows[0].acked = None
    assert metrics.flows_over_ideal(record, 8e9, 1e-6, acked=True) is None
    assert metrics.flows_over_ideal(record, 8e9, 1e-6) is not None


def test_netsim_runs_until_the_senders_saw_their_flows_acknowledged_only_when_asked():
    from experiments.backends.netsim_backend import NetsimBackend
    scenario = load_scenario(DATACENTER, quick=True, seed=1)
    case = next(c for c in scenario.cases() if c.variant.label == "incast" and c.transport.mode == "mrc")
    record = NetsimBackend(until_acked=True).run_case(case)
    assert record.completed and all(f.acked is not None and f.acked > f.finish for f in record.flows)
    assert record.end == pytest.approx(max(f.acked for f in record.flows))
    early = NetsimBackend().run_case(case)                    # stops when the last byte arrived
    last = max(early.flows, key=lambda f: f.finish)
    assert last.acked is None and early.end == pytest.approx(last.finish)
    assert [f.finish for f in early.flows] == [f.finish for f in record.flows]


def test_a_netsim_record_gives_link_rates_as_floats_in_either_build():
    # the compiled build holds a link's rate as a float, pure Python as given: the records (and so
    # raw.jsonl) of the two builds must read the same
    from experiments.backends.netsim_backend import NetsimBackend
    scenario = load_scenario(DATACENTER, quick=True, seed=1)
    case = next(c for c in scenario.cases() if c.variant.label == "incast" and c.transport.mode == "mrc")
    record = NetsimBackend().run_case(case)
    assert record.links and all(type(link.rate_bps) is float for link in record.links)


def test_a_receivers_rate_is_its_own_links_not_the_slowest_host_link():
    from experiments.transport_sizing import receiver_rate_and_one_way_delay
    from topologies.builders import TopologyBuilder
    b = TopologyBuilder("mixed", rate_bps=10 * 10**9)
    leaf = b.add_switch(0)
    slow, fast = b.add_host(), b.add_host()
    b.attach_host(slow, leaf)
    b.attach_host(fast, leaf, rate_bps=100 * 10**9)
    rate, one_way = receiver_rate_and_one_way_delay(b.build(), 1e-6)
    assert rate(fast) == 100e9 and rate(slow) == 10e9
    assert one_way(slow, fast) == pytest.approx(2e-6)
    record = CaseRecord("s", "one", "MRC", "mrc", "netsim", 1, "t", 2, "permutation")
    # 125,000 bytes at 100 Gbit/s: 10 us, plus 2 us: 12 us (at the slow host's 10 Gbit/s it were 102 us)
    record.flows = [FlowRecord(slow, fast, 125_000, finish=12e-6)]
    assert metrics.flows_over_ideal(record, rate, one_way) == pytest.approx([1.0])


def test_a_receiver_with_a_nic_on_every_plane_gets_their_rates_together():
    from experiments.transport_sizing import receiver_rate_and_one_way_delay
    from topologies.builders import multi_plane
    topo = multi_plane(planes=2, leaves=2, spines=1, hosts_per_leaf=1)
    rate, one_way = receiver_rate_and_one_way_delay(topo, 1e-6)
    assert rate("h2") == 2 * topo.host_rate_bps("h2")
    assert one_way("h1", "h2") == pytest.approx(4e-6)           # leaf, spine, leaf on either plane
    with pytest.raises(ValueError, match="s1 is no host"):
        rate("s1")


def test_crosschecks_acknowledged_ideal_exceeds_the_bound_by_the_base_rtts_extra():
    from experiments.ideal_excess import ideals
    from experiments.transport_sizing import cable_delay, line_rate_and_base_rtt
    case = next(c for c in load_scenario(DATACENTER, seed=1).cases()
                if c.variant.label == "permutation" and c.transport.mode == "mrc")
    found = ideals(case, 1)
    _, base_rtt = line_rate_and_base_rtt(case)
    # every receiver's nearest sender is across a spine: 4 cables each way and one SACK
    for ideal, bound in found.values():
        assert ideal - bound == pytest.approx(base_rtt - 8 * cable_delay(case) - 102 * 8 / 100e9)
        assert ideal > bound
