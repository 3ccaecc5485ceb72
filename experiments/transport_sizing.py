"""What each host's transport is told in a case: its line rate, its packets' payload, timers sized
for both, and, where the scenario sets the fabric's cable delay, windows sized for its base RTT.

Every backend takes the transport's parameters from here (`transport_params`; the simulators the
whole configuration, `transport_config`, with the case's cable delay, `cable_delay`); the sizes follow
`host_agent.transport.sizing`. The payload of a case's packets is `mtu_payload(case)`, the one
place that says which of the scenario's keys wins. A flow's ideal completion is made of the hosts'
line rate and the fabric's base RTT (`line_rate_and_base_rtt`: complete when its sender saw it
acknowledged) or its path's one-way delay (`line_rate_and_one_way_delay`: when its last byte arrived).
"""
from __future__ import annotations

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
    """(the hosts' line rate in bit/s, the base RTT of the case's simulated fabric): what a flow's
    ideal completion is made of (`experiments.metrics.flows_over_ideal(record, *this)`)."""
    from experiments.workloads import variant_topology
    topo = variant_topology(case.variant)
    return float(topo.host_rate_bps()), network_base_rtt(case, topo, cable_delay(case))


def line_rate_and_one_way_delay(case: Case):
    """(the hosts' line rate in bit/s, a function of (sender, receiver) giving the propagation delay
    of the shortest path between them on the case's simulated fabric): what the ideal of a flow
    complete when its last byte arrived is made of (`experiments.metrics.flows_over_ideal(record,
    *this)`). No store-and-forward counted: a lower bound whatever the packets and link rates."""
    from experiments.workloads import variant_topology
    topo = variant_topology(case.variant)
    delay = cable_delay(case)
    hops: dict[str, dict[str, int]] = {}

    def one_way(src: str, dst: str) -> float:
        if src not in hops:
            hops[src] = links_from(topo, src)
        if dst not in hops[src]:
            raise ValueError(f"no path from {src} to {dst} in {topo.name}")
        return hops[src][dst] * delay
    return float(topo.host_rate_bps()), one_way


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
