"""Who sends what to whom: the flows of a workload, the same for every backend.

Collectives (all-reduce, all-to-all) run over every host of the topology, rank = host order;
incast and permutation are sets of point-to-point flows whose bytes the receiver checks bit for
bit, drawn from the seed: on netsim, views of one stream (`host_agent.collectives.data.flow_payloads`);
on the agents, flow i a transfer job's `data.block_bytes(seed + i, 0, 1, n)`.
"""
from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

from experiments.scenario import AUTO, Variant, WorkloadSpec
from topologies import topology_from_spec
from topologies.model import Topology

COLLECTIVES = ("allreduce", "alltoall")


@dataclass(frozen=True)
class PlannedFlow:
    """One point-to-point flow of `nbytes` from `src` to `dst`."""

    src: str
    dst: str
    nbytes: int
    role: str = "data"


def variant_topology(variant: Variant) -> Topology:
    """The variant's topology with its link overrides applied to every link (`rate_bps: auto`
    keeps the topology's own rates: experiments/rate_caps.py sets them on mininet)."""
    topo = topology_from_spec(variant.topology)
    fields = {k: v for k, v in variant.link_fields.items() if not (k == "rate_bps" and v == AUTO)}
    if not fields:
        return topo
    links = [dataclasses.replace(link, **fields) for link in topo.links]
    return Topology(topo.name, topo.hosts, topo.switches, links).validate()


def leaf_of(topo: Topology, host: str) -> str:
    """The switch `host`'s first NIC plugs into."""
    return topo.host_nics(host)[0].switch


def collective_flows(topo: Topology, w: WorkloadSpec) -> list[PlannedFlow]:
    """The directed data flows of a collective and the payload each carries (tags not counted)."""
    hosts = [h.name for h in topo.hosts]
    n = len(hosts)
    if w.kind == "allreduce":
        per_flow = 2 * (n - 1) * w.bytes // n
        return [PlannedFlow(hosts[r], hosts[(r + 1) % n], per_flow) for r in range(n)] if n > 1 else []
    return [PlannedFlow(a, b, w.bytes) for a in hosts for b in hosts if a != b]


def collective_params(w: WorkloadSpec, seed: int) -> dict:
    """The parameters of a collective as each rank runs it (`host_agent.collectives.make_collective`,
    an agent job's workload): all-reduce elements and dtype, or the all-to-all block, plus the
    message size and the data seed."""
    params = {"chunk_bytes": w.chunk_bytes, "seed": seed}
    if w.kind == "allreduce":
        size = 4 if w.dtype in ("float32", "int32") else 8
        params.update(elements=w.bytes // size, dtype=w.dtype)
    elif w.kind == "alltoall":
        params.update(block_bytes=w.bytes)
    else:
        raise ValueError(f"workload {w.kind!r} is not a collective")
    return params


def point_to_point_flows(topo: Topology, w: WorkloadSpec, seed: int) -> list[PlannedFlow]:
    """The flows of an incast or a permutation."""
    if w.kind == "incast":
        return incast_flows(topo, w)
    if w.kind == "permutation":
        return permutation_flows(topo, w, seed)
    raise ValueError(f"workload {w.kind!r} is a collective, not a set of flows")


def incast_flows(topo: Topology, w: WorkloadSpec) -> list[PlannedFlow]:
    """`senders` hosts -> one receiver, plus (when asked) a victim flow into the receiver's leaf."""
    hosts = [h.name for h in topo.hosts]
    receiver = w.receiver or hosts[0]
    if receiver not in hosts:
        raise ValueError(f"incast receiver {receiver!r} is not a host of {topo.name}")
    others = [h for h in hosts if h != receiver]
    victim = None
    if w.victim:
        leaf = leaf_of(topo, receiver)
        near = [h for h in others if leaf_of(topo, h) == leaf] or others
        victim_dst = near[0]
        victim_src = next((h for h in reversed(others) if h != victim_dst and leaf_of(topo, h) != leaf),
                          [h for h in others if h != victim_dst][-1])
        victim = PlannedFlow(victim_src, victim_dst, w.bytes, "victim")
        others = [h for h in others if h not in (victim_src,)]
    count = w.senders or len(others)
    if count > len(others):
        raise ValueError(f"incast of {count} senders needs {count + 1 + bool(victim)} hosts; {topo.name} has {len(hosts)}")
    # Senders from other leaves first: they cross the fabric and meet at the receiver's last hop.
    leaf = leaf_of(topo, receiver)
    ordered = [h for h in others if leaf_of(topo, h) != leaf] + [h for h in others if leaf_of(topo, h) == leaf]
    flows = [PlannedFlow(h, receiver, w.bytes, "incast") for h in ordered[:count]]
    return flows + ([victim] if victim else [])


def permutation_flows(topo: Topology, w: WorkloadSpec, seed: int) -> list[PlannedFlow]:
    """Every host sends to one other host and receives from one; crossing leaves where possible."""
    hosts = [h.name for h in topo.hosts]
    leaf = {h: leaf_of(topo, h) for h in hosts}            # asked for every draw
    rng = random.Random(seed)
    best = None
    for _ in range(2000):
        perm = hosts[:]
        rng.shuffle(perm)
        if any(a == b for a, b in zip(hosts, perm)):
            continue
        crossing = sum(leaf[a] != leaf[b] for a, b in zip(hosts, perm))
        if best is None or crossing > best[0]:
            best = (crossing, perm)
        if crossing == len(hosts):
            break
    if best is None:
        raise ValueError(f"no permutation of {len(hosts)} hosts without a host sending to itself")
    return [PlannedFlow(a, b, w.bytes) for a, b in zip(hosts, best[1])]
