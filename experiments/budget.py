"""What a case may ask of this machine: link rates, its horizon, and what each host's transport is told.

Both backends take the hosts' line rate, the transport's parameters and the collective's sizes from
here. On the Mininet backend, links whose rate is `auto` (or not given) run at the rate calibrated for
the switch target on this machine and the case's topology size (experiments/calibration.py: by its
agents and switches per core), a given rate is capped at it, and a
horizon the workload cannot meet there is stretched. Without a calibration the fixed caps of
MAX_RATE_BPS stand in. Every cap, stretch and fallback comes with a note for the case's record.
"""
from __future__ import annotations

import dataclasses
from collections import Counter

from experiments.calibration import RateSource, rate_source
from experiments.metrics import RECOVERY_WINDOW_S
from experiments.scenario import AUTO, Case
from host_agent.transport import sizing
from host_agent.transport.config import TransportConfig
from experiments.workloads import COLLECTIVES, collective_flows, point_to_point_flows, variant_topology
from topologies.model import DEFAULT_RATE_BPS, Topology

MODEL_MAX_RATE_BPS = DEFAULT_RATE_BPS
# The fallback when this machine has no calibration for a target (`mrc-testbed calibrate`): what each
# target forwarded on a 2-core machine where they were chosen.
# BMv2 is CPU-bound here, at about BMV2_SWITCH_PPS packets/s summed over all its switch processes
# (failover's RoCE + reroute took 4.7 s at 5, 10 and 20 Mbit/s alike), so 20 Mbit/s is already more
# than 4 switches forward at once; the cap keeps its queue rate limiter (packets/s) in a sane range.
MAX_RATE_BPS = {"model": MODEL_MAX_RATE_BPS, "bmv2": DEFAULT_RATE_BPS}
BMV2_SWITCH_PPS = 8000          # measured: packets/s all BMv2 processes together forward here
HORIZON_STRETCH = 3.0           # a horizon too short for the target becomes this many estimated durations
HORIZON_ROOM = 2.0              # (plus the case's known delays) a horizon is too short below this many
PATH_SWITCHES = 3               # leaf, spine, leaf: the switches a packet crosses on most paths
PACKET_PAYLOAD = 1024           # bytes of data per MRC packet (its MTU payload)
AGENT_SAMPLE_MIN_S = 0.005      # agents on Mininet record goodput at most this often


MININET_FRAME_MAX = 1500 + 14   # bytes of an Ethernet frame a veth carries (MTU 1500)


def transport_params(case: Case, topo: Topology, **extra) -> dict:
    """The transport configuration fields of a case's hosts: the hosts' line rate, the seed, the
    scenario's payload size (`link.mtu_payload`), timers no shorter than a few packets at that rate
    (`sizing.for_line_rate`), what the backend adds (`extra`), then the scenario's own overrides."""
    mtu = case.variant.mtu_payload
    sized = {} if mtu is None else {"mtu_payload": mtu}
    rate = float(topo.host_rate_bps())
    payload = case.transport.params.get("mtu_payload") or mtu or TransportConfig.mtu_payload
    timers = sizing.for_line_rate(rate, payload) if rate > 0 else {}
    return {"line_rate_bps": rate, "seed": case.scenario.seed, **sized, **timers, **extra,
            **case.transport.params}


def path_hops(topo: Topology) -> int:
    """Links a packet crosses from host to host on the longest shortest path: up every tier and down."""
    return 2 * max(1, len(topo.tiers()))


def network_base_rtt(case: Case, topo: Topology, delay_s: float) -> float:
    """The base RTT of the case's fabric: a full data packet up and down every tier, `delay_s` per
    cable, at the hosts' line rate, and its acknowledgement back."""
    from wire.packets import CONTROL_BASE, CONTROL_HEADER_LEN, Sack
    mtu = case.transport.params.get("mtu_payload") or case.variant.mtu_payload or TransportConfig.mtu_payload
    return sizing.base_rtt(path_hops(topo), delay_s, float(topo.host_rate_bps()), mtu,
                           CONTROL_BASE + CONTROL_HEADER_LEN[Sack])


def network_params(case: Case, topo: Topology, delay_s: float | None) -> dict:
    """Transport fields that follow the fabric's base RTT and BDP (`host_agent.transport.sizing`)
    when the scenario sets its cable delay (`link.delay_s`, the data-center form; NSCC's tuning
    for spraying only for MRC); nothing otherwise (the transport's defaults, tuned for the
    existing scenarios, stay). The scenario's transport `params` still override each of them."""
    if case.variant.delay_s is None or delay_s is None:
        return {}
    mtu = case.transport.params.get("mtu_payload") or case.variant.mtu_payload or TransportConfig.mtu_payload
    return sizing.for_network(float(topo.host_rate_bps()), network_base_rtt(case, topo, delay_s), mtu,
                              spraying=case.transport.mode == "mrc")


