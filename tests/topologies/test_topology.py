"""Topology data model, validation and the standard builders."""
import ipaddress

import pytest

from topologies.builders import dumbbell, fat_tree, leaf_spine, multi_plane
from topologies.spec import TopologySpecError, topology_from_spec
from topologies.model import (DEFAULT_ECN_THRESHOLD, DEFAULT_QUEUE_DEPTH, DEFAULT_RATE_BPS,
                              DEFAULT_TRIM_THRESHOLD, Host, Link, Switch, Topology, TopologyError)


def tiny(links=None, hosts=2, switches=(0, 0)):
    """Two hosts on two leaf switches joined by one link, unless told otherwise."""
    hs = [Host(f"h{i + 1}", i) for i in range(hosts)]
    ss = [Switch(f"s{i + 1}", i, 0, plane) for i, plane in enumerate(switches)]
    if links is None:
        links = [Link("h1", 0, "s1", 1), Link("h2", 0, "s2", 1), Link("s1", 2, "s2", 2)]
    return Topology("tiny", hs, ss, links)


def test_defaults_are_consistent():
    link = Link("h1", 0, "s1", 1)
    assert (link.rate_bps, link.queue_depth, link.trim_threshold, link.ecn_threshold) == (
        DEFAULT_RATE_BPS, DEFAULT_QUEUE_DEPTH, DEFAULT_TRIM_THRESHOLD, DEFAULT_ECN_THRESHOLD)
    assert DEFAULT_ECN_THRESHOLD <= DEFAULT_TRIM_THRESHOLD <= DEFAULT_QUEUE_DEPTH
    assert link.ecn_max_threshold is None and link.ecn_ramp_top == link.ecn_threshold    # unset: a step
    assert Link("h1", 0, "s1", 1, ecn_max_threshold=8).ecn_ramp_top == 8


def test_queries():
    topo = tiny().validate()
    assert topo.node("s2").usid == 0x0101
    assert topo.host("h2").usid == 0x1001
    assert [l.label for l in topo.links_of("s1")] == ["h1:0-s1:1", "s1:2-s2:2"]
    assert topo.neighbor("s1", 2) == ("s2", 2)
    assert topo.neighbor("s1", 1).node == "h1"
    assert topo.port_towards("s2", "s1") == 2
    assert topo.port_towards("s2", "h2") == 1
    assert topo.planes == [0]
    nic, = topo.host_nics("h2")
    assert (nic.plane, nic.switch, nic.switch_port) == (0, "s2", 1)
    assert nic.address == ipaddress.IPv6Address("fc00:0:1001::")
    assert nic.mac == "02:00:00:00:00:01" and nic.ifname == "h2-eth0"
    with pytest.raises(KeyError, match="no node 'x9'"):
        topo.node("x9")
    with pytest.raises(KeyError, match="no link on port 9"):
        topo.neighbor("s1", 9)


def test_without_links():
    topo = tiny()
    cut = topo.without_links([("s2", "s1")])
    assert len(cut.links) == 2 and all(not l.joins("s1", "s2") for l in cut.links)
    assert len(topo.links) == 3
    with pytest.raises(KeyError):
        topo.without_links([("h1", "h2")])


@pytest.mark.parametrize("links,kind,index,message", [
    ([Link("h1", 0, "s9", 1)], "link", 0, "unknown node 's9'"),
    ([Link("h1", 0, "s1", 1), Link("h2", 0, "s1", 1)], "link", 1, "port 1 of s1 already used"),
    ([Link("h1", 0, "s1", 1), Link("h1", 0, "s2", 1)], "link", 1, "already has a NIC on plane 0"),
    ([Link("h1", 1, "s1", 1)], "link", 0, "must be the plane of s1"),
    ([Link("h1", 0, "h2", 0)], "link", 0, "joins two hosts"),
    ([Link("s1", 1, "s2", 1), Link("s1", 2, "s2", 2)], "link", 1, "parallel"),
    ([Link("s1", 0, "s2", 1)], "link", 0, "port 0 outside 1..511"),
    ([Link("h1", 0, "s1", 1, rate_bps=0)], "link", 0, "rate_bps = 0 must be positive"),
    ([Link("h1", 0, "s1", 1, ecn_threshold=9, trim_threshold=8)], "link", 0, "ecn_threshold = 9 exceeds"),
    ([Link("h1", 0, "s1", 1, trim_threshold=80)], "link", 0, "trim_threshold = 80 exceeds queue_depth"),
    ([Link("h1", 0, "s1", 1, ecn_threshold=4, ecn_max_threshold=3)], "link", 0, "ecn_max_threshold = 3 is below"),
    ([Link("h1", 0, "s1", 1, ecn_max_threshold=65)], "link", 0, "ecn_max_threshold = 65 exceeds queue_depth"),
    ([Link("h1", 0, "s1", 1, ecn_max_threshold="8")], "link", 0, "ecn_max_threshold = '8' is not an integer"),
])
def test_validate_names_the_bad_link(links, kind, index, message):
    with pytest.raises(TopologyError, match=message) as info:
        tiny(links).validate()
    assert (info.value.kind, info.value.index) == (kind, index)
    assert links[index].label in str(info.value)


def test_validate_rejects_cross_plane_switch_link():
    with pytest.raises(TopologyError, match="joins plane 0 .s1. to plane 1 .s2."):
        tiny([Link("s1", 1, "s2", 1)], switches=(0, 1)).validate()


