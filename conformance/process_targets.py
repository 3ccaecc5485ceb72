"""Conformance targets that run a real switch process on veths: the model process and BMv2.

Both are programmed exactly as the testbed programs them: over P4Runtime on a unix socket with
the controller's client. Packets are sent and received on raw sockets at the host ends of the
veths (refswitch.vethlab). A standing queue is built by slowing the held port's egress queue to
HOLD_PPS packets/s and sending one extra filler first (the primer); once it has come out (BMv2 may
hold it for up to one interval), the next departure is a whole interval away, so the fillers and then
the case's packets go in while the queue stands still. BMv2 gets its normal rate back when the case's
packets are in; the model process drains at HOLD_PPS.
Outputs carry no priority label; on a held port the runner infers it from overtaking (runner.py).

Injection is paced by the switch itself: at most RX_WINDOW frames sent on one port may be not yet
counted in its `MrcIngress.rx`; beyond that, sending waits (with a deadline) until the counter has
caught up, and `finish` waits until it has counted every frame sent. This is BMv2's input limit:
it reads each port through libpcap, whose capture ring (2 MB, in slots sized for 64 KB frames on a
veth with segmentation offloads) holds about 32 frames; a longer back-to-back run loses the rest
before the pipeline, and no counter shows it (measured: 400 frames sent at once, 32-33 reached
`MrcIngress.rx`). A frame that never reaches the pipeline is a TargetError, not a silent loss.

Each target's lab is a supervised run (`testbed.registry.RunRegistry`): its two named namespaces are
recorded before they are made and its switch processes carry the run's marker, so that if the
process driving the cases dies (a killed pytest), the run's supervisor removes them at once, and
`mrc-testbed clean` finds them otherwise. Lab names follow `testbed.registry.LAB_NETNS`.
"""
from __future__ import annotations

import itertools
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from pipeline_contract.names import QUEUE_DEPTH_SEEN, RX, TX, depth_cell
from pipeline_contract.entries import TableEntry
from pipeline_contract.p4info import REPO_ROOT, load_p4info
from conformance.runner import Output
from refswitch.vethlab import VethLab, in_netns
from testbed.processes import stop_process
from testbed.registry import RunRegistry, leftovers, marked_env

NPORTS = 8                 # ports 1..8, enough for every case
HOLD_PPS = 5                # egress rate of a held port while a case builds its standing queue
RELEASE_PPS = 1_000_000    # BMv2 rate after the hold
QUIET = 0.3                # seconds without a frame after which a case is considered finished
LINGER = 0.1               # seconds to wait for extra frames once the expected number arrived
START_TIMEOUT = 15.0
RX_WINDOW = 16             # frames per port sent but not yet counted in MrcIngress.rx (BMv2's ring: ~32)
RX_TIMEOUT = 5.0           # seconds for MrcIngress.rx to count a frame that was sent
RX_POLL = 0.0005           # seconds between two reads of MrcIngress.rx while waiting
DEFAULT_BMV2_JSON = REPO_ROOT / "p4" / "build" / "mrc.json"
_LAB_NUMBERS = itertools.count()    # several targets of one process (a pytest run) each get their own lab


def lab_prefix(pid: int, number: int) -> str:
    """The lab of the `number`th target of process `pid`: `rc`, 4 digits of the PID, 2 of the number
    (interface names are 15 characters at most); its namespaces match testbed.registry.LAB_NETNS."""
    return f"rc{pid % 10000:04d}{number % 100:02d}"


class TargetError(RuntimeError):
    """A switch process could not be started or programmed."""