def check_mininet(case: Case) -> None:
    """Raise ScenarioError naming the first scenario key of `case` the Mininet backend cannot honour."""
    from experiments.scenario import ScenarioError
    from wire.packets import DATA_OVERHEAD
    path = case.scenario.path
    if case.variant.delay_s is not None:
        raise ScenarioError(path, "link.delay_s", f"{case.variant.delay_s:g} s: Mininet's links are veth pairs "
                            f"whose delay is the machine's, not set per cable; run it with the netsim backend")
    for i, fault in enumerate(case.variant.faults):
        if fault.kind == "switch_kill" and fault.repair_after_s is not None:
            raise ScenarioError(path, f"faults[{i}].repair_after_s", "a switch_kill fault is not repaired on the "
                                "mininet backend (a killed switch process is not restarted); run it with netsim")
    mtu = case.transport.params.get("mtu_payload") or case.variant.mtu_payload
    if mtu is not None and mtu + DATA_OVERHEAD > MININET_FRAME_MAX:
        raise ScenarioError(path, "link.mtu_payload", f"{mtu} bytes make data frames of {mtu + DATA_OVERHEAD} "
                            f"bytes, above the veth MTU ({MININET_FRAME_MAX}-byte frames): at most "
                            f"{MININET_FRAME_MAX - DATA_OVERHEAD} on Mininet")


def nic_backlog(topo: Topology) -> int:
    """Packets a host may hand its NIC beyond the line rate on Mininet: half the smallest trim threshold.

    Mininet's host links are veth pairs without a rate, so what the NIC clock lets a host queue
    in its NIC (transport default 16 packets, sized for netsim's NICs, which serialise) lands at
    once in the first switch's egress queue, which trims from 8: on the failover's leaf-spine
    that made 75 trims per run, 7-15 with 4, at the same goodput.
    """
    return max(1, min(link.trim_threshold for link in topo.links) // 2)


def agent_sample_interval(case: Case) -> float:
    """How often agents on Mininet record goodput: the scenario's sample interval, but no more often
    than AGENT_SAMPLE_MIN_S (every record is a JSON line written by a process that shares the
    machine's CPUs with the switches)."""
    return max(case.scenario.sample_interval_s, AGENT_SAMPLE_MIN_S)


RECOVERY_WINDOW_MESSAGES = 2    # messages a recovery window holds at least on Mininet


def recovery_window(case: Case, topo: Topology) -> float:
    """The averaging window of the time-to-recover metric on Mininet: metrics.RECOVERY_WINDOW_S,
    widened to RECOVERY_WINDOW_MESSAGES messages (`chunk_bytes`) at the hosts' rate. Goodput there
    is counted per packet and sampled every 5 ms, but a collective's goodput comes in bursts of its
    messages: over 8 packets (34 ms at 2 Mbit/s) the main experiment's MRC runs, whose goodput did
    not drop at all (6.5 Mbit/s the second before and after the kill), read as recovering in 58 ms
    and 2.2 s. Windows still slide by the 5 ms samples."""
    return max(RECOVERY_WINDOW_S, RECOVERY_WINDOW_MESSAGES * case.variant.workload.chunk_bytes * 8
               / topo.host_rate_bps())


def asks_auto(case: Case) -> bool:
    """Whether the case's links take the calibrated rate (`rate_bps: auto`, or no rate given)."""
    return case.variant.link.get("rate_bps", AUTO) == AUTO


def emulated_processes(case: Case, topo: Topology) -> int:
    """The processes that emulate `case` on `topo` on Mininet, what shares the CPUs and so what the
    calibrated rate depends on: a switch process per switch, and an agent per host for a
    collective, a pair of agents per flow otherwise (experiments/backends/agent_jobs.py)."""
    w = case.variant.workload
    agents = (len(topo.hosts) if w.kind in COLLECTIVES
              else 2 * len(point_to_point_flows(topo, w, case.scenario.seed)))
    return len(topo.switches) + agents


def machine_rate(target: str) -> RateSource:
    """What `auto` links of `target` run at on this machine: its calibration (a rate per topology
    size), else the fixed cap for every size, with a note."""
    return rate_source(target, MAX_RATE_BPS.get(target, MODEL_MAX_RATE_BPS))


def target_topology(case: Case, target: str, rate: RateSource | None = None) -> tuple[Topology, list[str]]:
    """The case's topology with link rates set to (`auto`) or capped at `rate`'s rate for the
    topology's size (default: what the calibration of `target` says, `machine_rate`), and the notes
    (a cap, a fallback, a stretched horizon) the case's record carries."""
    topo = variant_topology(case.variant)
    rate = (rate or machine_rate(target)).for_processes(emulated_processes(case, topo))
    notes = []
    fastest = max(link.rate_bps for link in topo.links)
    what = "the Python switch model" if target == "model" else "BMv2"
    if asks_auto(case):
        scale = rate.rate_bps / fastest           # a topology's own rate ratios are kept
        topo = _with_rates(topo, lambda r: max(1, int(round(r * scale))))
        if rate.note:
            notes.append(rate.note)
    elif fastest > rate.rate_bps:
        topo = _with_rates(topo, lambda r: min(r, rate.rate_bps))
        notes.append(f"link rates capped at {rate.rate_bps / 1e6:g} Mbit/s for {what} on this machine "
                     f"(the scenario asks for {fastest / 1e6:g} Mbit/s)")
        if rate.note:
            notes.append(rate.note)
    _, stretched = horizon(case, topo, target)
    if stretched:
        notes.append(stretched)
    return topo, notes


def _with_rates(topo: Topology, rate_of) -> Topology:
    links = [dataclasses.replace(link, rate_bps=rate_of(link.rate_bps)) for link in topo.links]
    return Topology(topo.name, topo.hosts, topo.switches, links).validate()


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
