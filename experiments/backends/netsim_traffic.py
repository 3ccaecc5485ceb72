"""One case's traffic on the in-process network: the case's fabric, transport configuration and
workload (a collective, or point-to-point flows whose bytes the receivers check), carried by the one
simulation driver (`simulation.Simulation`), and what a case record keeps of it.

The netsim backend runs it, on the fabric and with the configuration `experiments.transport_sizing`
gives the case (`cable_delay`, `transport_config`).
"""
from __future__ import annotations

from collections import Counter

from experiments.record import FlowRecord
from experiments.scenario import Case
from experiments.workloads import COLLECTIVES, collective_flows, collective_params, point_to_point_flows
from host_agent.collectives.data import flow_payloads
from host_agent.transport import TransportConfig
from host_agent.transport import events
from netsim import Network
from simulation import Flow, Simulation

KEPT_EVENTS = (events.EvStateChanged, events.EvBackup)   # transport events a case record keeps


class Traffic:
    """The workload of one case on a fabric, carried by a `simulation.Simulation`: endpoints on every
    host (host i's seeded with i), one shared set of connections per pair of hosts, and what a case
    record keeps of it."""

    def __init__(self, fab: Network, case: Case, config: TransportConfig) -> None:
        self.fab = fab
        self.sim = fab.sim
        self.workload = case.variant.workload
        self.seed = case.scenario.seed
        self.mode = config.mode
        self.hosts = [h.name for h in fab.topo.hosts]
        self.simulation = Simulation(fab, config, keep_events=False)
        self.endpoints = {h: self.simulation.endpoint(h, rng_seed=i, attach=False) for i, h in enumerate(self.hosts)}
        self.collectives = self.simulation.collectives
        self.pairs = self.simulation.pairs
        self.flows: list[FlowRecord] = []
        self._rx_conn: list = []               # receiving connections (one per QP) of each flow
        self._carried: list = []               # the simulation's FlowOutcome of each point-to-point flow
        self.failures: list[str] = []          # connections that ran out of retries, in words
        self.kept_events: dict[str, list[dict]] = {h: [] for h in self.hosts}   # EV records not yet taken
        self.started = False
        self.stop_when_done = False            # stop the simulator as soon as the workload is done
        self.until_acked = False               # flows are done once their senders saw every byte acknowledged
        self._unfinished: list = []            # collectives not yet seen done (done() checks the last)
        self.simulation.listeners.append(self.on_event)
        if self.workload.kind in COLLECTIVES:
            self._setup_collective()
        else:
            self._setup_flows(config.mtu_payload)

    def connections(self, src: str, dst: str) -> list:
        """The connections (one per QP: `qps` of the config) of `src` to `dst`, in QP order."""
        return self.simulation.connections(src, dst)

    # --- collectives ----------------------------------------------------------------------------
    def _setup_collective(self) -> None:
        self._unfinished = self.simulation.add_collective(self.workload.kind, collective_params(self.workload, self.seed),
                                                   self.hosts)
        for flow in collective_flows(self.fab.topo, self.workload):
            self.flows.append(FlowRecord(flow.src, flow.dst, flow.nbytes, flow.role))
            self._rx_conn.append(self.connections(flow.dst, flow.src))

    # --- point-to-point flows ---------------------------------------------------------------------
    def _setup_flows(self, packet_payload: int) -> None:
        planned = point_to_point_flows(self.fab.topo, self.workload, self.seed)
        flows = [Flow(flow.src, flow.dst, flow.nbytes, self.workload.chunk_bytes) for flow in planned]
        # the flows' bytes: views of one stream, no two packets at the same place of it (flow_payloads)
        payloads = flow_payloads(self.seed, [flow.message_sizes() for flow in flows], packet_payload)
        for plan, flow, payload in zip(planned, flows, payloads):
            self.flows.append(FlowRecord(plan.src, plan.dst, plan.nbytes, plan.role))
            carried = self.simulation.add_flow(flow, payload, shared=True, schedule=False)
            self._carried.append(carried)
            self._rx_conn.append(carried.receivers)

    # --- running ----------------------------------------------------------------------------------
    def attach(self) -> None:
        """Let the hosts drive their endpoints and hand their events to `on_event`."""
        self.simulation.attach()

    def close(self) -> None:
        """The case is over, its record made: the simulation closes (`Simulation.close`)."""
        self.simulation.close()

    def on_event(self, host: str, event) -> None:
        """An event of `host`'s endpoint, after the simulation took its messages: failures, EV state
        changes and backups are kept (`kept_events`)."""
        if type(event) is events.ConnectionFailed:
            self.failures.append(f"{host}: {event.error}")
        if isinstance(event, KEPT_EVENTS):
            record = event.as_record()
            record["host"] = host
            self.kept_events[host].append(record)
        if self.stop_when_done and self.done():
            self.sim.stop()

    def take_kept_events(self) -> list[dict]:
        """The kept EV records since the last call, host by host (after draining what waits)."""
        self.simulation.drain()
        out = []
        for host in self.hosts:
            out.extend(self.kept_events[host])
            self.kept_events[host] = []
        return out

    def start(self) -> None:
        """Start the workload now."""
        self.started = True
        if self.collectives:
            self.simulation.start_collectives()
        else:
            for carried in self._carried:
                self.simulation.send(carried)
        self.simulation.service()
        if self.stop_when_done and self.done():
            self.sim.stop()

    def done(self) -> bool:
        """True when the workload has started and finished everywhere (a fault due at time 0 runs
        before the start: nothing is queued yet, which is not done)."""
        if not self.started:
            return False
        if self.collectives:
            unfinished = self._unfinished          # a collective once done stays done: each is
            while unfinished and unfinished[-1].done:   # asked until it is, not on every call
                unfinished.pop()
            return not unfinished
        return self.simulation.done() if self.until_acked else self.simulation.delivered()

    def received(self) -> list[int]:
        """Payload bytes received so far by each flow."""
        return [sum(c.stats["payload_bytes_received"] for c in conns) for conns in self._rx_conn]

    def progress(self) -> float:
        """Share of the workload's payload received (0..1)."""
        total = sum(f.expected_bytes for f in self.flows) or 1
        return min(1.0, sum(min(r, f.expected_bytes) for r, f in zip(self.received(), self.flows)) / total)

    def outcome(self) -> tuple[bool, int, int]:
        """(bit exact, duplicates, missing messages) of what the application received."""
        if self.collectives:
            results = [c.result() for c in self.collectives.values()]
            dup = sum(sum("twice" in e for e in c.protocol_errors) for c in self.collectives.values())
            missing = sum(not c.received_all for c in self.collectives.values())
            exact = all(c.done for c in self.collectives.values()) and all(r.mismatches == 0 for r in results)
            return exact, dup, missing
        duplicates = sum(f.duplicates for f in self._carried)
        corrupted = sum(f.corrupted for f in self._carried)
        missing = self.simulation.undelivered
        return (missing == 0 and not corrupted and not duplicates), duplicates, missing

    def finish_times(self) -> None:
        """Give each flow the time its last message was handed over (a collective's flow: the time
        its receiving rank finished), and each point-to-point flow the time its sender saw all of it
        acknowledged, when it did."""
        for flow, carried in zip(self.flows, self._carried):
            flow.finish = carried.finish
            flow.acked = carried.acked_at
        for flow in self.flows:
            coll = self.collectives.get(flow.dst)
            if coll is not None and coll.finished_at is not None:
                flow.finish = coll.finished_at

    def ev_sets(self, now: float) -> list[dict]:
        """One "ev_set" record per MRC connection: every EV it holds and the path of each, and whether
        it sent data (a connection that only acknowledges never uses its EVs)."""
        out = []
        for host, ep in self.endpoints.items():
            for conn in ep.connections.values():
                if conn.mode != "mrc":
                    continue
                dsts = [path.dst.hex() for path in conn.evset.paths]     # by path key, each once
                evs = [{"ev": ev.value, "path": ev.path_key, "dst": dsts[ev.path_key]}
                       for ev in conn.evset.by_value.values()]
                out.append({"t": now, "kind": "ev_set", "conn": conn.name, "host": host, "evs": evs,
                            "sent_data": bool(conn.stats.get("data_sent", 0))})
        return out

    def base_rtt(self) -> float | None:
        """The smallest data-packet RTT any host measured (None: none was)."""
        seen = [rtt for rtt in (ep.min_rtt() for ep in self.endpoints.values()) if rtt is not None]
        return min(seen) if seen else None

    def stats(self) -> dict:
        """Counters of every connection, summed."""
        total: Counter = Counter()
        for ep in self.endpoints.values():
            for conn in ep.connections.values():
                total.update(conn.stats)
        return dict(total)
