"""The mininet backend: a case on the real testbed, in real time.

Brings the variant's topology up with `testbed.network.TestbedNetwork` (model or BMv2 target,
static tables from the controller; the emulated converging control plane when the transport asks
for rerouting), writes one job file per host (host_agent/job.py) and starts `host_agent.agent` in
every host, all starting together. Faults act on the live network: links go down with
`ip link`, port faults are written to `MrcIngress.port_fault` over P4Runtime, a killed switch's
process is ended. The agents' JSON-lines logs become the case record.

Collectives run one agent per host; incast and permutation run a two-rank transfer per flow (an
agent pair; a host may run several agents side by side). A fault given as a share of the workload
("30%") starts when the agents' goodput records add up to that share of the workload's bytes
(extrapolated at the rate so far, as the agents flush their logs every 50 ms). Link rates above what the Python model forwards are capped (a note in the record
says so). Goodput comes from the agents' records, which count whole messages (`chunk_bytes`), so
it is coarser than on netsim.
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

from pipeline_contract.entries import TableEntry
from pipeline_contract.names import FAULT_DROP, FAULT_DROP_RANDOM, PORT_CONFIG, PORT_FAULT, TRIM_NEVER, TX
from experiments import faults as F
from experiments.metrics import RECOVERY_WINDOW_S
from experiments.backends.netsim_backend import busiest_targets, p4_ecmp
from experiments.record import CaseRecord, FaultEvent, FlowRecord, LinkRecord
from experiments.scenario import Case
from experiments.workloads import COLLECTIVES, collective_flows, point_to_point_flows, variant_topology
from topologies.model import DEFAULT_RATE_BPS, Topology
from topologies.paths import host_paths

log = logging.getLogger("mrc.experiments")
REPO = Path(__file__).resolve().parents[2]
LOOKAHEAD_S = 0.1                # faults due within this long are timed by extrapolation (logs lag up to 50 ms)
START_DELAY_S = 3.0              # agents open their NICs, then start the workload together
FLOW_QP_BASE = 0x2000           # QPs of point-to-point flows (collectives use 0x100 + rank * 256 + peer)
MODEL_MAX_RATE_BPS = DEFAULT_RATE_BPS
# What each target forwards on this kind of machine (2 cores): link rates above are capped.
# BMv2 is CPU-bound here, at about BMV2_SWITCH_PPS packets/s summed over all its switch processes
# (failover's RoCE + reroute took 4.7 s at 5, 10 and 20 Mbit/s alike), so 20 Mbit/s is already more
# than 4 switches forward at once; the cap keeps its queue rate limiter (packets/s) in a sane range.
MAX_RATE_BPS = {"model": MODEL_MAX_RATE_BPS, "bmv2": DEFAULT_RATE_BPS}
BMV2_SWITCH_PPS = 8000          # measured: packets/s all BMv2 processes together forward here
AGENT_SAMPLE_MIN_S = 0.005      # agents on Mininet record goodput at most this often
HORIZON_STRETCH = 3.0           # a horizon too short for the target becomes this many estimated durations
PATH_SWITCHES = 3               # leaf, spine, leaf: the switches a packet crosses on most paths
PACKET_PAYLOAD = 1024           # bytes of data per MRC packet (its MTU payload)


def _workload_json(case: Case) -> dict:
    w = case.variant.workload
    if w.kind == "allreduce":
        size = 4 if w.dtype in ("float32", "int32") else 8
        return {"kind": "allreduce", "elements": w.bytes // size, "dtype": w.dtype,
                "chunk_bytes": w.chunk_bytes, "seed": case.scenario.seed}
    return {"kind": "alltoall", "block_bytes": w.bytes, "chunk_bytes": w.chunk_bytes, "seed": case.scenario.seed}


def _transport_json(topo: Topology, case: Case) -> dict:
    host_rate = min(link.rate_bps for link in topo.links if topo.is_host(link.a) or topo.is_host(link.b))
    config = {"line_rate_bps": float(host_rate), "nic_backlog_pkts": nic_backlog(topo), "seed": case.scenario.seed,
              **case.transport.params}
    return {"mode": case.transport.mode, "config": config}


def agent_sample_interval(case: Case) -> float:
    """How often agents record goodput: the scenario's sample interval, but no more often than
    AGENT_SAMPLE_MIN_S (every record is a JSON line written by a process that shares the
    machine's CPUs with the switches)."""
    return max(case.scenario.sample_interval_s, AGENT_SAMPLE_MIN_S)


def nic_backlog(topo: Topology) -> int:
    """Packets a host may hand its NIC beyond the line rate: half the smallest trim threshold.

    Mininet's host links are veth pairs without a rate, so what the NIC clock lets a host queue
    in its NIC (transport default 16 packets, sized for netsim's NICs, which serialise) lands at
    once in the first switch's egress queue, which trims from 8: on the failover's leaf-spine
    that made 75 trims per run, 7-15 with 4, at the same goodput.
    """
    return max(1, min(link.trim_threshold for link in topo.links) // 2)


def _peer(topo: Topology, host: str, peer: str, rank: int, qp: int, remote_qp: int) -> dict:
    paths: dict[str, list[str]] = {}
    for path in host_paths(topo, host, peer):
        paths.setdefault(str(path.plane), []).append(str(path.address))
    return {"rank": rank, "qp": qp, "remote_qp": remote_qp,
            "nics": [_nic(n, own=False) for n in topo.host_nics(peer)], "paths": paths}


def agent_jobs(topo: Topology, case: Case, log_dir: Path, start_at: float, timeout: float
               ) -> tuple[list[tuple[str, dict]], list[tuple[FlowRecord, Path]]]:
    """The agents to start, as (name, job) with the job's host in it, and the flows with the log of
    the agent that receives each.

    A collective runs one agent per host (rank = host order, a connection to every other host);
    incast and permutation run a pair of agents per flow (a two-rank transfer), so a host may run
    several agents side by side, each with its own QPs.
    """
    w = case.variant.workload
    common = {"transport": _transport_json(topo, case), "timeout": timeout,
              "goodput_interval": agent_sample_interval(case), "start_at": start_at}
    hosts = [h.name for h in topo.hosts]
    if w.kind in COLLECTIVES:
        jobs = []
        for rank, host in enumerate(hosts):
            peers = [_peer(topo, host, peer, other, _qp(rank, other), _qp(other, rank))
                     for other, peer in enumerate(hosts) if other != rank]
            jobs.append((host, {"rank": rank, "world_size": len(hosts), "host": host,
                                "nics": [_nic(n, own=True) for n in topo.host_nics(host)], "peers": peers,
                                "workload": _workload_json(case), "log": str(log_dir / f"{host}.jsonl"),
                                **common}))
        received = Counter()
        for flow in collective_flows(topo, w):
            received[flow.dst] += flow.nbytes
        flows = [(FlowRecord("*", host, received[host], "data"), log_dir / f"{host}.jsonl")
                 for host in hosts if received[host]]
        return jobs, flows
    jobs, flows = [], []
    for index, flow in enumerate(point_to_point_flows(topo, w, case.scenario.seed)):
        qps = (FLOW_QP_BASE + 2 * index, FLOW_QP_BASE + 2 * index + 1)
        workload = {"kind": "transfer", "src": 0, "dst": 1, "bytes": flow.nbytes, "chunk_bytes": w.chunk_bytes,
                    "seed": case.scenario.seed}
        for rank, (host, peer) in enumerate(((flow.src, flow.dst), (flow.dst, flow.src))):
            name = f"{host}-flow{index}-{'tx' if rank == 0 else 'rx'}"
            jobs.append((name, {"rank": rank, "world_size": 2, "host": host,
                                "nics": [_nic(n, own=True) for n in topo.host_nics(host)],
                                "peers": [_peer(topo, host, peer, 1 - rank, qps[rank], qps[1 - rank])],
                                "workload": workload, "log": str(log_dir / f"{name}.jsonl"), **common}))
        flows.append((FlowRecord(flow.src, flow.dst, flow.nbytes, flow.role), log_dir / f"{flow.dst}-flow{index}-rx.jsonl"))
    return jobs, flows


def _qp(rank: int, peer: int) -> int:
    return 0x100 + rank * 256 + peer


def _nic(nic, own: bool) -> dict:
    data = {"plane": nic.plane, "mac": nic.mac, "address": str(nic.address)}
    if own:
        data["name"] = nic.ifname
    return data


class Progress:
    """The workload's progress, read live from the agents' event logs (their goodput records).

    Agents flush their logs every 50 ms, each at its own moment, so what is read lags, and by a
    different amount per log; the records carry their own times, so `eta` extrapolates each
    log at its own rate up to now.
    """

    def __init__(self, logs: list[Path], expected_bytes: int, start_at: float) -> None:
        self.logs = logs
        self.expected = max(1, expected_bytes)
        self.start_at = start_at
        self._offsets = {path: 0 for path in logs}
        self._received = {path: 0 for path in logs}     # bytes per log, as of its latest record
        self._until = {path: start_at for path in logs}   # time of each log's latest record
        self.received = 0
        self.last_t = start_at

    def read(self) -> float:
        """Take in what the agents have written since; return the share received as of `last_t`."""
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
                if b'"goodput"' not in line:
                    continue
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                self._received[path] += r.get("rx_bytes", 0)
                self._until[path] = max(self._until[path], r.get("t", self._until[path]))
        self.received = sum(self._received.values())
        self.last_t = max(self._until.values(), default=self.start_at)
        return min(1.0, self.received / self.expected)

    def eta(self, fraction: float) -> float | None:
        """UNIX time at which `fraction` of the workload is (or was) received, each log going on
        at its own rate so far from its own latest record."""
        target = fraction * self.expected
        if self.received >= target:
            return self.last_t
        rate = sum(self._received[p] / (self._until[p] - self.start_at)
                   for p in self.logs if self._until[p] > self.start_at)
        if rate <= 0:
            return None
        # bytes each log has received by time t: received_p + rate_p (t - until_p); solve for the target
        behind = sum(self._received[p] / (self._until[p] - self.start_at) * (self.last_t - self._until[p])
                     for p in self.logs if self._until[p] > self.start_at)
        return self.last_t + (target - self.received - behind) / rate


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
            entry = TableEntry(PORT_FAULT, {"port": port}, FAULT_DROP)
        else:
            entry = TableEntry(PORT_FAULT, {"port": port}, FAULT_DROP_RANDOM,
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
            control.switch_down(switch, list(self.topo.links_of(switch)))


class MininetBackend:
    """Runs cases on Mininet with the model or BMv2 switches."""

    name = "mininet"

    def __init__(self, target: str = "model", run_root: Path | None = None, pcap=None) -> None:
        self.target = target
        self.run_root = Path(run_root) if run_root else Path("runs") / "experiments"
        self.pcap = pcap                     # testbed.capture.PcapCapture: capture every switch port

    def run_case(self, case: Case, progress: Callable[[float], None] = lambda f: None) -> CaseRecord:
        from testbed.network import TestbedNetwork
        scenario, variant, transport = case.scenario, case.variant, case.transport
        topo, notes = self._topology(case)
        horizon, _ = self._horizon(case, topo)
        run_dir = (self.run_root / f"{scenario.name}-{int(time.time())}-{_slug(case.label)}").resolve()
        log_dir = run_dir / "agents"
        log_dir.mkdir(parents=True, exist_ok=True)
        record = CaseRecord(scenario.name, variant.label, transport.name, transport.mode,
                            f"{self.name}:{self.target}", scenario.seed, topo.name, len(topo.hosts),
                            variant.workload.kind, horizon=horizon,
                            sample_interval=agent_sample_interval(case), notes=notes,
                            recovery_window=max(RECOVERY_WINDOW_S, 2 * self._message_time(case, topo)))
        net = TestbedNetwork(topo, target=self.target, run_dir=run_dir, pcap=self.pcap,
                             convergence_delay=transport.reroute_delay_s,
                             progress=lambda line: log.info("%s", line))
        procs: dict[str, subprocess.Popen] = {}
        timers: list[threading.Timer] = []
        try:
            net.start()
            if not transport.trimming:
                self._trimming_off(net)
            start_at = time.time() + START_DELAY_S + 0.05 * len(topo.hosts)
            jobs, flow_logs = agent_jobs(topo, case, log_dir, start_at, horizon)
            record.flows = [flow for flow, _ in flow_logs]
            for name, job in jobs:
                path = log_dir / f"{name}.job.json"
                path.write_text(json.dumps(job, indent=1))
                with open(log_dir / f"{name}.stderr", "wb") as stderr:
                    procs[name] = net.popen(job["host"], [sys.executable, "-m", "host_agent.agent", "--job", str(path)],
                                            stdout=subprocess.DEVNULL, stderr=stderr, cwd=str(REPO))
            target = LiveTarget(net)
            timers, pending = self._schedule_faults(case, topo, target, record, start_at)
            live = Progress([log for _, log in flow_logs], sum(f.expected_bytes for f in record.flows), start_at)

            def poll() -> float:
                frac = live.read()
                for item in list(pending):
                    eta = live.eta(item[0])
                    if eta is not None and eta <= time.time() + LOOKAHEAD_S:
                        pending.remove(item)
                        timers.extend(self._start_actions(item[1], max(eta, time.time()), target, record, start_at))
                return frac

            self._wait(procs, start_at, horizon, progress, poll)
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
        self._read_logs(record, jobs, flow_logs, start_at, procs)
        progress(1.0)
        return record

    # --- set-up -----------------------------------------------------------------------------------
    @staticmethod
    def _message_time(case: Case, topo: Topology) -> float:
        """Seconds one message (`chunk_bytes`) takes at the hosts' line rate."""
        host_rate = min(link.rate_bps for link in topo.links if topo.is_host(link.a) or topo.is_host(link.b))
        return case.variant.workload.chunk_bytes * 8 / host_rate

    @staticmethod
    def _trimming_off(net) -> None:
        """Rewrite every port's trim threshold to a depth no queue reaches (drop-tail switches)."""
        import dataclasses
        for name, program in net.programs.items():
            changes = [(p4runtime_pb2.Update.MODIFY,
                        dataclasses.replace(e, params={**e.params, "trim_threshold": TRIM_NEVER}))
                       for e in program.entries_of(PORT_CONFIG)]
            if changes:
                net.clients[name].write(changes)

    def _topology(self, case: Case) -> tuple[Topology, list[str]]:
        topo = variant_topology(case.variant)
        notes = []
        fastest = max(link.rate_bps for link in topo.links)
        cap = MAX_RATE_BPS.get(self.target)
        if cap and fastest > cap:
            import dataclasses
            links = [dataclasses.replace(link, rate_bps=min(link.rate_bps, cap)) for link in topo.links]
            topo = Topology(topo.name, topo.hosts, topo.switches, links).validate()
            what = "the Python switch model" if self.target == "model" else "BMv2 on this machine"
            notes.append(f"link rates capped at {cap / 1e6:g} Mbit/s for {what} "
                         f"(the scenario asks for {fastest / 1e6:g} Mbit/s)")
        _, stretched = self._horizon(case, topo)
        if stretched:
            log.warning("%s: %s", case.label, stretched)
            notes.append(stretched)
        return topo, notes

    def _horizon(self, case: Case, topo: Topology) -> tuple[float, str | None]:
        """The horizon of `case` on this target, and a note when it had to be stretched.

        A workload that cannot finish within the scenario's horizon_s here (its estimated duration on
        the capped links, or through BMv2's packet rate) gets HORIZON_STRETCH times that least
        duration instead, so that every case can complete on a slow target and the comparison
        stays meaningful; the note says so."""
        horizon = case.scenario.horizon_s
        least = self._estimated_duration(case, topo)
        if least is None or least[0] <= horizon:
            return horizon, None
        need, why = least
        stretched = round(HORIZON_STRETCH * need, 1)
        return stretched, (f"horizon stretched on {self.target} here from {horizon:g} s to {stretched:g} s: "
                           f"the workload needs about {need:.2f} s ({why})")

    def _estimated_duration(self, case: Case, topo: Topology) -> tuple[float, str] | None:
        """About how long the workload takes on this target at best, with what sets it.

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
        for host, nbytes in (into + out_of).items():
            rate = min(link.rate_bps for link in topo.links if host in (link.a, link.b))
            busiest = max(into[host], out_of[host])
            bounds.append((busiest * 8 / rate, f"{busiest} bytes through {host}'s {rate / 1e6:g} Mbit/s link"))
        if self.target == "bmv2":
            packets = sum(-(-f.nbytes // PACKET_PAYLOAD) for f in flows)
            bounds.append((2 * packets * PATH_SWITCHES / BMV2_SWITCH_PPS,
                           f"{packets} data packets and their acknowledgements through ~{PATH_SWITCHES} BMv2 "
                           f"switches at ~{BMV2_SWITCH_PPS} packets/s (what BMv2 forwards on this machine)"))
        return max(bounds) if bounds else None

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
            actions = F.plan_actions(fault, link, switch, record.horizon)
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
                began = time.time() - start_at
                try:
                    action.apply(target)
                    record.faults.append(FaultEvent(began, action.what, action.target, action.breaks))
                except Exception as error:        # noqa: BLE001 - reported in the record
                    record.notes.append(f"fault {action.what} on {action.target} failed: {error!r}")

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
                        proc.wait(0.05)
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
            tx = counters.get(TX, {})
            for port in topo.ports_of(switch.name):
                far = topo.neighbor(switch.name, port)
                if topo.is_switch(far.node):
                    value = tx.get(port)
                    record.links.append(LinkRecord(f"{switch.name}->{far.node}", topo.link_at(switch.name, port).rate_bps,
                                                   value.bytes if value else 0))
        record.switch_stats = dict(totals)
        record.switch_stats["fault_drops"] = totals.get("fault_drops", 0)

    @staticmethod
    def _read_logs(record: CaseRecord, jobs: list[tuple[str, dict]], flow_logs: list[tuple[FlowRecord, Path]],
                   start_at: float, procs: dict) -> None:
        """Results, transport counters and EV events of every agent; goodput of every flow."""
        from testbed.transfer import read_events
        interval = record.sample_interval
        stats: Counter = Counter()
        finished, exact = {}, True
        for name, job in jobs:
            result = None
            for r in read_events(Path(job["log"])):
                kind = r.get("kind")
                t = r.get("t", start_at) - start_at
                if kind in ("ev_state", "ev_backup"):
                    record.ev_events.append({**r, "t": t, "host": job["host"]})
                elif kind == "result":
                    result = r
                    if r.get("ok"):
                        finished[name] = t
                elif kind == "counters":
                    transport = r.get("transport", {})
                    stats.update({k: v for k, v in transport.items() if isinstance(v, (int, float))})
            code = procs[name].returncode if name in procs else None
            if result is None or not result.get("ok") or code != 0:
                exact = False
                record.notes.append(f"{name}: agent exit {code}, result "
                                    f"{(result.get('detail') or 'not ok') if result else 'none'}")
        bins = []
        for flow, log_path in flow_logs:
            per_bin: Counter = Counter()
            for r in read_events(log_path):
                if r.get("kind") == "goodput":
                    per_bin[max(0, int((r["t"] - start_at) / interval))] += r.get("rx_bytes", 0)
                elif r.get("kind") == "result" and r.get("ok"):
                    flow.finish = r["t"] - start_at
            bins.append(per_bin)
        last = max((max(b, default=0) for b in bins), default=0)
        cumulative = [0] * len(bins)
        record.samples = [[0.0, list(cumulative)]]
        for k in range(last + 1):
            for i, per_bin in enumerate(bins):
                cumulative[i] += per_bin.get(k, 0)
            record.samples.append([(k + 1) * interval, list(cumulative)])
        for flow, got in zip(record.flows, cumulative):
            flow.received_bytes = got
        record.completed = exact and len(finished) == len(jobs)
        record.bit_exact = exact
        record.completion_time = max(finished.values()) if record.completed else None
        record.end = record.completion_time if record.completed else record.horizon
        record.transport_stats = dict(stats)
        record.app_missing = len(jobs) - len(finished)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")[:40]
