"""A netsim case as uet-htsim's input: its topology file, its connection matrix and the options
of `htsim_uec` that carry the scenario's switch and transport settings.

`export_case(case)` refuses (`Unmappable`, naming the thing) whatever htsim_uec cannot express:
other topologies than a single-plane leaf-spine or fat-tree, collectives, the RoCE-style
baseline, faults other than spines slowed from the start, per-link settings that differ.

What maps (htsim_uec's own names on the right):

| netsim                                   | htsim_uec                                            |
|------------------------------------------|------------------------------------------------------|
| leaf-spine / fat-tree, host i on leaf j  | `-topo` file: Tiers 2 / 3, Podsize, Radix_Down/Up    |
| link rate_bps, delay_s                   | Downlink_speed_Gbps, Downlink_Latency_ns, -linkspeed |
| mtu_payload                              | -mtu (payload + htsim's 64-byte header)              |
| incast / permutation flows               | `-tm` lines `src->dst id N start 0 size BYTES`       |
| MRC (mode mrc), NSCC                     | UEC transport, sender CC (NSCC), its default         |
| num_evs                                  | -paths                                               |
| trim_threshold (trimming on)             | -q (htsim trims when its data queue is full)         |
| queue_depth (trimming off)               | -q with -disable_trim                                |
| ecn_threshold .. ecn_max_threshold       | -ecn LOW HIGH (packets)                              |
| switch_slow of N spines, share 0.25, t=0 | -failed N (2 tiers: the first N spines at 25 %)      |
| seed, horizon_s                          | -seed, -end (µs)                                     |
| (a choice: `balancer`)                   | -load_balancing_algo oblivious|bitmap|reps|mixed     |

(reps only with trimming on: htsim_uec's REPS exits at its first path timeout without it.)

With `settings="htsim"` the switch thresholds are left to htsim_uec (queue and trim point one
BDP, ECN from 20 % to 80 % of it): `HtsimDefaults` reads what it chose from its output.

With `sizes=netsim_packet_sizes()` htsim_uec's packets are as large as netsim's (data headers, a trimmed
packet, ACK, NACK; the payload stays): `-mtu` the payload plus netsim's data headers, `-trimsize`,
and the rest through the environment variables of a build with scripts/build-htsim.sh
--measurement-switches (`HtsimInputs.env`; a run whose output does not confirm them fails).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from experiments.scenario import Case
from experiments.switch_profiles import HTSIM_HEADER_BYTES
from topologies.model import TIER_CORE, TIER_LEAF, TIER_SPINE, Topology

BALANCERS = ("oblivious", "bitmap", "reps", "mixed")
DEFAULT_BALANCER = "mixed"               # htsim_uec's own default
SETTINGS = ("scenario", "htsim")         # switch thresholds: the scenario's, or htsim_uec's defaults
HTSIM_SLOWED_SHARE = 0.25                # -failed N runs links at this share of their rate
TOPOLOGY_FILE = "topology.topo"
MATRIX_FILE = "flows.cm"


@dataclass(frozen=True)
class PacketSizes:
    """Bytes of htsim_uec's packets around the payload: a data packet's headers, a trimmed data
    packet, an ACK, a NACK."""

    data_header: int
    trimmed: int
    ack: int
    nack: int

    def env(self) -> dict[str, str]:
        """The measurement switches' environment variables giving these sizes (the trimmed size is
        htsim_uec's own option, -trimsize)."""
        return {"MRC_DATA_HEADER_BYTES": str(self.data_header), "MRC_ACK_BYTES": str(self.ack),
                "MRC_NACK_BYTES": str(self.nack)}

    def text(self) -> str:
        """The sizes in words, as summaries and notes print them."""
        return (f"data headers {self.data_header}, trimmed {self.trimmed}, ACK {self.ack}, "
                f"NACK {self.nack} bytes")


def data_header_bytes(sizes: Optional[PacketSizes] = None) -> int:
    """Bytes of htsim_uec's data packet around the payload: its own header, or that of `sizes`."""
    return HTSIM_HEADER_BYTES if sizes is None else sizes.data_header


def netsim_packet_sizes() -> PacketSizes:
    """netsim's sizes (wire.packets.wire_size): headers and ICRC around a data payload, a trimmed
    data packet (its headers), a SACK, a NACK."""
    from wire import constants
    from wire.packets import CONTROL_BASE, DATA_OVERHEAD
    return PacketSizes(DATA_OVERHEAD, constants.DATA_HEADERS_LEN, CONTROL_BASE + constants.SACK_LEN,
                       CONTROL_BASE + constants.NACK_LEN)


class Unmappable(ValueError):
    """A setting of a case that htsim_uec cannot be given; names the setting and why."""


