"""One case's traffic on the in-process network: the fabric, an Endpoint per host, its connections,
and the workload (a collective through `EndpointMessenger`, or point-to-point flows whose bytes the
receivers check).

The netsim backend runs it; fault planning also builds the baseline's traffic to see which links it
loads (experiments.faults.busiest_targets).
"""
from __future__ import annotations

from collections import Counter

from controller.routes import compute_programs
from experiments.transport_sizing import network_params, transport_params
from experiments.record import FlowRecord
from experiments.scenario import Case
from experiments.workloads import COLLECTIVES, collective_flows, collective_params, point_to_point_flows
from host_agent.collectives import make_collective
from host_agent.collectives.data import block_bytes
from host_agent.collectives.driver import EndpointMessenger
from host_agent.transport import Endpoint, MessageReceived, TransportConfig
from host_agent.transport import events
from netsim import Network, Simulator, from_topology
from topologies.model import Topology

KEPT_EVENTS = (events.EvStateChanged, events.EvBackup)   # transport events a case record keeps
QP_BASE = 0x100
LINK_DELAY_S = 20e-6             # default propagation delay of every cable (a veth pair plus a switch hop)


def cable_delay(case: Case) -> float:
    """The case's cable delay: its scenario's `link.delay_s`, else LINK_DELAY_S."""
    delay = case.variant.delay_s
    return LINK_DELAY_S if delay is None else delay


def build_fabric(topo: Topology, sim: Simulator, trimming: bool = True, delay: float | None = None) -> Network:
    """The simulated network of `topo` in `sim`, programmed with the controller's static routes,
    `delay` seconds per cable (default LINK_DELAY_S)."""
    return from_topology(topo, compute_programs(topo), sim, delay=LINK_DELAY_S if delay is None else delay,
                         trimming=trimming)


def transport_config(case: Case, topo: Topology) -> TransportConfig:
    """The endpoint configuration of a case: its mode and overrides, the NIC line rate, the seed,
    and, for a scenario that sets its cable delay, timers and windows that follow the fabric's
    base RTT and BDP (`experiments.transport_sizing.network_params`)."""
    extra = network_params(case, topo, cable_delay(case))
    return TransportConfig(mode=case.transport.mode, **transport_params(case, topo, **extra))


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
        self.failures: list[str] = []          # connections that ran out of retries, in words
        self.messengers: dict[str, EndpointMessenger] = {}
        self.kept_events: dict[str, list[dict]] = {h: [] for h in self.hosts}   # EV records not yet taken
        self.started = False
        self.stop_when_done = False            # stop the simulator as soon as the workload is done
        self._unfinished: list = []            # collectives not yet seen done (done() checks the last)
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
        params = collective_params(w, self.seed)
        for rank, host in enumerate(self.hosts):
            messenger = EndpointMessenger(self.endpoints[host])
            coll = make_collective(w.kind, rank, world, messenger, **params)
            self.messengers[host] = messenger
            self.collectives[host] = coll
        self._unfinished = list(self.collectives.values())
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
        self.started = True
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
