"""The mininet backend: a case on the real testbed, in real time.

Brings the variant's topology up with `testbed.network.TestbedNetwork` (model or BMv2 target,
static tables from the controller; the emulated converging control plane when the transport asks
for rerouting), writes one job file per host (host_agent/job.py) and starts `host_agent.agent` in
every host, all starting together. Faults act on the live network: links go down with
`ip link`, port faults are written to `MrcIngress.port_fault` over P4Runtime, a killed switch's
process is ended. The agents' JSON-lines logs become the case record.

A fault given as a share of the workload ("30%") starts when the agents' goodput records (flushed
every 0.2 s) add up to that share of the workload's bytes. Limits: collectives only (all-reduce,
all-to-all: one agent per host); link rates above what the Python model forwards are capped (a
note in the record says so).
"""
from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Callable

from p4.v1 import p4runtime_pb2

from controller.entries import TableEntry
from experiments import faults as F
from experiments.backends.netsim_backend import busiest_targets, p4_ecmp
from experiments.record import CaseRecord, FaultEvent, FlowRecord, LinkRecord
from experiments.scenario import Case
from experiments.workloads import COLLECTIVES, collective_flows, variant_topology
from topologies.model import DEFAULT_RATE_BPS, Topology
from topologies.paths import host_paths

log = logging.getLogger("mrc.experiments")
REPO = Path(__file__).resolve().parents[2]
START_DELAY_S = 3.0              # agents open their NICs, then start the workload together
PORT_FAULT = "MrcIngress.port_fault"
MODEL_MAX_RATE_BPS = DEFAULT_RATE_BPS


def agent_jobs(topo: Topology, case: Case, log_dir: Path, start_at: float, timeout: float) -> list[dict]:
    """One job per host: rank = host order, a connection to every other host, the collective."""
    w = case.variant.workload
    hosts = [h.name for h in topo.hosts]
    world = len(hosts)
    if w.kind == "allreduce":
        size = 4 if w.dtype in ("float32", "int32") else 8
        workload = {"kind": "allreduce", "elements": w.bytes // size, "dtype": w.dtype,
                    "chunk_bytes": w.chunk_bytes, "seed": case.scenario.seed}
    else:
        workload = {"kind": "alltoall", "block_bytes": w.bytes, "chunk_bytes": w.chunk_bytes,
                    "seed": case.scenario.seed}
    host_rate = min(link.rate_bps for link in topo.links if topo.is_host(link.a) or topo.is_host(link.b))
    config = {"line_rate_bps": float(host_rate), "seed": case.scenario.seed, **case.transport.params}
    jobs = []
    for rank, host in enumerate(hosts):
        peers = []
        for other, peer in enumerate(hosts):
            if other == rank:
                continue
            paths: dict[str, list[str]] = {}
            for path in host_paths(topo, host, peer):
                paths.setdefault(str(path.plane), []).append(str(path.address))
            peers.append({"rank": other, "qp": _qp(rank, other), "remote_qp": _qp(other, rank),
                          "nics": [_nic(n, own=False) for n in topo.host_nics(peer)], "paths": paths})
        jobs.append({"rank": rank, "world_size": world, "host": host,
                     "nics": [_nic(n, own=True) for n in topo.host_nics(host)], "peers": peers,
                     "transport": {"mode": case.transport.mode, "config": config}, "workload": workload,
                     "timeout": timeout, "goodput_interval": case.scenario.sample_interval_s,
                     "log": str(log_dir / f"{host}.jsonl"), "start_at": start_at})
    return jobs


def _qp(rank: int, peer: int) -> int:
    return 0x100 + rank * 256 + peer


def _nic(nic, own: bool) -> dict:
    data = {"plane": nic.plane, "mac": nic.mac, "address": str(nic.address)}
    if own:
        data["name"] = nic.ifname
    return data