@dataclass
class HtsimInputs:
    """Everything htsim_uec needs for one case: the two files' text and the options."""

    topology_text: str
    matrix_text: str
    options: list[str]                   # htsim_uec's options, without -topo/-tm/-o
    hosts: list[str]                     # netsim host names, in htsim's node order
    flows: list                          # experiments.workloads.PlannedFlow, flow id i + 1
    notes: list[str] = field(default_factory=list)   # how settings were mapped, in words
    env: dict = field(default_factory=dict)          # the measurement switches' variables to run with

    def write(self, folder: Path) -> tuple[Path, Path]:
        """Write the topology and connection matrix into `folder`; return their paths."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        topo, matrix = folder / TOPOLOGY_FILE, folder / MATRIX_FILE
        topo.write_text(self.topology_text)
        matrix.write_text(self.matrix_text)
        return topo, matrix

    def argv(self, binary: str, folder: Path) -> list[str]:
        """The command line running these inputs (written in `folder`) with `binary`."""
        folder = Path(folder)
        return [binary, "-topo", str(folder / TOPOLOGY_FILE), "-tm", str(folder / MATRIX_FILE),
                "-o", str(folder / "logout.dat"), *self.options]


def export_case(case: Case, balancer: str = DEFAULT_BALANCER, settings: str = "scenario",
                sizes: Optional[PacketSizes] = None) -> HtsimInputs:
    """The htsim_uec inputs of `case`, or Unmappable naming what cannot be expressed; with `sizes`,
    its packets of those sizes (through the measurement switches: `HtsimInputs.env`)."""
    from experiments.transport_sizing import cable_delay, transport_config
    from experiments.workloads import point_to_point_flows, variant_topology
    if balancer not in BALANCERS:
        raise Unmappable(f"load balancer {balancer!r}: htsim_uec knows {', '.join(BALANCERS)}")
    if settings not in SETTINGS:
        raise Unmappable(f"switch settings {settings!r}: expected one of {', '.join(SETTINGS)}")
    transport = case.transport
    if transport.mode != "mrc":
        raise Unmappable(f"transport {transport.name!r} (mode {transport.mode}): htsim_uec runs the UEC "
                         "transport only; MRC (mode mrc) maps to it, the RoCE-style baseline does not")
    if transport.reroute_delay_s is not None:
        raise Unmappable(f"transport {transport.name!r}: reroute_delay_s (a converging control plane) has no "
                         "htsim_uec counterpart")
    if balancer == "reps" and not transport.trimming:
        raise Unmappable(f"transport {transport.name!r} (trimming off) with load balancer reps: htsim_uec's REPS "
                         "needs trimming (it stops at the first path timeout: 'REPS currently requires trimming "
                         "in this implementation'); the other balancers run drop-tail")
    workload = case.variant.workload
    if workload.kind not in ("incast", "permutation"):
        raise Unmappable(f"variant {case.variant.label!r}: workload {workload.kind} is a collective (messages "
                         "that wait on each other); htsim_uec is given independent flows: incast or permutation")
    topo = variant_topology(case.variant)
    fabric = FabricShape.of(topo)
    config = transport_config(case, topo)
    link = _uniform_link(topo)
    notes: list[str] = []
    header = data_header_bytes(sizes)
    options = ["-seed", str(case.scenario.seed), "-end", str(max(1, math.ceil(case.scenario.horizon_s * 1e6))),
               "-linkspeed", f"{fabric.host_rate_bps / 1e6:.0f}", "-mtu", str(config.mtu_payload + header),
               "-paths", str(config.num_evs), "-load_balancing_algo", balancer]
    if sizes is not None:
        options += ["-trimsize", str(sizes.trimmed)]
        notes.append(f"packet sizes: {sizes.text()} (the measurement switches' build)")
    if not transport.trimming:
        options.append("-disable_trim")
    if settings == "scenario":
        options += _switch_options(link, transport.trimming, notes)
    else:
        notes.append("switch thresholds: htsim_uec's defaults (queue one BDP, ECN 20 %..80 % of it)")
    failed = _slowed_spines(case, topo, fabric)
    if failed:
        options += ["-failed", str(failed)]
        notes.append(f"{failed} spine(s) at {HTSIM_SLOWED_SHARE:.0%} from the start: -failed {failed}")
    flows = point_to_point_flows(topo, workload, case.scenario.seed)
    index = {host: i for i, host in enumerate(fabric.hosts)}
    lines = [f"Nodes {len(fabric.hosts)}", f"Connections {len(flows)}"]
    lines += [f"{index[f.src]}->{index[f.dst]} id {i + 1} start 0 size {f.nbytes}" for i, f in enumerate(flows)]
    topology_text = fabric.topology_text(cable_delay(case))
    return HtsimInputs(topology_text, "\n".join(lines) + "\n", options, list(fabric.hosts), flows, notes,
                       {} if sizes is None else sizes.env())


def _uniform_link(topo: Topology):
    """The one setting every link shares (htsim_uec takes one queue size and one ECN ramp)."""
    keys = ("queue_depth", "trim_threshold", "ecn_threshold", "ecn_max_threshold")
    first = topo.links[0]
    for link in topo.links[1:]:
        for key in keys:
            if getattr(link, key) != getattr(first, key):
                raise Unmappable(f"link {link.label}: {key} {getattr(link, key)} differs from {first.label}'s "
                                 f"{getattr(first, key)}; htsim_uec takes one value for every queue")
    return first


def _switch_options(link, trimming: bool, notes: list[str]) -> list[str]:
    """-q and -ecn for the scenario's thresholds (packets)."""
    queue = link.trim_threshold if trimming else link.queue_depth
    low, high = link.ecn_threshold, link.ecn_ramp_top
    if high > queue:
        notes.append(f"ECN ramp top {high} above the queue of {queue} packets: capped at {queue}")
        high = queue
    low = min(low, high)
    notes.append(f"queue {queue} packets ({'trim point' if trimming else 'drop-tail'}), ECN ramp {low}..{high}")
    return ["-q", str(queue), "-ecn", str(low), str(high)]


