"""The reference switch: pipeline + egress queues (SwitchCore) and the process around them (Switch).

`SwitchCore` holds the programmable state (P4Info, tables, pipeline, counters) and the egress
queues, without any I/O: frames go in with `receive`, leave through the `transmit` callback
when their queue lets them. `Switch` adds raw-socket ports, one epoll event loop with pacing
timers, the P4Runtime server and, optionally, the control socket for queue rates
(`refswitch.control`).
"""
from __future__ import annotations

import json
import logging
import os
import select
import signal
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from p4.config.v1 import p4info_pb2

from pipeline_contract.p4info import P4InfoIndex
from refswitch.pipeline import Pipeline
from refswitch.ports import MAX_FRAME, RawPort
from refswitch.queues import EgressQueues
from refswitch.tables import TableStore

log = logging.getLogger("mrc.refswitch")

RECV_BATCH = 64          # frames read from one port before looking at the others


class SwitchCore:
    """Programmable state and egress queues of one switch; `transmit(port, frame, priority) -> bool` sends."""

    def __init__(self, transmit: Callable[[int, bytes, int], bool], p4info: Optional[p4info_pb2.P4Info] = None,
                 seed: int = 0, clock: Callable[[], float] = time.monotonic):
        self.transmit = transmit
        self.seed = seed
        self.clock = clock
        self.queues = EgressQueues()
        # frames being serialised on a rate-limited port: port -> deque of (when the last bit is out,
        # frame, priority); a frame leaves then, as on a store-and-forward link
        self.on_wire: dict[int, deque] = {}
        # links into the switch that no egress queue serialises (from a host's NIC): port -> bit rate;
        # a frame from such a port is processed once its last bit has come in
        self.ingress_rates: dict[int, int] = {}
        self.arriving: dict[int, deque] = {}       # port -> deque of (when its last bit is in, frame)
        self._ingress_free: dict[int, float] = {}  # port -> when the frame being received ends
        self.p4info: Optional[p4info_pb2.P4Info] = None
        self.index: Optional[P4InfoIndex] = None
        self.tables: Optional[TableStore] = None
        self.pipeline: Optional[Pipeline] = None
        self.cookie = 0
        if p4info is not None:
            self.set_p4info(p4info)

    def set_p4info(self, p4info: p4info_pb2.P4Info, cookie: int = 0) -> None:
        """Load a pipeline: fresh tables and counters for this P4Info."""
        index = P4InfoIndex(p4info)
        tables = TableStore(index)
        pipeline = Pipeline(tables, seed=self.seed)
        self.p4info, self.index, self.tables, self.cookie = p4info, index, tables, cookie
        self.pipeline = pipeline          # the event loop picks up the new pipeline from here
        log.debug("pipeline loaded: %d tables, %d counters", len(index.tables), len(index.counters))

    def receive(self, frame: bytes, in_port: int) -> None:
        """Take a frame in: at once, or, from a port with an ingress rate, once its last bit is in."""
        rate = self.ingress_rates.get(in_port) if self.ingress_rates else None
        if rate:
            now = self.clock()
            done = max(now, self._ingress_free.get(in_port, 0.0)) + len(frame) * 8 / rate
            self._ingress_free[in_port] = done
            line = self.arriving.get(in_port)
            if line is None:
                line = self.arriving[in_port] = deque()
            line.append((done, frame))
            return
        self.process(frame, in_port)

    def process(self, frame: bytes, in_port: int) -> None:
        """Run a frame through the pipeline and queue (or send) what comes out."""
        pipeline = self.pipeline
        if pipeline is None:
            return
        result = pipeline.process(frame, in_port, self.queues.low_lengths)
        if result is None:
            return
        port, out, priority = result
        q = self.queues.ports.get(port)
        if q is None:                             # (`or` would ask the queue its length: a sum per frame)
            q = self.queues.queue(port)
        if not q.paused and not q.fifos[0] and not q.fifos[1]:
            if q.unlimited:                       # the common case: straight out
                self._send(pipeline, port, out, priority)
                return
            now = self.clock()
            if q.next_time <= now:
                q.charge(len(out), now)
                if q.rate_bps:
                    self._serialise(port, q.next_time, out, priority)
                else:
                    self._send(pipeline, port, out, priority)
                return
        if not q.enqueue(out, priority):
            pipeline.count_queue_drop(port, len(out))

    def _serialise(self, port: int, done_at: float, frame: bytes, priority: int) -> None:
        """Put a frame on the wire of a port limited by a bit rate (a link's speed): it leaves at
        `done_at`, when its last bit is out. A port limited only in packets/s (BMv2's kind of
        rate, the conformance suite's hold) paces departures and sends each frame at once."""
        line = self.on_wire.get(port)
        if line is None:
            line = self.on_wire[port] = deque()
        line.append((done_at, frame, priority))

    def drain(self) -> Optional[float]:
        """Send every frame whose time has come; return when the next one is due (None: nothing waits).

        A frame from a port with an ingress rate enters the pipeline once its last bit is in; a frame
        leaves a port limited by a bit rate once its serialisation is over (it starts when the
        queue's pacing clock lets it). The clock is read once, when the first frame waiting is met: a frame
        that falls due while others are being sent waits for the next call (the event loop makes it
        at once)."""
        next_due = None
        now = None
        if self.arriving:
            now = self.clock()
            next_due = self._release(self.arriving, now, self._enter)
        pipeline = self.pipeline
        for port, q in self.queues.ports.items():
            low, high = q.fifos
            if q.paused or not (high or low):
                continue
            if now is None:
                now = self.clock()
            while True:
                due = q.ready_at()
                if due is None:
                    break
                if due > now:
                    if next_due is None or due < next_due:
                        next_due = due
                    break
                priority, frame = q.dequeue(now)
                if q.rate_bps:
                    self._serialise(port, q.next_time, frame, priority)
                elif pipeline is not None:
                    self._send(pipeline, port, frame, priority)
        if self.on_wire:
            due = self._release(self.on_wire, self.clock() if now is None else now, self._leave)
            if due is not None and (next_due is None or due < next_due):
                next_due = due
        return next_due

    @staticmethod
    def _release(lines: dict[int, deque], now: float, deliver: Callable) -> Optional[float]:
        """Hand `deliver(port, entry)` every entry of the per-port `lines` (each a deque of tuples
        led by their due time, in order) due by `now`; forget emptied lines; return the earliest
        due time left (None: none)."""
        next_due = None
        for port in list(lines):
            line = lines[port]
            while line and line[0][0] <= now:
                deliver(port, line.popleft())
            if line:
                if next_due is None or line[0][0] < next_due:
                    next_due = line[0][0]
            else:
                del lines[port]
        return next_due

    def _enter(self, port: int, entry: tuple) -> None:
        """A frame from a host's link whose last bit is in: into the pipeline."""
        self.process(entry[1], port)

    def _leave(self, port: int, entry: tuple) -> None:
        """A frame whose last bit is out on `port`'s link: sent."""
        pipeline = self.pipeline
        if pipeline is not None:
            self._send(pipeline, port, entry[1], entry[2])

    def _send(self, pipeline: Pipeline, port: int, frame: bytes, priority: int) -> None:
        if self.transmit(port, frame, priority):
            pipeline.count_tx(port, getattr(frame, "untrimmed_length", len(frame)))
        else:
            pipeline.count_queue_drop(port, len(frame))