class Progress:
    """The workload's progress, read live from the agents' event logs (their goodput records)."""

    def __init__(self, logs: list[Path], expected_bytes: int) -> None:
        self.logs = logs
        self.expected = max(1, expected_bytes)
        self._offsets = {path: 0 for path in logs}
        self.received = 0

    def fraction(self) -> float:
        """Share of the expected bytes the agents have reported received so far."""
        for path in self.logs:
            try:
                with open(path, "rb") as f:
                    f.seek(self._offsets[path])
                    chunk = f.read()
            except OSError:
                continue
            complete = chunk[:chunk.rfind(b"\n") + 1]
            self._offsets[path] += len(complete)
            for line in complete.splitlines():
                if b'"goodput"' in line:
                    try:
                        self.received += json.loads(line).get("rx_bytes", 0)
                    except ValueError:
                        pass
        return min(1.0, self.received / self.expected)


class LiveTarget:
    """The faults' view of a running TestbedNetwork (experiments.faults.FaultTarget)."""

    def __init__(self, net) -> None:
        self.net = net
        self.topo = net.topology
        self._faults: dict[tuple[str, int], TableEntry] = {}

    def set_link(self, a: str, b: str, up: bool) -> None:
        self.net.set_link(a, b, up)

    def set_port_fault(self, switch: str, port: int, drop_all: bool, drop_prob: float) -> None:
        client = self.net.clients[switch]
        key = (switch, port)
        old = self._faults.pop(key, None)
        if not drop_all and not drop_prob:
            if old is not None:
                client.write([(p4runtime_pb2.Update.DELETE, old)])
            return
        if drop_all:
            entry = TableEntry(PORT_FAULT, {"port": port}, "MrcIngress.fault_drop")
        else:
            entry = TableEntry(PORT_FAULT, {"port": port}, "MrcIngress.fault_drop_random",
                               {"drop_ppm": int(round(drop_prob * 1_000_000))})
        kind = p4runtime_pb2.Update.MODIFY if old is not None else p4runtime_pb2.Update.INSERT
        client.write([(kind, entry)])
        self._faults[key] = entry

    def switch_ports(self, switch: str) -> list[int]:
        return self.topo.ports_of(switch)

    def port_towards(self, switch: str, neighbour: str) -> int:
        if not self.topo.is_switch(switch):
            raise KeyError(f"{switch} is not a switch")
        return self.topo.port_towards(switch, neighbour)

    def set_switch_alive(self, switch: str, alive: bool) -> None:
        if alive:
            raise RuntimeError("restarting a killed switch is not supported on the mininet backend")
        self.net.switch(switch).stop_process()
        control = self.net.control_plane
        if control is not None:              # a routing protocol would see its sessions drop
            for link in self.topo.links_of(switch):
                control.link_down(link)