class ProcessTarget:
    """Common part: the lab, the host-side sockets, the P4Runtime client, collecting outputs."""

    name = "process"

    def __init__(self, p4info_path: Optional[str] = None):
        self.p4info = load_p4info(p4info_path)
        self.lab: Optional[VethLab] = None
        self.ports = {}
        self.proc: Optional[subprocess.Popen] = None
        self.client = None
        self.tmp: Optional[str] = None
        self.hold_port: Optional[int] = None
        self.sent_fillers = 0
        self.injected: dict[int, int] = {}   # frames sent per in port since the switch started
        self.counted: dict[int, int] = {}    # MrcIngress.rx per in port, as last read
        self.offsets: dict[str, dict[int, tuple[int, int]]] = {}
        self.log_path: Optional[str] = None
        self.registry: Optional[RunRegistry] = None

    # --- lifecycle ---------------------------------------------------------------------
    def unavailable(self) -> Optional[str]:
        """Why this target cannot run here, or None."""
        if os.geteuid() != 0:
            return "needs root (network namespaces and raw sockets)"
        if not shutil.which("ip"):
            return "needs the ip command (iproute2)"
        return None

    def start(self) -> None:
        """Create the lab (recorded in a supervised run first) and open the host-side ports."""
        self.tmp = tempfile.mkdtemp(prefix="mrc-conf-")
        try:
            self.registry = RunRegistry(supervised=True)
            lab = VethLab(lab_prefix(os.getpid(), next(_LAB_NUMBERS)), NPORTS)
            for ns in (lab.switch_ns, lab.host_ns):
                self.registry.record_netns(ns)
            self.lab = lab.create()
            self.ports = {n: self.lab.open_port(n, "host") for n in range(1, NPORTS + 1)}
        except Exception:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the switch, close the ports, remove the lab (even when stopping the switch failed)."""
        try:
            self._stop_switch()
            for p in self.ports.values():
                p.close()
        finally:
            self.ports = {}
            if self.lab is not None:
                self.lab.destroy()
                self.lab = None
            if self.tmp:
                shutil.rmtree(self.tmp, ignore_errors=True)
                self.tmp = None
            if self.registry is not None:
                if not leftovers(self.registry.state):
                    self.registry.close()
                self.registry = None        # anything left, the run's supervisor removes at our exit

    def _stop_switch(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        stop_process(self.proc)
        if self.proc is not None and self.registry is not None:
            self.registry.forget_process(self.proc.pid)
        self.proc = None

    def _popen_switch(self, argv: list[str], **kwargs) -> subprocess.Popen:
        """Start `argv` in the lab's switch namespace, marked and recorded as this run's."""
        kwargs["env"] = marked_env(self.registry.state.run_id, kwargs.get("env"))
        proc = self.lab.popen("switch", argv, **kwargs)
        self.registry.record_process(proc.pid, f"{self.name} switch")
        return proc

    # --- per case ----------------------------------------------------------------------
    def reset(self, seed: int, queues: list[dict] = (), hold_port: Optional[int] = None) -> None:
        """A fresh switch process, programmed with the P4Info, queues set, nothing queued."""
        from pipeline_contract.client import P4RuntimeClient
        self._stop_switch()
        self.hold_port = hold_port
        self.sent_fillers = 0
        self.injected = {}
        self.counted = {}
        self.offsets = {}
        sock = os.path.join(self.tmp, "p4rt.sock")
        if os.path.exists(sock):
            os.unlink(sock)
        self.log_path = os.path.join(self.tmp, "switch.log")
        self.proc = self._launch(seed, queues, hold_port, f"unix:{sock}")
        self._wait_socket(sock)
        self.client = P4RuntimeClient(f"unix:{sock}", device_id=1, name=self.name, timeout=START_TIMEOUT)
        self.client.connect()
        self.client.set_pipeline(self.p4info, self._device_config())
        self._configure(queues, hold_port)
        for p in self.ports.values():        # anything left from an earlier case
            while p.recv() is not None:
                pass

    def install(self, entries: list[TableEntry]) -> None:
        """INSERT the entries over P4Runtime."""
        self.client.insert(entries)

    def preload(self, port: int, in_port: int, frames: list[bytes]) -> None:
        """Prime the slow queue with one extra filler; once it has left, queue the fillers behind it."""
        self._inject(in_port, frames[0])
        primer = (1, len(frames[0]))
        self.offsets = {RX: {in_port: primer}, TX: {port: primer},
                        QUEUE_DEPTH_SEEN: {depth_cell(port, 0): primer}}   # it found the queue empty
        self._wait_departure(port)
        for frame in frames:          # the next departure is one HOLD_PPS interval after the primer's
            self._inject(in_port, frame)
        self.sent_fillers = len(frames)

    def send(self, in_port: int, frame: bytes) -> None:
        """One frame in on `in_port`, once the switch has counted all but RX_WINDOW of those before it."""
        self._inject(in_port, frame)

    def finish(self, expected: Optional[int] = None) -> list[Output]:
        """Wait until the switch has counted every frame sent, release the held queue, and gather every
        frame that comes out."""
        for port, sent in self.injected.items():
            self._wait_counted(port, sent)
        self._release()
        outputs: list[Output] = []
        total = expected                 # the filler that left during preload is already consumed
        deadline = time.monotonic() + 10.0 + self.sent_fillers / HOLD_PPS
        fds = {p.fileno(): p for p in self.ports.values()}
        ep = select.epoll()
        for fd in fds:
            ep.register(fd, select.EPOLLIN)
        try:
            last = time.monotonic()
            done_at = None
            while time.monotonic() < deadline:
                now = time.monotonic()
                if done_at is not None and now >= done_at:
                    break
                if done_at is None and now - last >= QUIET and (total is None or len(outputs) >= total):
                    break
                for fd, _ in ep.poll(0.02):
                    port = fds[fd]
                    while True:
                        frame = port.recv()
                        if frame is None:
                            break
                        outputs.append(Output(port.number, frame, None))
                        last = time.monotonic()
                if total is not None and len(outputs) >= total and done_at is None:
                    done_at = time.monotonic() + LINGER
        finally:
            ep.close()
        self._check_alive()
        return outputs

    def counter_offsets(self) -> dict[str, dict[int, tuple[int, int]]]:
        """The extra filler sent by preload (packets, bytes): rx of its in port, tx of the held port, and
        the held port's queue_depth_seen at depth 0."""
        return self.offsets

    def read_counters(self, names: list[str]) -> dict[str, dict[int, tuple[int, int]]]:
        """Non-zero cells of the named counters, read over P4Runtime."""
        out = {}
        for name in names:
            if name not in self.client.counter_names():
                out[name] = {}
                continue
            cells = self.client.read_counter(name)
            out[name] = {i: (v.packets, v.bytes) for i, v in cells.items() if v.packets or v.bytes}
        return out

    # --- pacing --------------------------------------------------------------------------
    def _inject(self, in_port: int, frame: bytes) -> None:
        """Send one frame; first, when RX_WINDOW frames of this port are uncounted, wait for half of them."""
        sent = self.injected.get(in_port, 0)
        if sent - self.counted.get(in_port, 0) >= RX_WINDOW:
            self._wait_counted(in_port, sent - RX_WINDOW // 2)
        if not self.ports[in_port].send(frame):
            raise TargetError(f"{self.name}: could not send on port {in_port}")
        self.injected[in_port] = sent + 1

    def _wait_counted(self, port: int, frames: int) -> None:
        """Wait until MrcIngress.rx[port] has counted at least `frames` frames (RX_TIMEOUT deadline)."""
        deadline = time.monotonic() + RX_TIMEOUT
        while self.counted.get(port, 0) < frames:
            cell = self.client.read_counter("MrcIngress.rx", port).get(port)
            self.counted[port] = cell.packets if cell else 0
            if self.counted[port] >= frames:
                return
            self._check_alive()
            if time.monotonic() > deadline:
                raise TargetError(
                    f"{self.name}: MrcIngress.rx[{port}] = {self.counted[port]} after {RX_TIMEOUT:.0f} s, "
                    f"but {self.injected.get(port, 0)} frames were sent on port {port}: the rest never "
                    f"reached the pipeline")
            time.sleep(RX_POLL)

    # --- helpers -------------------------------------------------------------------------
    def _wait_socket(self, sock: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not os.path.exists(sock):
            self._check_alive()
            if time.monotonic() > deadline:
                raise TargetError(f"{self.name}: no P4Runtime socket {sock} after {START_TIMEOUT:.0f} s")
            time.sleep(0.02)

    def _wait_departure(self, port: int) -> None:
        """Wait until the primer frame has come out of `port`."""
        p = self.ports[port]
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            select.select([p.fileno()], [], [], 0.05)
            if p.recv() is not None:
                return
        raise TargetError(f"{self.name}: the queue primer never left port {port}")

    def _check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            log = Path(self.log_path).read_text()[-2000:] if self.log_path and os.path.exists(self.log_path) else ""
            raise TargetError(f"{self.name}: switch process exited with status {self.proc.returncode}: {log}")

    def _device_config(self) -> bytes:
        return b""

    def _configure(self, queues: list[dict], hold_port: Optional[int]) -> None:
        """Queue settings that are made after start (BMv2)."""

    def _release(self) -> None:
        """Let the held queue drain at full speed when the target can."""

    def _launch(self, seed: int, queues, hold_port, address: str) -> subprocess.Popen:
        raise NotImplementedError


class ModelProcessTarget(ProcessTarget):
    """The reference switch process (python -m refswitch.main) on the veths."""

    name = "model-proc"

    def _launch(self, seed, queues, hold_port, address) -> subprocess.Popen:
        argv = [sys.executable, "-m", "refswitch.main", "--grpc-addr", address, "--seed", str(seed),
                "--log-level", "WARNING"]
        for n in range(1, NPORTS + 1):
            argv += ["--port", f"{n}={self.lab.switch_if(n)}"]
        held_depth = 64
        for q in queues:
            if int(q["port"]) == hold_port:
                held_depth = int(q.get("depth", 64))
                continue
            argv += ["--queue", f"{int(q['port'])}:{int(q.get('rate_bps', 0))}:{int(q.get('depth', 64))}"
                                f":{int(q.get('rate_pps', 0))}"]
        if hold_port is not None:
            argv += ["--queue", f"{hold_port}:0:{held_depth}:{HOLD_PPS}"]
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
        with open(self.log_path, "ab") as log:
            return self._popen_switch(argv, cwd=str(REPO_ROOT), env=env, stdout=log, stderr=log)


class Bmv2Target(ProcessTarget):
    """BMv2 simple_switch_grpc running p4/build/mrc.json, with two strict-priority queues per port."""

    name = "bmv2"
    THRIFT_PORT = 9090          # inside the lab's own namespace: no clash with other switches
    TRACE_NAME = "bmv2-trace"   # BMv2 adds ".txt" to the --log-file name

    def __init__(self, p4info_path: Optional[str] = None, bmv2_json: Optional[str] = None):
        super().__init__(p4info_path)
        self.bmv2_json = Path(bmv2_json) if bmv2_json else DEFAULT_BMV2_JSON
        self.trace = False      # when True, each switch started writes a trace log (trace_path())

    def trace_path(self) -> Optional[Path]:
        """The trace log of the switch started last (when `trace` was on), else None."""
        if not self.tmp:
            return None
        return Path(self.tmp) / f"{self.TRACE_NAME}.txt"

    def unavailable(self) -> Optional[str]:
        """Root, simple_switch_grpc and simple_switch_CLI on PATH, and the compiled JSON."""
        reason = super().unavailable()
        if reason:
            return reason
        for program in ("simple_switch_grpc", "simple_switch_CLI"):
            if not shutil.which(program):
                return f"needs {program} on PATH (BMv2: the project's VM has it, see README.md)"
        if not self.bmv2_json.exists():
            return f"needs the compiled program {self.bmv2_json} (make -C p4)"
        return None

    def _device_config(self) -> bytes:
        return self.bmv2_json.read_bytes()

    def command(self, address: str) -> list[str]:
        """The simple_switch_grpc command line: P4Runtime on `address` (a unix socket), thrift on
        THRIFT_PORT and notifications on an IPC socket in this target's temporary folder."""
        argv = ["simple_switch_grpc", "--device-id", "1", "--no-p4", "--thrift-port", str(self.THRIFT_PORT),
                "--notifications-addr", f"ipc://{os.path.join(self.tmp, 'notifications.ipc')}"]
        for n in range(1, NPORTS + 1):
            argv += ["-i", f"{n}@{self.lab.switch_if(n)}"]
        if self.trace:          # every record, flushed, with whole frames dumped on receive and send
            argv += ["--log-file", os.path.join(self.tmp, self.TRACE_NAME), "--log-level", "trace",
                     "--log-flush", "--dump-packet-data", "65536"]
        return argv + ["--", "--grpc-server-addr", address, "--priority-queues", "2"]

    def _launch(self, seed, queues, hold_port, address) -> subprocess.Popen:
        """BMv2 inside the lab's switch namespace: its thrift server binds every address of that
        namespace only (BMv2 cannot bind it to one address)."""
        trace = self.trace_path()
        if trace is not None and trace.exists():     # one log per switch run
            trace.unlink()
        with open(self.log_path, "ab") as log:
            return self._popen_switch(self.command(address), stdout=log, stderr=log)

    def _cli(self, commands: list[str]) -> None:
        done = subprocess.run(["ip", "netns", "exec", self.lab.switch_ns, "simple_switch_CLI",
                               "--thrift-port", str(self.THRIFT_PORT)],
                              input="\n".join(commands) + "\n", capture_output=True, text=True, timeout=30,
                              env=marked_env(self.registry.state.run_id))
        if done.returncode != 0 or "Error" in done.stdout:
            raise TargetError(f"simple_switch_CLI {commands}: {done.stdout[-500:]} {done.stderr[-500:]}")

    def _wait_thrift(self) -> None:
        """Wait until the thrift server accepts connections: BMv2 starts it on a thread of its own, so
        it may come up after P4Runtime answers."""
        def connect() -> bool:
            deadline = time.monotonic() + START_TIMEOUT
            while time.monotonic() < deadline:
                try:
                    socket.create_connection(("127.0.0.1", self.THRIFT_PORT), timeout=1.0).close()
                    return True
                except OSError:
                    if self.proc.poll() is not None:
                        return False
                    time.sleep(0.02)
            return False
        if not in_netns(self.lab.switch_ns, connect):
            self._check_alive()
            raise TargetError(f"{self.name}: thrift server not listening on port {self.THRIFT_PORT} in "
                              f"namespace {self.lab.switch_ns} after {START_TIMEOUT:.0f} s")

    def _configure(self, queues, hold_port) -> None:
        commands = []
        for q in queues:
            commands.append(f"set_queue_depth {int(q.get('depth', 64))} {int(q['port'])}")
            if q.get("rate_pps"):
                commands.append(f"set_queue_rate {int(q['rate_pps'])} {int(q['port'])}")
        if hold_port is not None:
            commands.append(f"set_queue_rate {HOLD_PPS} {hold_port}")
        if commands:
            self._wait_thrift()
            self._cli(commands)

    def _release(self) -> None:
        if self.hold_port is not None:
            self._cli([f"set_queue_rate {RELEASE_PPS} {self.hold_port}"])
