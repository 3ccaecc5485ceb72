"""Where a fault lands when its scenario says `auto` (or, for random loss, every last hop): chosen
from the topology, the workload and the pipeline contract, the same for every backend.

`auto` is the fabric link and the spine that carry most of the baseline's data. The baseline
("roce") pins each connection to one ECMP path: the one the switches' hash gives its entropy value
(`topologies.paths.ecmp_path`, `pipeline_contract.ecmp`). That value is drawn by the transport
itself: `baseline_entropies` opens the baseline's connections on bare transport endpoints (no
network, nothing sent) in the order the simulation driver opens them, so each host draws what it draws
there. A fault there is one the baseline feels; MRC cases use the same targets, so every transport
meets the same fault.
"""
from __future__ import annotations

import dataclasses
from collections import Counter

from experiments.scenario import Case
from experiments.transport_sizing import transport_params
from experiments.workloads import COLLECTIVES, collective_flows, point_to_point_flows
from host_agent.transport import Endpoint, PathInfo, QpNumbers, TransportConfig, connection_paths
from topologies.graph import PlaneGraph
from topologies.model import TIER_LEAF, Topology
from topologies.paths import ecmp_path


def busiest_targets(case: Case, topo: Topology) -> tuple[tuple[str, str], str]:
    """(fabric link, spine) carrying most of the baseline's data in this case's variant; ties go
    to the first in topology order."""
    flows = _flows(case, topo)
    entropy = baseline_entropies(case, topo)
    graphs: dict[int, PlaneGraph] = {}
    links: Counter = Counter()
    switches: Counter = Counter()
    for src, dst, nbytes in flows:
        plane = _baseline_plane(topo, src, dst)
        graph = graphs.get(plane) or graphs.setdefault(plane, PlaneGraph(topo, plane))
        hops = ecmp_path(topo, src, dst, plane, entropy[src, dst], graph)
        for a, b in zip(hops, hops[1:]):
            links[frozenset((a, b))] += nbytes
        for name in hops:
            if topo.switch(name).tier != TIER_LEAF:
                switches[name] += nbytes
    fabric = [(link.a, link.b) for link in topo.links if topo.is_switch(link.a) and topo.is_switch(link.b)]
    if not fabric:
        raise ValueError(f"topology {topo.name} has no switch-to-switch link to break")
    link = max(fabric, key=lambda ab: (links[frozenset(ab)], -fabric.index(ab)))
    spines = [s.name for s in topo.switches if s.tier != TIER_LEAF] or [s.name for s in topo.switches]
    spine = max(spines, key=lambda n: (switches[n], -spines.index(n)))
    return link, spine


def last_hops(topo: Topology) -> list[tuple[str, str]]:
    """(switch, host) of every link between a switch and a host."""
    hops = []
    for link in topo.links:
        for sw, host in ((link.a, link.b), (link.b, link.a)):
            if topo.is_switch(sw) and topo.is_host(host):
                hops.append((sw, host))
    return hops


def baseline_entropies(case: Case, topo: Topology) -> dict[tuple[str, str], int]:
    """{(host, peer): the entropy value of the host's first baseline connection to the peer}: the
    transport's endpoints of the case's hosts (its seed, one QP per peer) open their connections in
    the simulation driver's order, `connection_order`, numbered as there (`QpNumbers`; the numbers
    are not in the hash and draw nothing); each draws its EV as it would there."""
    baseline = dataclasses.replace(case, transport=case.transport.model_copy(update={"mode": "roce", "params": {}}))
    config = TransportConfig(mode="roce", **transport_params(baseline, topo))
    hosts = [h.name for h in topo.hosts]
    endpoints = {h: Endpoint(h, config, rng_seed=i) for i, h in enumerate(hosts)}
    entropy = {}
    qps = QpNumbers()
    try:
        for a, b in connection_order(case, topo):
            qa, qb = qps.pair()
            for host, peer, qp, peer_qp in ((a, b, qa, qb), (b, a, qb, qa)):
                conn = endpoints[host].connect(peer, qp, peer_qp, _baseline_paths(topo, host, peer))
                entropy[host, peer] = conn.evset.slots[0].current.value
    finally:
        for endpoint in endpoints.values():     # freed by reference counting, not left to the collector
            endpoint.close()
    return entropy


def connection_order(case: Case, topo: Topology) -> list[tuple[str, str]]:
    """The host pairs of the case's workload, each once, in the order the netsim backend's traffic
    (experiments.backends.netsim_traffic, on `simulation.Simulation`) opens their connections: a collective's rank by rank,
    each to its peers (the ranks it sends to or receives from) in rank order; point-to-point
    flows in the order of the plan."""
    w = case.variant.workload
    if w.kind in COLLECTIVES:
        rank = {h.name: i for i, h in enumerate(topo.hosts)}
        pairs = {tuple(sorted((f.src, f.dst), key=rank.get)) for f in collective_flows(topo, w)}
        return sorted(pairs, key=lambda pair: (rank[pair[0]], rank[pair[1]]))
    order: dict[frozenset, tuple[str, str]] = {}
    for flow in point_to_point_flows(topo, w, case.scenario.seed):
        order.setdefault(frozenset((flow.src, flow.dst)), tuple(sorted((flow.src, flow.dst))))
    return list(order.values())


def _flows(case: Case, topo: Topology) -> list[tuple[str, str, int]]:
    """(src, dst, payload bytes) of every flow of the case's workload."""
    w = case.variant.workload
    planned = collective_flows(topo, w) if w.kind in COLLECTIVES else point_to_point_flows(topo, w, case.scenario.seed)
    return [(f.src, f.dst, f.nbytes) for f in planned]


def _baseline_plane(topo: Topology, src: str, dst: str) -> int:
    """The plane the baseline sends on: the first both hosts are on."""
    planes = {nic.plane for nic in topo.host_nics(dst)}
    return next(nic.plane for nic in topo.host_nics(src) if nic.plane in planes)


def _baseline_paths(topo: Topology, src: str, dst: str) -> list[PathInfo]:
    """The baseline's paths by the transport's one rule (`connection_paths`), with the simulation's
    NICs (`Topology.numbered_nics`: NIC i on plane i): the peer's NIC address on every plane both
    hosts are on, by plane (the baseline sends on the first)."""
    peer = {nic.plane: nic.address.packed for nic in topo.host_nics(dst)}
    return connection_paths("roce", topo.numbered_nics(src), peer, {})
