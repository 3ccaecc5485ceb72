"""Test support: a simulated fabric from a topology, and transfers run over it with what happened.

`fabric(...)` is a multi-plane leaf-spine (`topologies.builders.multi_plane`) on `netsim.from_topology`
with the controller's tables and the link parameters the netsim tests use (10 Gbit/s, 1 us, queues
of 64 packets, trimming from 16, ECN from 8). `run_transfers` gives each host one transport
Endpoint, runs point-to-point transfers and returns per-transfer results, goodput samples and
every endpoint event.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field, replace

from controller.routes import compute_programs
from host_agent.transport import Endpoint, MessageReceived, MessageSent, TransportConfig
from netsim import Network, Simulator, from_topology
from topologies.builders import multi_plane

RATE_BPS = 10_000_000_000
LINK = dict(rate_bps=RATE_BPS, queue_depth=64, trim_threshold=16, ecn_threshold=8)


def fabric(seed: int = 0, planes: int = 1, leaves: int = 2, spines: int = 2, hosts_per_leaf: int = 2,
           **link) -> Network:
    """A `planes` x `leaves` x `spines` leaf-spine with `hosts_per_leaf` hosts per leaf, 1 us cables.

    Hosts h1.. fill the leaves in order; per plane, leaves come first (s1, s2, ...), then spines."""
    topo = multi_plane(planes, leaves, spines, hosts_per_leaf, **{**LINK, **link})
    return from_topology(topo, compute_programs(topo), Simulator(seed), delay=1e-6)


@dataclass
class Transfer:
    """`size` bytes from host `src` to host `dst`, in messages of at most `message_size`, from `start`."""

    src: str
    dst: str
    size: int
    start: float = 0.0
    message_size: int | None = None
    mode: str | None = None            # None: the endpoint config's mode


@dataclass
class TransferResult:
    """Outcome of one transfer."""

    transfer: Transfer
    messages: int
    delivered: int = 0                 # messages whose received bytes equal the sent bytes
    corrupted: int = 0                 # messages received with other bytes
    duplicates: int = 0                # messages handed to the application more than once
    acked: int = 0                     # messages the sender saw fully acknowledged
    finish: float | None = None        # time the last message was delivered
    sender_stats: dict = field(default_factory=dict)
    receiver_stats: dict = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Every message delivered exactly once, intact, and acknowledged."""
        return (self.delivered == self.messages and not self.corrupted and not self.duplicates
                and self.acked == self.messages)

    @property
    def duration(self) -> float | None:
        """Seconds from start to the last delivery."""
        return None if self.finish is None else self.finish - self.transfer.start


@dataclass
class ScenarioResult:
    """Per-transfer results, goodput samples and the endpoints' events."""

    transfers: list[TransferResult]
    goodput: list[tuple[float, list[float]]]      # (time, bit/s of each transfer since the previous sample)
    events: list[dict]                             # TransportEvent.as_record() plus "host"
    end: float

    @property
    def all_complete(self) -> bool:
        """True when every transfer completed."""
        return all(t.complete for t in self.transfers)


