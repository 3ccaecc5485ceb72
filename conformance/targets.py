"""Conformance targets: the reference model in-process, and switch processes on veths (model or BMv2).

Every target offers the same steps, which the runner calls for each case:
`reset(seed, queues, hold_port)` (a fresh switch; `queues` = [{port, rate_bps, depth}]; `hold_port`
is the port whose queue the case will preload), `install(entries)`, `preload(port, in_port, frames)`
(leave len(frames) low-priority packets standing in the egress queue of `port`),
`send(in_port, frame)`, `finish(expected) -> [Output]`, `read_counters(names)`.
"""
from __future__ import annotations

from typing import Optional

from pipeline_contract.entries import TableEntry
from pipeline_contract.p4info import load_p4info
from conformance.runner import Output
from refswitch.switch import SwitchCore


class ModelTarget:
    """The reference pipeline and queues in this process, on a virtual clock."""

    name = "model"

    def __init__(self, p4info_path: Optional[str] = None):
        self.p4info = load_p4info(p4info_path)
        self.now = 0.0
        self.outputs: list[Output] = []
        self.core: Optional[SwitchCore] = None

    def unavailable(self) -> Optional[str]:
        """Always available."""
        return None

    def start(self) -> None:
        """Nothing to start."""

    def stop(self) -> None:
        """Nothing to stop."""

    def _transmit(self, port: int, frame: bytes, priority: int) -> bool:
        self.outputs.append(Output(port, frame, priority))
        return True

    def reset(self, seed: int, queues: list[dict] = (), hold_port: Optional[int] = None) -> None:
        """A fresh switch: empty tables, zero counters, the given queue settings."""
        self.now = 0.0
        self.outputs = []
        self.core = SwitchCore(self._transmit, self.p4info, seed=seed, clock=lambda: self.now)
        for q in queues:
            self.core.queues.configure(int(q["port"]), depth=int(q.get("depth", 64)),
                                       rate_bps=int(q.get("rate_bps", 0)), rate_pps=int(q.get("rate_pps", 0)))

    def install(self, entries: list[TableEntry]) -> None:
        """Insert the entries, as the controller would over P4Runtime."""
        self.core.tables.install(entries)

    def preload(self, port: int, in_port: int, frames: list[bytes]) -> None:
        """Pause the egress queue of `port` and queue the frames there."""
        self.core.queues.queue(port).paused = True
        for frame in frames:
            self.core.receive(frame, in_port)

    def send(self, in_port: int, frame: bytes) -> None:
        """One frame in."""
        self.core.receive(frame, in_port)

    def finish(self, expected: Optional[int] = None) -> list[Output]:
        """Release paused queues and run the clock until every queue is empty."""
        for q in self.core.queues.ports.values():
            q.paused = False
        while True:
            due = self.core.drain()
            if due is None:
                break
            self.now = max(self.now, due)
        return list(self.outputs)

    def counter_offsets(self) -> dict[str, dict[int, tuple[int, int]]]:
        """(packets, bytes) this target added to counters beyond the case's own (none)."""
        return {}

    def read_counters(self, names: list[str]) -> dict[str, dict[int, tuple[int, int]]]:
        """Non-zero cells of the named counters."""
        counters = self.core.pipeline.counters
        return {n: {i: counters.read(n, i) for i, p in enumerate(counters.packets[n]) if p} for n in names}


class ModelGrpcTarget(ModelTarget):
    """The in-process model programmed and read over P4Runtime (unix socket) by the controller's client.

    Packets still go in and out in-process; tables, pipeline resets and counters go through the
    P4Runtime server exactly as the testbed drives a switch process, without root.
    """

    name = "model-grpc"

    def __init__(self, p4info_path: Optional[str] = None):
        super().__init__(p4info_path)
        self.server = None
        self.client = None
        self.tmp: Optional[str] = None

    def start(self) -> None:
        """Start a P4Runtime server over a switch core and connect the controller's client."""
        import tempfile
        from pipeline_contract.client import P4RuntimeClient
        from refswitch.p4runtime_server import P4RuntimeServer
        self.tmp = tempfile.mkdtemp(prefix="mrc-conf-grpc-")
        self.core = SwitchCore(self._transmit, None, clock=lambda: self.now)
        self.server = P4RuntimeServer(self.core, 1, f"unix:{self.tmp}/p4rt.sock")
        self.server.start()
        self.client = P4RuntimeClient(self.server.address, 1, name=self.name, timeout=10).connect()

    def stop(self) -> None:
        """Disconnect and stop the server."""
        import shutil
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def reset(self, seed: int, queues: list[dict] = (), hold_port: Optional[int] = None) -> None:
        """SetForwardingPipelineConfig (fresh tables and counters), fresh queues."""
        from refswitch.queues import EgressQueues
        self.now = 0.0
        self.outputs = []
        self.core.seed = seed
        self.core.queues = EgressQueues()
        self.client.set_pipeline(self.p4info)
        for q in queues:
            self.core.queues.configure(int(q["port"]), depth=int(q.get("depth", 64)),
                                       rate_bps=int(q.get("rate_bps", 0)), rate_pps=int(q.get("rate_pps", 0)))

    def install(self, entries: list[TableEntry]) -> None:
        """INSERT over P4Runtime."""
        self.client.insert(entries)

    def read_counters(self, names: list[str]) -> dict[str, dict[int, tuple[int, int]]]:
        """Non-zero cells of the named counters, read over P4Runtime."""
        out = {}
        for name in names:
            cells = self.client.read_counter(name)
            out[name] = {i: (v.packets, v.bytes) for i, v in cells.items() if v.packets or v.bytes}
        return out
