"""One protocol for every control socket and helper process: framed JSON lines.

Framing: one JSON object per line (UTF-8, ended by a newline, at most MAX_LINE bytes on a socket).
Three shapes of message:

    request   {"op": NAME, "id": ANY, ...fields}                  asker -> server ("id" optional, echoed)
    response  {"id": ID, "ok": true, "result": ANY}               one per request, in order
              {"id": ID, "ok": false, "error": "<field>: <why>"}  a refusal names the field at fault
    event     {"event": NAME, "data": ANY}                        unasked: subscriptions, a helper's news

A server lists its operations as `Request` models (pydantic, `op: Literal["name"]` and typed
fields); `Operations` reads a line into the right one, so a bad request is refused naming its field
in the words of wire/schema.py. Who speaks it:

- the agent's control socket (host_agent.control: EV query, modify, replace, probe, subscribe),
- the model switch's control socket (refswitch.control: egress queue rates),
- the prober and the load generator over their stdin/stdout (testbed.prober, testbed.loadgen).

`ControlServer` serves a service on a unix socket, from the owner's select loop (`fds`,
`on_readable`) or from its own thread (`start`, `stop`); `ControlClient` is the blocking client;
`write_message`/`read_message` frame the same messages on a pipe.
"""
from __future__ import annotations

import io
import json
import os
import select
import socket
import threading
from typing import Any, Callable, IO, Optional, Protocol

from wire.schema import Schema, SchemaError, check

MAX_LINE = 64 * 1024          # a request line longer than this is refused (sockets)
MAX_SOCKET_PATH = 107         # bytes of a unix socket path (sun_path less its NUL)
LATER = object()              # what an operation returns when its response comes later (e.g. a probe)


class ControlError(Exception):
    """A request the server refused (its message names the field), or a broken control connection."""


class ControlSocketError(OSError):
    """A control socket cannot be opened (a bad path, or another process listens on it)."""


class RequestError(ValueError):
    """A bad request; the message starts with the field it is about."""


# --- framing and shapes --------------------------------------------------------------------------
def encode(message: dict) -> bytes:
    """One message as its line (with the newline)."""
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def decode(line: bytes | str) -> dict:
    """One line as a message; RequestError ('request: ...') when it is not a JSON object."""
    try:
        message = json.loads(line)
    except json.JSONDecodeError as err:
        raise RequestError(f"request: not JSON ({err.msg} at column {err.colno})") from None
    if not isinstance(message, dict):
        raise RequestError("request: not a JSON object")
    return message


def response(rid: Any, result: Any) -> dict:
    """The answer to the request `rid`."""
    return {"id": rid, "ok": True, "result": result}


def refusal(rid: Any, error: str) -> dict:
    """The refusal of the request `rid`; `error` starts with the field at fault."""
    return {"id": rid, "ok": False, "error": error}


def event(name: str, data: Any = None) -> dict:
    """An unasked message: `name` and its data."""
    return {"event": name, "data": data}


def result_of(message: dict, where: str) -> Any:
    """The result of a response, or ControlError with the server's message (prefixed by `where`)."""
    if "ok" not in message:
        raise ControlError(f"{where}: not a response: {message!r}"[:300])
    if not message["ok"]:
        raise ControlError(str(message.get("error", "request refused")))
    return message.get("result")


class Request(Schema):
    """A request: its operation and the id echoed in the response; subclasses add typed fields."""

    op: str
    id: Any = None


class Operations:
    """The requests a server takes: op name -> Request model. `parse` reads a message into one."""

    def __init__(self, *models: type[Request]) -> None:
        self.models: dict[str, type[Request]] = {}
        for model in models:
            (name,) = model.model_fields["op"].annotation.__args__     # op: Literal["name"]
            self.models[name] = model

    def parse(self, message: dict) -> Request:
        """The typed request of `message`; RequestError naming the field otherwise."""
        op = message.get("op")
        if "op" not in message:
            raise RequestError("op: missing")
        if not isinstance(op, str) or op not in self.models:
            raise RequestError(f"op: {op!r} is not one of {', '.join(sorted(self.models))}")
        try:
            return check(self.models[op], message)
        except SchemaError as error:
            raise RequestError(str(error)) from None


class Service(Protocol):
    """What a ControlServer serves: the response to a request line (None: later, or never), and
    the end of a client."""

    def handle(self, client: object, line: bytes) -> Optional[dict]: ...

    def forget(self, client: object) -> None: ...


class Handlers:
    """A Service from Operations and one function per op: `fn(client, request)` returns the result
    (or LATER); a RequestError or ValueError it raises is the refusal."""

    def __init__(self, operations: Operations, handlers: dict[str, Callable[[object, Request], Any]]) -> None:
        self.operations = operations
        self.handlers = handlers

    def handle(self, client: object, line: bytes) -> Optional[dict]:
        rid = None
        try:
            message = decode(line)
            rid = message.get("id")
            request = self.operations.parse(message)
            result = self.handlers[request.op](client, request)
        except (RequestError, ValueError, KeyError) as err:
            return refusal(rid, str(err.args[0] if err.args else err))
        return None if result is LATER else response(rid, result)

    def forget(self, client: object) -> None:
        pass


