"""Static routes: the computed tables, followed hop by hop with a tiny interpreter of the switch
pipeline contract (docs/design.md), deliver every uSID path and every baseline ECMP branch."""
import ipaddress
import os
from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

from controller import routes
from topologies import addressing
from topologies.builders import dumbbell, fat_tree, leaf_spine, multi_plane
from topologies.graph import PlaneGraph
from topologies.paths import all_pairs_paths
from topologies.yamlfile import load_topology, loads_topology

MAX_HOPS = 16
LOW_96 = (1 << 96) - 1


class ContractInterpreter:
    """usid_local (exact, shift on hit) -> routing (LPM) -> ecmp_member, per docs/design.md."""

    def __init__(self, topo, programs):
        self.topo = topo
        self.local, self.routes, self.members = {}, {}, {}
        for name, program in programs.items():
            self.local[name] = {e.match["dst_usid_prefix"] for e in program.entries_of(routes.USID_LOCAL)}
            assert all(e.action == routes.USID_SHIFT for e in program.entries_of(routes.USID_LOCAL))
            self.routes[name] = [e for e in program.entries_of(routes.ROUTING)]
            self.members[name] = {(e.match["group"], e.match["index"]): e.params["port"]
                                  for e in program.entries_of(routes.ECMP_MEMBER)}

    def egress_ports(self, switch, dst):
        """(ports the packet may leave by, dst after the switch); no port = dropped."""
        if dst >> 80 in self.local[switch]:
            dst = ((dst >> 96) << 96) | (((dst & ((1 << 80) - 1)) << 16) & LOW_96)
        best = None
        for entry in self.routes[switch]:
            value, length = entry.match["dst_addr"]
            if dst >> (128 - length) == value >> (128 - length) and (best is None or length > best[0]):
                best = (length, entry)
        if best is None:
            return [], dst
        entry = best[1]
        if entry.action == routes.FORWARD:
            return [entry.params["port"]], dst
        assert entry.action == routes.ECMP_SELECT
        group, size = entry.params["group"], entry.params["size"]
        return [self.members[switch][(group, index)] for index in range(size)], dst

    def walk(self, switch, dst):
        """Every outcome over all ECMP choices: (switches visited, (host, plane) reached or None)."""
        outcomes = []

        def step(here, dst, visited):
            visited = visited + (here,)
            if len(visited) > MAX_HOPS:
                outcomes.append((visited, None))
                return
            ports, dst = self.egress_ports(here, dst)
            if not ports:
                outcomes.append((visited, None))
            for port in ports:
                far = self.topo.neighbor(here, port)
                if self.topo.is_host(far.node):
                    outcomes.append((visited, far))
                else:
                    step(far.node, dst, visited)

        step(switch, int(ipaddress.IPv6Address(dst)), ())
        return outcomes


BUILDERS = {
    "dumbbell": lambda: dumbbell(2),
    "leafspine": lambda: leaf_spine(3, 2, 2),
    "fattree4": lambda: fat_tree(4),
    "multiplane": lambda: multi_plane(2, 3, 2, 2),
    "triangle": lambda: load_topology(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir,
                                                   "topologies", "examples", "triangle.yaml")),
    "interleaved": lambda: loads_topology(INTERLEAVED),
}

# Two leaves under two spines whose hosts alternate between the leaves in host order (h1 on s1, h2 on
# s2, h3 on s1, ...): every leaf's hosts are in several blocks (controller.routes.HostBlock).
INTERLEAVED = """
name: interleaved
defaults: {rate: 20Mbit, queue_depth: 64, trim_threshold: 8, ecn_threshold: 4}
hosts: [h1, h2, h3, h4, h5]
switches:
  - {name: s1, tier: leaf, plane: 0}
  - {name: s2, tier: leaf, plane: 0}
  - {name: s3, tier: spine, plane: 0}
  - {name: s4, tier: spine, plane: 0}
links:
  - {a: h1, b: s1}
  - {a: h2, b: s2}
  - {a: h3, b: s1}
  - {a: h4, b: s2}
  - {a: h5, b: s1}
  - {a: s1, b: s3}
  - {a: s1, b: s4}
  - {a: s2, b: s3}
  - {a: s2, b: s4}
"""


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def network(request):
    topo = BUILDERS[request.param]()
    return topo, routes.compute_programs(topo)


