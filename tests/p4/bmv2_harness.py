"""One BMv2 `simple_switch_grpc` running p4/mrc.p4, for tests and the conformance suite.

`Bmv2VethLab` creates two network namespaces of its own: `<prefix>sw`, where the switch runs
with ports on veths `<prefix>s<N>`, and `<prefix>h`, which holds the veth peers `<prefix>h<N>`
that tests send and receive on (raw sockets opened inside that namespace). Nothing touches the
root namespace: P4Runtime is served on a unix socket, thrift on the switch namespace's loopback.
`stop()` (or leaving the `with` block) ends the process by PID and deletes both namespaces,
which deletes the veths, even when the test failed.

    with Bmv2VethLab("t123", num_ports=3) as sw:
        client = sw.connect()                       # pipeline pushed, primary controller
        client.insert(entries)
        sw.set_queue(2, rate_pps=1000, depth=64)    # both priorities of port 2
        port1 = sw.host_socket(1)
        port1.send(frame)
        frames = sw.receive(2, count=1, timeout=2)

Start BMv2 as this does: `--no-p4`, ports `-i N@iface`, `-- --grpc-server-addr unix:... 
--priority-queues 2` (priority 1 = trimmed headers and control packets), no logging unless
asked (logging slows BMv2 by an order of magnitude).
"""
from __future__ import annotations

import ctypes
import os
import select
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BMV2_JSON = REPO / "p4" / "build" / "mrc.json"
P4INFO = REPO / "p4" / "build" / "mrc.p4info.txtpb"

CLONE_NEWNET = 0x40000000
ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23     # linux/if_packet.h: do not read back the frames we send
SOCKET_BUFFER = 8 * 1024 * 1024 # a burst waiting to be read is not dropped by the kernel
SO_SNDBUFFORCE, SO_RCVBUFFORCE = 32, 33     # asm-generic/socket.h (root may exceed rmem_max)
START_TIMEOUT = 20.0


class Bmv2Error(RuntimeError):
    """BMv2 could not be started, configured or reached; the message says which step failed."""


