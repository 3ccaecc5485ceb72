"""The agent's control socket: the OCP MRC EV operations over a unix socket, and its client.

Protocol: JSON lines, one request per line, one response line per request (in order), except
that a `subscribe` request turns its connection into a stream of event lines. Every request is an
object with `op` and, optionally, `id` (echoed back). Responses are
``{"id": ..., "ok": true, "result": ...}`` or ``{"id": ..., "ok": false, "error": "<field>: ..."}``.

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
- ``{"op": "subscribe", "states"?: ["GOOD", "ASSUMED_BAD"]}``: then a line
  ``{"event": {...ev_state record...}}`` for every EV entering one of those states (only GOOD and
  ASSUMED_BAD may be subscribed to, as in the API).

EV values are numbers or strings ("0x1f"). `ControlService` is the protocol without sockets;
`ControlServer` serves it on a unix socket from the agent's select loop; `ControlClient` is the
blocking client the CLI and tests use.
"""
from __future__ import annotations

import json
import os
import socket
from typing import Callable

from host_agent.transport import events as transport_events
from host_agent.transport.endpoint import Connection, Endpoint

SUBSCRIBABLE = ("GOOD", "ASSUMED_BAD")
MAX_LINE = 64 * 1024          # a request line longer than this is refused
MAX_SOCKET_PATH = 107         # bytes of a unix socket path (sun_path less its NUL)


class ControlError(Exception):
    """A request the agent refused (its message names the field), or a broken control connection."""


class ControlSocketError(OSError):
    """The control socket cannot be opened (bad path, or another agent listens on it)."""


class RequestError(ValueError):
    """A bad request; the message starts with the field it is about."""


def _field(request: dict, name: str, required: bool = True):
    if name not in request:
        if required:
            raise RequestError(f"{name}: missing")
        return None
    return request[name]


