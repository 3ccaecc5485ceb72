"""What each host's transport is told in a case: its line rate, its packets' payload, timers sized
for both, and, where the scenario sets the fabric's cable delay, windows sized for its base RTT.

Every backend takes the transport's parameters from here (`transport_params`; the simulators the
whole configuration, `transport_config`, with the case's cable delay, `cable_delay`); the sizes follow
`host_agent.transport.sizing`. The payload of a case's packets is `mtu_payload(case)`, the one
place that says which of the scenario's keys wins. A flow's ideal completion is made of the hosts'
line rate and the fabric's base RTT (`line_rate_and_base_rtt`: complete when its sender saw it
acknowledged; not a lower bound) or of its receiver's NIC rate and its path's one-way delay
(`line_rate_and_one_way_delay`: when its last byte arrived; a lower bound).
"""
from __future__ import annotations

from typing import Callable

from experiments.scenario import Case
from host_agent.transport import sizing
from host_agent.transport.config import TransportConfig
from topologies.model import Topology


def mtu_payload(case: Case) -> int:
    """Bytes of data per packet in `case`: the transport's own `params.mtu_payload`, else the
    scenario's `link.mtu_payload`, else the transport's default."""
    return case.transport.params.get("mtu_payload") or case.variant.mtu_payload or TransportConfig.mtu_payload


def transport_params(case: Case, topo: Topology, **extra) -> dict:
    """The transport configuration fields of a case's hosts: the hosts' line rate, the seed, the
    scenario's payload size (`link.mtu_payload`), timers no shorter than a few packets at that rate
    (`sizing.for_line_rate`), what the backend adds (`extra`), then the scenario's own overrides."""
    link_mtu = case.variant.mtu_payload
    sized = {} if link_mtu is None else {"mtu_payload": link_mtu}
    rate = float(topo.host_rate_bps())
    timers = sizing.for_line_rate(rate, mtu_payload(case)) if rate > 0 else {}
    return {"line_rate_bps": rate, "seed": case.scenario.seed, **sized, **timers, **extra,
            **case.transport.params}


def path_hops(topo: Topology) -> int:
    """Links a packet crosses from host to host on the longest shortest path: up every tier and down."""
    return 2 * max(1, len(topo.tiers()))


def network_base_rtt(case: Case, topo: Topology, delay_s: float) -> float:
    """The base RTT of the case's fabric: a full data packet up and down every tier, `delay_s` per
    cable, at the hosts' line rate, and its acknowledgement back."""
    from wire.packets import CONTROL_BASE, CONTROL_HEADER_LEN, Sack
    return sizing.base_rtt(path_hops(topo), delay_s, float(topo.host_rate_bps()), mtu_payload(case),
                           CONTROL_BASE + CONTROL_HEADER_LEN[Sack])


def network_params(case: Case, topo: Topology, delay_s: float | None) -> dict:
    """Transport fields that follow the fabric's base RTT and BDP (`host_agent.transport.sizing`)
    when the scenario sets its cable delay (`link.delay_s`, the data-center form; NSCC's tuning
    for spraying only for MRC); nothing otherwise (the transport's defaults, tuned for the
    existing scenarios, stay). The scenario's transport `params` still override each of them."""
    if case.variant.delay_s is None or delay_s is None:
        return {}
    return sizing.for_network(float(topo.host_rate_bps()), network_base_rtt(case, topo, delay_s),
                              mtu_payload(case), spraying=case.transport.mode == "mrc")


def cable_delay(case: Case) -> float:
    """The case's cable delay on a simulated fabric: its scenario's `link.delay_s`, else the
    simulation's CABLE_DELAY_S."""
    if case.variant.delay_s is not None:
        return case.variant.delay_s
    from simulation.networks import CABLE_DELAY_S      # here only: planning a case's faults loads no netsim
    return CABLE_DELAY_S


def transport_config(case: Case, topo: Topology) -> TransportConfig:
    """The endpoint configuration of a case on a simulated fabric (netsim; the htsim backend maps it):
    its mode and overrides, the NIC line rate, the seed, and, for a scenario that sets its cable
    delay, timers and windows that follow the fabric's base RTT and BDP (`network_params`)."""
    extra = network_params(case, topo, cable_delay(case))
    return TransportConfig(mode=case.transport.mode, **transport_params(case, topo, **extra))