def test_every_usid_path_delivers(network):
    topo, programs = network
    net = ContractInterpreter(topo, programs)
    count = 0
    for (src, dst), paths in all_pairs_paths(topo).items():
        assert paths, f"no path {src}->{dst}"
        for path in paths:
            (visited, reached), = net.walk(path.src_nic.switch, path.address)
            assert visited == path.switches, (src, dst, path.address)
            assert reached == (dst, path.plane)
            count += 1
    assert count == sum(len(p) for p in all_pairs_paths(topo).values())


def test_baseline_ecmp_branches_are_exactly_the_shortest_paths(network):
    topo, programs = network
    net = ContractInterpreter(topo, programs)
    for (src, dst), paths in all_pairs_paths(topo).items():
        for nic in topo.host_nics(src):
            dst_nic = topo.host_nic(dst, nic.plane)
            outcomes = net.walk(nic.switch, dst_nic.address)
            assert all(reached == (dst, nic.plane) for _, reached in outcomes), (src, dst)
            expected = Counter(p.switches for p in paths if p.plane == nic.plane)
            assert Counter(visited for visited, _ in outcomes) == expected


def test_ecmp_groups_hold_the_shortest_path_next_hops(network):
    topo, programs = network
    for switch in topo.switches:
        program = programs[switch.name]
        graph = PlaneGraph(topo, switch.plane)
        groups = {}
        for e in program.entries_of(routes.ECMP_MEMBER):
            groups.setdefault(e.match["group"], []).append((e.match["index"], e.params["port"]))
        assert sorted(groups) == list(range(1, len(groups) + 1))
        port_sets = [tuple(p for _, p in sorted(members)) for members in groups.values()]
        assert len(set(port_sets)) == len(port_sets), "one group per distinct port set"
        for e in program.entries_of(routes.ROUTING):
            if e.action != routes.ECMP_SELECT:
                continue
            plane, (usid,) = addressing.parse_usid_address(e.match["dst_addr"][0])
            dst_host = topo.hosts[usid - addressing.host_usid(0)]
            target = topo.host_nic(dst_host.name, plane).switch
            expected = sorted(end.port for end in graph.next_hops(switch.name, target))
            members = sorted(groups[e.params["group"]])
            assert [i for i, _ in members] == list(range(e.params["size"]))
            assert [p for _, p in members] == expected
            assert len(expected) > 1


def test_leaf_spine_tables_in_detail():
    topo = leaf_spine(2, 2, 1)                      # s1,s2 leaves; s3,s4 spines; h1 on s1, h2 on s2
    programs = routes.compute_programs(topo)
    assert [(p.switch, p.device_id) for p in programs.values()] == [("s1", 1), ("s2", 2), ("s3", 3), ("s4", 4)]
    s1 = programs["s1"]
    assert [e.match for e in s1.entries_of(routes.USID_LOCAL)] == [{"dst_usid_prefix": 0xFC0000000100}]
    installed = {ipaddress.IPv6Address(e.match["dst_addr"][0]): (e.match["dst_addr"][1], e.action, e.params)
                 for e in s1.entries_of(routes.ROUTING)}
    assert installed == {
        ipaddress.IPv6Address("fc00:0:102::"): (48, routes.FORWARD, {"port": 2}),
        ipaddress.IPv6Address("fc00:0:103::"): (48, routes.FORWARD, {"port": 3}),
        ipaddress.IPv6Address("fc00:0:1000::"): (48, routes.FORWARD, {"port": 1}),
        ipaddress.IPv6Address("fc00:0:1001::"): (48, routes.ECMP_SELECT, {"group": 1, "size": 2}),
    }
    assert [(e.match, e.params) for e in s1.entries_of(routes.ECMP_MEMBER)] == [
        ({"group": 1, "index": 0}, {"port": 2}), ({"group": 1, "index": 1}, {"port": 3})]
    # spines: single next hop to each host, no groups
    assert programs["s3"].entries_of(routes.ECMP_MEMBER) == []
    # members are installed before the routes that use them
    kinds = [e.table for e in s1.entries]
    assert kinds.index(routes.ECMP_MEMBER) < kinds.index(routes.ROUTING)


