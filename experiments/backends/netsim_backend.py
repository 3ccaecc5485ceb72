"""The netsim backend: a case on the in-process network, in simulated time.

Builds the topology with the controller's static tables (`netsim.from_topology`), one transport
Endpoint per host, the workload (a collective through `EndpointMessenger`, or checked
point-to-point flows), schedules the faults (at a time, or when a share of the workload is done),
optionally an emulated converging control plane, and samples goodput every `sample_interval_s`.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Callable, Optional

from controller.routes import rerouted_programs
from experiments import faults as F
from experiments.record import CaseRecord, FaultEvent, FlowRecord, LinkRecord
from experiments.scenario import Case
from experiments.workloads import COLLECTIVES, collective_flows, point_to_point_flows, variant_topology
from host_agent.collectives import make_collective
from host_agent.collectives.data import block_bytes
from host_agent.collectives.driver import EndpointMessenger
from host_agent.transport import Endpoint, MessageReceived, TransportConfig
from host_agent.transport import events as E
from netsim.build import Network
from netsim.sim import Simulator
from netsim.switch import Switch, ecmp_member, usid_shift
from netsim.topology import from_topology
from topologies.model import TIER_LEAF, Topology

KEPT_EVENTS = (E.EvStateChanged, E.EvBackup)
QP_BASE = 0x100
LINK_DELAY_S = 20e-6             # propagation delay of every cable (a veth pair plus a switch hop)


def build_fabric(topo: Topology, sim: Simulator, trimming: bool = True) -> Network:
    """The simulated network of `topo` in `sim`, programmed with the controller's static routes."""
    return from_topology(topo, sim, delay=LINK_DELAY_S, trimming=trimming)


def transport_config(case: Case, topo: Topology) -> TransportConfig:
    """The endpoint configuration of a case: its mode and overrides, the NIC line rate, the seed."""
    host_rate = min(link.rate_bps for link in topo.links if topo.is_host(link.a) or topo.is_host(link.b))
    params = {"line_rate_bps": float(host_rate), "seed": case.scenario.seed, **case.transport.params}
    return TransportConfig(mode=case.transport.mode, **params)