def _slowed_spines(case: Case, topo: Topology, fabric: "FabricShape") -> int:
    """How many spines the case's faults slow (htsim_uec's -failed), refusing any other fault."""
    slowed = set()
    for fault in case.variant.faults:
        where = f"variant {case.variant.label!r}: fault {fault.label}"
        if fault.kind != "switch_slow":
            raise Unmappable(f"{where}: htsim_uec can only slow spines from the start (-failed N); "
                             f"{fault.kind} has no counterpart")
        if fault.at.fraction is not None or (fault.at.seconds or 0.0) != 0.0:
            raise Unmappable(f"{where}: htsim_uec slows links for the whole run; this fault starts later")
        if fault.repair_after_s is not None:
            raise Unmappable(f"{where}: repair_after_s: htsim_uec's slowed links stay slow")
        if not math.isclose(fault.share, HTSIM_SLOWED_SHARE):
            raise Unmappable(f"{where}: share {fault.share:g}: htsim_uec slows links to {HTSIM_SLOWED_SHARE:g} "
                             "of their rate only")
        if fabric.tiers != 2:
            raise Unmappable(f"{where}: htsim_uec's -failed slows whole spines on two tiers only; "
                             f"{topo.name} has {fabric.tiers}")
        if fault.switch != "auto" and (not topo.is_switch(fault.switch)
                                       or topo.switch(fault.switch).tier != TIER_SPINE):
            raise Unmappable(f"{where}: {fault.switch} is not a spine of {topo.name}")
        slowed.add(fault.switch)             # "auto" is one spine, the busiest, however often named
    if "auto" in slowed and len(slowed) > 1:
        raise Unmappable(f"variant {case.variant.label!r}: slowed spines named and 'auto' together; 'auto' may be "
                         "one of the named ones, so how many are slow is not known before the run: name them all")
    return len(slowed)                       # the spines are alike: which ones does not matter to htsim