def line_rate_and_base_rtt(case: Case) -> tuple[float, float]:
    """(the hosts' line rate in bit/s, the slowest host link; the base RTT of the case's simulated
    fabric): what crosscheck's ideal of a flow complete when its sender saw it acknowledged is made
    of (`experiments.metrics.flows_over_ideal(record, *this, acked=True)`).

    Not a lower bound: the base RTT is a full data packet's round trip over the longest path,
    store-and-forward at every hop included, where a bound has twice the nearest sender's one-way
    delay and one SACK's serialisation (`experiments.ideal_excess`, which prints the excess: on
    datacenter.yaml 1.369 µs a receiver whose nearest sender is across a spine, as in every case
    crosscheck runs there, 5.369 µs on the same leaf); and on a fabric with faster or several NICs a
    receiver's bytes take less than at the slowest host link. Kept for the figures measured with it
    (experiments/README.md, "completion over ideal")."""
    from experiments.workloads import variant_topology
    topo = variant_topology(case.variant)
    return float(topo.host_rate_bps()), network_base_rtt(case, topo, cable_delay(case))


def line_rate_and_one_way_delay(case: Case) -> tuple[Callable[[str], float], Callable[[str, str], float]]:
    """What the ideal of a flow complete when its last byte arrived is made of on the case's
    simulated fabric (`experiments.metrics.flows_over_ideal(record, *this)`): `receiver_rate_and_one_way_delay`
    of its topology and cable delay."""
    from experiments.workloads import variant_topology
    return receiver_rate_and_one_way_delay(variant_topology(case.variant), cable_delay(case))


def receiver_rate_and_one_way_delay(topo: Topology, delay_s: float
                                    ) -> tuple[Callable[[str], float], Callable[[str, str], float]]:
    """(a function of a receiver giving its total NIC rate in bit/s, the sum over its NICs' links,
    one a plane; a function of (sender, receiver) giving the propagation delay, `delay_s` a link,
    of the shortest path between them on `topo`, over any plane).

    A lower bound of when a receiver's last byte arrives, on any topology: no byte reaches it before
    the nearest sender's one-way delay, none faster than all its NICs together carry, and no
    store-and-forward, header or acknowledgement is counted."""
    hops: dict[str, dict[str, int]] = {}
    rates: dict[str, float] = {}

    def rate(dst: str) -> float:
        if dst not in rates:
            links = topo.links_of(dst) if topo.is_host(dst) else []
            if not links:
                raise ValueError(f"{dst} is no host with a link in {topo.name}")
            rates[dst] = float(sum(link.rate_bps for link in links))
        return rates[dst]

    def one_way(src: str, dst: str) -> float:
        if src not in hops:
            hops[src] = links_from(topo, src)
        if dst not in hops[src]:
            raise ValueError(f"no path from {src} to {dst} in {topo.name}")
        return hops[src][dst] * delay_s
    return rate, one_way


def links_from(topo: Topology, host: str) -> dict[str, int]:
    """Links crossed from `host` to every host it reaches on a shortest path (hosts are never transit)."""
    seen, frontier, reached = {host: 0}, [host], {}
    while frontier:
        ahead = []
        for node in frontier:
            for link in topo.links_of(node):
                far = link.other(node).node
                if far in seen:
                    continue
                seen[far] = seen[node] + 1
                if topo.is_host(far):
                    reached[far] = seen[far]
                else:
                    ahead.append(far)
        frontier = ahead
    return reached


def nic_backlog(topo: Topology) -> int:
    """Packets a host may hand its NIC beyond the line rate on Mininet: half the smallest trim threshold.

    Mininet's host links are veth pairs without a rate, so what the NIC clock lets a host queue
    in its NIC (transport default 16 packets, sized for netsim's NICs, which serialise) lands at
    once in the first switch's egress queue, which trims from 8: on the failover's leaf-spine
    that made 75 trims per run, 7-15 with 4, at the same goodput.
    """
    return max(1, min(link.trim_threshold for link in topo.links) // 2)
