"""Run a collective over the transport's Endpoint.

`EndpointMessenger` is the collective's `Messenger`: `send(peer, data)` becomes
`Endpoint.send_message` on the connection to that peer, whose completion is reported back to the
collective; whole messages the endpoint delivers are handed to the collective with the sender's
rank. It keeps byte counters that the agent turns into goodput samples.
"""
from __future__ import annotations

from typing import Callable

from host_agent.collectives.base import Collective


class EndpointMessenger:
    """Binds one collective to an Endpoint and one connection per peer rank.

    `clock()` returns the transport's current time (the same clock given to receive/poll).
    Typical use: make the messenger, make the collective with it, `add_peer` a connection for
    each rank in `collective.peers()`, `attach(collective)`, then `collective.start(now)`.
    """

    def __init__(self, endpoint, clock: Callable[[], float]) -> None:
        self.endpoint = endpoint
        self.clock = clock
        self.connections: dict[int, list] = {}      # rank -> its connections (several QPs: messages take turns)
        self._turn: dict[int, int] = {}
        self._rank_of_qp: dict[int, int] = {}
        self.collective: Collective | None = None
        self.rx_bytes = 0               # payload bytes of whole messages received
        self.tx_acked_bytes = 0         # payload bytes of own messages fully acknowledged
        self.tx_queued_bytes = 0
        self.foreign_messages = 0       # messages on connections that belong to no peer rank
        endpoint.on_message(self._on_message)

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

    def send(self, peer: int, data: bytes) -> None:
        """Queue one message to rank `peer`."""
        conns = self.connections.get(peer)
        if not conns:
            raise KeyError(f"no connection to rank {peer}; add_peer it first")
        turn = self._turn[peer]
        conn = conns[turn % len(conns)]
        self._turn[peer] = turn + 1
        size = len(data)
        self.tx_queued_bytes += size

        def completed(_msg_id: int) -> None:
            self.tx_acked_bytes += size
            if self.collective is not None:
                self.collective.on_send_complete(peer, self.clock())

        self.endpoint.send_message(conn, data, on_complete=completed)

    def _on_message(self, conn, _msg_id: int, data) -> None:
        rank = self._rank_of_qp.get(conn.local_qp)
        if rank is None or self.collective is None:
            self.foreign_messages += 1
            return
        self.rx_bytes += len(data)
        self.collective.on_message(rank, data, self.clock())
