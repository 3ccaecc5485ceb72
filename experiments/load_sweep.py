"""A load sweep through one bottleneck queue on Mininet: trimmed share, ECN-marked share and the queue
depth the pipeline saw, against the offered load (`experiments/trim-sweep.yaml`).

Open-loop senders (`testbed.loadgen`, no congestion control) offer a fixed share of the bottleneck's
rate for `step_s`; the bottleneck switch's P4 counters are read before and after each step:
`MrcIngress.rx` of the senders' ports (what was offered), `trimmed`, `ecn_marked` and `tx` of the
bottleneck port, and its `queue_depth_seen` histogram (docs/design.md, the switch contract). The
offered load on the x axis is measured (bytes in / (rate x time)), not the one asked for.

    spec = load_sweep_spec("experiments/trim-sweep.yaml")
    steps = run_sweep(spec, target="model", out_dir=Path("results/trim-sweep"))
    plot_sweep(spec, {"model": steps}, Path("results/trim-sweep/trim-sweep.png"))
"""
from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from experiments.scenario import LOAD_SWEEP
from pipeline_contract.names import (DEPTH_BUCKETS, ECN_MARKED, QUEUE_DEPTH_SEEN, RX, TRIMMED, TX,
                                     depth_cell)
from topologies import topology_from_spec
from topologies.model import Topology
from topologies.paths import host_paths

REPO = Path(__file__).resolve().parent.parent
SWEEP_LINK_KEYS = ("rate_bps", "queue_depth", "trim_threshold", "ecn_threshold", "ecn_max_threshold")
FRAME_OVERHEAD = 102 + 4        # headers before the payload, and the ICRC after it (wire.constants)
DRAIN_POLL_S = 0.05             # how often the bottleneck's tx counter is read while its queue drains
DRAIN_TIMEOUT_S = 10.0
READY_TIMEOUT_S = 30.0


class SweepError(ValueError):
    """A bad sweep file: the message names the file and the key."""


@dataclass(frozen=True)
class SweepSpec:
    """What to sweep: the topology and its links, who sends to whom through which queue, the loads."""

    name: str
    title: str
    topology: str
    link: dict
    senders: tuple[str, ...]
    receiver: str
    bottleneck: tuple[str, str]          # (switch, next node): the egress queue of `switch` towards it
    loads: tuple[float, ...]             # offered load as a share of the bottleneck's rate
    step_s: float
    payload_bytes: int

    def topology_built(self) -> Topology:
        """The topology with the sweep's link fields on every link."""
        topo = topology_from_spec(self.topology)
        links = [dataclasses.replace(link, **self.link) for link in topo.links]
        return Topology(topo.name, topo.hosts, topo.switches, links).validate()


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


# --- the sweep file ---------------------------------------------------------------------------

