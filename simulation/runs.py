"""The one driver of the transport on a simulated network: endpoints on its hosts, their connections
(one QP numbering, one rule for their paths), checked flows and collectives, and what they delivered.

    net = leaf_spine_fabric(seed=1, planes=2)
    result = run_flows(net, [Flow("h1", "h3", 1_000_000, message_size=100_000)], leaf_spine_config())
    assert result.all_exactly_once

Faults and repairs are scheduled on the network beforehand (`net.at(t, ...)`). For more than a
run of flows or of one collective (the netsim backend's cases), use `Simulation` itself.
"""
from __future__ import annotations

import random
from dataclasses import replace
from itertools import accumulate
from typing import Callable

from host_agent.collectives import Collective, make_collective
from host_agent.collectives.driver import EndpointMessenger
from host_agent.transport import (Endpoint, MessageReceived, MessageSent, PathInfo, Policies, QpNumbers,
                                  TransportConfig, connection_paths, uses_usid_paths)
from netsim import Network
from simulation.outcomes import Flow, FlowOutcome, SimulationResult
from topologies.paths import steering_addresses


def same_bytes(got: bytes, want) -> bool:
    """True when `got` holds exactly the bytes of `want` (bytes, or a view of them). Compares at
    memory speed: `bytes == memoryview` compares byte by byte through the buffer's format."""
    return len(got) == len(want) and got.startswith(want)


