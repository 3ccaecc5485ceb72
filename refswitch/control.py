"""The reference switch's runtime control socket: egress queue rates changed while it runs.

P4Runtime has no message for a queue's rate; BMv2 takes it through its thrift CLI
(`set_queue_rate`). The model takes the same change on a unix socket (`--control PATH`), one
command a line, one answer a line:

    set_queue_rate PORT RATE_BPS     ->  ok            (0: unlimited)
    get_queue_rate PORT              ->  ok RATE_BPS
    anything else                    ->  error: <why>

The testbed slows a gray switch with it (`testbed.nodes.RefSwitch.set_queue_rates`). The server
runs in a thread of the switch process; a rate is one attribute of the queue, read by the event
loop at each departure, so a change applies from the next packet on.
"""
from __future__ import annotations

import logging
import os
import socket
import socketserver
import threading

from refswitch.queues import EgressQueues

log = logging.getLogger("mrc.refswitch")

MAX_LINE = 256                  # longest command line read


class ControlError(RuntimeError):
    """The switch refused a control command or could not be reached; the message says which."""


def execute(queues: EgressQueues, line: str) -> str:
    """Run one command line on `queues`; return its answer line (without the newline)."""
    words = line.split()
    if not words:
        return "error: empty command"
    verb, args = words[0], words[1:]
    try:
        if verb == "set_queue_rate" and len(args) == 2:
            port, rate = _integer("PORT", args[0]), _integer("RATE_BPS", args[1])
            queues.configure(port, rate_bps=rate)
            return "ok"
        if verb == "get_queue_rate" and len(args) == 1:
            port = _integer("PORT", args[0])
            return f"ok {queues.queue(port).rate_bps}"
    except ValueError as exc:
        return f"error: {exc}"
    return (f"error: unknown command {line.strip()!r} (set_queue_rate PORT RATE_BPS, "
            f"get_queue_rate PORT)")


def _integer(name: str, text: str) -> int:
    if not text.isdigit():
        raise ValueError(f"{name} {text!r} is not a non-negative integer")
    return int(text)


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        while True:
            line = self.rfile.readline(MAX_LINE)
            if not line:
                return
            answer = execute(self.server.queues, line.decode(errors="replace"))
            self.wfile.write(answer.encode() + b"\n")


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class ControlServer:
    """Serves control commands for `queues` on the unix socket `path` (in a thread)."""

    def __init__(self, queues: EgressQueues, path: str) -> None:
        self.path = path
        if os.path.exists(path):
            os.unlink(path)
        self._server = _Server(path, _Handler)
        self._server.queues = queues
        self._thread = threading.Thread(target=self._server.serve_forever, name="control", daemon=True)

    def start(self) -> None:
        self._thread.start()
        log.info("control socket on %s", self.path)

    def stop(self) -> None:
        """Stop serving and remove the socket file."""
        self._server.shutdown()
        self._server.server_close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def request(path: str, commands: list[str], timeout: float = 5.0) -> list[str]:
    """Send `commands` to the switch whose control socket is `path`; return the answers.
    Raises ControlError when the switch cannot be reached or refuses a command."""
    answers = []
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(path)
            reader = sock.makefile("rb")
            for command in commands:
                sock.sendall(command.encode() + b"\n")
                answer = reader.readline(MAX_LINE).decode(errors="replace").strip()
                if not answer.startswith("ok"):
                    raise ControlError(f"switch control {path}: {command!r}: {answer or 'no answer'}")
                answers.append(answer)
    except OSError as exc:
        raise ControlError(f"switch control {path}: {exc}") from None
    return answers
