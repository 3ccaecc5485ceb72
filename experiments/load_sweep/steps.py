"""The load steps of a sweep on a running network: what each sender offers, and the bottleneck
switch's counters read before and after each step.

Open-loop senders (`testbed.loadgen`, no congestion control) offer a fixed share of the bottleneck's
rate for `step_s`; the bottleneck switch's P4 counters are read (`TestbedNetwork.counters`) before
and after each step: `MrcIngress.rx` of the senders' ports (what was offered), `trimmed`,
`ecn_marked` and `tx` of the bottleneck port, and its `queue_depth_seen` histogram (docs/design.md,
the switch contract). The offered load on the x axis is measured (bytes in / (rate x time)), not
the one asked for.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from experiments.load_sweep.sweep_file import SweepError, SweepSpec, paths_through_bottleneck
from pipeline_contract import names
from testbed.loadgen import run_generators
from topologies.model import Topology
from topologies.paths import host_paths

FRAME_OVERHEAD = 102 + 4        # headers before the payload, and the ICRC after it (wire.constants)
DRAIN_POLL_S = 0.05             # how often the bottleneck's tx counter is read while its queue drains
DRAIN_TIMEOUT_S = 10.0


@dataclass
class LoadStep:
    """One load step's measured figures at the bottleneck port."""

    asked_load: float
    offered_load: float            # measured: bytes the senders' ports received / (rate x elapsed)
    arrived: int                   # packets the bottleneck switch received from the senders
    trimmed: int
    ecn_marked: int
    tx: int
    depth_hist: list[int]          # queue_depth_seen cells of the bottleneck port (last: 31 or more)
    sender_late_max_s: float

    @property
    def trimmed_share(self) -> float:
        return self.trimmed / self.arrived if self.arrived else 0.0

    @property
    def ecn_share(self) -> float:
        return self.ecn_marked / self.arrived if self.arrived else 0.0

    def depth_quantile(self, q: float) -> int:
        """The depth bucket below which a share `q` of the counted packets saw the queue."""
        total = sum(self.depth_hist)
        if not total:
            return 0
        running = 0
        for depth, count in enumerate(self.depth_hist):
            running += count
            if running >= q * total:
                return depth
        return len(self.depth_hist) - 1

    @property
    def depth_mean(self) -> float:
        total = sum(self.depth_hist)
        return sum(d * c for d, c in enumerate(self.depth_hist)) / total if total else 0.0

    def as_record(self) -> dict:
        return {**dataclasses.asdict(self), "trimmed_share": self.trimmed_share, "ecn_share": self.ecn_share,
                "depth_mean": self.depth_mean, "depth_p50": self.depth_quantile(0.5),
                "depth_p99": self.depth_quantile(0.99)}


def sender_specs(spec: SweepSpec, topo: Topology, load: float) -> dict[str, dict]:
    """Each sender's load generator spec (testbed.loadgen.LoadSpec fields): its share of `load` x the
    bottleneck rate, over its paths that cross the bottleneck."""
    switch, towards = spec.bottleneck
    rate_bps = topo.link_between(switch, towards).rate_bps
    frame_bits = 8 * (spec.payload_bytes + FRAME_OVERHEAD)
    per_sender_pps = load * rate_bps / frame_bits / len(spec.senders)
    out = {}
    for sender in spec.senders:
        paths = paths_through_bottleneck(spec, topo, sender)
        if not paths:
            raise SweepError(f"no path from {sender} to {spec.receiver} crosses {switch}->{towards}")
        nic = paths[0].src_nic
        out[sender] = {"nic": nic.ifname, "src_mac": nic.mac, "src": str(nic.address),
                       "dst_mac": topo.host_nic(spec.receiver, nic.plane).mac,
                       "paths": [str(p.address) for p in paths if p.src_nic == nic],
                       "rate_pps": per_sender_pps, "duration_s": spec.step_s,
                       "payload_bytes": spec.payload_bytes}
    return out