class _Session:
    """Endpoints, connections and bookkeeping of one scenario."""

    def __init__(self, net: Network, config: TransportConfig, seed: int) -> None:
        self.net = net
        self.config = config
        self.endpoints: dict[str, Endpoint] = {}
        self.expected: dict[tuple, bytes] = {}
        self.received: Counter = Counter()
        self.results: list[TransferResult] = []
        self._transfer_of: dict = {}             # Connection -> index of its transfer in results
        self.rx_conn: list = []
        self.tx_conn: list = []
        self.events: list[dict] = []
        self._rng = random.Random(seed)
        self._qp = 0x100

    def endpoint(self, host: str, mode: str) -> Endpoint:
        key = f"{host}/{mode}"
        if key not in self.endpoints:
            cfg = self.config if mode == self.config.mode else _with_mode(self.config, mode)
            ep = Endpoint(host, cfg, rng_seed=self._rng.getrandbits(32))
            self.endpoints[key] = ep
            if self.net.hosts[host].endpoint is None:
                self.net.hosts[host].attach(ep, lambda event, ep=ep, host=host: self._on_event(ep, host, event))
            else:
                raise ValueError(f"host {host}: one transport mode per host in a scenario")
        return self.endpoints[key]

    def done(self) -> bool:
        """True when every transfer has been delivered and acknowledged."""
        return all(r.delivered + r.corrupted >= r.messages and r.acked >= r.messages for r in self.results)

    def drain(self) -> None:
        """Take the events still waiting in the endpoints."""
        for key, ep in self.endpoints.items():
            host = key.split("/")[0]
            for ev in ep.drain_events():
                self._on_event(ep, host, ev)

    def _on_event(self, ep: Endpoint, host: str, event) -> None:
        """Count message deliveries and acknowledgements; keep every event's record, tagged with its host."""
        kind = type(event)
        if kind is MessageReceived:
            self._on_message(ep.connection(event.conn), event.msg_id, event.data)
        elif kind is MessageSent:
            res = self.results[self._transfer_of[ep.connection(event.conn)]]
            res.acked += 1
        record = event.as_record()
        record["host"] = host
        self.events.append(record)

    def _on_message(self, conn, msg_id: int, data: bytes) -> None:
        idx = self._transfer_of[conn]
        res = self.results[idx]
        key = (idx, msg_id)
        self.received[key] += 1
        if self.received[key] > 1:
            res.duplicates += 1
        elif self.expected.get(key) == data:
            res.delivered += 1
        else:
            res.corrupted += 1
        res.finish = self.net.sim.now

    def add(self, index: int, t: Transfer) -> None:
        mode = t.mode or self.config.mode
        a, b = self.endpoint(t.src, mode), self.endpoint(t.dst, mode)
        qa, qb = self._qp, self._qp + 1
        self._qp += 2
        ca = a.connect(t.dst, qa, qb, self.net.paths(t.src, t.dst, mode), self.net.paths(t.dst, t.src, mode))
        cb = b.connect(t.src, qb, qa, self.net.paths(t.dst, t.src, mode), self.net.paths(t.src, t.dst, mode))
        self._transfer_of[ca] = self._transfer_of[cb] = index
        msg_size = t.message_size or max(t.size, 1)
        chunks = [t.size - off if t.size - off < msg_size else msg_size for off in range(0, max(t.size, 1), msg_size)]
        res = TransferResult(t, len(chunks))
        self.results.append(res)
        self.tx_conn.append(ca)
        self.rx_conn.append(cb)
        payloads = [self._rng.randbytes(n) for n in chunks]

        def start():
            for data in payloads:
                msg_id = a.send_message(ca, data)
                self.expected[(index, msg_id)] = data
            self.net.hosts[t.src].service()

        self.net.at(t.start, start)


def _with_mode(config: TransportConfig, mode: str) -> TransportConfig:
    return replace(config, mode=mode)


def run_transfers(net: Network, transfers: list[Transfer], config: TransportConfig | None = None,
                  until: float = 1.0, sample_interval: float = 100e-6, seed: int = 0,
                  stop_when_done: bool = True) -> ScenarioResult:
    """Run `transfers` on `net` until they all complete (or `until`); return results.

    Faults and repairs are scheduled beforehand with `net.at(t, ...)`. Deterministic for a
    given network, config and seed.
    """
    config = config or TransportConfig()
    session = _Session(net, config, seed)
    for i, t in enumerate(transfers):
        session.add(i, t)
    sim = net.sim
    goodput: list[tuple[float, list[float]]] = []
    last = [0] * len(transfers)
    last_t = [0.0]

    def sample(reschedule: bool = True):
        now = sim.now
        cur = [c.stats["payload_bytes_received"] for c in session.rx_conn]
        if now > last_t[0]:
            goodput.append((now, [(c - l) * 8 / (now - last_t[0]) for c, l in zip(cur, last)]))
        last[:] = cur
        last_t[0] = now
        session.drain()
        if reschedule and not (stop_when_done and session.done()):
            sim.after(sample_interval, sample)

    sim.after(sample_interval, sample)
    sim.run(until=until, stop=(session.done if stop_when_done else None))
    if sim.now > last_t[0]:
        sample(reschedule=False)                # the last, shorter interval
    session.drain()
    for res, ca, cb in zip(session.results, session.tx_conn, session.rx_conn):
        res.sender_stats = dict(ca.stats)
        res.receiver_stats = dict(cb.stats)
    return ScenarioResult(session.results, goodput, session.events, sim.now)
