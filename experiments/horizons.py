"""How long a case may run on a switch target: its horizon, stretched when the workload cannot
meet it there.

What a case is known to need is its workload's least duration on the target (`estimated_duration`:
the busiest host link at its rate, and on BMv2 the packet rate its switch processes forward) plus
its known delays (`known_delays`: a reroute and the backed-off timeout after it). A horizon shorter
than HORIZON_ROOM times that need is stretched (`horizon`), with a note for the case's record.
"""
from __future__ import annotations

from collections import Counter

from experiments.scenario import Case
from experiments.transport_sizing import transport_params
from experiments.workloads import COLLECTIVES, collective_flows, point_to_point_flows
from host_agent.transport.config import TransportConfig
from topologies.model import Topology

# BMv2 is CPU-bound here, at about BMV2_SWITCH_PPS packets/s summed over all its switch processes
# (failover's RoCE + reroute took 4.7 s at 5, 10 and 20 Mbit/s alike).
BMV2_SWITCH_PPS = 8000          # measured: packets/s all BMv2 processes together forward here
HORIZON_STRETCH = 3.0           # a horizon too short for the target becomes this many estimated durations
HORIZON_ROOM = 2.0              # (plus the case's known delays) a horizon is too short below this many
PATH_SWITCHES = 3               # leaf, spine, leaf: the switches a packet crosses on most paths
PACKET_PAYLOAD = 1024           # bytes of data per MRC packet (its MTU payload)


def horizon(case: Case, topo: Topology, target: str) -> tuple[float, str | None]:
    """The horizon of `case` on `target`, and a note when it had to be stretched.

    What the case is known to need: the workload's least duration there (its estimated duration on
    the capped links, or through BMv2's packet rate; a time-triggered fault starting later counts
    from that start), plus its known delays (`known_delays`: a reroute and the backed-off timeout
    after it). A horizon_s shorter than HORIZON_ROOM times that duration plus the delays becomes
    HORIZON_STRETCH times the duration plus the delays, so that every case can complete on a slow
    target, faults and retransmissions included, and the comparison stays meaningful; the note says
    so. (With 1.25 times the duration as the mark, the quick failover on BMv2 at 2 Mbit/s, 3.15 s
    at least, kept its 4 s horizon: MRC, slowed by the dead link, needed 3.96 s and was cut at 4.0
    s in 3 of 4 runs; RoCE + reroute was cut while delivering at full rate.)"""
    asked = case.scenario.horizon_s
    least = estimated_duration(case, topo, target)
    if least is None:
        return asked, None
    need, why = least
    starts = [f.at.seconds for f in case.variant.faults if f.at.seconds is not None]
    if starts and max(starts) > need:
        need, why = max(starts), f"a fault starts at {max(starts):g} s"
    delays, said = known_delays(case, topo)
    if HORIZON_ROOM * need + delays <= asked:
        return asked, None
    stretched = round(HORIZON_STRETCH * need + delays, 1)
    return stretched, (f"horizon stretched on {target} here from {asked:g} s to {stretched:g} s: "
                       f"the workload needs about {need:.2f} s ({why})" + (f", {said}" if said else ""))


def known_delays(case: Case, topo: Topology) -> tuple[float, str]:
    """Seconds a case is known to wait beyond its workload, and what for: a control plane that
    reroutes around a failure it notices waits `reroute_delay_s`, after which the baseline's
    timers, backed off while the path was dead, may wait up to their ceiling (`rto_max`) before
    they resend on the new route."""
    from experiments.faults import notifies_control_plane
    delay = case.transport.reroute_delay_s
    if delay is None or not any(notifies_control_plane(f) for f in case.variant.faults):
        return 0.0, ""
    rto_max = float(transport_params(case, topo).get("rto_max", TransportConfig.rto_max))
    return delay + rto_max, f"plus {delay:g} s until the reroute and up to {rto_max:g} s of backed-off timeout"


def estimated_duration(case: Case, topo: Topology, target: str) -> tuple[float, str] | None:
    """About how long the workload takes on `target` at best, with what sets it.

    The larger of: the busiest host link at its (capped) rate, and, on BMv2, every data
    packet and its acknowledgement crossing PATH_SWITCHES switches at BMV2_SWITCH_PPS."""
    w = case.variant.workload
    flows = (collective_flows(topo, w) if w.kind in COLLECTIVES
             else point_to_point_flows(topo, w, case.scenario.seed))
    into, out_of = Counter(), Counter()
    for flow in flows:
        into[flow.dst] += flow.nbytes
        out_of[flow.src] += flow.nbytes
    bounds = []
    for host in (into + out_of):
        rate = topo.host_rate_bps(host)
        busiest = max(into[host], out_of[host])
        bounds.append((busiest * 8 / rate, f"{busiest} bytes through {host}'s {rate / 1e6:g} Mbit/s link"))
    if target == "bmv2":
        packets = sum(-(-f.nbytes // PACKET_PAYLOAD) for f in flows)
        bounds.append((2 * packets * PATH_SWITCHES / BMV2_SWITCH_PPS,
                       f"{packets} data packets and their acknowledgements through ~{PATH_SWITCHES} BMv2 "
                       f"switches at ~{BMV2_SWITCH_PPS} packets/s (what BMv2 forwards on this machine)"))
    return max(bounds) if bounds else None