def _ports_in(spec: SweepSpec, topo: Topology) -> list[int]:
    """The bottleneck switch's ports on which the senders' paths arrive."""
    switch = spec.bottleneck[0]
    ports = set()
    for sender in spec.senders:
        for path in host_paths(topo, sender, spec.receiver):
            hops = (sender, *path.switches)
            ports.update(topo.port_towards(switch, hops[i - 1]) for i, hop in enumerate(hops) if hop == switch and i)
    return sorted(ports)


def run_sweep(spec: SweepSpec, target: str, out_dir: Path,
              progress: Callable[[str], None] = print) -> list[LoadStep]:
    """Bring the topology up on `target`, run every load step, tear it down; the steps measured."""
    from testbed.network import TestbedNetwork
    topo = spec.topology_built()
    out_dir.mkdir(parents=True, exist_ok=True)
    steps = []
    with TestbedNetwork(topo, target=target, run_dir=out_dir / "run", progress=progress) as net:
        for load in spec.loads:
            step = _run_step(net, spec, topo, load, out_dir)
            progress(f"{target}: load {load:.2f} -> offered {step.offered_load:.2f}, trimmed "
                     f"{step.trimmed_share:.1%}, ECN {step.ecn_share:.1%}, depth p50 {step.depth_quantile(0.5)} "
                     f"p99 {step.depth_quantile(0.99)}")
            steps.append(step)
    return steps


def _run_step(net, spec: SweepSpec, topo: Topology, load: float, out_dir: Path) -> LoadStep:
    switch, towards = spec.bottleneck
    port = topo.port_towards(switch, towards)
    in_ports = _ports_in(spec, topo)
    before = _read(net, switch, port, in_ports)
    results = run_generators(net, sender_specs(spec, topo, load), out_dir)
    _wait_drained(net, switch, port)
    after = _read(net, switch, port, in_ports)
    delta = {k: _minus(after[k], before[k]) for k in after}
    rate_bps = topo.link_between(switch, towards).rate_bps
    elapsed = max(r["elapsed_s"] for r in results)
    return LoadStep(asked_load=load, offered_load=delta["rx"][1] * 8 / (rate_bps * elapsed) if elapsed else 0.0,
                    arrived=delta["rx"][0], trimmed=delta["trimmed"][0], ecn_marked=delta["ecn"][0],
                    tx=delta["tx"][0], depth_hist=[c[0] for c in delta["depth"]],
                    sender_late_max_s=max(r["late_max_s"] for r in results))


def _read(net, switch: str, port: int, in_ports: list[int]) -> dict:
    """The bottleneck's figures now: (packets, bytes) arrived from the senders, trimmed, marked and
    sent at `port`, and its depth cells."""
    counters = net.counters(switch)

    def cell(name: str, index: int) -> tuple[int, int]:
        value = counters.get(name, {}).get(index)
        return (value.packets, value.bytes) if value else (0, 0)

    arrived = [cell(names.RX, p) for p in in_ports]
    first = names.depth_cell(port, 0)
    return {"rx": (sum(a[0] for a in arrived), sum(a[1] for a in arrived)),
            "trimmed": cell(names.TRIMMED, port), "ecn": cell(names.ECN_MARKED, port), "tx": cell(names.TX, port),
            "depth": [cell(names.QUEUE_DEPTH_SEEN, c) for c in range(first, first + names.DEPTH_BUCKETS)]}


def _minus(a, b):
    if isinstance(a, list):
        return [_minus(x, y) for x, y in zip(a, b)]
    return tuple(x - y for x, y in zip(a, b))


def _wait_drained(net, switch: str, port: int) -> None:
    """Until the bottleneck port's tx counter stops moving (its queue is empty), or a timeout."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    last, still = None, 0
    while time.monotonic() < deadline and still < 3:
        value = net.counters(switch, port).get(names.TX, {}).get(port)
        now = value.packets if value else 0
        still = still + 1 if now == last else 0
        last = now
        time.sleep(DRAIN_POLL_S)
