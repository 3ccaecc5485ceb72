"""Placement of nodes on cluster servers (topologies/placement.py): leaves stay with their hosts,
fat-tree pods stay whole, the top tier is spread, pins are honoured, mistakes are named."""
from __future__ import annotations

import pytest

from topologies import topology_from_spec
from topologies.placement import PlacementError, place


def test_a_leaf_stays_with_its_hosts_and_spines_are_spread():
    topo = topology_from_spec("leafspine:4x2x2")
    placement = place(topo, ["a", "b"])
    for host in topo.hosts:
        (leaf,) = [end.node for end in topo.neighbors(host.name)]
        assert placement.server_of[host.name] == placement.server_of[leaf]
    spines = [s.name for s in topo.switches if s.tier == max(topo.tiers())]
    assert {placement.server_of[s] for s in spines} == {"a", "b"}
    assert placement.processes() == {"a": 7, "b": 7}
    # only leaf-spine links cross: each leaf has one of its two spines elsewhere
    assert len(placement.crossing_links()) == 4
    assert all(topo.is_switch(link.a) and topo.is_switch(link.b) for link in placement.crossing_links())


def test_a_fat_tree_pod_stays_whole_and_cores_are_spread():
    topo = topology_from_spec("fattree:4")
    placement = place(topo, ["a", "b"])
    cores = {s.name for s in topo.switches if s.tier == max(topo.tiers())}
    for link in placement.crossing_links():
        assert link.a in cores or link.b in cores          # only pod-to-core links cross
    assert sorted(placement.processes().values()) == [18, 18]
    assert {placement.server_of[c] for c in cores} == {"a", "b"}


def test_more_cores_take_more_work():
    placement = place(topology_from_spec("fattree:4"), ["big", "small"], cores={"big": 3, "small": 1})
    counts = placement.processes()
    assert counts["big"] > 2 * counts["small"]


def test_pins_are_honoured_and_pull_their_group():
    topo = topology_from_spec("leafspine:4x2x2")
    (leaf,) = [end.node for end in topo.neighbors("h1")]
    placement = place(topo, ["a", "b"], pinned={"h1": "b", "s5": "b", "s6": "b"})
    assert placement.server_of["h1"] == "b" and placement.server_of[leaf] == "b"
    assert placement.server_of["s5"] == placement.server_of["s6"] == "b"
    assert "links crossing servers" in placement.describe()


def test_one_tier_puts_each_switch_with_its_hosts():
    topo = topology_from_spec("dumbbell:2")
    placement = place(topo, ["a", "b"])
    assert set(placement.processes()) == {"a", "b"} and len(placement.crossing_links()) == 1


@pytest.mark.parametrize("servers,pinned,message", [
    ([], {}, "no servers"),
    (["a", "a"], {}, "named twice"),
    (["a"], {"h99": "a"}, "'h99' is not a node"),
    (["a"], {"h1": "z"}, "pinned to 'z', which is not a server"),
])
def test_mistakes_are_named(servers, pinned, message):
    with pytest.raises(PlacementError, match=message):
        place(topology_from_spec("leafspine:2x2x1"), servers, pinned=pinned)