class ControlService:
    """Requests on one endpoint, answered as dicts. `now()` gives the transport time."""

    def __init__(self, endpoint: Endpoint, now: Callable[[], float]) -> None:
        self.endpoint = endpoint
        self.now = now
        self._probes: dict[int, tuple[object, object]] = {}     # request id -> (client, request id to echo)
        self._subscribers: dict[object, set[str]] = {}         # client -> states

    # --- requests --------------------------------------------------------------------------------
    def handle(self, client, line: str) -> dict | None:
        """The response to one request line from `client`, or None when it comes later (probe)."""
        rid = None
        try:
            try:
                request = json.loads(line)
            except json.JSONDecodeError as err:
                raise RequestError(f"request: not JSON ({err.msg} at column {err.colno})") from None
            if not isinstance(request, dict):
                raise RequestError("request: not a JSON object")
            rid = request.get("id")
            op = _field(request, "op")
            handler = self._OPS.get(op) if isinstance(op, str) else None
            if handler is None:
                raise RequestError(f"op: {op!r} is not one of {', '.join(sorted(self._OPS))}")
            result = handler(self, client, request, rid)
        except (RequestError, ValueError, KeyError) as err:
            message = err.args[0] if err.args else str(err)
            return {"id": rid, "ok": False, "error": str(message)}
        if result is _LATER:
            return None
        return {"id": rid, "ok": True, "result": result}

    def connection(self, request: dict) -> Connection:
        """The connection `peer` (and `qp`, when needed) name."""
        peer = _field(request, "peer")
        qp = _field(request, "qp", required=False)
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

    def _connections(self, _client, _request, _rid):
        return [{"peer": c.peer, "qp": c.local_qp, "name": c.name, "mode": c.mode}
                for c in self.endpoint.connections.values()]

    def _query(self, _client, request, _rid):
        return self.endpoint.query_ev(self.connection(request), _field(request, "ev"))

    def _array(self, _client, request, _rid):
        return self.endpoint.query_ev_array(self.connection(request))

    def _modify(self, _client, request, _rid):
        return self.endpoint.modify_ev_state(self.connection(request), _field(request, "ev"),
                                             _field(request, "state"), self.now())

    def _deny(self, _client, request, _rid):
        return self.connection(request).control.deny(_field(request, "ev"), self.now())

    def _allow(self, _client, request, _rid):
        return self.connection(request).control.allow(_field(request, "ev"), self.now())

    def _replace(self, _client, request, _rid):
        return self.endpoint.replace_ev(self.connection(request), _field(request, "ev"), self.now(),
                                        _field(request, "new_ev", required=False))

    def _probe(self, client, request, rid):
        conn = self.connection(request)
        timeout_ns = _field(request, "timeout_ns", required=False)
        timeout = None
        if timeout_ns is not None:
            if not isinstance(timeout_ns, int) or isinstance(timeout_ns, bool) or timeout_ns <= 0:
                raise RequestError(f"timeout_ns: {timeout_ns!r} is not a positive whole number of nanoseconds")
            timeout = timeout_ns * 1e-9
        try:
            req = self.endpoint.probe_ev(conn, _field(request, "ev"), self.now(), timeout)
        except ValueError as err:
            raise RequestError(str(err).replace("timeout:", "timeout_ns:", 1)) from None
        self._probes[req] = (client, rid)
        return _LATER

    def _subscribe(self, client, request, _rid):
        states = _field(request, "states", required=False)
        states = list(SUBSCRIBABLE) if states is None else states
        if not isinstance(states, list) or not states or any(s not in SUBSCRIBABLE for s in states):
            raise RequestError(f"states: {states!r} must be a non-empty list of {', '.join(SUBSCRIBABLE)}")
        self._subscribers[client] = set(states)
        return {"states": sorted(states)}

    _OPS = {"connections": _connections, "query": _query, "array": _array, "modify": _modify,
            "deny": _deny, "allow": _allow, "replace": _replace, "probe": _probe, "subscribe": _subscribe}

    # --- events --------------------------------------------------------------------------------------
    def on_events(self, events: list) -> list[tuple[object, dict]]:
        """(client, line object) pairs the transport's `events` call for: probe results to their
        askers, EV state changes to their subscribers."""
        out = []
        for event in events:
            if type(event) is transport_events.ProbeResult:
                asker = self._probes.pop(event.req_id, None)
                if asker is not None:
                    client, rid = asker
                    out.append((client, {"id": rid, "ok": True,
                                         "result": {"ev": event.ev, "port": event.port, "rtt_ns": event.rtt_ns,
                                                    "peer": event.conn.peer}}))
            elif type(event) is transport_events.EvStateChanged and self._subscribers:
                for client, states in self._subscribers.items():
                    if event.new in states:
                        out.append((client, {"event": event.as_record()}))
        return out

    def forget(self, client) -> None:
        """`client` went away: drop its subscription and pending probes."""
        self._subscribers.pop(client, None)
        for req, (who, _) in list(self._probes.items()):
            if who is client:
                del self._probes[req]


_LATER = object()


