"""Mininet node classes for the two switch targets: the reference model and BMv2.

Each switch node is a Mininet `Switch` in its own network namespace (so its port names, its
thrift server and its IPv6 settings never touch the root namespace), running one switch process:

- `RefSwitch`: `python -m refswitch.main` (the pure-Python model), P4Runtime on a unix socket;
- `Bmv2Switch`: `simple_switch_grpc ... -- --priority-queues 2`, P4Runtime on a unix socket,
  thrift (for `simple_switch_CLI`: queue rate and depth) inside the switch's namespace.

Both are made with the same parameters (a network passes the class in, as Mininet does, and
never asks which one it has): the switch's egress queues and the rates of the host links into it,
each class applying what it can. Both have the same life cycle: `check_program(compiled)` says
whether the class can run a compiled program, `start()` launches the process (log in
`<run_dir>/<name>.log`, optional pcap per port), `wait_ready()` waits for the process to serve
P4Runtime (with a deadline), `configure_queues()` applies the egress queues once the pipeline is
installed, `set_queue_rates()` changes queue rates while it runs (the model through its control
socket, BMv2 through `set_queue_rate`), `stop()` ends the process by PID.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
from mininet.node import Host, Node, Switch

from controller.entries import PortQueue
from testbed import realtime
from testbed.processes import stop_process
from testbed.capture import PcapCapture
from testbed.registry import marked_env
from wire import constants
from wire.control import ControlClient

REPO = Path(__file__).resolve().parent.parent

# BMv2's set_queue_rate is in packets/s: a link's bit rate is turned into packets of this size,
# per priority: a 1 KB-payload MRC data frame (1130 bytes) for the data queue, a trimmed header
# (102 bytes; control packets are smaller still) for the high-priority queue, so that headers
# drain at the pace their bytes allow instead of one full-size slot each.
RATE_PACKET_BYTES = {0: constants.DATA_HEADERS_LEN + 1024 + constants.ICRC_LEN, 1: constants.DATA_HEADERS_LEN}


class SwitchStartError(RuntimeError):
    """A switch process did not start or did not become ready; the message names it and its log."""


def disable_ipv6(node, interfaces=()) -> None:
    """Turn IPv6 off on the named interfaces, and namespace-wide (all, default) only when the node
    has a namespace of its own: the root namespace is never switched off as a whole."""
    keys = list(interfaces)
    if node.inNamespace:
        keys = ["all", "default", *keys]
    if keys:
        node.cmd("sysctl -q " + " ".join(f"-w net.ipv6.conf.{k}.disable_ipv6=1" for k in keys))


class RunMarked:
    """Mixin: every process a node spawns (its shell included) carries the run's marker."""

    run_id: str | None = None

    def _popen(self, cmd, **params):
        if self.run_id:
            params["env"] = marked_env(self.run_id, params.get("env"))
        return super()._popen(cmd, **params)


class MrcHost(RunMarked, Host):
    """A Mininet host with IPv6 off in its namespace (agents use raw sockets only)."""

    def __init__(self, name, run_id: str | None = None, **params):
        self.run_id = run_id
        super().__init__(name, **params)
        disable_ipv6(self)

    def configDefault(self, **moreParams):
        """No IPv4 address, no default route: only bring the interfaces up."""
        self.cmd("ip link set lo up")
        for intf in self.intfList():
            self.cmd(f"ip link set {intf.name} up")


