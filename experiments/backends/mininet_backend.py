"""The mininet backend: a case on the real testbed, in real time.

Brings the variant's topology up as a `testbed.network.TestbedNetwork` (model or BMv2 target,
static tables from the controller; the emulated converging control plane when the transport asks
for rerouting), starts the case's host agents (`agent_jobs`) with `testbed.agents.AgentLauncher`,
waits until every one is up and then starts them together (their start file), and acts on the live network through its verbs when a fault is due
(`live_target`, run by `fault_timers`). The agents' JSON-lines logs become the case record
(`agent_logs`).

A fault given as a share of the workload ("30%") starts when the agents' goodput records add up
to that share of the workload's bytes (read every 10 ms; extrapolated at each log's rate over the
few milliseconds until the agents' next flush). Where each fault landed (the share delivered when
it began to take effect) is filled in from the agents' goodput records once they have stopped
(`experiments.validity`). Links run at `link_rate` (default: the calibration of the target here):
`auto` links at it, faster ones capped, and horizons too short for the target stretched
(`experiments.rate_caps`, `experiments.horizons`; a note in the record says so). Goodput comes from the
agents' records, which count whole messages (`chunk_bytes`), so it is coarser than on netsim.
"""
from __future__ import annotations

import logging
import time
from collections import Counter
from pathlib import Path
from typing import Callable

from experiments import horizons, rate_caps, validity
from experiments.backends import mininet_limits
from experiments.backends.agent_jobs import agent_jobs
from experiments.backends.agent_logs import Progress, read_results, start_lateness
from experiments.backends.fault_timers import FaultTimers
from experiments.backends.live_target import ControlSockets, LiveTarget
from experiments.calibration import LinkRate
from experiments.faults import FaultSchedule
from experiments.record import CaseRecord, LinkRecord
from experiments.scenario import Case
from pipeline_contract.names import RX, TX
from testbed.fidelity import FidelityMonitor
from topologies.model import Topology

log = logging.getLogger("mrc.experiments")
start_log = logging.getLogger("mrc.experiments.start")      # how long the agents took to come up and begin
LOOKAHEAD_S = 0.03               # faults due within this long are timed by extrapolation (logs lag up to 10 ms)
PROGRESS_TICK_S = 0.01           # how often the agents' logs are read while a fault waits for its share
AGENTS_UP_S = 60.0               # agents not up (NICs open, start record written) after this long
AGENT_UP_S = 0.5                 # ... plus this per agent: the case fails naming them
STOP_AFTER_HORIZON_S = 15.0      # agents still running this long after the horizon are stopped