class Simulation:
    """Transport endpoints on the hosts of `net`, the connections between them and what they carry.

    Endpoints use `config` (a flow may name another mode: one mode per host) and `policies`; each is
    seeded with the number it is given, else with the next number of the run's random stream
    (`seed`), which also draws the flows' bytes. Every endpoint event is handled once: a
    collective's messages go to its rank's messenger, a flow's are checked against what was sent,
    its record is kept in `events` (with `keep_events`), and each of `listeners` gets (host, event).
    """

    def __init__(self, net: Network, config: TransportConfig | None = None, seed: int = 0,
                 policies: Policies | None = None, keep_events: bool = True) -> None:
        self.net = net
        self.sim = net.sim
        self.config = config or TransportConfig()
        self.policies = policies
        self.keep_events = keep_events
        self.endpoints: dict[str, Endpoint] = {}
        self.events: list[dict] = []
        self.listeners: list[Callable[[str, object], None]] = []
        self.flows: list[FlowOutcome] = []
        self.messengers: dict[str, EndpointMessenger] = {}
        self.collectives: dict[str, Collective] = {}        # host -> the collective its rank runs
        self.undelivered = 0                 # messages of the flows not yet handed over
        self.unacknowledged = 0              # messages of the flows their sender has not seen acknowledged
        self._rng = random.Random(seed)
        self._qps = QpNumbers()
        self.pairs: dict[tuple[str, str], tuple[list, list]] = {}   # shared connections: (a, b) sorted -> (a's, b's)
        self._paths: dict[tuple[str, str, str], list[PathInfo]] = {}
        self._graphs: dict = {}              # plane -> topologies.graph.PlaneGraph, for steering_addresses
        self._receiving: dict[tuple, tuple[FlowOutcome, bytes | memoryview]] = {}   # (receiving conn id, msg id) -> flow, bytes
        self._sending: dict[tuple, FlowOutcome] = {}                   # (sending conn id, msg id) -> flow
        self._flow_of: dict = {}                                       # receiving conn id -> its last flow
        self._payloads: dict[int, list[bytes | memoryview]] = {}     # id(outcome) -> its messages, until sent

    # --- endpoints ----------------------------------------------------------------------------------
    def endpoint(self, host: str, rng_seed: int | None = None, mode: str | None = None,
                 attach: bool = True) -> Endpoint:
        """The endpoint of `host`, made on first use (seeded with `rng_seed`, else drawn) and, with
        `attach`, handed to the host at once; otherwise `attach()` hands it over later."""
        mode = mode or self.config.mode
        ep = self.endpoints.get(host)
        if ep is not None:
            if ep.config.mode != mode:
                raise ValueError(f"host {host}: one transport mode per host in a simulation "
                                 f"(it runs {ep.config.mode!r}, asked for {mode!r})")
            return ep
        if host not in self.net.hosts:
            raise KeyError(f"{host} is not a host of the simulated network")
        config = self.config if mode == self.config.mode else replace(self.config, mode=mode)
        seed = self._rng.getrandbits(32) if rng_seed is None else rng_seed
        ep = self.endpoints[host] = Endpoint(host, config, rng_seed=seed, policies=self.policies)
        if attach:
            self._attach(host)
        return ep

    def attach(self) -> None:
        """Hand every endpoint not yet driven to its host."""
        for host, ep in self.endpoints.items():
            if self.net.hosts[host].endpoint is not ep:
                self._attach(host)

    def _attach(self, host: str) -> None:
        self.net.hosts[host].attach(self.endpoints[host], lambda event, host=host: self.on_event(host, event))

    def close(self) -> None:
        """End the simulation once its run is over: its endpoints close (`Endpoint.close`), its
        messengers let go of their collectives and it lets go of its listeners, so that reference
        counting frees what it made once the last reference to it goes. The network is its
        builder's to close (`Network.close`)."""
        for ep in self.endpoints.values():
            ep.close()
        for messenger in self.messengers.values():
            messenger.detach()
        self.listeners = []

    # --- connections ----------------------------------------------------------------------------------
    def paths(self, src: str, dst: str, mode: str | None = None) -> list[PathInfo]:
        """The paths of a connection in `mode` from host `src` to host `dst` (`connection_paths`): the
        NICs by their number on the topology (`Topology.numbered_nics`: NIC i on plane i), the uSID
        paths of `topologies.paths.host_paths` (their `steering_addresses`)."""
        mode = mode or self.config.mode
        key = (src, dst, mode)
        paths = self._paths.get(key)
        if paths is None:
            peer = self.net.hosts[dst].nic_addr
            usid: dict[int, list[bytes]] = {}
            if uses_usid_paths(mode):                # only then: the paths cost time on a large fabric
                usid = steering_addresses(self.net.topo, src, dst, self._graphs)
            paths = self._paths[key] = connection_paths(mode, self.net.topo.numbered_nics(src), peer, usid)
        return list(paths)

    def connect(self, a: str, b: str, mode: str | None = None) -> tuple[list, list]:
        """A new pair of connections between hosts `a` and `b`: (a's, b's), `config.qps` queue pairs
        each, numbered by the one QP numbering (`QpNumbers`: `a` the first of the next two numbers)."""
        qa, qb = self._qps.pair()
        ea, eb = self.endpoint(a, mode=mode), self.endpoint(b, mode=mode)
        ab, ba = self.paths(a, b, mode), self.paths(b, a, mode)
        return ea.connect_qps(b, qa, qb, ab, ba), eb.connect_qps(a, qb, qa, ba, ab)

    def connections(self, src: str, dst: str) -> list:
        """The connections of `src` to `dst` shared by everything between the two hosts (collectives,
        the backend's flows), in QP order; both ends open on first use."""
        key = (src, dst) if src < dst else (dst, src)
        pair = self.pairs.get(key)
        if pair is None:
            pair = self.pairs[key] = self.connect(*key)
        return pair[0] if src == key[0] else pair[1]

    # --- flows ------------------------------------------------------------------------------------------
    def add_flow(self, flow: Flow, payload: bytes | None = None, shared: bool = False,
                 schedule: bool = True) -> FlowOutcome:
        """Carry `flow`: on a pair of connections of its own (or, `shared`, on `connections`), its bytes
        `payload` (default: drawn from the run's stream, message by message) cut into its messages,
        which take the QPs in turn. With `schedule` they are sent at `flow.start`; otherwise `send`
        sends them."""
        if shared:
            if flow.mode not in (None, self.config.mode):
                raise ValueError(f"flow {flow.src} -> {flow.dst}: a shared connection runs the configured mode")
            tx, rx = self.connections(flow.src, flow.dst), self.connections(flow.dst, flow.src)
        else:
            tx, rx = self.connect(flow.src, flow.dst, flow.mode)
        sizes = flow.message_sizes()
        if payload is None:
            messages = [self._rng.randbytes(n) for n in sizes]
        else:
            if len(payload) != flow.size:
                raise ValueError(f"flow {flow.src} -> {flow.dst}: {len(payload)} bytes given for a flow of "
                                 f"{flow.size}")
            offsets = accumulate([0, *sizes[:-1]])
            whole = memoryview(payload).cast("B")           # messages are views of it, not copies
            messages = [whole[off:off + n] for off, n in zip(offsets, sizes)]
        outcome = FlowOutcome(flow, len(messages), list(tx), list(rx))
        self.flows.append(outcome)
        for conn in rx:
            self._flow_of[conn.ident] = outcome
        self._payloads[id(outcome)] = messages
        self.undelivered += len(messages)
        self.unacknowledged += len(messages)
        if schedule:
            self.net.at(flow.start, self._start, outcome)
        return outcome

    def send(self, outcome: FlowOutcome) -> None:
        """Queue the messages of a flow at its sender now (the host sends them when next serviced)."""
        messages = self._payloads.pop(id(outcome), None)
        if messages is None:
            raise ValueError(f"flow {outcome.flow.src} -> {outcome.flow.dst}: already sent, "
                             "or not a flow of this simulation")
        ep = self.endpoints[outcome.flow.src]
        tx, rx = outcome.senders, outcome.receivers
        for n, data in enumerate(messages):
            k = n % len(tx)
            msg_id = ep.send_message(tx[k], data)
            self._sending[(tx[k].ident, msg_id)] = outcome
            self._receiving[(rx[k].ident, msg_id)] = (outcome, data)

    def _start(self, outcome: FlowOutcome) -> None:
        self.send(outcome)
        self.net.hosts[outcome.flow.src].service()

    def delivered(self) -> bool:
        """True when every message of every flow has been handed over."""
        return self.undelivered == 0

    def done(self) -> bool:
        """True when every message of every flow has been handed over and acknowledged."""
        return self.undelivered == 0 and self.unacknowledged == 0

    # --- collectives ------------------------------------------------------------------------------------
    def add_collective(self, kind: str, params: dict, hosts: list[str] | None = None) -> list[Collective]:
        """Collective `kind` with `params`, rank i on the i-th of `hosts` (default: the network's
        hosts in order), over `connections`; returns the ranks' collectives. `start_collectives` starts them."""
        hosts = list(hosts or self.net.hosts)
        world = len(hosts)
        ranks = []
        for rank, host in enumerate(hosts):
            messenger = self.messengers[host] = EndpointMessenger(self.endpoint(host))
            ranks.append(make_collective(kind, rank, world, messenger, **params))
            self.collectives[host] = ranks[-1]
        for host, collective in zip(hosts, ranks):
            for peer in collective.peers():
                self.messengers[host].add_peer(peer, self.connections(host, hosts[peer]))
            self.messengers[host].attach(collective)
        return ranks

    def start_collectives(self) -> None:
        """Start every rank's collective now (its host sends when next serviced)."""
        now = self.sim.now
        for collective in self.collectives.values():
            collective.start(now)

    def collectives_done(self) -> bool:
        """True when every rank's collective has finished."""
        return all(c.done for c in self.collectives.values())

    # --- events and running -------------------------------------------------------------------------------
    def on_event(self, host: str, event) -> None:
        """One event of `host`'s endpoint (the hosts call this; so does `drain`)."""
        messenger = self.messengers.get(host)
        kind = type(event)
        if messenger is not None:
            messenger.handle(event)
        elif kind is MessageReceived:
            self._received(event)
        elif kind is MessageSent:
            outcome = self._sending.pop((event.conn, event.msg_id), None)
            if outcome is not None:
                outcome.acked += 1
                self.unacknowledged -= 1
                if outcome.acked == outcome.messages:
                    outcome.acked_at = self.sim.now
        if self.keep_events:
            record = event.as_record()
            record["host"] = host
            self.events.append(record)
        for listener in self.listeners:
            listener(host, event)

    def _received(self, event: MessageReceived) -> None:
        found = self._receiving.pop((event.conn, event.msg_id), None)
        if found is None:
            outcome = self._flow_of.get(event.conn)
            if outcome is not None:
                outcome.duplicates += 1
            return
        outcome, want = found
        if same_bytes(event.data, want):
            outcome.delivered += 1
        else:
            outcome.corrupted += 1
        self.undelivered -= 1
        if outcome.delivered + outcome.corrupted == outcome.messages:
            outcome.finish = self.sim.now

    def drain(self) -> None:
        """Handle the events still waiting in the endpoints."""
        for host, ep in self.endpoints.items():
            for event in ep.drain_events():
                self.on_event(host, event)

    def service(self) -> None:
        """Let every host send what its endpoint has queued, in the order the endpoints were made."""
        for host in self.endpoints:
            self.net.hosts[host].service()

    def run(self, until: float, stop: Callable[[], bool] | None = None,
            sample_interval: float | None = None) -> list[tuple[float, list[float]]]:
        """Run the simulator until `until` or until `stop()`, then handle what the endpoints still hold;
        every `sample_interval` seconds (None: never) sample each flow's goodput, returned as
        (time, bit/s of each flow since the previous sample), the last interval shorter."""
        sampler = GoodputSampler(self, sample_interval, stop)
        if sample_interval is not None:
            self.sim.after(sample_interval, sampler.sample)
        self.sim.run(until=until, stop=stop)
        if sample_interval is not None and self.sim.now > sampler.last_t:
            sampler.sample(reschedule=False)
        self.drain()
        return sampler.goodput

    def result(self, goodput: list | None = None) -> SimulationResult:
        """What the run carried so far."""
        return SimulationResult(self.flows, list(self.collectives.values()), dict(self.endpoints), goodput or [],
                                self.events, self.sim.now)