def test_validate_names_bad_nodes():
    with pytest.raises(TopologyError, match="duplicate node name 'h1'") as info:
        Topology("t", [Host("h1", 0), Host("h1", 1)], [], []).validate()
    assert (info.value.kind, info.value.index) == ("host", 1)
    with pytest.raises(TopologyError, match="must be named s1"):
        Topology("t", [], [Switch("sw", 0)], []).validate()
    with pytest.raises(TopologyError, match="index 1 but it is at position 0"):
        Topology("t", [Host("h1", 1)], [], []).validate()
    with pytest.raises(TopologyError, match="tier 5"):
        Topology("t", [], [Switch("s1", 0, tier=5)], []).validate()
    with pytest.raises(TopologyError, match="host h2 has no link") as info:
        tiny([Link("h1", 0, "s1", 1)]).validate()
    assert (info.value.kind, info.value.index) == ("host", 1)
    with pytest.raises(TopologyError, match="uSID 0x999"):
        Topology("t", [], [Switch("s1", 0, usid=0x999)], []).validate()


def test_dumbbell():
    topo = dumbbell(3, bottleneck_rate_bps=5_000_000)
    assert [h.name for h in topo.hosts] == ["h1", "h2", "h3", "h4", "h5", "h6"]
    assert len(topo.switches) == 2
    bottleneck = topo.link_between("s1", "s2")
    assert bottleneck.rate_bps == 5_000_000 and (bottleneck.a_port, bottleneck.b_port) == (4, 4)
    assert {nic.switch for h in ("h1", "h2", "h3") for nic in topo.host_nics(h)} == {"s1"}
    assert topo.host_nics("h6")[0].switch == "s2"


def test_leaf_spine_ports_and_tiers():
    topo = leaf_spine(4, 2, 3)
    assert len(topo.hosts) == 12 and len(topo.switches) == 6 and len(topo.links) == 12 + 8
    assert [s.tier for s in topo.switches] == [0, 0, 0, 0, 1, 1]
    # leaf: host ports first, then one uplink per spine; spine port i+1 faces leaf i
    assert topo.ports_of("s1") == [1, 2, 3, 4, 5]
    assert topo.neighbor("s1", 4) == ("s5", 1)
    assert topo.neighbor("s6", 3) == ("s3", 5)
    assert topo.host_nics("h12")[0].switch == "s4"


def test_fat_tree_k4_shape():
    topo = fat_tree(4)
    assert len(topo.hosts) == 16 and len(topo.switches) == 20
    assert [sum(1 for s in topo.switches if s.tier == t) for t in (0, 1, 2)] == [8, 8, 4]
    assert len(topo.links) == 16 + 16 + 16
    for sw in topo.switches:
        assert len(topo.links_of(sw.name)) == 4, sw.name   # every switch has k ports
    # a core switch reaches exactly one aggregation switch per pod
    core = topo.switches[-1].name
    pods = {(topo.switch(end.node).index - 8) // 2 for end in topo.neighbors(core)}
    assert pods == {0, 1, 2, 3}


def test_fat_tree_rejects_odd_k():
    with pytest.raises(ValueError, match="even"):
        fat_tree(3)


def test_multi_plane_has_one_nic_per_plane():
    topo = multi_plane(3, 2, 2, 2)
    assert topo.planes == [0, 1, 2]
    assert len(topo.switches) == 3 * 4 and len(topo.hosts) == 4
    for host in topo.hosts:
        nics = topo.host_nics(host.name)
        assert [nic.plane for nic in nics] == [0, 1, 2]
        assert all(topo.switch(nic.switch).plane == nic.plane for nic in nics)
        assert len({nic.address for nic in nics}) == 3
    for plane in topo.planes:
        assert len(topo.switches_of_plane(plane)) == 4


@pytest.mark.parametrize("spec,hosts,switches", [
    ("dumbbell:2", 4, 2), ("leafspine:4x2x2", 8, 6), ("fattree:4", 16, 20),
    ("multiplane:2x2x2x2", 4, 8), ("LeafSpine:2x1x1", 2, 3)])
def test_spec_parser(spec, hosts, switches):
    topo = topology_from_spec(spec)
    assert (len(topo.hosts), len(topo.switches)) == (hosts, switches)


@pytest.mark.parametrize("spec,message", [
    ("ring:4", "unknown kind"), ("leafspine:4x2", "takes 3 number"), ("fattree:3", "even"),
    ("leafspine", "needs leavesxspinesxhosts_per_leaf"), ("dumbbell:0", "positive"),
    ("multiplane:2x2xx2x2", "takes 4 number")])
def test_spec_parser_errors_name_the_spec(spec, message):
    with pytest.raises(TopologySpecError, match=message) as info:
        topology_from_spec(spec)
    assert repr(spec) in str(info.value)


def test_host_nics_are_made_once_and_each_caller_gets_its_own_list():
    import dataclasses
    topo = multi_plane(2, 2, 2, 1)
    first = topo.host_nics("h1")
    assert [nic.plane for nic in first] == [0, 1]
    first.clear()                                        # the caller's list, not the topology's
    again = topo.host_nics("h1")
    assert [nic.plane for nic in again] == [0, 1] and again[0] is topo.host_nics("h1")[0]
    # another topology (here without h1's plane-1 link) has NICs of its own
    fewer = dataclasses.replace(topo, links=tuple(link for link in topo.links
                                                  if not (link.a == "h1" and link.a_port == 1)))
    assert [nic.plane for nic in fewer.host_nics("h1")] == [0]
    assert [nic.plane for nic in topo.host_nics("h1")] == [0, 1]
