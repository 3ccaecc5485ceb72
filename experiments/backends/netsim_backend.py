"""The netsim backend: a case on the in-process network, in simulated time.

Builds the topology with the controller's static tables (`netsim.from_topology`), one transport
Endpoint per host, the workload (a collective through `EndpointMessenger`, or checked
point-to-point flows), schedules the faults (at a time, or when a share of the workload is done:
looked at every packet time at the hosts' rate),
optionally an emulated converging control plane, and samples goodput every `sample_interval_s`.
"""
from __future__ import annotations

from collections import Counter
from typing import Callable, Optional

from controller.routes import rerouted_programs
from experiments.backends.netsim_traffic import Traffic
from experiments.ev_deny import LocalControls
from experiments.faults import FaultSchedule, apply_action
from experiments.record import CaseRecord, LinkRecord
from experiments.scenario import Case
from experiments.transport_sizing import cable_delay, transport_config
from experiments.workloads import variant_topology
from host_agent.transport.sizing import packet_time
from netsim import Network, NoCollections, Simulator
from simulation import network



class ControlPlane:
    """Emulated routing protocol: reroutes around down links `delay` seconds after a change."""

    def __init__(self, fab: Network, delay: float, on_reroute: Callable[[float], None]) -> None:
        self.fab = fab
        self.delay = delay
        self.on_reroute = on_reroute

    def notify(self) -> None:
        """A link changed state."""
        self.fab.sim.after(self.delay, self._converge)

    def _converge(self) -> None:
        self.fab.reroute(rerouted_programs(self.fab.topo, self.fab.down_links()))
        self.on_reroute(self.fab.sim.now)


class NetsimTarget:
    """The faults' view of a fabric (experiments.faults.FaultTarget); `endpoints` ({host: Endpoint})
    answer the EV control operations."""

    def __init__(self, fab: Network, control: Optional[ControlPlane], endpoints: Optional[dict] = None) -> None:
        self.fab = fab
        self.control = control
        self.endpoints = endpoints or {}
        self._full_rate: dict = {}          # SimLink -> its rate before any switch_slow fault

    def set_link(self, a: str, b: str, up: bool) -> None:
        cable = self.fab.cable(a, b)
        if cable.up != up:
            cable.set_up(up)
            if self.control:
                self.control.notify()

    def set_port_fault(self, switch: str, port: int, drop_all: bool, drop_prob: float) -> None:
        self.fab.switches[switch].set_fault(port, drop_all, drop_prob)

    def switch_ports(self, switch: str) -> list[int]:
        return sorted(self.fab.switches[switch].links)

    def port_towards(self, switch: str, neighbour: str) -> int:
        if switch not in self.fab.switches:
            raise KeyError(f"{switch} is not a switch")
        return self.fab.topo.port_towards(switch, neighbour)

    def set_switch_alive(self, switch: str, alive: bool) -> None:
        for cable in self.fab.cables_of(switch):
            cable.set_up(alive)
        if self.control:
            self.control.notify()

    def ev_controls(self):
        """Each host's EV control operations, served in-process on its endpoint at the simulated time."""
        return [(host, LocalControls(endpoint, lambda: self.fab.sim.now)) for host, endpoint in self.endpoints.items()]

    def set_switch_rate(self, switch: str, share: float) -> None:
        if switch not in self.fab.switches:
            raise KeyError(f"{switch} is not a switch")
        for cable in self.fab.cables_of(switch):
            for link in (cable.ab, cable.ba):
                full = self._full_rate.setdefault(link, link.rate_bps)
                link.rate_bps = full * share


class CaseSampler:
    """Every `interval` seconds of a case's simulator, until its traffic is done: the bytes each flow
    received, into the record's samples, the traffic's kept events, into its record, and the progress
    (`progress(share)`). An object, not a closure that schedules itself again: a closure refers to
    itself, a reference cycle that would hold the whole case after its network closed."""

    def __init__(self, sim: Simulator, traffic: Traffic, record: CaseRecord, interval: float,
                 progress: Callable[[float], None]) -> None:
        self.sim = sim
        self.traffic = traffic
        self.record = record
        self.interval = interval
        self.progress = progress

    def sample(self) -> None:
        """Take a sample now, and the next one `interval` later unless the traffic is done."""
        traffic = self.traffic
        self.record.samples.append([self.sim.now, traffic.received()])
        NetsimBackend._keep_events(traffic, self.record)
        self.progress(traffic.progress())
        if not traffic.done():
            self.sim.after(self.interval, self.sample)


class FaultWatch:
    """Starts each fault of a case's schedule that waits for a share of the traffic (`start(fault)`)
    once that share has arrived, looking every `poll` seconds while one waits and the traffic is not
    done (an object for the reason `CaseSampler` gives)."""

    def __init__(self, sim: Simulator, traffic: Traffic, schedule: FaultSchedule, poll: float,
                 start: Callable) -> None:
        self.sim = sim
        self.traffic = traffic
        self.schedule = schedule
        self.poll = poll
        self.start = start

    def look(self) -> None:
        """Start what the share arrived so far lets start; look again `poll` later if one still waits."""
        sim, share = self.sim, self.traffic.progress()
        for fault, _ in self.schedule.reached(lambda needed: sim.now if needed <= share else None):
            self.start(fault)
        if self.schedule.waiting and not self.traffic.done():
            sim.after(self.poll, self.look)


