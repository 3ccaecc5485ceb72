"""The agent's control operations: the OCP MRC EV operations, served on a unix socket.

The protocol is wire.control's framed JSON lines (request, response, event); this module holds the
agent's operations as typed requests and `ControlService`, which answers them on one endpoint
without sockets. The agent serves it with `wire.control.ControlServer` from its select loop; the CLI,
the testbed and the tests ask with `wire.control.ControlClient`.

Operations (a connection is named by `peer`, e.g. "rank1", and `qp`, our QP number, when the
peer has several):

- ``{"op": "connections"}``: the connections, `[{"peer", "qp", "name", "mode"}]`.
- ``{"op": "query", "peer", "ev"}``: QUERY_EV_STATE, one EV (`ev`, `state`, `port`, `plane`,
  `path`, `dst`, `drop_count`, `backup`, `slot`).
- ``{"op": "array", "peer"}``: QUERY_EV_ARRAY, every slot (a backup standing in: `in_use`).
- ``{"op": "modify", "peer", "ev", "state"}``: MODIFY_EV_STATE (GOOD, ASSUMED_BAD, DENIED, UNKNOWN);
  ``"deny"`` and ``"allow"`` (DENIED -> UNKNOWN, probed before use) are shorthands.
- ``{"op": "replace", "peer", "ev", "new_ev"?}``: REPLACE_EV; the new EV is UNKNOWN until probed.
- ``{"op": "probe", "peer", "ev", "timeout_ns"?}``: one probe; the response comes when it is
  answered (`port`, `rtt_ns`) or times out (`rtt_ns` null).
- ``{"op": "subscribe", "states"?: ["GOOD", "ASSUMED_BAD"]}``: then an event
  ``{"event": "ev_state", "data": {...ev_state record...}}`` for every EV entering one of those
  states (only GOOD and ASSUMED_BAD may be subscribed to, as in the API).

EV values are numbers or strings ("0x1f").
"""
from __future__ import annotations

from typing import Callable, Literal, Optional, Union

from pydantic import Field

from host_agent.transport import events as transport_events
from host_agent.transport.endpoint import Connection, Endpoint
from wire.control import LATER, Handlers, Operations, Request, RequestError, event, response

SUBSCRIBABLE = ("GOOD", "ASSUMED_BAD")
EV_STATE = "ev_state"             # the event a subscriber gets

EvValue = Union[int, str]         # a number, or its text ("0x1f")


class Connections(Request):
    op: Literal["connections"]


class OnConnection(Request):
    """A request about one connection: `peer`, and `qp` when the peer has several."""

    peer: str
    qp: Optional[EvValue] = None


class Array(OnConnection):
    op: Literal["array"]


class Query(OnConnection):
    op: Literal["query"]
    ev: EvValue


class Modify(OnConnection):
    op: Literal["modify"]
    ev: EvValue
    state: str


class Deny(OnConnection):
    op: Literal["deny"]
    ev: EvValue


class Allow(OnConnection):
    op: Literal["allow"]
    ev: EvValue


class Replace(OnConnection):
    op: Literal["replace"]
    ev: EvValue
    new_ev: Optional[EvValue] = None


class ProbeRequest(OnConnection):
    op: Literal["probe"]
    ev: EvValue
    timeout_ns: Optional[int] = Field(None, gt=0, description="nanoseconds")


class Subscribe(Request):
    op: Literal["subscribe"]
    states: list[Literal[SUBSCRIBABLE]] = Field(list(SUBSCRIBABLE), min_length=1)


OPERATIONS = Operations(Connections, Array, Query, Modify, Deny, Allow, Replace, ProbeRequest, Subscribe)