def load_sweep_spec(path: str | Path, quick: bool = False) -> SweepSpec:
    """Read a sweep file (`quick:` overrides loads and step_s); SweepError names what is wrong."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise SweepError(f"{path}: cannot read: {error.strerror or error}") from None
    except yaml.YAMLError as error:
        raise SweepError(f"{path}: not YAML: {error}") from None
    if not isinstance(raw, dict):
        raise SweepError(f"{path}: a sweep file is a mapping")
    if raw.get("kind") != LOAD_SWEEP:
        raise SweepError(f"{path}: kind must be {LOAD_SWEEP!r} (a sweep file), not {raw.get('kind')!r}"
                         + ("; scenarios run with `mrc-testbed run`" if "workload" in raw else ""))
    known = {"kind", "name", "title", "description", "topology", "link", "senders", "receiver", "bottleneck",
             "loads", "step_s", "payload_bytes", "quick"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise SweepError(f"{path}: unknown keys {unknown} (known: {sorted(known)})")
    if quick:
        extra = raw.get("quick") or {}
        bad = sorted(set(extra) - {"loads", "step_s"})
        if bad:
            raise SweepError(f"{path}: quick: only loads and step_s may be overridden, not {bad}")
        raw = {**raw, **extra}

    def need(key: str, kind, what: str):
        value = raw.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise SweepError(f"{path}: {key} must be {what}, not {value!r}")
        return value

    link = need("link", dict, "a mapping of link fields")
    bad = sorted(set(link) - set(SWEEP_LINK_KEYS))
    if bad:
        raise SweepError(f"{path}: link: unknown keys {bad} (known: {list(SWEEP_LINK_KEYS)})")
    loads = need("loads", list, "a list of loads (shares of the bottleneck's rate)")
    if not loads or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x <= 10 for x in loads):
        raise SweepError(f"{path}: loads must be numbers in (0, 10], not {loads!r}")
    def names(key: str, what: str, count: int | None = None) -> tuple[str, ...]:
        value = need(key, list, what)
        if not value or not all(isinstance(x, str) for x in value) or (count is not None and len(value) != count):
            raise SweepError(f"{path}: {key} must be {what}, not {value!r}")
        return tuple(value)

    payload = raw.get("payload_bytes", 1000)
    if not isinstance(payload, int) or isinstance(payload, bool) or not 1 <= payload <= 9000:
        raise SweepError(f"{path}: payload_bytes must be an integer in 1..9000, not {payload!r}")
    step = need("step_s", (int, float), "seconds")
    if not 0 < step <= 600:
        raise SweepError(f"{path}: step_s must be in (0, 600] seconds, not {step!r}")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(raw.get("name", ""))):
        raise SweepError(f"{path}: name must be letters, digits, '.', '_' or '-' (it names the results "
                         f"folder), not {raw.get('name')!r}")
    title = raw.get("title", raw.get("name"))
    spec = SweepSpec(name=need("name", str, "text"), title=str(title),
                     topology=need("topology", str, "a topology spec (e.g. dumbbell:2)"), link=dict(link),
                     senders=names("senders", "a list of hosts"), receiver=need("receiver", str, "a host"),
                     bottleneck=names("bottleneck", "[switch, next node]", count=2),
                     loads=tuple(float(x) for x in loads), step_s=float(step), payload_bytes=payload)
    _check_against_topology(path, spec)
    return spec


def _check_against_topology(path: Path, spec: SweepSpec) -> None:
    try:
        topo = spec.topology_built()
    except (ValueError, TypeError) as error:
        raise SweepError(f"{path}: topology/link: {error}") from None
    switch, towards = spec.bottleneck
    try:
        topo.link_between(switch, towards)
    except (KeyError, ValueError):
        raise SweepError(f"{path}: bottleneck: no link between {switch} and {towards} in {spec.topology}") from None
    if not topo.is_switch(switch):
        raise SweepError(f"{path}: bottleneck: {switch} is not a switch")
    for host in (*spec.senders, spec.receiver):
        if host not in {h.name for h in topo.hosts}:
            raise SweepError(f"{path}: no host {host!r} in {spec.topology}")
    if spec.receiver in spec.senders:
        raise SweepError(f"{path}: receiver {spec.receiver} is also a sender")
    try:
        for load in spec.loads:
            sender_specs(spec, topo, load)
    except (SweepError, ValueError) as error:
        raise SweepError(f"{path}: {error}") from None


# --- running it -------------------------------------------------------------------------------

def sender_specs(spec: SweepSpec, topo: Topology, load: float) -> dict[str, dict]:
    """Each sender's loadgen spec: its share of `load` x the bottleneck rate, over its paths that
    cross the bottleneck."""
    switch, towards = spec.bottleneck
    rate_bps = topo.link_between(switch, towards).rate_bps
    frame_bits = 8 * (spec.payload_bytes + FRAME_OVERHEAD)
    per_sender_pps = load * rate_bps / frame_bits / len(spec.senders)
    out = {}
    for sender in spec.senders:
        paths = [p for p in host_paths(topo, sender, spec.receiver)
                 if _crosses(p.switches, spec.receiver, switch, towards)]
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


def _crosses(switches: tuple[str, ...], receiver: str, a: str, b: str) -> bool:
    hops = (*switches, receiver)
    return any((x, y) == (a, b) for x, y in zip(hops, hops[1:]))


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
    results = _send(net, spec, topo, load, out_dir)
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
    client = net.clients[switch]
    rx = client.read_counter(RX)
    cells = client.read_counter(QUEUE_DEPTH_SEEN)
    first = depth_cell(port, 0)

    def one(name):
        v = client.read_counter(name, port).get(port)
        return (v.packets, v.bytes) if v else (0, 0)

    return {"rx": (sum(rx[p].packets for p in in_ports if p in rx), sum(rx[p].bytes for p in in_ports if p in rx)),
            "trimmed": one(TRIMMED), "ecn": one(ECN_MARKED), "tx": one(TX),
            "depth": [((cells[c].packets, cells[c].bytes) if c in cells else (0, 0))
                      for c in range(first, first + DEPTH_BUCKETS)]}


def _minus(a: Any, b: Any) -> Any:
    if isinstance(a, list):
        return [_minus(x, y) for x, y in zip(a, b)]
    return tuple(x - y for x, y in zip(a, b))


def _send(net, spec: SweepSpec, topo: Topology, load: float, out_dir: Path) -> list[dict]:
    """Start a loadgen per sender, let them go together, collect their reports."""
    procs = {}
    try:
        for sender, gen in sender_specs(spec, topo, load).items():
            path = out_dir / f"loadgen-{sender}.json"
            path.write_text(json.dumps(gen))
            procs[sender] = net.popen(sender, [sys.executable, "-m", "testbed.loadgen", str(path)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      cwd=str(REPO), text=True, bufsize=1)
        for sender, proc in procs.items():
            line = proc.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"loadgen on {sender} did not start: {line or proc.stderr.read().strip()}")
        for proc in procs.values():
            proc.stdin.write("go\n")
            proc.stdin.flush()
        reports = []
        for sender, proc in procs.items():
            line = proc.stdout.readline().strip()
            try:
                reports.append(json.loads(line))
            except json.JSONDecodeError:
                raise RuntimeError(f"loadgen on {sender} failed: {line or proc.stderr.read().strip()}") from None
        return reports
    finally:
        for proc in procs.values():
            net.stop_process(proc)


def _wait_drained(net, switch: str, port: int) -> None:
    """Until the bottleneck port's tx counter stops moving (its queue is empty), or a timeout."""
    client = net.clients[switch]
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    last, still = None, 0
    while time.monotonic() < deadline and still < 3:
        v = client.read_counter(TX, port).get(port)
        now = v.packets if v else 0
        still = still + 1 if now == last else 0
        last = now
        time.sleep(DRAIN_POLL_S)