class GoodputSampler:
    """Every `interval` seconds of `run`'s simulator, each flow's goodput since the previous sample
    (`Simulation.run`), until `stop()`. An object rather than a closure that reschedules itself: a
    closure would refer to itself, a reference cycle holding the whole run."""

    def __init__(self, run: Simulation, interval: float | None, stop: Callable[[], bool] | None) -> None:
        self.run = run
        self.interval = interval
        self.stop = stop
        self.goodput: list[tuple[float, list[float]]] = []      # (time, bit/s of each flow since the previous sample)
        self.last = [0] * len(run.flows)
        self.last_t = run.sim.now

    def sample(self, reschedule: bool = True) -> None:
        """Take a sample now; with `reschedule`, the next one `interval` later unless `stop()`."""
        run = self.run
        now = run.sim.now
        cur = [f.received_bytes for f in run.flows]
        if now > self.last_t:
            self.goodput.append((now, [(c - p) * 8 / (now - self.last_t) for c, p in zip(cur, self.last)]))
        self.last = cur
        self.last_t = now
        run.drain()
        if reschedule and not (self.stop is not None and self.stop()):
            run.sim.after(self.interval, self.sample)


def run_flows(net: Network, flows: list[Flow], config: TransportConfig | None = None,
              policies: Policies | None = None, until: float = 1.0, sample_interval: float | None = 100e-6,
              seed: int = 0, stop_when_done: bool = True) -> SimulationResult:
    """Run `flows` on `net`, each on its own connections, until all are delivered and acknowledged
    (or `until`; or only `until` without `stop_when_done`). Deterministic for a given network,
    configuration and seed."""
    run = Simulation(net, config, seed, policies)
    for flow in flows:
        run.add_flow(flow)
    goodput = run.run(until, run.done if stop_when_done else None, sample_interval)
    return run.result(goodput)


def run_collective(net: Network, kind: str, params: dict, config: TransportConfig | None = None,
                   hosts: list[str] | None = None, until: float = 1.0, seed: int = 0) -> SimulationResult:
    """Run collective `kind` with `params` on `net`, rank i on the i-th of `hosts` (default: the
    network's hosts), until every rank is done or `until`."""
    run = Simulation(net, config, seed)
    run.add_collective(kind, params, hosts)

    def start() -> None:
        run.start_collectives()
        run.service()

    net.at(net.sim.now, start)
    run.run(until, run.collectives_done)
    return run.result()