@dataclass(frozen=True)
class FabricShape:
    """A single-plane leaf-spine (2 tiers) or fat-tree (3 tiers) as htsim_uec describes one."""

    tiers: int
    hosts: tuple                 # host names in htsim's node order (leaf by leaf, pod by pod)
    hosts_per_leaf: int
    leaves_per_pod: int
    uplinks_per_leaf: int        # spines (2 tiers) or aggregation switches per pod (3 tiers)
    spines_down: int             # a spine's (aggregation switch's) links to leaves
    agg_up: int                  # 3 tiers: an aggregation switch's links to cores
    core_down: int               # 3 tiers: a core's links to aggregation switches
    host_rate_bps: int
    fabric_rate_bps: int

    @classmethod
    def of(cls, topo: Topology) -> "FabricShape":
        """The shape of `topo`, or Unmappable saying what htsim_uec's fat-tree cannot be."""
        if len(topo.planes) != 1:
            raise Unmappable(f"topology {topo.name}: {len(topo.planes)} planes; this htsim_uec build "
                             "runs one plane only (it stops at -planes above 1)")
        tiers = {s.tier for s in topo.switches}
        if tiers not in ({TIER_LEAF, TIER_SPINE}, {TIER_LEAF, TIER_SPINE, TIER_CORE}):
            raise Unmappable(f"topology {topo.name}: htsim_uec builds leaf-spines and 3-tier fat-trees; "
                             f"this one has tiers {sorted(tiers)}")
        by_tier = {t: [s.name for s in topo.switches if s.tier == t] for t in tiers}
        leaves = by_tier[TIER_LEAF]
        hosts_of = {leaf: [] for leaf in leaves}
        for host in topo.hosts:
            nics = topo.host_nics(host.name)
            if len(nics) != 1:
                raise Unmappable(f"host {host.name}: {len(nics)} NICs; htsim_uec's hosts have one per plane")
            hosts_of[nics[0].switch].append(host.name)
        per_leaf = {len(h) for h in hosts_of.values()}
        if len(per_leaf) != 1:
            raise Unmappable(f"topology {topo.name}: leaves hold {sorted(per_leaf)} hosts; htsim_uec's all hold "
                             "the same number")
        up = {leaf: [e.node for e in topo.neighbors(leaf) if topo.is_switch(e.node)] for leaf in leaves}
        pods: list[list[str]] = []           # leaves sharing their uplink switches, in switch order
        for leaf in leaves:
            pod = next((p for p in pods if set(up[p[0]]) == set(up[leaf])), None)
            if pod is None:
                pods.append([leaf])
            else:
                pod.append(leaf)
        if len({len(p) for p in pods}) != 1:
            raise Unmappable(f"topology {topo.name}: pods of unequal size")
        if (len(tiers) == 2) != (len(pods) == 1):
            raise Unmappable(f"topology {topo.name}: a 2-tier fabric must join every leaf to every spine")
        spine = by_tier[TIER_SPINE][0]
        spines_down = sum(topo.switch(e.node).tier == TIER_LEAF for e in topo.neighbors(spine)
                          if topo.is_switch(e.node))
        agg_up = core_down = 0
        if len(tiers) == 3:
            agg_up = sum(topo.is_switch(e.node) and topo.switch(e.node).tier == TIER_CORE for e in topo.neighbors(spine))
            core_down = len(topo.neighbors(by_tier[TIER_CORE][0]))
        rates = {"host": set(), "fabric": set()}
        for link in topo.links:
            rates["host" if topo.is_host(link.a) or topo.is_host(link.b) else "fabric"].add(link.rate_bps)
        for kind, seen in rates.items():
            if len(seen) != 1:
                raise Unmappable(f"topology {topo.name}: {kind} links at several rates {sorted(seen)}")
            rate = next(iter(seen))
            if rate % 1_000_000_000:
                raise Unmappable(f"topology {topo.name}: {kind} link rate {rate:g} bit/s; htsim_uec's topology file "
                                 "takes whole Gbit/s")
        order = tuple(h for pod in pods for leaf in pod for h in hosts_of[leaf])
        return cls(len(tiers), order, per_leaf.pop(), len(pods[0]), len(up[leaves[0]]), spines_down, agg_up,
                   core_down, next(iter(rates["host"])), next(iter(rates["fabric"])))

    def topology_text(self, delay_s: float) -> str:
        """htsim_uec's topology file (`-topo`): every cable `delay_s`, switches adding no latency."""
        ns = round(delay_s * 1e9)
        if ns < 1 or not math.isclose(ns, delay_s * 1e9, rel_tol=1e-6):
            raise Unmappable(f"link.delay_s {delay_s:g} s: htsim_uec's topology file takes whole nanoseconds, 1 or more")
        host_gbps, fabric_gbps = self.host_rate_bps // 10**9, self.fabric_rate_bps // 10**9
        podsize = self.hosts_per_leaf * self.leaves_per_pod
        lines = ["# written by mrc-testbed (experiments/backends/htsim/inputs.py)",
                 f"Nodes {len(self.hosts)}", f"Tiers {self.tiers}", f"Podsize {podsize}", "",
                 "Tier 0", f"Downlink_speed_Gbps {host_gbps}", f"Radix_Down {self.hosts_per_leaf}",
                 f"Radix_Up {self.uplinks_per_leaf}", f"Downlink_Latency_ns {ns}", "Switch_Latency_ns 0", "",
                 "Tier 1", f"Downlink_speed_Gbps {fabric_gbps}", f"Radix_Down {self.spines_down}"]
        if self.tiers == 3:
            lines += [f"Radix_Up {self.agg_up}"]
        lines += [f"Downlink_Latency_ns {ns}", "Switch_Latency_ns 0"]
        if self.tiers == 3:
            lines += ["", "Tier 2", f"Downlink_speed_Gbps {fabric_gbps}", f"Radix_Down {self.core_down}",
                      f"Downlink_Latency_ns {ns}", "Switch_Latency_ns 0"]
        return "\n".join(lines) + "\n"