class WireNode(RunMarked, Node):
    """The namespace that carries every link: one Linux bridge per link joins its two ends.

    A link is host/switch port <-veth-> bridge <-veth-> host/switch port. Taking the wire-side
    interfaces down makes both ports lose carrier while they stay administratively up, as a cut
    cable does: the switch keeps running (BMv2's pcap receive loop stalls, for every port, when one
    of its interfaces is set down) and frames sent to a dead port simply vanish.
    """

    def __init__(self, name, run_id: str | None = None, **params):
        self.run_id = run_id
        self._shell = threading.Lock()       # one command at a time: faults fire from timer threads
        super().__init__(name, inNamespace=True, **params)
        disable_ipv6(self)

    @staticmethod
    def end_names(index: int) -> tuple[str, str]:
        """Names of the wire-side interfaces of link `index` (towards its a and b ends)."""
        return f"w{index}a", f"w{index}b"

    def join(self, index: int) -> None:
        """Bridge the two wire-side interfaces of link `index` (a hub: no learning, no STP)."""
        a, b = self.end_names(index)
        bridge = f"br{index}"
        out = self.cmd(f"ip link add {bridge} type bridge ageing_time 0 stp_state 0 "
                       f"mcast_snooping 0 && ip link set {a} master {bridge} && "
                       f"ip link set {b} master {bridge} && ip link set {bridge} up && "
                       f"ip link set {a} up && ip link set {b} up")
        if out.strip():
            raise RuntimeError(f"wire for link {index}: {out.strip()}")

    def set_link(self, index: int, up: bool) -> None:
        """Cut (up=False) or restore the link: both ends lose or regain carrier."""
        status = "up" if up else "down"
        with self._shell:
            out = self.cmd(" && ".join(f"ip link set {name} {status}" for name in self.end_names(index)))
        if out.strip():
            raise RuntimeError(f"wire for link {index}: {out.strip()}")


