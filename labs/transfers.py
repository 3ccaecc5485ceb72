"""Transfers on the in-process network (netsim) with a student's transport policies, for the labs' checks.

`fabric(...)` builds a small leaf-spine (`topologies.builders.multi_plane`) programmed with the
controller's routes; `run_flows(...)` gives every host one transport `Endpoint` with the `Policies`
given, sends each flow's bytes as messages, runs the simulator until every message has been
delivered and acknowledged (or `until`), and says what the application received. Everything is
deterministic for a given fabric seed.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from controller.routes import compute_programs
from host_agent.transport import Endpoint, MessageReceived, MessageSent, Policies, TransportConfig
from netsim import Network, Simulator, from_topology
from topologies.builders import multi_plane

LINK = dict(rate_bps=10_000_000_000, queue_depth=64, trim_threshold=16, ecn_threshold=8)
# microsecond timers for a fabric of 1 us cables (the defaults suit Mininet's millisecond RTTs)
FAST = dict(qp_timeout=6, initial_rtt=10e-6, ack_delay=5e-6, probe_interval=50e-6, line_rate_bps=10e9)
QP_BASE = 0x100


def fabric(seed: int, planes: int = 1, leaves: int = 2, spines: int = 2, hosts_per_leaf: int = 1) -> Network:
    """A leaf-spine of 10 Gbit/s links and 1 us cables; hosts h1.. fill the leaves in order, and per
    plane the leaves come first (s1, s2, ...), then the spines."""
    topo = multi_plane(planes, leaves, spines, hosts_per_leaf, **LINK)
    return from_topology(topo, compute_programs(topo), Simulator(seed), delay=1e-6)


def config(mode: str = "mrc", **overrides) -> TransportConfig:
    """The endpoints' configuration on the fabric: microsecond timers, the NIC line rate."""
    return TransportConfig(mode=mode, **{**FAST, **overrides})


@dataclass(frozen=True)
class Flow:
    """`size` bytes from host `src` to host `dst` in messages of `message_size`, from time `start`."""

    src: str
    dst: str
    size: int
    message_size: int = 100_000
    start: float = 0.0


@dataclass
class FlowOutcome:
    """What the application saw of one flow, and its connections' counters."""

    flow: Flow
    messages: int
    delivered: int = 0                 # messages handed over intact, the first time
    corrupted: int = 0                 # messages handed over with other bytes
    duplicates: int = 0                # messages handed over again
    acked: int = 0                     # messages the sender saw acknowledged
    finish: float | None = None        # when the last message was handed over
    sender: object = None              # the sending Connection
    receiver: object = None            # the receiving Connection

    @property
    def exactly_once(self) -> bool:
        """Every message delivered once, bit exact, and acknowledged."""
        return (self.delivered == self.messages and not self.corrupted and not self.duplicates
                and self.acked == self.messages)

    @property
    def goodput_bps(self) -> float:
        """Payload bits per second from the flow's start to its last delivery (0 when unfinished)."""
        if self.finish is None or self.delivered < self.messages:
            return 0.0
        return self.flow.size * 8 / (self.finish - self.flow.start)


@dataclass
class Outcome:
    """Every flow's outcome and every endpoint event's record (with its "host")."""

    flows: list[FlowOutcome]
    events: list[dict] = field(default_factory=list)
    end: float = 0.0

    def ev_events(self, host: str, **match) -> list[dict]:
        """The EV state changes of `host` whose fields equal `match` (e.g. new="ASSUMED_BAD")."""
        return [e for e in self.events if e["host"] == host and e["kind"] == "ev_state"
                and all(e.get(k) == v for k, v in match.items())]


def run_flows(net: Network, flows: list[Flow], cfg: TransportConfig, policies: Policies | None = None,
              until: float = 0.05, seed: int = 0) -> Outcome:
    """Run `flows` on `net` (faults scheduled beforehand with `net.at`) until all are delivered and
    acknowledged, or `until`; every host's endpoint uses `policies` (None: MRC's)."""
    rng = random.Random(seed)
    endpoints: dict[str, Endpoint] = {}
    outcomes = [FlowOutcome(f, messages=len(range(0, f.size, f.message_size))) for f in flows]
    expected: dict[tuple, bytes] = {}          # (receiving connection name, msg id) -> bytes
    index_of: dict[str, int] = {}              # connection name -> flow index
    events: list[dict] = []

    def on_event(host: str, event) -> None:
        kind = type(event)
        if kind is MessageReceived:
            out = outcomes[index_of[event.conn.name]]
            key = (event.conn.name, event.msg_id)
            want = expected.pop(key, None)
            if want is None:
                out.duplicates += 1
            elif want == event.data:
                out.delivered += 1
            else:
                out.corrupted += 1
            out.finish = net.sim.now
        elif kind is MessageSent:
            outcomes[index_of[event.conn.name]].acked += 1
        record = event.as_record()
        record["host"] = host
        events.append(record)

    def endpoint(host: str) -> Endpoint:
        if host not in endpoints:
            endpoints[host] = Endpoint(host, cfg, rng_seed=rng.getrandbits(32), policies=policies)
            net.hosts[host].attach(endpoints[host], lambda event, host=host: on_event(host, event))
        return endpoints[host]

    for i, (flow, out) in enumerate(zip(flows, outcomes)):
        a, b = endpoint(flow.src), endpoint(flow.dst)
        qa, qb = QP_BASE + 2 * i, QP_BASE + 2 * i + 1
        fwd, rev = net.paths(flow.src, flow.dst, cfg.mode), net.paths(flow.dst, flow.src, cfg.mode)
        out.sender = a.connect(flow.dst, qa, qb, fwd, rev)
        out.receiver = b.connect(flow.src, qb, qa, rev, fwd)
        index_of[out.sender.name] = index_of[out.receiver.name] = i
        payloads = [rng.randbytes(min(flow.message_size, flow.size - off))
                    for off in range(0, flow.size, flow.message_size)]
        net.at(flow.start, _starter(net, a, out, payloads, expected, flow.src))

    def done() -> bool:
        return all(o.delivered + o.corrupted >= o.messages and o.acked >= o.messages for o in outcomes)

    net.sim.run(until=until, stop=done)
    for host, ep in endpoints.items():
        for event in ep.drain_events():
            on_event(host, event)
    return Outcome(outcomes, events, net.sim.now)


def _starter(net: Network, ep: Endpoint, out: FlowOutcome, payloads: list[bytes], expected: dict, host: str):
    def start() -> None:
        for data in payloads:
            msg_id = ep.send_message(out.sender, data)
            expected[(out.receiver.name, msg_id)] = data
        net.hosts[host].service()
    return start


def pause(net: Network, host: str, start: float, end: float) -> list:
    """From `start` to `end` the process of `host` does not run (a descheduled agent): what arrives
    waits, as in a socket buffer, and its timers fire only at `end`. Returns the held packets' list."""
    return net.hosts[host].pause(start, end)
