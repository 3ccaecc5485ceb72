"""The switch_slow fault (a gray switch: up, forwarding, every link slowed) on the netsim backend,
and what the Mininet backend accepts."""
from __future__ import annotations

import pytest

from experiments import metrics
from experiments.backends.mininet_limits import check_mininet
from experiments.backends.netsim_backend import NetsimBackend, NetsimTarget
from experiments.scenario import ScenarioError, parse_scenario
from netsim import Simulator
from simulation import network
from topologies import topology_from_spec

SCENARIO = {"name": "gray-switch", "topology": "leafspine:2x2x2", "seed": 1, "horizon_s": 1.0,
            "sample_interval_s": 0.0001,
            "link": {"rate_bps": 1_000_000_000, "delay_s": 2e-6},
            "workload": {"kind": "permutation", "bytes": 262144},
            "transports": [{"name": "MRC", "mode": "mrc"}],
            "variants": [{"label": "healthy"},
                         {"label": "gray", "faults": [{"kind": "switch_slow", "switch": "s3", "share": 0.1}]}]}


def test_a_slowed_switch_runs_every_link_both_ways_at_its_share_and_is_restored():
    topo = topology_from_spec("leafspine:2x2x2")
    fab = network(topo, Simulator(1))
    target = NetsimTarget(fab, None)
    before = {link.name: link.rate_bps for c in fab.cables for link in (c.ab, c.ba)}
    target.set_switch_rate("s3", 0.25)
    for c in fab.cables:
        for link in (c.ab, c.ba):
            slowed = "s3" in (c.a, c.b)
            assert link.rate_bps == pytest.approx(before[link.name] * (0.25 if slowed else 1.0)), link.name
    target.set_switch_rate("s3", 0.5)                    # a share of the full rate, not of the slowed one
    assert fab.link("s3", "s1").rate_bps == pytest.approx(before["s3->s1"] * 0.5)
    target.set_switch_rate("s3", 1.0)
    assert {link.name: link.rate_bps for c in fab.cables for link in (c.ab, c.ba)} == before
    with pytest.raises(KeyError, match="h1"):
        target.set_switch_rate("h1", 0.5)


@pytest.mark.slow
def test_a_gray_spine_slows_the_permutation_and_mrc_still_delivers_everything():
    scenario = parse_scenario(SCENARIO)
    healthy, gray = (NetsimBackend().run_case(case) for case in scenario.cases())
    assert [f.what for f in gray.faults] == ["links at 10% rate"] and gray.faults[0].target == "s3"
    for record in (healthy, gray):
        s = metrics.summarise(record)
        assert s["completed"] and s["bit_exact"], s
    assert gray.completion_time > healthy.completion_time


def test_share_is_checked_and_belongs_to_switch_slow_only():
    bad = dict(SCENARIO, variants=[{"label": "x", "faults": [{"kind": "switch_slow", "share": 1.5}]}])
    with pytest.raises(ScenarioError, match=r"faults\[0\]\.share"):
        parse_scenario(bad)
    bad = dict(SCENARIO, variants=[{"label": "x", "faults": [{"kind": "link_kill", "share": 0.5}]}])
    with pytest.raises(ScenarioError, match="only a switch_slow"):
        parse_scenario(bad)


def test_mininet_refuses_what_it_cannot_run_naming_the_key():
    gray = parse_scenario(SCENARIO).cases()[1]
    with pytest.raises(ScenarioError, match=r"link\.delay_s"):
        check_mininet(gray)
    no_delay = parse_scenario(dict(SCENARIO, link={"rate_bps": 20_000_000})).cases()[1]
    check_mininet(no_delay)                       # switch_slow runs on Mininet (the queue rates)
    restarted = dict(SCENARIO, link={"rate_bps": 20_000_000},
                     variants=[{"label": "k", "faults": [{"kind": "switch_kill", "switch": "s3", "repair_after_s": 0.1}]}])
    with pytest.raises(ScenarioError, match=r"faults\[0\]\.repair_after_s"):
        check_mininet(parse_scenario(restarted).cases()[0])
    big = parse_scenario(dict(SCENARIO, link={"mtu_payload": 4096})).cases()[0]
    with pytest.raises(ScenarioError, match=r"link\.mtu_payload"):
        check_mininet(big)
    check_mininet(parse_scenario(dict(SCENARIO, link={"mtu_payload": 1024})).cases()[0])
