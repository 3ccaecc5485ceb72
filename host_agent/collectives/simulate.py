"""Run a collective over the in-process network (netsim): one Endpoint per rank, same code as the agent.

    net = netsim.from_topology(topo, controller.routes.compute_programs(topo), netsim.Simulator(1))
    run = simulate(net, "allreduce", dict(elements=100_000, chunk_bytes=32768), TransportConfig(...))
    assert all(r.ok for r in run.results)

Rank i runs on the i-th host of `hosts` (default: the network's hosts in order). Faults and
repairs are scheduled on `net` beforehand (`net.at(t, ...)`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from host_agent.collectives import Collective, CollectiveResult, make_collective
from host_agent.collectives.driver import EndpointMessenger
from host_agent.transport import Endpoint, TransportConfig

QP_BASE = 0x1000


def connection_qp(src_rank: int, dst_rank: int, world: int) -> int:
    """The QP rank `src_rank` uses for its connection to `dst_rank` (distinct for every ordered pair)."""
    return QP_BASE + src_rank * world + dst_rank


@dataclass
class SimulatedRun:
    """Outcome of one simulated collective."""

    results: list[CollectiveResult]
    collectives: list[Collective]
    endpoints: list[Endpoint]
    end: float                                   # simulated time when the run stopped
    events: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every rank finished with a bit-exact result."""
        return all(r.ok for r in self.results)


def simulate(net, kind: str, params: dict, config: TransportConfig | None = None,
             hosts: list[str] | None = None, until: float = 1.0, seed: int = 0) -> SimulatedRun:
    """Run collective `kind` with `params` on `net` until every rank is done (or `until` seconds)."""
    config = config or TransportConfig()
    hosts = hosts or list(net.hosts)
    world = len(hosts)
    sim = net.sim
    endpoints, messengers, collectives = [], [], []
    for rank, host in enumerate(hosts):
        ep = Endpoint(host, config, rng_seed=seed * 7919 + rank)
        messenger = EndpointMessenger(ep)
        collective = make_collective(kind, rank, world, messenger, **params)
        endpoints.append(ep)
        messengers.append(messenger)
        collectives.append(collective)
    for rank, host in enumerate(hosts):
        for peer in collectives[rank].peers():
            conn = endpoints[rank].connect(
                hosts[peer], local_qp=connection_qp(rank, peer, world),
                remote_qp=connection_qp(peer, rank, world),
                paths=net.paths(host, hosts[peer], config.mode),
                reverse_paths=net.paths(hosts[peer], host, config.mode))
            messengers[rank].add_peer(peer, conn)
        messengers[rank].attach(collectives[rank])
    events: list[dict] = []
    for rank, host in enumerate(hosts):
        net.hosts[host].attach(endpoints[rank], _recorder(messengers[rank], host, events))

    def start() -> None:
        for rank, host in enumerate(hosts):
            collectives[rank].start(sim.now)
            net.hosts[host].service()

    sim.at(sim.now, start)
    sim.run(until=until, stop=lambda: all(c.done for c in collectives))
    for host, ep, messenger in zip(hosts, endpoints, messengers):
        handle = _recorder(messenger, host, events)
        for event in ep.drain_events():
            handle(event)
    return SimulatedRun([c.result() for c in collectives], collectives, endpoints, sim.now, events)


def _recorder(messenger: EndpointMessenger, host: str, records: list):
    """An event handler: the messenger takes the event, `records` gets its record tagged with `host`."""
    def handle(event) -> None:
        messenger.handle(event)
        record = event.as_record()
        record["host"] = host
        records.append(record)
    return handle