# --- a unix socket server -----------------------------------------------------------------------
class _Client:
    """One accepted connection: its socket and unparsed input."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""


class ControlServer:
    """`service` on a unix stream socket at `path`. Driven by the owner's select loop (`fds`,
    `on_readable`) or by its own thread (`start`, `stop`); `close` removes the socket file.
    A stale socket file is replaced; one another process listens on is refused."""

    def __init__(self, path: str, service: Service, name: str = "control socket") -> None:
        self.path = path
        self.service = service
        self.name = name
        if len(os.fsencode(path)) > MAX_SOCKET_PATH:
            raise ControlSocketError(f"{name} {path}: longer than {MAX_SOCKET_PATH} bytes "
                                     f"(the limit of a unix socket path)")
        _clear_stale(path, name)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.listener.bind(path)
        except OSError as err:
            self.listener.close()
            raise ControlSocketError(f"{name} {path}: {err.strerror}") from None
        self.listener.listen(8)
        self.listener.setblocking(False)
        self.clients: dict[int, _Client] = {}
        self._lock = threading.Lock()            # send() may come from another thread than on_readable
        self._thread: Optional[threading.Thread] = None
        self._wake_r, self._wake_w = -1, -1

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
                answer = self.service.handle(client, line)
                if answer is not None:
                    self.send(client, answer)
        if len(client.buffer) > MAX_LINE:
            self.send(client, refusal(None, f"request: longer than {MAX_LINE} bytes"))
            self._drop(client)

    def send(self, client: object, message: dict) -> None:
        """Send one message to `client` (a connection `service.handle` was given); a client that
        stops reading is dropped, not waited for."""
        assert isinstance(client, _Client)
        with self._lock:
            if client.sock.fileno() < 0:
                return
            try:
                client.sock.setblocking(True)
                client.sock.settimeout(1.0)
                client.sock.sendall(encode(message))
                client.sock.setblocking(False)
            except OSError:
                self._drop(client)

    def _drop(self, client: _Client) -> None:
        self.service.forget(client)
        self.clients.pop(client.sock.fileno(), None)
        client.sock.close()

    # --- on its own thread ---------------------------------------------------------------------
    def start(self) -> None:
        """Serve from a thread of this process until `stop`."""
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            readable = select.select([self._wake_r, *self.fds()], [], [])[0]
            if self._wake_r in readable:
                return
            for fd in readable:
                if self.owns(fd):
                    self.on_readable(fd)

    def stop(self) -> None:
        """Stop the serving thread (if started) and close (see `close`)."""
        if self._thread is not None:
            os.write(self._wake_w, b"x")
            self._thread.join(timeout=5)
            os.close(self._wake_r)
            os.close(self._wake_w)
            self._thread = None
        self.close()

    def close(self) -> None:
        """Close every connection and the listener; remove the socket file."""
        for client in list(self.clients.values()):
            self._drop(client)
        self.listener.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def _clear_stale(path: str, name: str) -> None:
    """Remove a socket file no process listens on any more; refuse one that is alive."""
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
    raise ControlSocketError(f"{name} {path}: another process is listening on it")


# --- the blocking client ------------------------------------------------------------------------
class ControlClient:
    """Blocking client of a control socket: `request(op, **fields)` returns the result or raises
    ControlError with the server's message; `next_event()` follows a subscription. `server` names
    who should listen at `path`, for the error when nobody does."""

    def __init__(self, path: str, timeout: float = 5.0, server: str = "the agent") -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(path)
        except OSError as err:
            self.sock.close()
            raise ControlError(f"control socket {path}: {err.strerror or err} (is {server} running?)") from None
        self._file = self.sock.makefile("rb")
        self._next_id = 0
        self._events: list[dict] = []

    def __enter__(self) -> "ControlClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()
        self.sock.close()

    def send_line(self, line: str) -> dict:
        """Send one raw request line; return the response (events meanwhile are kept for next_event)."""
        try:
            self.sock.sendall(line.encode() + b"\n")
        except OSError as err:
            raise ControlError(f"control socket {self.path}: {err.strerror or err}") from None
        while True:
            message = self._read()
            if "event" not in message:
                return message
            self._events.append(message)

    def _read(self) -> dict:
        try:
            line = self._file.readline()
        except (socket.timeout, OSError):
            raise ControlError(f"control socket {self.path}: no answer in time") from None
        if not line:
            raise ControlError(f"control socket {self.path}: the server closed the connection")
        return json.loads(line)

    def request(self, op: str, **fields) -> Any:
        """One operation; its result, or ControlError with the server's message."""
        self._next_id += 1
        return result_of(self.send_line(json.dumps({"op": op, "id": self._next_id, **fields})),
                         f"control socket {self.path}")

    def next_event(self) -> Any:
        """The data of the next event (blocks up to the timeout)."""
        while not self._events:
            message = self._read()
            if "event" in message:
                self._events.append(message)
        return self._events.pop(0)["data"]


# --- on a pipe (helper processes) ----------------------------------------------------------------
def write_message(stream: IO, message: dict) -> None:
    """Send one message on a pipe (binary or text stream) and flush it."""
    line = encode(message)
    stream.write(line.decode() if isinstance(stream, io.TextIOBase) else line)
    stream.flush()


def read_message(stream: IO) -> Optional[dict]:
    """The next message on a pipe; None at its end."""
    line = stream.readline()
    if not line:
        return None
    return decode(line)