class Traffic:
    """Endpoints, connections and the workload of one case on a fabric."""

    def __init__(self, fab: Network, case: Case, config: TransportConfig) -> None:
        self.fab = fab
        self.sim = fab.sim
        self.workload = case.variant.workload
        self.seed = case.scenario.seed
        self.mode = config.mode
        self.hosts = [h.name for h in fab.topo.hosts]
        self.endpoints = {h: Endpoint(h, config, rng_seed=i) for i, h in enumerate(self.hosts)}
        self.pairs: dict[tuple[str, str], tuple] = {}
        self._qp = QP_BASE
        self.collectives: dict[str, object] = {}
        self.flows: list[FlowRecord] = []
        self._rx_conn: list = []               # receiving connections (one per QP) of each flow
        self._expected: dict[tuple, bytes] = {}   # (dst, local qp, msg id) -> bytes
        self._pending: Counter = Counter()     # flow index -> messages not yet delivered
        self.duplicates = 0
        self.corrupted = 0
        self.messengers: dict[str, EndpointMessenger] = {}
        self.kept_events: dict[str, list[dict]] = {h: [] for h in self.hosts}   # EV records not yet taken
        if self.workload.kind in COLLECTIVES:
            self._setup_collective()
        else:
            self._setup_flows()

    # --- connections ----------------------------------------------------------------------------
    def connections(self, src: str, dst: str) -> list:
        """The connections (one per QP: `qps` of the config) of `src` to `dst`, in QP order;
        both ends are opened on first use."""
        key = tuple(sorted((src, dst)))
        if key not in self.pairs:
            a, b = key
            qa, qb = self._qp, self._qp + 1
            self._qp += 2
            ca = self.endpoints[a].connect_qps(b, qa, qb, self.paths(a, b), self.paths(b, a))
            cb = self.endpoints[b].connect_qps(a, qb, qa, self.paths(b, a), self.paths(a, b))
            self.pairs[key] = (ca, cb)
        ca, cb = self.pairs[key]
        return ca if src == key[0] else cb

    def paths(self, src: str, dst: str) -> list:
        """Every uSID path for MRC; for the baseline, the peer's NIC on each plane, as the agent builds them."""
        return self.fab.mrc_paths(src, dst) if self.mode == "mrc" else self.fab.baseline_paths(src, dst)

    # --- collectives ----------------------------------------------------------------------------
    def _setup_collective(self) -> None:
        w, world = self.workload, len(self.hosts)
        params = {"chunk_bytes": w.chunk_bytes, "seed": self.seed}
        if w.kind == "allreduce":
            params.update(elements=w.bytes // 4 if w.dtype in ("float32", "int32") else w.bytes // 8, dtype=w.dtype)
        else:
            params.update(block_bytes=w.bytes)
        for rank, host in enumerate(self.hosts):
            messenger = EndpointMessenger(self.endpoints[host])
            coll = make_collective(w.kind, rank, world, messenger, **params)
            self.messengers[host] = messenger
            self.collectives[host] = coll
        for rank, host in enumerate(self.hosts):
            for peer in self.collectives[host].peers():
                self.messengers[host].add_peer(peer, self.connections(host, self.hosts[peer]))
            self.messengers[host].attach(self.collectives[host])
        for flow in collective_flows(self.fab.topo, w):
            self.flows.append(FlowRecord(flow.src, flow.dst, flow.nbytes, flow.role))
            self._rx_conn.append(self.connections(flow.dst, flow.src))

    # --- point-to-point flows ---------------------------------------------------------------------
    def _setup_flows(self) -> None:
        index = {h: i for i, h in enumerate(self.hosts)}
        self._plan = point_to_point_flows(self.fab.topo, self.workload, self.seed)
        self._flow_of: dict[tuple[str, int], int] = {}     # (receiving host, its QP) -> flow index
        self._payload: dict[int, bytes] = {}
        for i, flow in enumerate(self._plan):
            self.flows.append(FlowRecord(flow.src, flow.dst, flow.nbytes, flow.role))
            rx = self.connections(flow.dst, flow.src)
            self._rx_conn.append(rx)
            for conn in rx:
                self._flow_of[(flow.dst, conn.local_qp)] = i
            self._payload[i] = block_bytes(self.seed, index[flow.src], index[flow.dst], flow.nbytes)

    def _on_message(self, host: str, event: MessageReceived) -> None:
        local_qp, data = event.conn.local_qp, event.data
        key = (host, local_qp, event.msg_id)
        want = self._expected.pop(key, None)
        flow = self._flow_of.get((host, local_qp))
        if want is None:
            self.duplicates += 1
            return
        if data != want:
            self.corrupted += 1
        self._pending[flow] -= 1
        if self._pending[flow] == 0:
            self.flows[flow].finish = self.sim.now

    # --- running ----------------------------------------------------------------------------------
    def attach(self) -> None:
        """Let the hosts drive their endpoints and hand their events to `on_event`."""
        for host, ep in self.endpoints.items():
            self.fab.hosts[host].attach(ep, lambda event, host=host: self.on_event(host, event))

    def on_event(self, host: str, event) -> None:
        """An event of `host`'s endpoint: messages go to the collective or the flow check, EV state
        changes and backups are kept (`kept_events`)."""
        messenger = self.messengers.get(host)
        if messenger is not None:
            messenger.handle(event)
        elif type(event) is MessageReceived:
            self._on_message(host, event)
        if isinstance(event, KEPT_EVENTS):
            record = event.as_record()
            record["host"] = host
            self.kept_events[host].append(record)

    def take_kept_events(self) -> list[dict]:
        """The kept EV records since the last call, host by host (after draining what waits)."""
        out = []
        for host, ep in self.endpoints.items():
            for event in ep.drain_events():
                self.on_event(host, event)
            out.extend(self.kept_events[host])
            self.kept_events[host] = []
        return out

    def start(self) -> None:
        """Start the workload now."""
        now = self.sim.now
        if self.collectives:
            for coll in self.collectives.values():
                coll.start(now)
        else:
            chunk = self.workload.chunk_bytes
            for i, flow in enumerate(self._plan):
                tx = self.connections(flow.src, flow.dst)
                rx = self._rx_conn[i]
                data = self._payload[i]
                for n, off in enumerate(range(0, len(data), chunk)):
                    piece = data[off:off + chunk]
                    k = n % len(tx)                      # messages take the QPs in turn
                    msg_id = self.endpoints[flow.src].send_message(tx[k], piece)
                    self._expected[(flow.dst, rx[k].local_qp, msg_id)] = piece
                    self._pending[i] += 1
        for host in self.hosts:
            self.fab.hosts[host].service()

    def done(self) -> bool:
        """True when the workload has finished everywhere."""
        if self.collectives:
            return all(c.done for c in self.collectives.values())
        return not self._expected

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
        missing = len(self._expected)
        return (missing == 0 and not self.corrupted and not self.duplicates), self.duplicates, missing

    def finish_times(self) -> None:
        """Give collective flows the finish time of their receiving rank."""
        for flow in self.flows:
            coll = self.collectives.get(flow.dst)
            if coll is not None and coll.finished_at is not None:
                flow.finish = coll.finished_at

    def ev_sets(self, now: float) -> list[dict]:
        """One "ev_set" record per MRC connection: every EV it holds and the path of each."""
        out = []
        for host, ep in self.endpoints.items():
            for conn in ep.connections.values():
                if conn.mode != "mrc":
                    continue
                evs = [{"ev": ev.value, "path": ev.path_key, "dst": conn.evset.path_of(ev).dst.hex()}
                       for ev in conn.evset.by_value.values()]
                out.append({"t": now, "kind": "ev_set", "conn": conn.name, "host": host, "evs": evs})
        return out

    def stats(self) -> dict:
        """Counters of every connection, summed."""
        total: Counter = Counter()
        for ep in self.endpoints.values():
            for conn in ep.connections.values():
                total.update(conn.stats)
        return dict(total)


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
    """The faults' view of a fabric (experiments.faults.FaultTarget)."""

    def __init__(self, fab: Network, control: Optional[ControlPlane]) -> None:
        self.fab = fab
        self.control = control

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


# The ECMP member every target picks (BMv2, the reference model and netsim share the hash).
p4_ecmp = ecmp_member


def trace(fab: Network, src: str, path, ev: int, choose: Callable = ecmp_member) -> list[str]:
    """Switches a packet from `src` on `path` with entropy `ev` crosses (without sending it);
    `choose(src, dst, ev, group size)` is the ECMP member choice of the switches."""
    node = fab.hosts[src].nics[path.nic].dest[0]
    dst = int.from_bytes(path.dst, "big")
    names = []
    while isinstance(node, Switch) and len(names) < 16:
        names.append(node.name)
        if dst >> 80 in node.usid_local:
            dst = usid_shift(dst)
        action = node.lookup(dst)
        if action is None:
            break
        if action[0] == "ecmp":
            members = node.ecmp_groups[action[1]]
            port = members[choose(path.src, dst.to_bytes(16, "big"), ev, len(members))]
        else:
            port = action[1]
        node = node.links[port].dest[0]
    return names


def busiest_targets(case: Case, topo: Topology, choose: Callable = ecmp_member) -> tuple[tuple[str, str], str]:
    """(fabric link, spine) carrying most of the baseline's data in this variant.

    The baseline pins every flow to one ECMP path; a fault there is one the baseline feels. MRC
    cases use the same targets, so every transport meets the same fault.
    """
    baseline = dataclasses.replace(case, transport=dataclasses.replace(case.transport, mode="roce", params={}))
    fab = build_fabric(topo, Simulator(case.scenario.seed))
    traffic = Traffic(fab, baseline, transport_config(baseline, topo))
    links: Counter = Counter()
    switches: Counter = Counter()
    for flow in traffic.flows:
        conn = traffic.connections(flow.src, flow.dst)[0]     # params {}: one QP
        path = conn.evset.paths[0]
        ev = conn.evset.slots[0].current.value
        hops = trace(fab, flow.src, path, ev, choose)
        for a, b in zip(hops, hops[1:]):
            links[tuple(sorted((a, b), key=lambda n: topo.switch(n).index))] += flow.expected_bytes
        for name in hops:
            if topo.switch(name).tier != TIER_LEAF:
                switches[name] += flow.expected_bytes
    fabric = [(c.a, c.b) for c in fab.cables if c.fabric]
    if not fabric:
        raise ValueError(f"topology {topo.name} has no switch-to-switch link to break")
    link = max(fabric, key=lambda ab: (links[ab], -fabric.index(ab)))
    spines = [s.name for s in topo.switches if s.tier != TIER_LEAF] or [s.name for s in topo.switches]
    spine = max(spines, key=lambda n: (switches[n], -spines.index(n)))
    return link, spine


class NetsimBackend:
    """Runs cases on the in-process network."""

    name = "netsim"

    def run_case(self, case: Case, progress: Callable[[float], None] = lambda f: None) -> CaseRecord:
        scenario, variant, transport = case.scenario, case.variant, case.transport
        topo = variant_topology(variant)
        sim = Simulator(scenario.seed)
        fab = build_fabric(topo, sim, trimming=transport.trimming)
        traffic = Traffic(fab, case, transport_config(case, topo))
        record = CaseRecord(scenario.name, variant.label, transport.name, transport.mode, self.name, scenario.seed,
                            topo.name, len(topo.hosts), variant.workload.kind, horizon=scenario.horizon_s,
                            sample_interval=scenario.sample_interval_s)
        record.flows = traffic.flows
        control = None
        if transport.reroute_delay_s is not None:
            control = ControlPlane(fab, transport.reroute_delay_s, record.reroutes.append)
        target = NetsimTarget(fab, control)
        pending = self._plan_faults(case, topo, target, record)
        traffic.attach()
        sim.at(0.0, traffic.start)
        interval = scenario.sample_interval_s

        def sample() -> None:
            now = sim.now
            record.samples.append([now, traffic.received()])
            self._keep_events(traffic, record)
            frac = traffic.progress()
            for item in [p for p in pending if p[0] <= frac]:
                pending.remove(item)
                self._schedule(sim, target, item[1], record)
            progress(frac)
            if not traffic.done():
                sim.after(interval, sample)

        sim.at(0.0, sample)
        sim.run(until=scenario.horizon_s, stop=traffic.done)
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
        record.ev_events.extend(traffic.ev_sets(sim.now))
        record.links = [LinkRecord(link.name, link.rate_bps, link.counters["tx_bytes"], link.counters["dropped_queue"],
                                   link.counters["dropped_down"]) for link in fab.fabric_links()]
        switch_stats: Counter = Counter()
        for sw in fab.switches.values():
            switch_stats.update(sw.counters)
            switch_stats["queue_full_drops"] += sum(link.counters["dropped_queue"] for link in sw.links.values())
        record.switch_stats = dict(switch_stats)
        progress(1.0)
        return record

    # --- faults ---------------------------------------------------------------------------------
    def _plan_faults(self, case: Case, topo: Topology, target: NetsimTarget, record: CaseRecord) -> list:
        """Schedule time-triggered faults; return (fraction, actions) of progress-triggered ones."""
        pending = []
        auto = None
        for fault in case.variant.faults:
            link, switch = None, None
            if F.needs_link(fault):
                if fault.link == "auto":
                    auto = auto or busiest_targets(case, topo)
                    link = auto[0]
                else:
                    link = fault.link
                    topo.link_between(*link)
            else:
                if fault.switch == "auto":
                    auto = auto or busiest_targets(case, topo)
                    switch = auto[1]
                else:
                    switch = fault.switch
                    topo.switch(switch)
            actions = F.plan_actions(fault, link, switch, case.scenario.horizon_s)
            if fault.at.fraction is not None:
                pending.append((fault.at.fraction, actions))
            else:
                target.fab.sim.at(fault.at.seconds, self._schedule, target.fab.sim, target, actions, record)
        return pending

    @staticmethod
    def _schedule(sim: Simulator, target: NetsimTarget, actions: list, record: CaseRecord) -> None:
        """Run `actions` at their offsets from now."""
        start = sim.now

        def run(action) -> None:
            action.apply(target)
            record.faults.append(FaultEvent(sim.now, action.what, action.target, action.breaks))

        for action in actions:
            sim.at(start + action.offset, run, action)

    @staticmethod
    def _keep_events(traffic: Traffic, record: CaseRecord) -> None:
        record.ev_events.extend(traffic.take_kept_events())
