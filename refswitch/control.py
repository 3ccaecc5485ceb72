"""The reference switch's runtime control: egress queue rates changed while it runs.

P4Runtime has no message for a queue's rate; BMv2 takes it through its thrift CLI
(`set_queue_rate`). The model takes the same change on a unix socket (`--control PATH`), in the
testbed's one control protocol (wire.control: a JSON request a line, a JSON response a line):

    {"op": "set_queue_rate", "port": PORT, "rate_bps": RATE}   -> result null   (0: unlimited)
    {"op": "get_queue_rate", "port": PORT}                     -> result {"rate_bps": RATE}

The testbed slows a gray switch with it (`testbed.nodes.RefSwitch.set_queue_rates`, through
`wire.control.ControlClient`). The server runs in a thread of the switch process; a rate is one
attribute of the queue, read by the event loop at each departure, so a change applies from the next
packet on.
"""
from __future__ import annotations

import logging
from typing import Literal

from pydantic import Field

from refswitch.queues import EgressQueues
from wire.control import ControlServer, Handlers, Operations, Request

log = logging.getLogger("mrc.refswitch")

SERVER = "the switch"             # who listens, for a client's error when nobody does


class SetQueueRate(Request):
    """Serve the egress queue of `port` at `rate_bps` (0: unlimited)."""

    op: Literal["set_queue_rate"]
    port: int = Field(ge=0)
    rate_bps: int = Field(ge=0)


class GetQueueRate(Request):
    """The rate the egress queue of `port` is served at."""

    op: Literal["get_queue_rate"]
    port: int = Field(ge=0)


OPERATIONS = Operations(SetQueueRate, GetQueueRate)


class QueueControl(Handlers):
    """The queue-rate operations on `queues`."""

    def __init__(self, queues: EgressQueues) -> None:
        super().__init__(OPERATIONS, {"set_queue_rate": self._set, "get_queue_rate": self._get})
        self.queues = queues

    def _set(self, _client, request: SetQueueRate) -> None:
        self.queues.configure(request.port, rate_bps=request.rate_bps)

    def _get(self, _client, request: GetQueueRate) -> dict:
        return {"rate_bps": self.queues.queue(request.port).rate_bps}


def serve(queues: EgressQueues, path: str) -> ControlServer:
    """The queue control of `queues` served on the unix socket `path`, in a thread (stop with `stop()`)."""
    server = ControlServer(path, QueueControl(queues), name="switch control socket")
    server.start()
    log.info("control socket on %s", path)
    return server