class P4Switch(RunMarked, Switch):
    """Common life cycle of a switch process in its own namespace, reached over P4Runtime.

    `queues` are the switch's egress queues (rate and depth per port); `ingress` maps each port
    facing a host to the rate of that host's link, which no switch egress queue serialises.
    """

    target = "?"

    def __init__(self, name, device_id: int = 1, run_dir: str = "/tmp", sock_dir: str | None = None,
                 topo_name: str = "", pcap: bool | PcapCapture = False, registry=None,
                 ready_timeout: float = 20.0, queues: list[PortQueue] = (),
                 ingress: dict[int, int] | None = None, run_id: str | None = None, **params):
        self.run_id = run_id or (registry.state.run_id if registry is not None else None)
        params["inNamespace"] = True      # overrides Mininet's default (root namespace)
        super().__init__(name, dpid=f"{device_id:x}", **params)
        disable_ipv6(self)
        self.cmd("ip link set lo up")           # thrift (BMv2) listens on the namespace's loopback
        self.device_id = device_id
        self.queues = list(queues)
        self.ingress = dict(ingress or {})       # port -> bit rate of the host's link into it
        self.topo_name = topo_name or name
        self.run_dir = Path(run_dir)
        self.pcap = PcapCapture.of(pcap)       # None: no capture
        self.registry = registry
        self.ready_timeout = ready_timeout
        self.process: subprocess.Popen | None = None
        self.captures: list[subprocess.Popen] = []
        sock_dir = Path(sock_dir) if sock_dir else self.run_dir     # unix socket paths are short
        self.grpc_address = f"unix:{sock_dir / (self.topo_name + '.grpc.sock')}"
        self.log_path = self.run_dir / f"{self.topo_name}.log"
        if registry is not None:
            registry.record_process(self.pid, f"{self.target} switch shell {name}", group=True)

    # --- what subclasses define ----------------------------------------------------------
    @classmethod
    def check_program(cls, compiled) -> None:
        """Raise SwitchStartError naming what this kind of switch needs of the compiled program
        (a `controller.installer.CompiledProgram`) when it lacks it; every switch needs its P4Info."""

    def command(self) -> list[str]:
        """The switch process's command line."""
        raise NotImplementedError

    def configure_queues(self) -> None:
        """Apply the switch's egress queues, rate and depth per port (after the pipeline is installed)."""
        raise NotImplementedError

    def set_queue_rates(self, queues: list[PortQueue]) -> None:
        """While running: serve each of these ports' egress queues at its new `rate_bps` (its depth
        is left as it is); a gray switch (experiments' switch_slow fault)."""
        raise NotImplementedError

    def queue_service(self) -> dict[int, dict] | None:
        """After the process stopped: how each rate-limited queue was served while backlogged
        (port -> rate, busy_s, lost_s), or None when this target cannot say."""
        return None

    # --- life cycle ---------------------------------------------------------------------------
    def data_ports(self) -> dict[int, str]:
        """P4 port number -> interface name, for every data port."""
        return {port: intf.name for port, intf in sorted(self.intfs.items())
                if intf.name != "lo" and port > 0}

    def start(self, controllers=()) -> None:
        """Launch the switch process (and a capture per port when pcap is on)."""
        if self.process is not None:
            return
        disable_ipv6(self, self.data_ports().values())
        sock = self.grpc_address[len("unix:"):]
        if os.path.exists(sock):
            os.unlink(sock)
        log = open(self.log_path, "ab")
        try:
            self.process = self.popen([*realtime.command_prefix(), *self.command()], stdin=subprocess.DEVNULL,
                                      stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO))
        finally:
            log.close()
        if self.registry is not None:
            self.registry.record_process(self.process.pid, f"{self.target} switch {self.name}")
        if self.pcap:
            self._start_captures()

    def _start_captures(self) -> None:
        tcpdump = shutil.which("tcpdump")
        if tcpdump is None:
            raise SwitchStartError(f"{self.name}: pcap asked for but tcpdump is not on PATH")
        folder = self.pcap.files_folder(self.run_dir)
        folder.mkdir(parents=True, exist_ok=True)
        for port, ifname in self.data_ports().items():
            out = folder / f"{self.topo_name}-port{port}.pcap"
            with open(self.run_dir / f"{self.topo_name}-port{port}.tcpdump.log", "wb") as err:
                proc = self.popen([tcpdump, "-i", ifname, "--immediate-mode", "-U", "-w", str(out),
                                   *self.pcap.tcpdump_args()],
                                  stdout=subprocess.DEVNULL, stderr=err)
            self.captures.append(proc)
            if self.registry is not None:
                self.registry.record_process(proc.pid, f"tcpdump {ifname}")

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until the process serves P4Runtime; raise SwitchStartError with its log if not."""
        deadline = time.monotonic() + (self.ready_timeout if timeout is None else timeout)
        sock = self.grpc_address[len("unix:"):]
        while not os.path.exists(sock):
            self._check_alive()
            if time.monotonic() > deadline:
                raise SwitchStartError(self._failure("no P4Runtime socket " + sock))
            time.sleep(0.02)
        channel = grpc.insecure_channel(self.grpc_address)
        try:
            grpc.channel_ready_future(channel).result(timeout=max(0.1, deadline - time.monotonic()))
        except grpc.FutureTimeoutError:
            raise SwitchStartError(self._failure("P4Runtime not answering")) from None
        finally:
            channel.close()
        self._check_alive()
        self._wait_captures(deadline)

    def _wait_captures(self, deadline: float) -> None:
        """Wait until every tcpdump of this switch says it is listening."""
        for port in self.data_ports() if self.captures else ():
            log = self.run_dir / f"{self.topo_name}-port{port}.tcpdump.log"
            while "listening on" not in (log.read_text(errors="replace") if log.exists() else ""):
                if time.monotonic() > deadline:
                    raise SwitchStartError(f"{self.name}: tcpdump on port {port} not listening "
                                           f"(log {log})")
                time.sleep(0.02)

    def _check_alive(self) -> None:
        if self.process is None:
            raise SwitchStartError(f"{self.name}: not started")
        if self.process.poll() is not None:
            raise SwitchStartError(self._failure(f"exited with status {self.process.returncode}"))

    def _failure(self, what: str) -> str:
        tail = ""
        if self.log_path.exists():
            tail = "\n".join(self.log_path.read_text(errors="replace").splitlines()[-15:])
        return f"{self.target} switch {self.name}: {what} (log {self.log_path}):\n{tail}"

    def alive(self) -> bool:
        """True while the switch process runs."""
        return self.process is not None and self.process.poll() is None

    def stop_process(self, grace: float = 3.0) -> None:
        """End the switch process and captures by PID: SIGTERM, then SIGKILL after `grace` s."""
        for proc in [self.process, *self.captures]:
            if proc is None:
                continue
            stop_process(proc, grace)
            if self.registry is not None:
                self.registry.forget_process(proc.pid)
        self.process, self.captures = None, []

    def stop(self, deleteIntfs=True) -> None:
        """Stop the switch process, then the node (its namespace goes with its shell)."""
        self.stop_process()
        super().stop(deleteIntfs)


class RefSwitch(P4Switch):
    """The reference model: `python -m refswitch.main` with one raw-socket port per interface."""

    target = "model"

    def __init__(self, name, **params):
        super().__init__(name, **params)
        self.ready_file = self.run_dir / f"{self.topo_name}.ready"

    @property
    def stats_file(self) -> Path:
        """Where the model writes its counters and queue service when it exits."""
        return Path(self.run_dir) / f"{self.topo_name}.stats.json"

    @property
    def control_path(self) -> str:
        """The model's control socket (refswitch.control), beside its P4Runtime socket."""
        return str(Path(self.grpc_address[len("unix:"):]).with_name(f"{self.topo_name}.ctl.sock"))

    python = sys.executable         # the interpreter that runs the model where the switch runs

    def model_files(self) -> dict[str, str]:
        """The model's options naming its P4Runtime address, ready file, statistics file and
        control socket, as the model process reaches them."""
        return {"--grpc-addr": self.grpc_address, "--ready-file": str(self.ready_file),
                "--stats-file": str(self.stats_file), "--control": self.control_path}

    def command(self) -> list[str]:
        cmd = [self.python, "-m", "refswitch.main", "--name", self.topo_name, "--device-id", str(self.device_id)]
        for option, path in self.model_files().items():
            cmd += [option, path]
        for port, ifname in self.data_ports().items():
            cmd += ["--port", f"{port}={ifname}"]
        for q in self.queues:
            cmd += ["--queue", f"{q.port}:{q.rate_bps}:{q.depth_pkts}"]
        for port, rate in sorted(self.ingress.items()):
            cmd += ["--ingress", f"{port}:{rate}"]
        return cmd

    def start(self, controllers=()) -> None:
        self.ready_file.unlink(missing_ok=True)
        super().start(controllers)

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait for the model's ready file (ports open, server up), then for P4Runtime itself."""
        deadline = time.monotonic() + (self.ready_timeout if timeout is None else timeout)
        while not self.ready_file.exists():
            self._check_alive()
            if time.monotonic() > deadline:
                raise SwitchStartError(self._failure(f"no ready file {self.ready_file}"))
            time.sleep(0.02)
        super().wait_ready(max(0.1, deadline - time.monotonic()))

    def queue_service(self) -> dict[int, dict] | None:
        try:
            doc = json.loads(self.stats_file.read_text())
        except (OSError, ValueError):
            return None                       # not written: the process was killed, not stopped
        return {int(port): service for port, service in (doc.get("queues") or {}).items()}

    def set_queue_rates(self, queues: list[PortQueue]) -> None:
        """Through the model's control socket (`refswitch.control`)."""
        from refswitch.control import SERVER
        with ControlClient(self.control_path, server=SERVER) as client:
            for q in queues:
                client.request("set_queue_rate", port=q.port, rate_bps=q.rate_bps)

    def queue_rate(self, port: int) -> int:
        """The bit rate the model's egress queue of `port` is served at now (0: unlimited)."""
        from refswitch.control import SERVER
        with ControlClient(self.control_path, server=SERVER) as client:
            return client.request("get_queue_rate", port=port)["rate_bps"]

    def configure_queues(self) -> None:
        """Nothing to do: the model took its queues (and its host links' rates) on its command line."""


