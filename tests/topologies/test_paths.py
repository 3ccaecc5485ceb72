"""Path enumeration: every shortest (valley-free) uSID path per plane, deterministic order."""
import pytest

from topologies import addressing
from topologies.builders import dumbbell, fat_tree, leaf_spine, multi_plane
from topologies.model import Host, Link, Switch, Topology
from topologies.paths import PathError, all_pairs_paths, host_paths


def is_valley_free(topo, switches):
    tiers = [topo.switch(s).tier for s in switches]
    peak = tiers.index(max(tiers))
    return tiers[:peak + 1] == sorted(tiers[:peak + 1]) and tiers[peak:] == sorted(tiers[peak:], reverse=True)


def test_same_leaf_path_is_one_switch():
    topo = leaf_spine(2, 2, 2)
    path, = host_paths(topo, "h1", "h2")
    assert path.switches == ("s1",)
    assert path.address == addressing.usid_path_address(0, [0x100], 0x1001)
    assert path.src_nic.host == "h1" and path.src_nic.plane == 0


def test_leaf_spine_one_path_per_spine():
    topo = leaf_spine(4, 3, 1)
    paths = host_paths(topo, "h1", "h4")
    assert [p.switches for p in paths] == [("s1", "s5", "s4"), ("s1", "s6", "s4"), ("s1", "s7", "s4")]
    assert len({p.address for p in paths}) == 3


def test_fat_tree_path_counts_and_valley_free():
    topo = fat_tree(4)
    paths = all_pairs_paths(topo)
    assert len(paths) == 16 * 15
    edge = {h.name: topo.host_nics(h.name)[0].switch for h in topo.hosts}
    for (src, dst), plist in paths.items():
        if edge[src] == edge[dst]:
            expected = 1
        elif (topo.switch(edge[src]).index // 2) == (topo.switch(edge[dst]).index // 2):
            expected = 2      # same pod: via either aggregation switch
        else:
            expected = 4      # other pod: (k/2)^2 cores
        assert len(plist) == expected, (src, dst)
        for p in plist:
            assert is_valley_free(topo, p.switches)
            assert p.switches[0] == edge[src] and p.switches[-1] == edge[dst]
            plane, usids = addressing.parse_usid_address(p.address)
            assert usids == [topo.switch(s).usid for s in p.switches] + [topo.host(dst).usid]


def test_multi_plane_paths_cover_every_plane():
    topo = multi_plane(2, 2, 3, 1)
    paths = host_paths(topo, "h1", "h2")
    assert [p.plane for p in paths] == [0, 0, 0, 1, 1, 1]
    for p in paths:
        assert all(topo.switch(s).plane == p.plane for s in p.switches)
        assert p.src_nic.plane == p.plane
        assert addressing.parse_usid_address(p.address)[0] == p.plane


def test_order_is_deterministic():
    a = all_pairs_paths(fat_tree(4))
    b = all_pairs_paths(fat_tree(4))
    assert a == b
    for plist in a.values():
        keys = [(p.plane, [int(s[1:]) for s in p.switches]) for p in plist]
        assert keys == sorted(keys)


def test_dumbbell_paths_cross_the_bottleneck():
    topo = dumbbell(2)
    assert [p.switches for p in host_paths(topo, "h1", "h3")] == [("s1", "s2")]


def test_errors():
    with pytest.raises(PathError, match="itself"):
        host_paths(leaf_spine(2, 1, 1), "h1", "h1")
    # a chain of 6 switches cannot be encoded in one uSID address
    switches = [Switch(f"s{i + 1}", i) for i in range(6)]
    links = [Link("h1", 0, "s1", 1), Link("h2", 0, "s6", 1)]
    links += [Link(f"s{i + 1}", 2, f"s{i + 2}", 3) for i in range(5)]
    chain = Topology("chain", [Host("h1", 0), Host("h2", 1)], switches, links).validate()
    with pytest.raises(PathError, match="6 switches"):
        host_paths(chain, "h1", "h2")


def test_disconnected_plane_gives_no_path():
    topo = leaf_spine(2, 1, 1)
    cut = topo.without_links([("s1", "s3")])
    assert host_paths(cut, "h1", "h2") == []


def walked_shortest_paths(graph, source, target):
    """Every shortest path from `source` to `target` found without the graph's distances or cache:
    walks without repeated switches grown a hop at a time (neighbours by index) until some reach it."""
    walks = [(source,)]
    while walks:
        arrived = [walk for walk in walks if walk[-1] == target]
        if arrived:
            return arrived
        walks = [walk + (end.node,) for walk in walks for end in graph.adjacent(walk[-1]) if end.node not in walk]
    return []


@pytest.mark.parametrize("make", [lambda: fat_tree(4), lambda: leaf_spine(4, 3, 1), lambda: multi_plane(2, 3, 2, 1)])
def test_kept_paths_are_the_paths_of_each_pair_alone(make):
    """One graph asked every pair of switches (its paths through a switch made once and kept) gives
    each pair exactly the paths, in the order, of a walk of that pair alone; so does host_paths
    with graphs shared across pairs."""
    from topologies.graph import PlaneGraph
    topo = make()
    for plane in topo.planes:
        graph = PlaneGraph(topo, plane)
        names = graph.switches
        for source in names + names[::-1]:          # every pair asked twice, the second time from the cache
            for target in names:
                got = graph.shortest_paths(source, target)
                assert got == walked_shortest_paths(graph, source, target), (source, target)
                got.clear()                          # a caller's list is its own
                assert graph.shortest_paths(source, target)
    graphs: dict = {}
    for a in topo.hosts:
        for b in topo.hosts:
            if a != b:
                assert host_paths(topo, a.name, b.name, graphs) == host_paths(topo, a.name, b.name)


@pytest.mark.parametrize("make", [lambda: fat_tree(4), lambda: multi_plane(2, 3, 2, 1)])
def test_steering_addresses_are_the_host_paths_addresses(make):
    from topologies.paths import steering_addresses
    topo = make()
    graphs: dict = {}
    for a in topo.hosts:
        for b in topo.hosts:
            if a != b:
                by_plane: dict = {}
                for path in host_paths(topo, a.name, b.name):
                    by_plane.setdefault(path.plane, []).append(path.address.packed)
                assert steering_addresses(topo, a.name, b.name, graphs) == by_plane
    with pytest.raises(PathError, match="itself"):
        steering_addresses(topo, "h1", "h1")


def test_shortest_path_usids_are_the_paths_usids_packed():
    from topologies.graph import PlaneGraph
    from wire.constants import USID_BITS
    topo = fat_tree(4)
    graph = PlaneGraph(topo, 0)
    for source in graph.switches:
        for target in graph.switches:
            paths = graph.shortest_paths(source, target)
            count, packed = graph.shortest_path_usids(source, target)
            want = []
            for path in paths:
                value = 0
                for usid in graph.usids(path):
                    value = (value << USID_BITS) | usid
                want.append(value)
            assert packed == want and all(len(path) == count for path in paths)
            assert packed                                 # a fat-tree's switches all reach each other
    assert addressing.packed_path_value(1, 2, (0x100 << USID_BITS) | 0x105, 0x1003) == \
        addressing.usid_path_value(1, [0x100, 0x105], 0x1003)