class MininetBackend:
    """Runs cases on Mininet with the model or BMv2 switches."""

    name = "mininet"

    def __init__(self, target: str = "model", run_root: Path | None = None, pcap=None,
                 link_rate: LinkRate | None = None, cluster: Path | None = None) -> None:
        self.target = target
        self.cluster = cluster                   # a cluster file: each network spread over its servers
        self.link_rate = link_rate               # None: the calibration of the target, read per case
        self.run_root = Path(run_root) if run_root else Path("runs") / "experiments"
        self.pcap = pcap                     # testbed.capture.PcapCapture: capture every switch port

    def run_case(self, case: Case, progress: Callable[[float], None] = lambda f: None) -> CaseRecord:
        from testbed.agents import AgentLauncher
        mininet_limits.check_mininet(case)
        if self.cluster is not None:
            _check_cluster(case)
        rate = self.link_rate
        if rate is None and self.cluster is not None:
            rate = _servers_rate(case, self.target, self.cluster)
        topo, notes = rate_caps.target_topology(case, self.target, rate)
        for note in notes:
            log.warning("%s: %s", case.label, note)
        record = self._record(case, topo, notes)
        run_dir = (self.run_root / f"{case.scenario.name}-{int(time.time())}-{_slug(case.label)}").resolve()
        pcap = self.pcap.case_folder(case.label, case.repetition) if self.pcap is not None else None
        net = network(topo, self.target, self.cluster, run_dir=run_dir, pcap=pcap,
                      convergence_delay=case.transport.reroute_delay_s, progress=lambda line: log.info("%s", line))
        agents = AgentLauncher(net, run_dir / "agents")
        timers, monitor, verdict = None, FidelityMonitor(net), None
        sockets = None                       # the agents' control sockets, for the switch_ev_deny fault
        if case.transport.mode == "mrc" and any(f.kind == "switch_ev_deny" for f in case.variant.faults):
            sockets = ControlSockets()
        try:
            net.start()
            if not case.transport.trimming:
                net.set_trimming(False)
            jobs, flow_logs = agent_jobs(topo, case, agents.log_dir, record.horizon, agents.start_file)
            record.flows = [item.flow for item in flow_logs]
            agents.prepare([(item.name, item.job) for item in jobs])
            for item in jobs:
                extra = () if sockets is None else ("--control", sockets.add(net, item.job.host, item.name))
                agent = agents.start(item.name, item.job, *extra)
                if not net.is_remote(item.job.host):           # a cluster server's process is not ours to watch
                    monitor.watch(item.name, agent.proc.pid)
            launched = time.monotonic()
            agents.wait_up(AGENTS_UP_S + AGENT_UP_S * len(jobs))
            up = time.monotonic()
            lead = agents.start_lead()
            start_at = time.time() + lead
            agents.begin(start_at)
            start_log.info("%s: %d agents up %.2f s after the last launch; start %.2f s ahead, the start file "
                           "sent in %.2f s", case.label, len(jobs), up - launched, lead, time.monotonic() - up)
            timers = FaultTimers(LiveTarget(net, sockets.agents if sockets else []), record, start_at)
            live = Progress([i.log for i in flow_logs], sum(f.expected_bytes for f in record.flows), start_at)
            monitor.start(delay_s=start_at - time.time())     # the agents' start-up is not judged
            self._follow(case, topo, record, agents, timers, live, progress)
            monitor.stop()
            packets = self._read_counters(net, topo, record)
            faulted = {node for f in record.faults for node in f.target.split("-")}
            verdict = monitor.verdict(faulted, packets, origin=start_at)
            record.reroutes = [t - start_at for t in net.reroutes()]
            record.notes += net.control_plane_errors()
        finally:
            monitor.stop()
            if timers is not None:
                timers.cancel()
            agents.stop()
            if sockets is not None:
                sockets.remove()
            remaining = net.stop()
            if remaining:
                record.notes.append(f"left behind after tear-down: {', '.join(map(str, remaining))}")
        lateness = read_results(record, list(agents.agents.values()), flow_logs, start_at)
        validity.fill_landing(record)
        if verdict is not None:
            verdict.add_lateness(lateness)
            verdict.add_start_lateness(start_lateness(list(agents.agents.values()), start_at))
            verdict.add_queue_service(net.queue_service)
            if timers is not None:
                verdict.add_fault_lateness(timers.late)
            record.fidelity = verdict.as_dict()
        progress(1.0)
        return record

    def _record(self, case: Case, topo: Topology, notes: list[str]) -> CaseRecord:
        scenario, variant, transport = case.scenario, case.variant, case.transport
        horizon, _ = horizons.horizon(case, topo, self.target)
        return CaseRecord(scenario.name, variant.label, transport.name, transport.mode,
                          f"{self.name}:{self.target}", scenario.seed, topo.name, len(topo.hosts),
                          variant.workload.kind, horizon=horizon,
                          sample_interval=mininet_limits.agent_sample_interval(case), notes=notes,
                          recovery_window=mininet_limits.recovery_window(case, topo))

    @staticmethod
    def _follow(case: Case, topo: Topology, record: CaseRecord, agents, timers: FaultTimers,
                live: Progress, progress: Callable[[float], None]) -> None:
        """Until the agents are done (or well past the horizon): start faults when they are due,
        report the workload's progress."""
        schedule = FaultSchedule.of_case(case, topo, record.horizon)
        record.planned_faults = schedule.plans()
        for fault in schedule.timed():
            timers.start(fault.actions, timers.start_at + fault.seconds)

        def start_of(share: float) -> float | None:
            """When the share arrives (UNIX time), once that is at most LOOKAHEAD_S away."""
            eta = live.eta(share)
            return max(eta, time.time()) if eta is not None and eta <= time.time() + LOOKAHEAD_S else None

        def tick() -> None:
            progress(live.read())
            for fault, at in schedule.reached(start_of):
                timers.start(fault.actions, at)

        agents.wait(timers.start_at + record.horizon + STOP_AFTER_HORIZON_S, tick,
                    tick_s=PROGRESS_TICK_S if schedule.waiting else 0.05)

    @staticmethod
    def _read_counters(net, topo: Topology, record: CaseRecord) -> tuple[dict, dict]:
        """Every live switch's counters summed, and the bytes each fabric link direction carried;
        returns the packets each switch counted out and in, by port ({switch: {port: packets}})."""
        totals: Counter = Counter()
        tx_packets, rx_packets = {}, {}
        for switch in topo.switches:
            if not net.switch_alive(switch.name):
                continue
            try:
                counters = net.counters(switch.name)
            except Exception as error:           # noqa: BLE001 - a killed switch cannot answer
                record.notes.append(f"counters of {switch.name}: {error}")
                continue
            for name, cells in counters.items():
                totals[name.split(".")[-1]] += sum(v.packets for v in cells.values())
            tx = counters.get(TX, {})
            tx_packets[switch.name] = {port: v.packets for port, v in tx.items()}
            rx_packets[switch.name] = {port: v.packets for port, v in counters.get(RX, {}).items()}
            for port in topo.ports_of(switch.name):
                far = topo.neighbor(switch.name, port)
                if topo.is_switch(far.node):
                    value = tx.get(port)
                    record.links.append(LinkRecord(f"{switch.name}->{far.node}",
                                                   topo.link_at(switch.name, port).rate_bps,
                                                   value.bytes if value else 0))
        record.switch_stats = dict(totals)
        record.switch_stats["fault_drops"] = totals.get("fault_drops", 0)
        return tx_packets, rx_packets


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")[:40]