def _run(*cmd: str, stdin: str | None = None) -> str:
    """Run a command; raise Bmv2Error naming it and its stderr when it fails."""
    result = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise Bmv2Error(f"{' '.join(cmd)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def missing_requirements() -> str | None:
    """Why a Bmv2VethLab cannot run on this machine, or None when it can."""
    if os.geteuid() != 0:
        return "BMv2 tests need root (network namespaces, veths, raw sockets)"
    for program in ("simple_switch_grpc", "simple_switch_CLI", "ip"):
        if shutil.which(program) is None:
            return f"needs {program} on PATH"
    if not BMV2_JSON.exists():
        return f"needs {BMV2_JSON.relative_to(REPO)} (run `make -C p4` where p4c exists)"
    return None


def open_raw_socket(netns: str, ifname: str) -> socket.socket:
    """An AF_PACKET socket bound to interface `ifname` of network namespace `netns`.

    The calling thread enters the namespace only for the socket() and bind() calls; the socket
    stays attached to that namespace afterwards.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    with open("/proc/thread-self/ns/net") as home, open(f"/run/netns/{netns}") as target:
        if libc.setns(target.fileno(), CLONE_NEWNET) != 0:
            raise Bmv2Error(f"setns({netns}) failed: {os.strerror(ctypes.get_errno())}")
        try:
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, SOCKET_BUFFER)
            sock.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, SOCKET_BUFFER)
            sock.bind((ifname, 0))
        finally:
            if libc.setns(home.fileno(), CLONE_NEWNET) != 0:
                raise Bmv2Error(f"cannot return from namespace {netns}: "
                                f"{os.strerror(ctypes.get_errno())}")
    return sock


class Bmv2VethLab:
    """A simple_switch_grpc process with `num_ports` veth ports, in namespaces named from `prefix`."""

    def __init__(self, prefix: str, num_ports: int = 2, device_id: int = 1,
                 priority_queues: int = 2, thrift_port: int = 9090,
                 json_path: Path = BMV2_JSON, p4info_path: Path = P4INFO, log: bool = False):
        if len(prefix) + 2 + len(str(num_ports)) > 15:
            raise ValueError(f"prefix {prefix!r} too long for interface names (15 characters)")
        self.prefix = prefix
        self.num_ports = num_ports
        self.device_id = device_id
        self.priority_queues = priority_queues
        self.thrift_port = thrift_port
        self.json_path = Path(json_path)
        self.p4info_path = Path(p4info_path)
        self.log = log
        self.switch_ns = f"{prefix}sw"
        self.host_ns = f"{prefix}h"
        self.workdir: Path | None = None
        self.process: subprocess.Popen | None = None
        self._sockets: dict[int, socket.socket] = {}
        self._clients: list = []

    # --- names ---------------------------------------------------------------------------
    def switch_ifname(self, port: int) -> str:
        """Interface of P4 port `port`, inside the switch namespace."""
        return f"{self.prefix}s{port}"

    def host_ifname(self, port: int) -> str:
        """Peer of P4 port `port`, inside the host namespace (where tests send and receive)."""
        return f"{self.prefix}h{port}"

    @property
    def grpc_address(self) -> str:
        """P4Runtime address (a unix socket)."""
        assert self.workdir is not None, "switch not started"
        return f"unix:{self.workdir / 'p4rt.sock'}"

    @property
    def output_path(self) -> Path:
        """stdout/stderr of simple_switch_grpc (and its log when `log=True`)."""
        assert self.workdir is not None, "switch not started"
        return self.workdir / "bmv2.out"

    # --- life cycle ----------------------------------------------------------------------
    def __enter__(self) -> "Bmv2VethLab":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> "Bmv2VethLab":
        """Create namespaces and veths, start the switch, wait until P4Runtime answers."""
        try:
            self.workdir = Path(tempfile.mkdtemp(prefix=f"bmv2-{self.prefix}-"))
            self._create_namespaces()
            for port in range(1, self.num_ports + 1):
                self._create_port(port)
            self._start_process()
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """End the process by PID, delete the namespaces (and with them the veths)."""
        for client in self._clients:
            client.close()
        self._clients.clear()
        for sock in self._sockets.values():
            sock.close()
        self._sockets.clear()
        if self.process is not None:
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(timeout=5)
            self.process = None
        for ns in (self.switch_ns, self.host_ns):
            if Path("/run/netns", ns).exists():
                subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def _create_namespaces(self) -> None:
        for ns in (self.switch_ns, self.host_ns):
            if Path("/run/netns", ns).exists():
                raise Bmv2Error(f"network namespace {ns} already exists (another test's prefix?)")
            _run("ip", "netns", "add", ns)
            _run("ip", "-n", ns, "link", "set", "lo", "up")

    def _create_port(self, port: int) -> None:
        sw_if, host_if = self.switch_ifname(port), self.host_ifname(port)
        _run("ip", "-n", self.switch_ns, "link", "add", sw_if, "type", "veth",
             "peer", "name", host_if, "netns", self.host_ns)
        for ns, ifname in ((self.switch_ns, sw_if), (self.host_ns, host_if)):
            # No router solicitations or MLD reports: only test frames on the wire.
            _run("ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{ifname}.disable_ipv6=1")
            _run("ip", "-n", ns, "link", "set", ifname, "up")

    def command_line(self) -> list[str]:
        """The simple_switch_grpc command, run inside the switch namespace."""
        cmd = ["ip", "netns", "exec", self.switch_ns, "simple_switch_grpc",
               "--device-id", str(self.device_id), "--no-p4", "--thrift-port", str(self.thrift_port)]
        for port in range(1, self.num_ports + 1):
            cmd += ["-i", f"{port}@{self.switch_ifname(port)}"]
        if self.log:
            cmd += ["--log-file", str(self.workdir / "bmv2"), "--log-flush"]
        cmd += ["--", "--grpc-server-addr", self.grpc_address,
                "--priority-queues", str(self.priority_queues)]
        return cmd

    def _start_process(self) -> None:
        with open(self.output_path, "wb") as out:
            # `ip netns exec` execs the switch: this PID is simple_switch_grpc's own.
            self.process = subprocess.Popen(self.command_line(), stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)

    def _wait_ready(self) -> None:
        """Wait (with a deadline) for the P4Runtime unix socket to accept connections."""
        path = self.workdir / "p4rt.sock"
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise Bmv2Error(f"simple_switch_grpc exited with {self.process.returncode}:\n"
                                f"{self.output_tail()}")
            if path.exists():
                probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    probe.connect(str(path))
                    return
                except OSError:
                    pass
                finally:
                    probe.close()
            time.sleep(0.05)   # polling a condition with a deadline, not hiding a race
        raise Bmv2Error(f"simple_switch_grpc did not serve {self.grpc_address} within "
                        f"{START_TIMEOUT:.0f} s:\n{self.output_tail()}")

    def output_tail(self, lines: int = 20) -> str:
        """The last lines simple_switch_grpc printed."""
        try:
            return "\n".join(self.output_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no output)"

    # --- control plane -------------------------------------------------------------------------
    def connect(self, push_pipeline: bool = True):
        """A connected pipeline_contract.client.P4RuntimeClient, pipeline pushed by default."""
        from pipeline_contract.p4info import load_p4info
        from pipeline_contract.client import P4RuntimeClient

        client = P4RuntimeClient(self.grpc_address, self.device_id, name=f"bmv2-{self.prefix}")
        client.connect()
        self._clients.append(client)
        p4info = load_p4info(self.p4info_path)
        if push_pipeline:
            client.set_pipeline(p4info, self.json_path.read_bytes())
        else:
            client.use_p4info(p4info)
        return client

    def cli(self, *commands: str) -> str:
        """Run simple_switch_CLI commands over thrift (inside the switch namespace)."""
        out = _run("ip", "netns", "exec", self.switch_ns, "simple_switch_CLI",
                   "--thrift-port", str(self.thrift_port), stdin="\n".join(commands) + "\n")
        for line in out.splitlines():
            if "Error" in line or "Invalid" in line:
                raise Bmv2Error(f"simple_switch_CLI {commands!r}: {line.strip()}")
        return out

    def set_queue(self, port: int, rate_pps: int, depth: int) -> None:
        """Rate (packets/s, 0 = unlimited) and depth (packets) of every priority queue of `port`.

        The priority is always given: in BMv2 1.15 `set_queue_depth <n> <port>` resizes the
        queues of every port.
        """
        commands = []
        for priority in range(self.priority_queues):
            commands += [f"set_queue_rate {rate_pps} {port} {priority}",
                         f"set_queue_depth {depth} {port} {priority}"]
        self.cli(*commands)

    def register_write(self, name: str, index: int, value: int) -> None:
        """Write one register cell (e.g. the queue estimate MrcIngress.queued_low)."""
        self.cli(f"register_write {name} {index} {value}")

    def register_read(self, name: str, index: int) -> int:
        """Read one register cell."""
        out = self.cli(f"register_read {name} {index}")
        for line in out.splitlines():
            if f"{name}[{index}]" in line and "=" in line:
                return int(line.rsplit("=", 1)[1].strip())
        raise Bmv2Error(f"register_read {name} {index}: no value in {out!r}")

    # --- data plane ------------------------------------------------------------------------------
    def host_socket(self, port: int) -> socket.socket:
        """The raw socket on the peer of P4 port `port` (opened once, closed by stop())."""
        if port not in self._sockets:
            self._sockets[port] = open_raw_socket(self.host_ns, self.host_ifname(port))
        return self._sockets[port]

    def send(self, port: int, frame: bytes) -> None:
        """Send one Ethernet frame into P4 port `port`."""
        self.host_socket(port).send(frame)

    def receive(self, port: int, count: int = 1, timeout: float = 2.0,
                accept=lambda frame: frame[12:14] == b"\x86\xdd") -> list[bytes]:
        """Frames that P4 port `port` sent, until `count` arrived or `timeout` passed.

        `accept` filters what counts (default: IPv6 frames).
        """
        sock = self.host_socket(port)
        frames: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(frames) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([sock], [], [], left)
            if ready:
                frame = sock.recv(65536)
                if accept(frame):
                    frames.append(frame)
        return frames

    def drain(self, port: int) -> int:
        """Discard frames already waiting on port `port`'s socket; return how many."""
        sock = self.host_socket(port)
        n = 0
        while select.select([sock], [], [], 0)[0]:
            sock.recv(65536)
            n += 1
        return n