def test_equal_routes_of_switches_are_one_entry_and_every_host_has_its_own():
    """Switches routing a leaf's hosts out of the same port hold the same (frozen) entries; each
    switch still has one routing entry per host it can reach, in host order."""
    topo = fat_tree(4)
    programs = routes.compute_programs(topo)
    cores = [s.name for s in topo.switches if s.tier == 2]
    host_match = {(addressing.node_prefix(0, h.usid) << routes.PREFIX_SHIFT, addressing.NODE_PREFIX_LEN): h.name
                  for h in topo.hosts}
    for core in cores:
        hosts = [host_match[e.match["dst_addr"]] for e in programs[core].entries_of(routes.ROUTING)
                 if e.match["dst_addr"] in host_match]
        assert hosts == [h.name for h in topo.hosts]
    first, second = (programs[name].entries_of(routes.ROUTING) for name in cores[:2])
    same_port = [(a, b) for a, b in zip(first, second) if a == b and a.match["dst_addr"] in host_match]
    assert same_port and all(a is b for a, b in same_port)


def test_groups_are_shared_between_destinations():
    topo = leaf_spine(4, 2, 2)
    s1 = routes.compute_programs(topo)["s1"]
    selects = [e for e in s1.entries_of(routes.ROUTING) if e.action == routes.ECMP_SELECT]
    assert len(selects) == 6                        # hosts on the 3 other leaves
    assert {e.params["group"] for e in selects} == {1}
    assert len(s1.entries_of(routes.ECMP_MEMBER)) == 2


def test_port_config_and_queues_follow_the_links():
    topo = dumbbell(2, bottleneck_rate_bps=7_000_000, trim_threshold=6, ecn_threshold=2, queue_depth=30)
    s1 = routes.compute_programs(topo)["s1"]
    config = {e.match["port"]: e.params for e in s1.entries_of(routes.PORT_CONFIG)}
    assert config == {
        1: {"trim_threshold": 6, "ecn_threshold": 2, "host_facing": 1, "ecn_max_threshold": 2},
        2: {"trim_threshold": 6, "ecn_threshold": 2, "host_facing": 1, "ecn_max_threshold": 2},
        3: {"trim_threshold": 6, "ecn_threshold": 2, "host_facing": 0, "ecn_max_threshold": 2},
    }
    assert all(e.action == routes.SET_PORT_CONFIG for e in s1.entries_of(routes.PORT_CONFIG))
    assert [(q.port, q.rate_bps, q.depth_pkts) for q in s1.queues] == [
        (1, 20_000_000, 30), (2, 20_000_000, 30), (3, 7_000_000, 30)]


def test_entry_keys_are_unique_per_switch():
    for program in routes.compute_programs(fat_tree(4)).values():
        keys = [e.key() for e in program.entries]
        assert len(keys) == len(set(keys)), program.switch


def test_a_path_through_a_non_neighbour_is_dropped():
    topo = leaf_spine(2, 2, 1)
    net = ContractInterpreter(topo, routes.compute_programs(topo))
    # s1 -> s2 directly: leaves are not neighbours, so s1 has no route for s2's uSID
    bogus = addressing.usid_path_address(0, [0x100, 0x101], 0x1001)
    (visited, reached), = net.walk("s1", bogus)
    assert visited == ("s1",) and reached is None