def _check_cluster(case: Case) -> None:
    """Raise ScenarioError naming what of `case` a network spread over servers cannot run: data
    packets larger than the tunnels between servers carry."""
    from experiments.scenario import ScenarioError
    from experiments.transport_sizing import mtu_payload
    from testbed.cluster import ClusterError, check_frames_fit
    try:
        check_frames_fit(mtu_payload(case))
    except ClusterError as error:
        raise ScenarioError(case.scenario.path, "link.mtu_payload", str(error)) from None


def _servers_rate(case: Case, target: str, cluster: Path):
    """What `auto` links run at with the case's network spread over the cluster's servers: the
    lowest of each server's calibrated rate for its share of the nodes (calibration.ServerRates)."""
    from experiments.calibration import server_rates
    from experiments.workloads import variant_topology
    from testbed.cluster import placement_for
    from testbed.clusterfile import load_cluster_file
    placement = placement_for(variant_topology(case.variant), load_cluster_file(cluster))
    placed = Counter(placement.server_of.values())
    total = sum(placed.values())
    return server_rates(target, {address: count / total for address, count in placed.items()},
                        rate_caps.machine_rate(target))


def network(topo: Topology, target: str, cluster: Path | None, **params):
    """The case's network: on this machine, or spread over the servers of the cluster file."""
    if cluster is None:
        from testbed.network import TestbedNetwork
        return TestbedNetwork(topo, target=target, **params)
    from testbed.cluster import ClusterNetwork
    from testbed.clusterfile import load_cluster_file
    return ClusterNetwork(topo, load_cluster_file(cluster), target, **params)