# --- results and the figure -------------------------------------------------------------------

def save_steps(steps: list[LoadStep], path: Path, conditions: dict) -> None:
    """The steps as JSON, with the run's conditions (target, machine load, rate)."""
    path.write_text(json.dumps({"conditions": conditions, "steps": [s.as_record() for s in steps]}, indent=1))


def plot_sweep(spec: SweepSpec, by_target: dict[str, list[LoadStep]], path: Path) -> None:
    """Shares (left) and the queue depth seen (right) against the measured offered load, per target,
    with the trim threshold and the ECN ramp drawn."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    link = spec.topology_built().link_between(*spec.bottleneck)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = {"model": "-", "bmv2": "--"}
    for target, steps in by_target.items():
        x = [s.offered_load for s in steps]
        ls = styles.get(target, ":")
        left.plot(x, [s.trimmed_share for s in steps], "o" + ls, color="tab:red", label=f"trimmed ({target})")
        left.plot(x, [s.ecn_share for s in steps], "s" + ls, color="tab:blue", label=f"ECN-marked ({target})")
        right.plot(x, [s.depth_mean for s in steps], "o" + ls, color="tab:green", label=f"mean ({target})")
        right.plot(x, [s.depth_quantile(0.99) for s in steps], "^" + ls, color="tab:olive", label=f"p99 ({target})")
    left.set_xlabel("offered load (share of the bottleneck rate, measured)")
    left.set_ylabel("share of the packets arriving for the bottleneck")
    left.set_ylim(-0.02, 1.02)
    left.grid(alpha=0.3)
    left.legend(fontsize=8)
    right.axhline(link.trim_threshold, color="tab:red", lw=1, label=f"trim threshold {link.trim_threshold}")
    right.axhspan(link.ecn_threshold, max(link.ecn_ramp_top, link.ecn_threshold + 0.1), color="tab:blue",
                  alpha=0.12, label=f"ECN ramp {link.ecn_threshold}..{link.ecn_ramp_top}")
    right.set_xlabel("offered load (share of the bottleneck rate, measured)")
    right.set_ylabel("queue depth seen by the pipeline (packets)")
    right.grid(alpha=0.3)
    right.legend(fontsize=8)
    fig.suptitle(f"{spec.title}\n{spec.topology}, bottleneck {spec.bottleneck[0]}->{spec.bottleneck[1]} at "
                 f"{link.rate_bps / 1e6:g} Mbit/s, {spec.payload_bytes} B payloads, {spec.step_s:g} s a step",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