@pytest.mark.parametrize("make,cut", [
    (lambda: leaf_spine(3, 2, 2), ("s1", "s4")),
    (lambda: fat_tree(4), ("s9", "s17")),          # aggregation-core
    (lambda: fat_tree(4), ("s1", "s9")),           # edge-aggregation
    (lambda: multi_plane(2, 2, 2, 1), ("s5", "s7")),
])
def test_rerouting_removes_exactly_the_paths_through_the_link(make, cut):
    topo = make()
    dead = topo.link_between(*cut)
    before = routes.compute_programs(topo)
    after = routes.rerouted_programs(topo, [cut])
    net = ContractInterpreter(topo, after)
    crossing = lambda switches: any({a, b} == set(cut) for a, b in zip(switches, switches[1:]))
    broken = kept = 0
    for (src, dst), paths in all_pairs_paths(topo).items():
        for path in paths:
            (visited, reached), = net.walk(path.src_nic.switch, path.address)
            if crossing(path.switches):
                assert reached is None, (src, dst, path.switches)
                broken += 1
            else:
                assert reached == (dst, path.plane) and visited == path.switches
                kept += 1
        # the baseline converges: every ECMP branch avoids the dead link and still delivers
        for nic in topo.host_nics(src):
            for visited, reached in net.walk(nic.switch, topo.host_nic(dst, nic.plane).address):
                assert reached == (dst, nic.plane) and not crossing(visited)
    assert broken and kept
    for name in before:
        for table in (routes.USID_LOCAL, routes.PORT_CONFIG):
            assert before[name].entries_of(table) == after[name].entries_of(table)
        assert before[name].queues == after[name].queues
    # no cut: the static programs; a Link object and a (node, node) pair name the same cut
    assert routes.rerouted_programs(topo, []) == before
    assert routes.rerouted_programs(topo, [dead]) == after


def test_rerouting_accepts_switch_port_pairs():
    topo = leaf_spine(2, 2, 1)
    port = topo.port_towards("s1", "s3")
    assert routes.rerouted_programs(topo, [("s1", port)]) == routes.rerouted_programs(topo, [("s3", "s1")])


def test_unreachable_hosts_get_no_route():
    topo = leaf_spine(2, 1, 1)
    s1 = routes.rerouted_programs(topo, [("s1", "s3")])["s1"]
    dsts = {e.match["dst_addr"][0] for e in s1.entries_of(routes.ROUTING)}
    assert int(topo.host_nic("h2", 0).address) not in dsts
    assert int(topo.host_nic("h1", 0).address) in dsts


@settings(max_examples=12, deadline=None)
@given(planes=st.integers(1, 2), leaves=st.integers(1, 4), spines=st.integers(1, 3), hosts=st.integers(1, 2),
       cut_index=st.integers(0, 10**6))
def test_property_any_small_clos_delivers_and_reroutes(planes, leaves, spines, hosts, cut_index):
    topo = multi_plane(planes, leaves, spines, hosts)
    if len(topo.hosts) < 2:
        return
    net = ContractInterpreter(topo, routes.compute_programs(topo))
    for (src, dst), paths in all_pairs_paths(topo).items():
        for path in paths:
            (visited, reached), = net.walk(path.src_nic.switch, path.address)
            assert reached == (dst, path.plane) and visited == path.switches
    fabric = [l for l in topo.links if topo.is_switch(l.a) and topo.is_switch(l.b)]
    if not fabric:
        return
    cut = fabric[cut_index % len(fabric)]
    rerouted = ContractInterpreter(topo, routes.rerouted_programs(topo, [cut]))
    for (src, dst), paths in all_pairs_paths(topo).items():
        for path in paths:
            crosses = any(cut.joins(a, b) for a, b in zip(path.switches, path.switches[1:]))
            (_, reached), = rerouted.walk(path.src_nic.switch, path.address)
            assert (reached is None) == crosses