class MininetBackend:
    """Runs cases on Mininet with the model or BMv2 switches."""

    name = "mininet"

    def __init__(self, target: str = "model", run_root: Path | None = None) -> None:
        self.target = target
        self.run_root = Path(run_root) if run_root else Path("runs") / "experiments"

    def run_case(self, case: Case, progress: Callable[[float], None] = lambda f: None) -> CaseRecord:
        from testbed.network import TestbedNetwork
        scenario, variant, transport = case.scenario, case.variant, case.transport
        if variant.workload.kind not in COLLECTIVES:
            raise RuntimeError(f"{case.label}: the mininet backend runs collectives only "
                               f"({', '.join(COLLECTIVES)}); use --backend netsim for {variant.workload.kind}")
        topo, notes = self._topology(case)
        run_dir = (self.run_root / f"{scenario.name}-{int(time.time())}-{_slug(case.label)}").resolve()
        log_dir = run_dir / "agents"
        log_dir.mkdir(parents=True, exist_ok=True)
        record = CaseRecord(scenario.name, variant.label, transport.name, transport.mode,
                            f"{self.name}:{self.target}", scenario.seed, topo.name, len(topo.hosts),
                            variant.workload.kind, horizon=scenario.horizon_s,
                            sample_interval=scenario.sample_interval_s, notes=notes)
        flows = collective_flows(topo, variant.workload)
        received = Counter()
        for flow in flows:
            received[flow.dst] += flow.nbytes
        record.flows = [FlowRecord("*", host, nbytes, "data") for host, nbytes in received.items()]
        net = TestbedNetwork(topo, target=self.target, run_dir=run_dir,
                             convergence_delay=transport.reroute_delay_s,
                             progress=lambda line: log.info("%s", line))
        procs: dict[str, subprocess.Popen] = {}
        timers: list[threading.Timer] = []
        try:
            net.start()
            start_at = time.time() + START_DELAY_S
            jobs = agent_jobs(topo, case, log_dir, start_at, scenario.horizon_s)
            for job in jobs:
                path = log_dir / f"{job['host']}.job.json"
                path.write_text(json.dumps(job, indent=1))
                procs[job["host"]] = net.popen(
                    job["host"], [sys.executable, "-m", "host_agent.agent", "--job", str(path)],
                    stdout=subprocess.DEVNULL, stderr=open(log_dir / f"{job['host']}.stderr", "wb"),
                    cwd=str(REPO))
            target = LiveTarget(net)
            timers, pending = self._schedule_faults(case, topo, target, record, start_at)
            live = Progress([Path(job["log"]) for job in jobs], sum(f.nbytes for f in flows))

            def poll() -> float:
                frac = live.fraction()
                for item in [p for p in pending if p[0] <= frac]:
                    pending.remove(item)
                    timers.extend(self._start_actions(item[1], time.time(), target, record, start_at))
                return frac

            self._wait(procs, start_at, scenario.horizon_s, progress, poll)
            self._read_counters(net, topo, record)
            if net.control_plane is not None:
                mono_start = time.monotonic() - (time.time() - start_at)
                record.reroutes = [r.done_at - mono_start for r in net.control_plane.history]
                record.notes += net.control_plane.errors
        finally:
            for timer in timers:
                timer.cancel()
            for proc in procs.values():
                if proc.poll() is None:
                    proc.terminate()
                    try:
                        proc.wait(5)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait(5)
            remaining = net.stop()
            if remaining:
                record.notes.append(f"left behind after tear-down: {', '.join(map(str, remaining))}")
        self._read_logs(record, jobs, start_at, procs)
        progress(1.0)
        return record

    # --- set-up -----------------------------------------------------------------------------------
    def _topology(self, case: Case) -> tuple[Topology, list[str]]:
        topo = variant_topology(case.variant)
        notes = []
        fastest = max(link.rate_bps for link in topo.links)
        if self.target == "model" and fastest > MODEL_MAX_RATE_BPS:
            import dataclasses
            links = [dataclasses.replace(link, rate_bps=min(link.rate_bps, MODEL_MAX_RATE_BPS)) for link in topo.links]
            topo = Topology(topo.name, topo.hosts, topo.switches, links).validate()
            notes.append(f"link rates capped at {MODEL_MAX_RATE_BPS / 1e6:g} Mbit/s for the Python switch model "
                         f"(the scenario asks for {fastest / 1e6:g} Mbit/s)")
        return topo, notes

    def _schedule_faults(self, case: Case, topo: Topology, target: LiveTarget, record: CaseRecord,
                         start_at: float) -> tuple[list[threading.Timer], list]:
        """Start timers for time-triggered faults; return them and the (fraction, actions) of
        progress-triggered ones."""
        timers, pending, auto = [], [], None
        for fault in case.variant.faults:
            link, switch = None, None
            if F.needs_link(fault):
                if fault.link == "auto":
                    auto = auto or busiest_targets(case, topo, p4_ecmp)
                link = auto[0] if fault.link == "auto" else fault.link
            else:
                if fault.switch == "auto":
                    auto = auto or busiest_targets(case, topo, p4_ecmp)
                switch = auto[1] if fault.switch == "auto" else fault.switch
            actions = F.plan_actions(fault, link, switch, case.scenario.horizon_s)
            if fault.at.fraction is not None:
                pending.append((fault.at.fraction, actions))
            else:
                timers += self._start_actions(actions, start_at + fault.at.seconds, target, record, start_at)
        return timers, pending

    @staticmethod
    def _start_actions(actions: list, begin: float, target: LiveTarget, record: CaseRecord,
                       start_at: float) -> list[threading.Timer]:
        """Timers running `actions` at their offsets from the UNIX time `begin`."""
        timers = []
        for action in actions:
            def fire(action=action) -> None:
                try:
                    action.apply(target)
                    record.faults.append(FaultEvent(time.time() - start_at, action.what, action.target,
                                                    action.breaks))
                except Exception as error:        # noqa: BLE001 - reported in the record
                    record.notes.append(f"fault {action.what} on {action.target} failed: {error}")

            timer = threading.Timer(max(0.0, begin + action.offset - time.time()), fire)
            timer.daemon = True
            timer.start()
            timers.append(timer)
        return timers

    @staticmethod
    def _wait(procs: dict, start_at: float, horizon: float, progress, poll: Callable[[], float]) -> None:
        """Until every agent has exited (or well past the horizon), follow the workload's progress."""
        deadline = start_at + horizon + 15.0
        while time.time() < deadline:
            if all(p.poll() is not None for p in procs.values()):
                return
            progress(poll())
            for proc in procs.values():
                if proc.poll() is None:
                    try:
                        proc.wait(0.2)
                    except subprocess.TimeoutExpired:
                        pass
                    break

    # --- results ------------------------------------------------------------------------------------
    @staticmethod
    def _read_counters(net, topo: Topology, record: CaseRecord) -> None:
        totals: Counter = Counter()
        for switch in topo.switches:
            if not net.switch(switch.name).alive():
                continue
            try:
                counters = net.counters(switch.name)
            except Exception as error:           # noqa: BLE001 - a killed switch cannot answer
                record.notes.append(f"counters of {switch.name}: {error}")
                continue
            for name, cells in counters.items():
                short = name.split(".")[-1]
                totals[short] += sum(v.packets for v in cells.values())
            tx = counters.get("MrcEgress.tx", {})
            for port in topo.ports_of(switch.name):
                far = topo.neighbor(switch.name, port)
                if topo.is_switch(far.node):
                    value = tx.get(port)
                    record.links.append(LinkRecord(f"{switch.name}->{far.node}", topo.link_at(switch.name, port).rate_bps,
                                                   value.bytes if value else 0))
        record.switch_stats = dict(totals)
        record.switch_stats["fault_drops"] = totals.get("fault_drops", 0)

    @staticmethod
    def _read_logs(record: CaseRecord, jobs: list[dict], start_at: float, procs: dict) -> None:
        from testbed.transfer import read_events
        interval = record.sample_interval
        bins: dict[str, Counter] = {}
        stats: Counter = Counter()
        finished, exact, end = [], True, 0.0
        for job in jobs:
            host = job["host"]
            per_bin = bins.setdefault(host, Counter())
            result = None
            for r in read_events(Path(job["log"])):
                t = r.get("t", start_at) - start_at
                kind = r.get("kind")
                if kind == "goodput":
                    per_bin[max(0, int(t / interval))] += r.get("rx_bytes", 0)
                elif kind in ("ev_state", "ev_backup"):
                    record.ev_events.append({**r, "t": t, "host": host})
                elif kind == "result":
                    result = r
                    if r.get("ok"):
                        finished.append(t)
                elif kind == "counters":
                    transport = r.get("transport", {})
                    stats.update({k: v for k, v in transport.items() if isinstance(v, (int, float))})
                end = max(end, t)
            code = procs[host].returncode if host in procs else None
            if result is None or not result.get("ok") or code != 0:
                exact = False
                record.notes.append(f"{host}: agent exit {code}, result {result.get('detail') if result else 'none'}")
        last = max((max(b, default=0) for b in bins.values()), default=0)
        cumulative = {h: 0 for h in bins}
        flow_hosts = [f.dst for f in record.flows]
        record.samples = [[0.0, [0 for _ in flow_hosts]]]
        for k in range(last + 1):
            for h in bins:
                cumulative[h] += bins[h].get(k, 0)
            record.samples.append([(k + 1) * interval, [cumulative.get(h, 0) for h in flow_hosts]])
        for flow in record.flows:
            flow.received_bytes = cumulative.get(flow.dst, 0)
        record.completed = exact and len(finished) == len(jobs)
        record.bit_exact = exact
        record.completion_time = max(finished) if record.completed else None
        record.end = record.completion_time if record.completed else max(end, record.horizon)
        record.transport_stats = dict(stats)
        record.app_missing = 0 if record.completed else sum(1 for _ in jobs) - len(finished)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")[:40]