@dataclass
class SwitchConfig:
    """What one switch process is started with."""

    name: str = "s1"
    device_id: int = 1
    ports: dict[int, str] = field(default_factory=dict)            # P4 port -> interface name
    queues: dict[int, tuple[int, int, int]] = field(default_factory=dict)   # port -> (rate_bps, rate_pps, depth)
    ingress: dict[int, int] = field(default_factory=dict)    # port -> bit rate of the link into it (from a host)
    grpc_address: str = "127.0.0.1:9559"
    p4info_path: Optional[str] = None
    seed: int = 0
    ready_file: Optional[str] = None
    stats_file: Optional[str] = None      # counters as JSON, written at exit (queue_drops included)
    control_path: Optional[str] = None    # unix socket for queue rate changes at run time (refswitch.control)


class ReferenceSwitch:
    """The switch process: ports, one event loop, the P4Runtime server."""

    def __init__(self, config: SwitchConfig, p4info: Optional[p4info_pb2.P4Info] = None):
        self.config = config
        self.ports: dict[int, RawPort] = {n: RawPort(n, ifname) for n, ifname in sorted(config.ports.items())}
        self.core = SwitchCore(self._transmit, p4info, seed=config.seed)
        for port, (rate_bps, rate_pps, depth) in config.queues.items():
            self.core.queues.configure(port, depth=depth, rate_bps=rate_bps, rate_pps=rate_pps)
        self.core.ingress_rates = {port: rate for port, rate in config.ingress.items() if rate}
        self.server = None
        self.control = None                   # wire.control.ControlServer, with control_path
        self._senders: dict = {}              # port -> bound send of its socket (the hot path)
        self._stop_r, self._stop_w = os.pipe()
        self._running = False

    def _transmit(self, port: int, frame: bytes, priority: int) -> bool:
        send = self._senders.get(port)
        if send is None:
            return False
        try:
            send(frame)
            return True
        except OSError:            # buffer full, link down: counted as a queue drop by the core
            return False

    def start(self) -> None:
        """Open ports and start the P4Runtime server."""
        from refswitch.p4runtime_server import P4RuntimeServer
        for p in self.ports.values():
            p.open()
        self._senders = {n: p.sock.send for n, p in self.ports.items()}
        self.server = P4RuntimeServer(self.core, self.config.device_id, self.config.grpc_address)
        self.server.start()
        if self.config.control_path:
            from refswitch.control import serve
            self.control = serve(self.core.queues, self.config.control_path)
        log.info("switch %s: %d ports, P4Runtime on %s", self.config.name, len(self.ports), self.server.address)
        if self.config.ready_file:
            tmp = self.config.ready_file + ".tmp"
            Path(tmp).write_text(f"{os.getpid()} {self.server.address}\n")
            os.replace(tmp, self.config.ready_file)

    def stop(self) -> None:
        """Ask the event loop to return (safe from a signal handler or another thread)."""
        self._running = False
        try:
            os.write(self._stop_w, b"x")
        except OSError:
            pass

    def run(self) -> None:
        """The event loop: read ports in batches, run the pipeline, drain queues on time."""
        ep = select.epoll()
        by_fd = {p.fileno(): p for p in self.ports.values()}
        for fd in by_fd:
            ep.register(fd, select.EPOLLIN)
        ep.register(self._stop_r, select.EPOLLIN)
        core = self.core
        self._running = True
        timeout = -1.0
        try:
            while self._running:
                for fd, _ in ep.poll(timeout):
                    port = by_fd.get(fd)
                    if port is None:
                        continue
                    number, receive = port.number, core.receive
                    raw_recv = port.raw_recv
                    if raw_recv is not None:          # the kernel drops our own frames: read directly
                        try:
                            for _ in range(RECV_BATCH):
                                receive(raw_recv(MAX_FRAME), number)
                        except (BlockingIOError, InterruptedError):
                            pass
                        except OSError as exc:        # e.g. ENETDOWN once when the link goes down
                            log.info("port %d (%s): %s", number, port.ifname, exc.strerror)
                        continue
                    for _ in range(RECV_BATCH):
                        frame = port.recv()
                        if frame is None:
                            break
                        receive(frame, number)
                next_due = core.drain()
                timeout = -1.0 if next_due is None else max(0.0, next_due - time.monotonic())
        finally:
            ep.close()

    def close(self) -> None:
        """Stop the server, close ports, log the counters."""
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self.control is not None:
            self.control.stop()
            self.control = None
        for p in self.ports.values():
            p.close()
        if self.core.pipeline is not None:
            counters = self.core.pipeline.counters.nonzero()
            log.info("switch %s counters: %s", self.config.name, counters)
            if self.config.stats_file:
                self.write_stats(counters)
        if self.config.ready_file:
            try:
                os.unlink(self.config.ready_file)
            except FileNotFoundError:
                pass
        for fd in (self._stop_r, self._stop_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def write_stats(self, counters: dict) -> None:
        """Write {counter: {port: [packets, bytes]}} of the non-zero cells to the stats file."""
        doc = {"switch": self.config.name, "counters": {name: {str(port): list(cell) for port, cell in cells.items()}
                                                        for name, cells in counters.items()},
               "queues": {str(port): service for port, q in sorted(self.core.queues.ports.items())
                          if (service := q.service()) is not None}}
        tmp = self.config.stats_file + ".tmp"
        Path(tmp).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, self.config.stats_file)

    def serve_forever(self) -> None:
        """Start, run until SIGTERM/SIGINT, close."""
        signal.signal(signal.SIGTERM, lambda *_: self.stop())
        signal.signal(signal.SIGINT, lambda *_: self.stop())
        try:
            self.start()
            self.run()
        finally:
            self.close()