class ControlService(Handlers):
    """The EV operations on one endpoint, answered as messages. `now()` gives the transport time."""

    def __init__(self, endpoint: Endpoint, now: Callable[[], float]) -> None:
        super().__init__(OPERATIONS, {
            "connections": self._connections, "query": self._query, "array": self._array,
            "modify": self._modify, "deny": self._deny, "allow": self._allow, "replace": self._replace,
            "probe": self._probe, "subscribe": self._subscribe})
        self.endpoint = endpoint
        self.now = now
        self._probes: dict[int, tuple[object, object]] = {}     # request id -> (client, request id to echo)
        self._subscribers: dict[object, set[str]] = {}         # client -> states

    # --- requests --------------------------------------------------------------------------------
    def connection(self, request: OnConnection) -> Connection:
        """The connection `peer` (and `qp`, when needed) name."""
        peer, qp = request.peer, request.qp
        conns = [c for c in self.endpoint.connections.values() if c.peer == peer]
        if not conns:
            peers = sorted({c.peer for c in self.endpoint.connections.values()})
            raise RequestError(f"peer: {peer!r} is not connected (peers: {', '.join(peers) or 'none'})")
        if qp is not None:
            try:
                qp = int(qp, 0) if isinstance(qp, str) else int(qp)
            except (TypeError, ValueError):
                raise RequestError(f"qp: {qp!r} is not a number") from None
            conns = [c for c in conns if c.local_qp == qp]
            if not conns:
                raise RequestError(f"qp: {qp:#x} is not a QP of ours to {peer}")
        if len(conns) > 1:
            raise RequestError(f"qp: {peer} has {len(conns)} connections "
                               f"({', '.join(hex(c.local_qp) for c in conns)}); say which")
        return conns[0]

    def _connections(self, _client, _request: Connections):
        return [{"peer": c.peer, "qp": c.local_qp, "name": c.name, "mode": c.mode}
                for c in self.endpoint.connections.values()]

    def _query(self, _client, request: Query):
        return self.endpoint.query_ev(self.connection(request), request.ev)

    def _array(self, _client, request: Array):
        return self.endpoint.query_ev_array(self.connection(request))

    def _modify(self, _client, request: Modify):
        return self.endpoint.modify_ev_state(self.connection(request), request.ev, request.state, self.now())

    def _deny(self, _client, request: Deny):
        return self.connection(request).control.deny(request.ev, self.now())

    def _allow(self, _client, request: Allow):
        return self.connection(request).control.allow(request.ev, self.now())

    def _replace(self, _client, request: Replace):
        return self.endpoint.replace_ev(self.connection(request), request.ev, self.now(), request.new_ev)

    def _probe(self, client, request: ProbeRequest):
        conn = self.connection(request)
        timeout = None if request.timeout_ns is None else request.timeout_ns * 1e-9
        try:
            req = self.endpoint.probe_ev(conn, request.ev, self.now(), timeout)
        except ValueError as err:
            raise RequestError(str(err).replace("timeout:", "timeout_ns:", 1)) from None
        self._probes[req] = (client, request.id)
        return LATER

    def _subscribe(self, client, request: Subscribe):
        self._subscribers[client] = set(request.states)
        return {"states": sorted(request.states)}

    # --- events --------------------------------------------------------------------------------------
    def on_events(self, events: list) -> list[tuple[object, dict]]:
        """(client, message) pairs the transport's `events` call for: probe results to their
        askers, EV state changes to their subscribers."""
        out = []
        for item in events:
            if type(item) is transport_events.ProbeResult:
                asker = self._probes.pop(item.req_id, None)
                if asker is not None:
                    client, rid = asker
                    out.append((client, response(rid, {"ev": item.ev, "port": item.port, "rtt_ns": item.rtt_ns,
                                                       "peer": item.conn.peer})))
            elif type(item) is transport_events.EvStateChanged and self._subscribers:
                for client, states in self._subscribers.items():
                    if item.new in states:
                        out.append((client, event(EV_STATE, item.as_record())))
        return out

    def forget(self, client) -> None:
        """`client` went away: drop its subscription and pending probes."""
        self._subscribers.pop(client, None)
        for req, (who, _) in list(self._probes.items()):
            if who is client:
                del self._probes[req]