class Bmv2Switch(P4Switch):
    """BMv2 `simple_switch_grpc` with two strict-priority queues per port. It cannot pace the frames
    that arrive from hosts (`ingress` is not used): its queues serialise only what leaves it."""

    target = "bmv2"
    THRIFT_PORT = 9090            # inside the switch's own namespace: every switch can use it

    @classmethod
    def check_program(cls, compiled) -> None:
        """BMv2 runs the compiled pipeline (p4/build/mrc.json), which only p4c makes."""
        if not compiled.device_config:
            raise SwitchStartError("BMv2 needs the compiled program p4/build/mrc.json "
                                   "(run `make -C p4` where p4c is installed)")

    @property
    def grpc_server_address(self) -> str:
        """Where the switch process serves P4Runtime, as that process reaches it."""
        return self.grpc_address

    def command(self) -> list[str]:
        binary = shutil.which("simple_switch_grpc")
        if binary is None:
            raise SwitchStartError("simple_switch_grpc is not on PATH (BMv2: the project's VM has it, see README.md)")
        # No --log-file/--log-console: BMv2's logging slows it by an order of magnitude.
        cmd = [binary, "--device-id", str(self.device_id), "--thrift-port", str(self.THRIFT_PORT)]
        for port, ifname in self.data_ports().items():
            cmd += ["-i", f"{port}@{ifname}"]
        cmd += ["--no-p4", "--", "--grpc-server-addr", self.grpc_server_address,
                "--priority-queues", str(constants.NUM_PRIORITIES)]
        return cmd

    def runtime_cli(self, commands: list[str]) -> str:
        """Run `simple_switch_CLI` commands against this switch; raise on error."""
        binary = shutil.which("simple_switch_CLI")
        if binary is None:
            raise SwitchStartError("simple_switch_CLI is not on PATH (BMv2: the project's VM has it, see README.md)")
        proc = self.popen([binary, "--thrift-port", str(self.THRIFT_PORT)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out, _ = proc.communicate("\n".join(commands).encode() + b"\n", timeout=30)
        text = out.decode(errors="replace")
        if proc.returncode != 0 or "Error" in text or "Invalid" in text:
            raise SwitchStartError(f"{self.name}: simple_switch_CLI failed on {commands}:\n{text}")
        return text

    def configure_queues(self) -> None:
        """set_queue_depth / set_queue_rate (packets/s from bits/s, RATE_PACKET_BYTES) per port and priority."""
        commands = []
        for q in self.queues:
            for prio in range(constants.NUM_PRIORITIES):
                commands.append(f"set_queue_depth {q.depth_pkts} {q.port} {prio}")
            commands += self._rate_commands(q)
        if commands:
            self.runtime_cli(commands)

    def set_queue_rates(self, queues: list[PortQueue]) -> None:
        """set_queue_rate of every priority through the thrift CLI (a rate of 0 cannot be set:
        BMv2 queues have no "unlimited" rate once limited)."""
        for q in queues:
            if not q.rate_bps:
                raise ValueError(f"{self.name}: port {q.port}: a BMv2 queue rate cannot be set back to unlimited")
        commands = [c for q in queues for c in self._rate_commands(q)]
        if commands:
            self.runtime_cli(commands)

    @staticmethod
    def _rate_commands(q: PortQueue) -> list[str]:
        """set_queue_rate of each priority of `q`'s port, in packets/s (RATE_PACKET_BYTES); none when unlimited."""
        if not q.rate_bps:
            return []
        return [f"set_queue_rate {max(1, q.rate_bps // (8 * RATE_PACKET_BYTES[prio]))} {q.port} {prio}"
                for prio in range(constants.NUM_PRIORITIES)]


TARGETS = {"model": RefSwitch, "bmv2": Bmv2Switch}


def default_target() -> str:
    """'bmv2' when simple_switch_grpc is on PATH, else 'model'."""
    return "bmv2" if shutil.which("simple_switch_grpc") else "model"


def target_unavailable(target: str) -> str | None:
    """Why switch target `target` cannot run here (a missing binary or program), or None."""
    if target != "bmv2":
        return None
    for program in ("simple_switch_grpc", "simple_switch_CLI"):
        if shutil.which(program) is None:
            return (f"--target bmv2 needs {program} on PATH (BMv2, Debian/Ubuntu package p4lang-bmv2; "
                    f"the project's VM has it); use --target model for the reference switch")
    from controller.installer import DEFAULT_BMV2_JSON
    if not DEFAULT_BMV2_JSON.exists():
        return f"--target bmv2 needs the compiled program {DEFAULT_BMV2_JSON} (make -C p4)"
    return None