class _Client:
    """One accepted control connection: its socket and unparsed input."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""


class ControlServer:
    """`ControlService` on a unix stream socket at `path`, served from the caller's select loop
    (`fds`, `on_readable`, `on_events`); `close` removes the socket file."""

    def __init__(self, path: str, service: ControlService) -> None:
        self.path = path
        self.service = service
        if len(os.fsencode(path)) > MAX_SOCKET_PATH:
            raise ControlSocketError(f"control socket {path}: longer than {MAX_SOCKET_PATH} bytes "
                                     f"(the limit of a unix socket path)")
        _clear_stale(path)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.listener.bind(path)
        except OSError as err:
            self.listener.close()
            raise ControlSocketError(f"control socket {path}: {err.strerror}") from None
        self.listener.listen(8)
        self.listener.setblocking(False)
        self.clients: dict[int, _Client] = {}

    def fds(self) -> list[int]:
        """The descriptors to watch for reading."""
        return [self.listener.fileno(), *self.clients]

    def owns(self, fd: int) -> bool:
        return fd == self.listener.fileno() or fd in self.clients

    def on_readable(self, fd: int) -> None:
        """Accept a connection, or read and answer the complete request lines of one."""
        if fd == self.listener.fileno():
            try:
                sock, _ = self.listener.accept()
            except BlockingIOError:
                return
            sock.setblocking(False)
            self.clients[sock.fileno()] = _Client(sock)
            return
        client = self.clients[fd]
        try:
            data = client.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop(client)
            return
        client.buffer += data
        while b"\n" in client.buffer:
            line, client.buffer = client.buffer.split(b"\n", 1)
            if line.strip():
                self._answer(client, self.service.handle(client, line.decode("utf-8", "replace")))
        if len(client.buffer) > MAX_LINE:
            self._send(client, {"id": None, "ok": False, "error": f"request: longer than {MAX_LINE} bytes"})
            self._drop(client)

    def on_events(self, events: list) -> None:
        """Send what the transport's events call for (probe results, subscribed EV changes)."""
        for client, line in self.service.on_events(events):
            self._send(client, line)

    def _answer(self, client: _Client, response: dict | None) -> None:
        if response is not None:
            self._send(client, response)

    def _send(self, client: _Client, obj: dict) -> None:
        if client.sock.fileno() < 0:
            return
        try:
            client.sock.setblocking(True)
            client.sock.settimeout(1.0)           # a client that stops reading is dropped, not waited for
            client.sock.sendall((json.dumps(obj) + "\n").encode())
            client.sock.setblocking(False)
        except OSError:
            self._drop(client)

    def _drop(self, client: _Client) -> None:
        self.service.forget(client)
        self.clients.pop(client.sock.fileno(), None)
        client.sock.close()

    def close(self) -> None:
        """Close every connection and the listener; remove the socket file."""
        for client in list(self.clients.values()):
            self._drop(client)
        self.listener.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def _clear_stale(path: str) -> None:
    """Remove a socket file no agent listens on any more; refuse one that is alive."""
    if not os.path.exists(path):
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        os.unlink(path)
        return
    finally:
        probe.close()
    raise ControlSocketError(f"control socket {path}: another agent is listening on it")


class ControlClient:
    """Blocking client of an agent's control socket: `request(op, **fields)` returns the result or
    raises ControlError with the agent's message; `events()` follows a subscription."""

    def __init__(self, path: str, timeout: float = 5.0) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(path)
        except OSError as err:
            self.sock.close()
            raise ControlError(f"control socket {path}: {err.strerror or err} (is the agent running?)") from None
        self._file = self.sock.makefile("rb")
        self._next_id = 0

    def __enter__(self) -> "ControlClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()
        self.sock.close()

    def send_line(self, line: str) -> dict:
        """Send one raw request line; return the response object (for tests of bad input)."""
        self.sock.sendall(line.encode() + b"\n")
        return self._read()

    def _read(self) -> dict:
        try:
            line = self._file.readline()
        except socket.timeout:
            raise ControlError(f"control socket {self.path}: no answer in time") from None
        if not line:
            raise ControlError(f"control socket {self.path}: the agent closed the connection")
        return json.loads(line)

    def request(self, op: str, **fields):
        """One operation; its result, or ControlError with the agent's message."""
        self._next_id += 1
        response = self.send_line(json.dumps({"op": op, "id": self._next_id, **fields}))
        if not response.get("ok"):
            raise ControlError(response.get("error", "request refused"))
        return response["result"]

    def subscribe(self, states: list[str] | None = None) -> dict:
        """Subscribe this connection to EV events (GOOD and ASSUMED_BAD by default)."""
        fields = {} if states is None else {"states": states}
        return self.request("subscribe", **fields)

    def next_event(self) -> dict:
        """The next subscribed EV event record (blocks up to the timeout)."""
        while True:
            obj = self._read()
            if "event" in obj:
                return obj["event"]