class NetsimBackend:
    """Runs cases on the in-process network."""

    name = "netsim"

    def __init__(self, until_acked: bool = False) -> None:
        self.until_acked = until_acked     # run point-to-point flows until their senders saw them acknowledged

    def run_case(self, case: Case, progress: Callable[[float], None] = lambda f: None) -> CaseRecord:
        """Build, run and record `case`. The cyclic garbage collector does not run meanwhile
        (`NoCollections`): when the case ends, whether it ran or raised, its network and (once
        built) its traffic are closed (`Network.close`, `Traffic.close`) and reference counting
        frees them; a traffic that failed half-built is left to the collector, on again after."""
        with NoCollections():
            return self._run_case(case, progress)

    def _run_case(self, case: Case, progress: Callable[[float], None]) -> CaseRecord:
        scenario, variant, transport = case.scenario, case.variant, case.transport
        topo = variant_topology(variant)
        sim = Simulator(scenario.seed)
        fab = network(topo, sim, delay=cable_delay(case), trimming=transport.trimming)
        traffic: Traffic | None = None
        try:
            config = transport_config(case, topo)
            traffic = Traffic(fab, case, config)
            record = CaseRecord(scenario.name, variant.label, transport.name, transport.mode, self.name, scenario.seed,
                                topo.name, len(topo.hosts), variant.workload.kind, horizon=scenario.horizon_s,
                                sample_interval=scenario.sample_interval_s)
            record.flows = traffic.flows
            control = None
            if transport.reroute_delay_s is not None:
                control = ControlPlane(fab, transport.reroute_delay_s, record.reroutes.append)
            target = NetsimTarget(fab, control, traffic.endpoints)
            schedule = FaultSchedule.of_case(case, topo, scenario.horizon_s)
            record.planned_faults = schedule.plans()
            for fault in schedule.timed():
                sim.at(fault.seconds, self._schedule, sim, target, fault.actions, record, traffic.progress)
            traffic.attach()
            sim.at(0.0, traffic.start)
            delivered = traffic.progress
            watch = FaultWatch(sim, traffic, schedule, packet_time(float(topo.host_rate_bps()), config.mtu_payload),
                               lambda fault: self._schedule(sim, target, fault.actions, record, delivered))
            sampler = CaseSampler(sim, traffic, record, scenario.sample_interval_s, progress)
            sim.at(0.0, watch.look)
            sim.at(0.0, sampler.sample)
            traffic.until_acked = self.until_acked
            traffic.stop_when_done = True         # ends the run when done turns true: not asked after every event
            sim.run(until=scenario.horizon_s)
            record.samples.append([sim.now, traffic.received()])
            self._keep_events(traffic, record)
            traffic.finish_times()
            for flow, got in zip(record.flows, traffic.received()):
                flow.received_bytes = got
            record.end = sim.now
            record.completed = traffic.done()
            record.completion_time = sim.now if record.completed else None
            record.bit_exact, record.app_duplicates, record.app_missing = traffic.outcome()
            record.transport_stats = traffic.stats()
            record.notes.extend(traffic.failures)
            record.base_rtt = traffic.base_rtt()
            record.ev_events.extend(traffic.ev_sets(sim.now))
            # float() as LinkRecord says: the compiled build holds a link's rate as a float, pure Python as
            # it was given (an int from most topologies), and the two builds' records must read the same
            record.links = [LinkRecord(link.name, float(link.rate_bps), link.counters["tx_bytes"],
                                       link.counters["dropped_queue"], link.counters["dropped_down"])
                            for link in fab.fabric_links()]
            switch_stats: Counter = Counter()
            for sw in fab.switches.values():
                switch_stats.update(sw.counters)
                switch_stats["queue_full_drops"] += sum(link.counters["dropped_queue"] for link in sw.links.values())
            record.switch_stats = dict(switch_stats)
            record.fidelity = {"verdict": "simulated", "reasons": [], "measured": {}}   # exact by construction
            progress(1.0)
            return record
        finally:                              # the case is over, whether it ran or raised
            if traffic is not None:
                traffic.close()
            fab.close()

    # --- faults ---------------------------------------------------------------------------------
    @staticmethod
    def _schedule(sim: Simulator, target: NetsimTarget, actions: list, record: CaseRecord,
                  delivered: Callable[[], float]) -> None:
        """Run `actions` at their offsets from now."""
        start = sim.now
        for action in actions:
            sim.at(start + action.offset,
                   lambda action=action: apply_action(action, target, record, lambda: sim.now, delivered))

    @staticmethod
    def _keep_events(traffic: Traffic, record: CaseRecord) -> None:
        record.ev_events.extend(traffic.take_kept_events())
