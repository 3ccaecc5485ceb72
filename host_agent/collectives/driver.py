"""Run a collective over the transport's Endpoint.

`EndpointMessenger` is the collective's `Messenger`: `send(peer, data)` becomes
`Endpoint.send_message` on the connection to that peer. Whoever drives the endpoint hands it
the endpoint's events (`handle(event)`, after `receive`/`poll` returned): a `MessageReceived` on
a peer's connection goes to the collective with the sender's rank, a `MessageSent` tells the
collective one of its messages was fully acknowledged. It keeps byte counters that the agent
turns into goodput samples.
"""
from __future__ import annotations

from host_agent.collectives.base import Collective
from host_agent.transport.events import MessageReceived, MessageSent


class EndpointMessenger:
    """Binds one collective to an Endpoint and one connection per peer rank.

    Typical use: make the messenger, make the collective with it, `add_peer` a connection for
    each rank in `collective.peers()`, `attach(collective)`, then `collective.start(now)`, and
    `handle` every event the endpoint reports.
    """

    def __init__(self, endpoint) -> None:
        self.endpoint = endpoint
        self.connections: dict[int, list] = {}      # rank -> its connections (several QPs: messages take turns)
        self._turn: dict[int, int] = {}
        self._rank_of_qp: dict[int, int] = {}
        self.collective: Collective | None = None
        self.rx_bytes = 0               # payload bytes of whole messages received
        self.tx_acked_bytes = 0         # payload bytes of own messages fully acknowledged
        self.tx_queued_bytes = 0
        self.foreign_messages = 0       # messages on connections that belong to no peer rank

    def add_peer(self, rank: int, connection) -> None:
        """Messages to and from rank `rank` go over `connection` (an Endpoint connection, or a
        list of them: the queue pairs of `Endpoint.connect_qps`, which messages take in turn)."""
        conns = list(connection) if isinstance(connection, (list, tuple)) else [connection]
        if not conns:
            raise ValueError(f"add_peer: no connection to rank {rank}")
        self.connections.setdefault(rank, []).extend(conns)
        self._turn.setdefault(rank, 0)
        for conn in conns:
            self._rank_of_qp[conn.local_qp] = rank

    def attach(self, collective: Collective) -> None:
        """The collective whose messages this messenger carries."""
        self.collective = collective

    def detach(self) -> None:
        """Carry no collective's messages any more: let go of the collective attached (it refers to
        this messenger, and this messenger to it: letting go on one side breaks the cycle)."""
        self.collective = None

    def send(self, peer: int, data: bytes) -> None:
        """Queue one message to rank `peer`."""
        conns = self.connections.get(peer)
        if not conns:
            raise KeyError(f"no connection to rank {peer}; add_peer it first")
        turn = self._turn[peer]
        conn = conns[turn % len(conns)]
        self._turn[peer] = turn + 1
        self.tx_queued_bytes += len(data)
        self.endpoint.send_message(conn, data)

    def handle(self, event) -> None:
        """Take one event of the endpoint: messages received and sent reach the collective."""
        kind = type(event)
        if kind is MessageReceived:
            rank = self._rank_of_qp.get(event.conn.local_qp)
            if rank is None or self.collective is None:
                self.foreign_messages += 1
                return
            self.rx_bytes += len(event.data)
            self.collective.on_message(rank, event.data, event.t)
        elif kind is MessageSent:
            rank = self._rank_of_qp.get(event.conn.local_qp)
            if rank is None:
                return
            self.tx_acked_bytes += event.size
            if self.collective is not None:
                self.collective.on_send_complete(rank, event.t)
