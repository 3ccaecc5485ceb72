"""The testbed on several servers, on Mininet's cluster edition (`mininet.examples.cluster`).

`ClusterNetwork` is a `TestbedNetwork` whose nodes run on the servers of a cluster file
(testbed/clusterfile.py), placed by `topologies.placement`. Each node is a Mininet `RemoteMixin`
node: its shell runs on its server over ssh (one shared connection per server, OpenSSH's
ControlMaster), and every command and process of the node goes through that server.

What the cluster edition does not give, and this module adds on top of it:

- **Links that can drop.** Mininet's default cluster links are ssh tunnels (frames over TCP: they
  never drop or trim). A link whose ends are on different servers is a kernel tunnel between the
  servers' *wire* nodes instead: gretap (`RemoteGRELink`'s device) where the kernel has it, VXLAN
  otherwise (`TunnelLink`); both carry Ethernet frames over IP and drop what they cannot carry.
  Every interface of a crossing link is set to the tunnel MTU (1450 by default), and a run whose
  frames do not fit is refused, naming the frame size and the MTU.
- **Remote switch processes** (`ClusterSwitch`: `ClusterRefSwitch`, `ClusterBmv2Switch`): the
  model switch or BMv2 started on its server, its readiness checked there (the model's ready file;
  BMv2's P4Runtime socket and listening thrift port), its log streamed back over ssh, counters and
  P4Runtime. P4Runtime (and the model's control socket) are unix sockets on the server, forwarded
  to the front end by OpenSSH (`-L local.sock:remote.sock` on the server shell's connection), so
  the controller talks to it as to a local switch; BMv2's thrift (queue settings) is reached by `simple_switch_CLI` run on the
  server in the switch's namespace.
- **Processes that die with the run** (`RemoteProcess`): each remote process records its PID in a
  file on its server and is ended by that PID; it also ends when its ssh connection closes (its
  stdin reaches end of file), so a SIGKILL of the front end leaves nothing running on a server.
  Every local ssh client is started with PR_SET_PDEATHSIG (DIE_WITH_PARENT).
- **Agents' control sockets** (EV denial): served in the run's folder on the server, forwarded to
  the front end over the host's ssh connection (`agent_control`).
- **Files both ways**: jobs pushed before the agents start (all of a server's in one ssh session,
  `put_files`), the agents' event logs streamed back as they are written (the agent logs to its
  standard output), the model's statistics read back, the switches' pcaps captured on their server
  and streamed into the local pcap folder.
- **Bring-up in parallel** (`ClusterNetwork._start_nodes`): node shells started several at a
  time, and one shell per server (`ServerShell`) kept open for commands outside the nodes'
  namespaces (tunnels, waits, statistics, signals), so that those cost a round trip, not an ssh
  session each (docs/scale.md, "Bring-up over several servers").
- **A CPU watch per server** (`ServerCpuWatch`): the fidelity monitor's samples of each server's
  processes and CPUs, taken there and brought back; every reason of its verdict names its server.
"""
from __future__ import annotations

import json
import logging
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

from mininet.examples.cluster import RemoteLink, RemoteMixin
from mininet.node import Node

from testbed import cpu_sample, nodes
from testbed.clusterfile import ClusterFile, Server
from testbed.fidelity import CpuWatch
from testbed.network import TestbedNetwork
from testbed.processes import DIE_WITH_PARENT
from topologies.placement import Placement, place
from wire import constants

log = logging.getLogger("mrc.testbed")

NODES_PER_CONNECTION = 6          # node shells sharing one ssh connection (sshd's MaxSessions is 10)
NODE_STARTS = 8                    # node shells started at once (`ClusterNetwork._start_nodes`)
SSH_CHECK_S = 20                   # a server's first ssh answer before any node starts (`ClusterNetwork._add_hosts`)
TUNNEL_MTU = 1450                  # Mininet's GRE links use it on every interface; VXLAN fits it too
REMOTE_ROOT = "/tmp/mrc-cluster"    # each run's files on a server: REMOTE_ROOT/<run id>/
FRONT_END_FILE = "front-end"        # in a run's folder on a server: the front end that made it

# A remote process: run "$@" in the background, write its PID to $1, end it when our standard input
# (held open by the front end's ssh client) reaches end of file, and exit with its status.
# The PID and kernel start time (field 22 of /proc/PID/stat) of a process, as its PID file holds them.
_PID_AND_START = 'echo "$1 $(sed "s/.*) //" /proc/$1/stat | cut -d" " -f20)"'
# A remote process: run "$@" in the background, write its PID and start time to $1, end it when our
# standard input (held open by the front end's ssh client) reaches end of file, exit with its status.
WATCHDOG = ('pidfile=$1; shift; exec 3<&0; "$@" </dev/null 3<&- & child=$!; '
            f'sh -c {shlex.quote(_PID_AND_START)} sh $child > "$pidfile"; '
            '( cat <&3 >/dev/null 2>&1; kill -TERM $child 2>/dev/null ) >/dev/null 2>&1 & '
            'watcher=$!; exec 3<&-; wait $child; code=$?; kill $watcher 2>/dev/null; rm -f "$pidfile"; exit $code')
# On a server: signal $1 every process of a PID file given after it, when it is still the process
# that wrote it (same start time).
_SIGNAL_PID_FILES = ('sig=$1; shift; for f in "$@"; do [ -s "$f" ] || continue; read pid start < "$f"; '
                     f'now=$(sh -c {shlex.quote(_PID_AND_START)} sh $pid 2>/dev/null | cut -d" " -f2); '
                     '[ -n "$now" ] && [ "$now" = "$start" ] && kill -$sig $pid 2>/dev/null; done; true')


class ClusterError(RuntimeError):
    """A cluster run that cannot go on; the message names the server or node."""




def front_end() -> str:
    """This machine as a run folder on a server names it (host name and machine ID): run IDs are
    unique on one machine only, and servers may be shared by several front ends."""
    try:
        machine = Path("/etc/machine-id").read_text().strip()
    except OSError:
        machine = ""
    return f"{socket.gethostname()}/{machine}"


def ssh_base(server: Server, control_dir: str | None = None, channel: int = 0) -> list[str]:
    """The OpenSSH client command reaching `server` (without the destination): the cluster file's
    options and batch mode; with `control_dir`, over shared connection number `channel` to the
    server kept there (OpenSSH's ControlMaster), else on a connection of its own. A server that
    stops answering ends the connection after 30 s (a tear-down never waits on it for ever); the
    cluster file's own options come first and win."""
    base = ["ssh", *server.ssh_args()[:-1], "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
            "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3"]
    if control_dir is None:
        return [*base, "-o", "ControlMaster=no", "-o", "ControlPath=none"]
    return [*base, "-o", f"ControlPath={control_dir}/ssh-%h-%p-{channel}", "-o", "ControlMaster=auto",
            "-o", "ControlPersist=2"]


def run_on(server: Server, command: str, timeout: float, control_dir: str | None = None,
           stdin=subprocess.DEVNULL) -> tuple[int, str, str]:
    """Run the shell `command` on `server` by ssh: its exit status, output and error text. An ssh
    that has not returned within `timeout` s is ended and reported as status 255, 'no answer'."""
    try:
        done = subprocess.run([*ssh_base(server, control_dir), server.ssh_target, command], stdin=stdin,
                              capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 255, "", f"no answer within {timeout:g} s"
    error = done.stderr.decode(errors="replace").strip() or f"exit status {done.returncode}"
    return done.returncode, done.stdout.decode(errors="replace"), error


class ClusterNode(RemoteMixin):
    """Mixin: a testbed node on a server of the cluster (Mininet's `RemoteMixin`, with the cluster
    file's ssh options, commands quoted for the remote shell and Python 3's bytes decoded)."""

    def __init__(self, name, server: Server, control_dir: str, remote_dir: str, channel: int = 0, **params):
        self.cluster_server = server
        self.remote_dir = remote_dir
        self.sshbase = [*ssh_base(server, control_dir, channel), "-tt"]
        super().__init__(name, server=server.address, user=server.user or "root", serverIP=server.address,
                         **params)

    _ignoreSignal = None        # RemoteMixin's preexec_fn: none (threads); a session of its own instead

    def startShell(self, *args, **kwargs):
        """As RemoteMixin's, with ssh started directly rather than through a local `sudo -u` (this
        process is root already, and PR_SET_PDEATHSIG does not survive sudo's set-user-ID exec) and
        dying with this process (DIE_WITH_PARENT)."""
        if self.sshcmd[:2] == ["sudo", "-E"]:
            self.sshcmd = [*DIE_WITH_PARENT, *self.sshcmd[4:]]
        try:
            super().startShell(*args, **kwargs)
        except OSError as exc:                  # the terminal let go of: ssh ended before the prompt
            raise ClusterError(f"server {self.cluster_server.address}: the ssh carrying node {self.name}'s "
                               f"shell ended before its prompt ({exc.strerror})") from None

    def _popen(self, cmd, sudo=True, tt=True, **params):
        if self.isRemote and isinstance(cmd, list):
            cmd = [shlex.quote(str(part)) for part in cmd]      # ssh joins its arguments with spaces
        params.setdefault("start_new_session", True)            # Ctrl-C is this process's to handle
        popen = super()._popen(cmd, sudo=sudo, tt=tt, **params)
        if self.slave is not None and params.get("stdout") is self.slave:
            self._let_go_of_the_terminal()
        return popen

    def _let_go_of_the_terminal(self) -> None:
        """Close this process's copy of the shell's terminal (its pty's slave end) once ssh holds
        it: Mininet keeps it open, so a reading of the shell's output never ends when ssh dies (a
        server that refuses the connection would hang the bring-up, Ctrl-C and SIGTERM included);
        closed, the read fails at once. What Mininet closes later in its place is /dev/null."""
        placeholder = os.open(os.devnull, os.O_RDONLY)
        os.close(self.slave)
        self.slave = placeholder

    def rcmd(self, *cmd, **opts) -> str:
        """Run a command on the node's server, outside the node's namespace; its output as text."""
        popen = self.rpopen(*cmd, **opts)
        out, _ = popen.communicate()
        return out.decode(errors="replace") if isinstance(out, bytes) else (out or "")

    admin: "ServerShell | None" = None     # the server's own shell, kept open by `ClusterNetwork`

    def remote_shell(self, script: str) -> str:
        """Run a shell script on the node's server (root namespace of the server); its output. Through
        the server's open shell when it has one (a round trip), else an ssh session of its own."""
        if self.admin is not None and self.admin is not self and self.admin.shell is not None:
            return self.admin.remote_shell(script)
        return self.rcmd(["sh", "-c", script])

    def start_remote(self, name: str, cmd: list[str], stdout, stderr=subprocess.STDOUT) -> "RemoteProcess":
        """Start `cmd` in this node's namespace on its server, its output streamed to `stdout`."""
        pid_file = f"{self.remote_dir}/{name}.pid"
        proc = self.popen(["sh", "-c", WATCHDOG, "sh", pid_file, *cmd], stdin=subprocess.PIPE,
                          stdout=stdout, stderr=stderr)
        return RemoteProcess(self, name, proc, pid_file)


class RemoteProcess:
    """A process on a server: the local ssh client that carries it, and its PID file there."""

    def __init__(self, node: ClusterNode, name: str, local: subprocess.Popen, pid_file: str) -> None:
        self.node = node
        self.name = name
        self.local = local
        self.pid_file = pid_file

    @property
    def pid(self) -> int:
        """The local ssh client's PID (what the registry records on this machine)."""
        return self.local.pid

    @property
    def returncode(self) -> int | None:
        return self.local.returncode

    def poll(self) -> int | None:
        return self.local.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self.local.wait(timeout)

    def send_signal(self, sig: int) -> None:
        """Signal the remote process by the PID it recorded (a no-op once it is gone)."""
        self.node.remote_shell(f"sh -c {shlex.quote(_SIGNAL_PID_FILES)} sh {int(sig)} {shlex.quote(self.pid_file)}")

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)
        if self.local.poll() is None and self.local.stdin:
            self.local.stdin.close()            # end of file: the watchdog ends it too
        try:
            self.local.wait(5)
        except subprocess.TimeoutExpired:
            self.local.kill()


class ClusterHost(ClusterNode, nodes.MrcHost):
    """A testbed host on a server."""


class ClusterSwitch(ClusterNode):
    """Mixin: a switch process on a server, with the life cycle of the local one (`nodes.P4Switch`)
    run there: started under the watchdog (PID file on the server, ended with its ssh connection),
    its output streamed back into the local log, ready once `remote_ready_test()` holds on the
    server (`ClusterNetwork` waits for every switch of a server in one shell), its unix sockets
    forwarded to the front end (`forwards()`), stopped by the PID it recorded."""

    @property
    def remote_grpc_path(self) -> str:
        return f"{self.remote_dir}/{self.topo_name}.grpc.sock"

    def remote_ready_test(self) -> str:
        """A shell condition, true on the server once the process is ready for P4Runtime."""
        raise NotImplementedError

    def socket_pairs(self) -> list[tuple[str, str]]:
        """(local path, path on the server) of every unix socket forwarded to the front end."""
        return [(self.grpc_address[len("unix:"):], self.remote_grpc_path)]

    def start(self, controllers=()) -> None:
        if self.process is not None:
            return
        nodes.disable_ipv6(self, self.data_ports().values())      # the run's folder is new: no old ready file
        with open(self.log_path, "ab") as out:
            self.process = self.start_remote(self.topo_name, [*nodes.realtime.command_prefix(), *self.command()],
                                             stdout=out)
        if self.registry is not None:
            self.registry.record_process(self.process.pid, f"ssh carrying {self.target} switch {self.name}")
        if self.pcap:
            self._start_captures()

    def _start_captures(self) -> None:
        """A tcpdump per data port, run on the server in the switch's namespace, writing its pcap to
        its standard output, which ssh brings into the local file as it is captured (`-U`: packet by
        packet); its messages ("listening on ...") go to the local tcpdump log as on one machine."""
        folder = self.pcap.files_folder(self.run_dir)
        folder.mkdir(parents=True, exist_ok=True)
        tcpdump = shutil.which("tcpdump") or "tcpdump"          # the same software on the servers
        for port, ifname in self.data_ports().items():
            with open(folder / f"{self.topo_name}-port{port}.pcap", "wb") as out, \
                    open(self.run_dir / f"{self.topo_name}-port{port}.tcpdump.log", "wb") as err:
                proc = self.start_remote(f"tcpdump-{self.topo_name}-port{port}",
                                         [tcpdump, "-i", ifname, "--immediate-mode", "-U", "-w", "-",
                                          *self.pcap.tcpdump_args()], stdout=out, stderr=err)
            self.captures.append(proc)
            if self.registry is not None:
                self.registry.record_process(proc.pid, f"ssh carrying tcpdump {ifname} of {self.name}")

    def forwards(self) -> list[str]:
        """OpenSSH's -L arguments bringing this switch's sockets to this machine."""
        args = []
        for local, remote in self.socket_pairs():
            Path(local).unlink(missing_ok=True)
            args += ["-L", f"{local}:{remote}"]
        return args

    def wait_ready(self, timeout: float | None = None) -> None:
        """P4Runtime answering through the forwarded socket (`ClusterNetwork` has waited for
        `remote_ready_test()` on the server and forwards the sockets)."""
        nodes.P4Switch.wait_ready(self, timeout)


class ClusterRefSwitch(ClusterSwitch, nodes.RefSwitch):
    """The model switch on a server; P4Runtime and its control socket forwarded to the front end."""

    @property
    def remote_control_path(self) -> str:
        return f"{self.remote_dir}/{self.topo_name}.ctl.sock"

    @property
    def remote_ready_file(self) -> str:
        return f"{self.remote_dir}/{self.topo_name}.ready"

    @property
    def remote_stats_file(self) -> str:
        return f"{self.remote_dir}/{self.topo_name}.stats.json"

    @property
    def python(self) -> str:
        return self.cluster_server.python or sys.executable

    def model_files(self) -> dict[str, str]:
        """The model's files and sockets in this run's folder on the server."""
        return {"--grpc-addr": f"unix:{self.remote_grpc_path}", "--ready-file": self.remote_ready_file,
                "--stats-file": self.remote_stats_file, "--control": self.remote_control_path}

    def remote_ready_test(self) -> str:
        return f"[ -e {shlex.quote(self.remote_ready_file)} ]"

    def socket_pairs(self) -> list[tuple[str, str]]:
        return [*super().socket_pairs(), (self.control_path, self.remote_control_path)]

    def queue_service(self) -> dict[int, dict] | None:
        text = self.remote_shell(f"cat {self.remote_stats_file} 2>/dev/null")
        try:
            doc = json.loads(text)
        except ValueError:
            return None
        return {int(port): service for port, service in (doc.get("queues") or {}).items()}


class ClusterBmv2Switch(ClusterSwitch, nodes.Bmv2Switch):
    """BMv2 (`simple_switch_grpc`) on a server: P4Runtime on a unix socket in the run's folder
    there, forwarded to the front end; its thrift server (queue rates and depths) on the switch
    namespace's loopback, reached by `simple_switch_CLI` run in that namespace on the server
    (`runtime_cli`, through the node's `popen`). The binaries are the front end's paths: servers
    have the same software (docs/scale.md)."""

    @property
    def grpc_server_address(self) -> str:
        return f"unix:{self.remote_grpc_path}"

    def remote_ready_test(self) -> str:
        """The P4Runtime socket made, and the thrift port listening in the switch's namespace
        (/proc/<a process of that namespace>/net/tcp lists that namespace's sockets; 0A: listen)."""
        port = f"{self.THRIFT_PORT:04X}"
        tables = f"/proc/{self.pid}/net/tcp /proc/{self.pid}/net/tcp6"
        return (f"[ -S {shlex.quote(self.remote_grpc_path)} ] && "
                f"cat {tables} 2>/dev/null | awk '$2 ~ /:{port}$/ && $4 == \"0A\" {{ f = 1 }} END {{ exit !f }}'")


CLUSTER_SWITCHES = {"model": ClusterRefSwitch, "bmv2": ClusterBmv2Switch}


class ServerCpuWatch(CpuWatch):
    """The CPU watch of one server: the sampler program (testbed/cpu_sample.py, its source sent as
    `python -c`) runs there under the watchdog, sampling the processes of the run's PID files that
    belong to `nodes` and the server's CPUs; its lines come back over ssh and are taken as samples,
    their times moved to this machine's clock by the first line's arrival (the servers share no
    clock; only differences between a server's own samples count)."""

    def __init__(self, node: ClusterNode, nodes: list[str], sample_s: float) -> None:
        super().__init__(sample_s)
        self.node = node
        self.nodes = sorted(nodes)
        self.proc: RemoteProcess | None = None
        self._reader: threading.Thread | None = None
        self._offset: float | None = None
        self._not_before = 0.0

    def start(self, delay_s: float = 0.0) -> "ServerCpuWatch":
        source = Path(cpu_sample.__file__).read_text()
        python = self.node.cluster_server.python or sys.executable
        self._not_before = time.monotonic() + delay_s
        self.proc = self.node.start_remote("cpu-sampler", [python, "-c", source, self.node.remote_dir,
                                                           str(self.sample_s), *self.nodes],
                                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._reader = threading.Thread(target=self._read, name=f"cpu-watch {self.node.cluster_server.address}",
                                        daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        for line in self.proc.local.stdout:
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if self._offset is None:
                self._offset = time.monotonic() - doc["t"]
            self.cpus = int(doc["cpus"])
            now = doc["t"] + self._offset
            if now >= self._not_before:
                self.add_sample(now, tuple(doc["machine"]), {name: tuple(v) for name, v in doc["processes"].items()},
                                float(doc["load"]))

    def stop(self) -> None:
        """End the sampler (by its PID there) and take what it sent until then."""
        if self.proc is None:
            return
        self.proc.kill()
        self._reader.join(5)
        self.proc = None


class TunnelLink(RemoteLink):
    """A link between wire nodes of two servers: a gretap or VXLAN device on each server, in the
    wire node, MTU `TUNNEL_MTU` on both, made beforehand by `make_tunnels` (every tunnel end of a
    server in one script). Same-server links are veth pairs as usual."""

    def makeTunnel(self, node1, node2, intfname1, intfname2, addr1=None, addr2=None):
        self.tunnel = True              # the devices are in the wire nodes already (make_tunnels)
        return None

    def stop(self):
        if self.tunnel:
            for intf in (self.intf1, self.intf2):
                intf.delete()
            self.tunnel = None
        else:
            super().stop()


def tunnel_spec(kind: str, key: int, local: str, remote: str) -> str:
    """`ip link add` arguments of one end of tunnel `key` (a gretap key or VXLAN id, the same at both ends)."""
    if kind == "gretap":
        return f"type gretap local {local} remote {remote} ttl 64 key {key}"
    return f"type vxlan id {key} local {local} remote {remote} dstport 4789 ttl 64"


def make_tunnels(wire: "ClusterWire", kind: str, ends: list[tuple[str, int, str]]) -> None:
    """Make every tunnel end of `wire`'s server, (interface name, key, far server address) each,
    in one script on the server: made in the server's namespace (where its address is), MTU
    TUNNEL_MTU, moved into the wire node."""
    if not ends:
        return
    local = wire.cluster_server.address
    script = " && ".join(f"{{ ip link del {name} 2>/dev/null; true; }} && ip link add name {name} "
                         f"{tunnel_spec(kind, key, local, far)} && ip link set {name} mtu {TUNNEL_MTU} && "
                         f"ip link set {name} netns {wire.pid}" for name, key, far in ends)
    out = wire.remote_shell(script)
    if out.strip():
        raise ClusterError(f"tunnels on {local}: {out.strip()}")


def tunnel_kind(node: ClusterNode) -> str:
    """'gretap' when the kernel of `node`'s server makes one, else 'vxlan' (checked the same way)."""
    for kind, spec in (("gretap", "type gretap local 127.0.0.1 remote 127.0.0.2 key 9999"),
                       ("vxlan", "type vxlan id 9999 local 127.0.0.1 remote 127.0.0.2 dstport 4789")):
        out = node.cmd(f"ip link add mrcprobe0 {spec} && ip link del mrcprobe0 && echo made")
        if "made" in out:
            return kind
    raise ClusterError(f"the kernel of {node.cluster_server.address} makes neither gretap nor VXLAN tunnels")


def check_frames_fit(payload: int, mtu: int = TUNNEL_MTU) -> None:
    """Refuse data packets of `payload` bytes that do not fit a tunnel's MTU."""
    frame = constants.DATA_HEADERS_LEN + payload + constants.ICRC_LEN - 14          # an MTU counts from the IP header
    if frame > mtu:
        raise ClusterError(f"frames of {frame} bytes (IPv6 packet of a {payload}-byte payload) do not fit "
                           f"the tunnels' MTU of {mtu} bytes between servers")


def placement_for(topology, cluster: ClusterFile) -> Placement:
    """Where each node runs: `topologies.placement.place` over the cluster's servers and pins."""
    servers = [s.address for s in cluster.servers]
    return place(topology, servers, cores={s.address: s.cores for s in cluster.servers},
                 pinned=cluster.placement)


class ClusterWire(ClusterNode, nodes.WireNode):
    """The wire node of one server: one bridge per link with an end there (the link's two ends,
    or one end and the tunnel to the other server)."""

    def bridge(self, index: int, a: str, b: str) -> None:
        """Join interfaces `a` and `b` in the bridge of link `index` (a hub, as `WireNode.join`)."""
        out = self.cmd(f"ip link add br{index} type bridge ageing_time 0 stp_state 0 mcast_snooping 0 && "
                       f"ip link set {a} master br{index} && ip link set {b} master br{index} && "
                       f"ip link set br{index} up && ip link set {a} up && ip link set {b} up")
        if out.strip():
            raise ClusterError(f"wire of {self.cluster_server.address}, link {index}: {out.strip()}")

    def set_ends(self, names: list[str], up: bool) -> None:
        """Set these wire-side interfaces up or down (their far ports gain or lose carrier)."""
        with self._shell:
            out = self.cmd(" && ".join(f"ip link set {name} {'up' if up else 'down'}" for name in names))
        if out.strip():
            raise ClusterError(f"wire of {self.cluster_server.address}: {out.strip()}")


class ClusterNetwork(TestbedNetwork):
    """A `TestbedNetwork` whose nodes run on the servers of `cluster` (model or BMv2 target)."""

    __test__ = False

    def __init__(self, topology, cluster: ClusterFile, target: str = "model", **params):
        super().__init__(topology, target, **params)
        self.cluster = cluster
        self.placement = placement_for(topology, cluster)
        self.wires: dict[str, ClusterWire] = {}
        self.ends: dict[int, list[tuple[ClusterWire, str]]] = {}     # link index -> (wire, wire-side name)
        self.tunnel_kind = ""
        self._remote_dir = ""
        self._remote_procs: list[RemoteProcess] = []
        self._nodes_on: Counter = Counter()        # nodes started so far per server (their ssh connection)
        self._opened: set[tuple[str, int]] = set()   # (server, connection) whose master is running
        self.admins: dict[str, ServerShell] = {}     # per server: its own shell, kept open while up
        self._left_on_servers: list[str] = []       # run folders the tear-down could not remove
        # The threads that start node shells live as long as the network: a shell's ssh client gets
        # SIGKILL when the *thread* that started it ends (PR_SET_PDEATHSIG, DIE_WITH_PARENT).
        self._starter: ThreadPoolExecutor | None = None
        self.server_paths: dict[str, dict] = {}    # "a-b": pings between two servers at bring-up

    # --- where things are ----------------------------------------------------------------------
    def server_of(self, node: str) -> Server:
        return self.cluster.server(self.placement.server_of[node])

    def remote_dir(self) -> str:
        """This run's folder on every server (logs of nothing: PID files, sockets, ready files)."""
        if not self._remote_dir:
            self._remote_dir = f"{REMOTE_ROOT}/{self.registry.state.run_id}"
        return self._remote_dir

    def _node_params(self, node: str) -> dict:
        """Where `node` runs and over which shared ssh connection: a server's sshd opens at most
        MaxSessions (10 by default) sessions on one connection, and each node keeps its shell open
        on one, so every NODES_PER_CONNECTION nodes of a server share a connection of their own."""
        return self._node_params_on(self.server_of(node))

    def _node_params_on(self, server: Server) -> dict:
        index = self._nodes_on[server.address]
        self._nodes_on[server.address] += 1
        return {"server": server, "control_dir": str(self.sock_dir), "remote_dir": self.remote_dir(),
                "channel": index // NODES_PER_CONNECTION}

    def is_remote(self, node: str) -> bool:
        return True

    def agent_control(self, host: str, name: str, local_dir: str) -> tuple[str, str]:
        """The agent serves its control socket in the run's folder on its server; the host's shared
        ssh connection forwards a socket in `local_dir` to it (OpenSSH's `-O forward` on the
        connection's master: no process of its own; each use connects anew, so the agent may make
        its socket later)."""
        node = self.net[host]
        served, reached = f"{self.remote_dir()}/{name}.ctl.sock", f"{local_dir}/{name}.sock"
        base = [arg for arg in node.sshbase if arg != "-tt"]
        done = subprocess.run([*base, "-O", "forward", "-L", f"{reached}:{served}", node.cluster_server.ssh_target],
                              capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise ClusterError(f"forwarding the control socket of {name} on {node.cluster_server.address}: "
                               f"{done.stderr.strip() or done.returncode}")
        return served, reached

    def node_servers(self) -> dict[str, str]:
        return dict(self.placement.server_of)

    def server_watches(self, sample_s: float) -> dict[str, "ServerCpuWatch"]:
        """A `ServerCpuWatch` per server that holds nodes, sampling that server's nodes."""
        names: dict[str, list[str]] = {}
        for node, address in self.placement.server_of.items():
            names.setdefault(address, []).append(node)
        return {address: ServerCpuWatch(wire, names[address], sample_s) for address, wire in self.wires.items()}

    def python(self, node: str) -> str:
        return self.server_of(node).python or sys.executable

    def put_files(self, nodes_files: dict[str, list[Path]]) -> dict[Path, str]:
        """Copy files of this machine into this run's folder on the servers of their nodes
        (`{node: [local path, ...]}`), every file of one server in one ssh session (a tar stream):
        each local path's path there. Names must differ (the folder is the run's, shared by its nodes)."""
        by_server: dict[str, list[Path]] = {}
        for node, paths in nodes_files.items():
            by_server.setdefault(self.server_of(node).address, []).extend(Path(p) for p in paths)
        remote = self.remote_dir()
        placed: dict[Path, str] = {}
        for address, paths in by_server.items():
            names = [p.name for p in paths]
            if len(set(names)) != len(names):
                raise ClusterError(f"copying to {address}: two files named {Counter(names).most_common(1)[0][0]}")
            with tempfile.TemporaryFile() as source:
                with tarfile.open(fileobj=source, mode="w") as tar:
                    for path in paths:
                        tar.add(path, arcname=path.name)
                source.seek(0)
                code, _, error = run_on(self.cluster.server(address),
                                        f"tar -x -o -f - -C {shlex.quote(remote)}", 30, str(self.sock_dir), stdin=source)
            if code != 0:
                raise ClusterError(f"copying {len(paths)} files to {address}:{remote}: {error}")
            placed.update({path: f"{remote}/{path.name}" for path in paths})
        return placed

    def popen(self, host: str, cmd: list[str], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, **_local):
        """Start `cmd` in `host` on its server (a `RemoteProcess`), recorded for clean-up."""
        name = f"{host}-p{len(self._remote_procs)}"
        proc = self.net[host].start_remote(name, cmd, stdout=stdout, stderr=stderr)
        self._remote_procs.append(proc)
        self.registry.record_process(proc.pid, f"ssh carrying {Path(cmd[0]).name} on {host}")
        return proc

    # --- bring-up phases ------------------------------------------------------------------------
    def _start_nodes(self, items: list[tuple[str, object, dict]]) -> dict[str, object]:
        """Make nodes concurrently, (name, constructor, parameters) each (`_node_params` gave the
        parameters, in order): each node's shell is an ssh session on its server, which costs
        about as much as a round trip and a process start there. The first node of a shared ssh
        connection not open yet goes first (it becomes the connection's master; two at once would
        each open a connection of their own), then the others NODE_STARTS at a time. Every node
        made is returned, by name; the first error is raised once all have finished."""
        first, rest, keys = [], [], set()
        for item in items:
            key = (item[2]["server"].address, item[2]["channel"])
            (rest if key in self._opened or key in keys else first).append(item)
            keys.add(key)
        made: dict[str, object] = {}
        errors: list[BaseException] = []
        if self._starter is None:
            self._starter = ThreadPoolExecutor(max_workers=NODE_STARTS, thread_name_prefix="node-start")
        for batch in (first, rest):
            futures = {name: self._starter.submit(make, name, **params) for name, make, params in batch}
            wait(futures.values())
            for name, future in futures.items():
                if future.exception() is not None:
                    errors.append(future.exception())
                else:
                    made[name] = future.result()
            if errors:
                break
        self._opened |= keys
        if errors:
            raise errors[0]
        return made

    def _add_hosts(self) -> str:
        """The servers' own shells and wire nodes, then every host, concurrently (`_start_nodes`)."""
        self.progress("placement on the cluster's servers:\n" + self.placement.describe())
        used = [s for s in self.cluster.servers if s.address in self.placement.server_of.values()]
        for server in used:                         # a server that does not answer: said, not waited on
            code, _, error = run_on(server, "true", SSH_CHECK_S)
            if code != 0:
                raise ClusterError(f"server {server.address}: ssh failed: {error}")
        run_id = self.registry.state.run_id
        self.admins = self._start_nodes([(f"srv{i + 1}", ServerShell, self._node_params_on(server))
                                         for i, server in enumerate(used)])
        self.admins = {self.admins[f"srv{i + 1}"].cluster_server.address: self.admins[f"srv{i + 1}"]
                       for i in range(len(used))}
        for address, admin in self.admins.items():
            self.registry.record_process(admin.shell.pid, f"ssh carrying the shell of server {address}")
            out = admin.remote_shell(f"mkdir -p {self.remote_dir()} && echo {shlex.quote(front_end())} "
                                     f"> {self.remote_dir()}/{FRONT_END_FILE} && echo made")
            if "made" not in out:
                raise ClusterError(f"server {address}: cannot make {self.remote_dir()}: {out.strip()}")
        items = [(f"wire-{i + 1}", ClusterWire, {"run_id": run_id, **self._node_params_on(server)})
                 for i, server in enumerate(used)]
        items += [(host.name, lambda name, **params: self.net.addHost(name, cls=ClusterHost, ip=None, **params),
                   {"run_id": run_id, **self._node_params(host.name)}) for host in self.topology.hosts]
        made = self._start_nodes(items)
        self.wires = {made[f"wire-{i + 1}"].cluster_server.address: made[f"wire-{i + 1}"] for i in range(len(used))}
        for node in made.values():
            node.admin = self.admins[node.cluster_server.address]
            self.registry.record_process(node.shell.pid, f"ssh carrying the shell of {node.name}")
        order = {host.name: i for i, host in enumerate(self.topology.hosts)}
        self.net.hosts.sort(key=lambda h: order[h.name])
        return f"{len(self.topology.hosts)} hosts on {len(used)} servers"

    def _add_switches(self) -> str:
        def add(name, **params):
            node = self.net.addSwitch(name, cls=CLUSTER_SWITCHES[self.target], **params)
            node.admin = self.admins[node.cluster_server.address]
            return node

        items = []
        for switch in self.topology.switches:
            program = self.programs[switch.name]
            extra = ({"queues": program.queues, "ingress": self._host_links_into(switch.name)}
                     if self.target == "model" else {})
            items.append((switch.name, add, {"device_id": program.device_id, "run_dir": str(self.run_dir),
                                             "sock_dir": str(self.sock_dir), "topo_name": switch.name,
                                             "pcap": self.pcap, "run_id": self.registry.state.run_id,
                                             **extra, **self._node_params(switch.name)}))
        made = self._start_nodes(items)
        for node in made.values():
            node.registry = self.registry
            self.registry.record_process(node.shell.pid, f"ssh carrying switch shell {node.name}")
        order = {switch.name: i for i, switch in enumerate(self.topology.switches)}
        self.net.switches.sort(key=lambda s: order[s.name])
        return f"{len(self.topology.switches)} {self.target} switches"

    def _add_links(self) -> str:
        """Every tunnel end of a server made in one script there (`make_tunnels`), then each link:
        veth pairs into the wire node of each end's server, bridged there."""
        self.tunnel_kind = tunnel_kind(next(iter(self.wires.values())))
        count = len(self.topology.links)
        tunnel_ends: dict[str, list[tuple[str, int, str]]] = {address: [] for address in self.wires}
        for index, link in enumerate(self.topology.links):
            a, b = self.placement.server_of[link.a], self.placement.server_of[link.b]
            if a != b:
                tunnel_ends[a].append((f"t{index}a", index + 1, b))
                tunnel_ends[b].append((f"t{index}b", index + 1, a))
        with ThreadPoolExecutor(max_workers=len(self.wires)) as pool:
            for done in [pool.submit(make_tunnels, self.wires[address], self.tunnel_kind, ends)
                         for address, ends in tunnel_ends.items()]:
                done.result()
        for index, link in enumerate(self.topology.links):
            wires = []
            for end, (node, port) in enumerate(((link.a, link.a_port), (link.b, link.b_port))):
                wire = self.wires[self.placement.server_of[node]]
                name = nodes.WireNode.end_names(index)[end]
                params = {"intfName2": name}
                if self.topology.is_host(node):
                    nic = self.topology.host_nic(node, port)
                    params.update(intfName1=nic.ifname, addr1=nic.mac)
                self.net.addLink(self.net[node], wire, port1=port, port2=2 * index + end + 1, **params)
                wires.append((wire, name))
            (wire_a, name_a), (wire_b, name_b) = wires
            if wire_a is wire_b:
                wire_a.bridge(index, name_a, name_b)
            else:
                tunnel_a, tunnel_b = f"t{index}a", f"t{index}b"
                self.net.addLink(wire_a, wire_b, cls=TunnelLink, port1=2 * (count + index) + 1,
                                 port2=2 * (count + index) + 2, intfName1=tunnel_a, intfName2=tunnel_b)
                wire_a.bridge(index, name_a, tunnel_a)
                wire_b.bridge(index, tunnel_b, name_b)
                for node, wire in ((link.a, wire_a), (link.b, wire_b)):
                    self.net[node].cmd(f"ip link set {self.net[node].intfs[link.port_of(node)]} mtu {TUNNEL_MTU}")
            self.ends[index] = wires
        self.net.build()
        for host in self.net.hosts:
            nodes.disable_ipv6(host, [i.name for i in host.intfList() if i.name != "lo"])
        crossing = len(self.placement.crossing_links())
        self._measure_server_paths()
        return f"{count} links, {crossing} of them {self.tunnel_kind} tunnels between servers"

    def _measure_server_paths(self, count: int = 20) -> None:
        """For every pair of servers that crossing links join: the round trip and loss of `count`
        pings between them (what the tunnels ride on; one way is taken as half the round trip, as
        the servers share no clock), shown and kept in `<run_dir>/cluster.json`."""
        pairs = sorted({tuple(sorted((self.placement.server_of[l.a], self.placement.server_of[l.b])))
                        for l in self.placement.crossing_links()})
        for a, b in pairs:
            out = self.wires[a].remote_shell(f"ping -q -n -c {count} -i 0.01 -W 1 {shlex.quote(b)} 2>&1")
            sent_received = re.search(r"(\d+) packets transmitted, (\d+) received", out)
            rtt = re.search(r"= [\d.]+/([\d.]+)/([\d.]+)/", out)
            sent, got = (int(x) for x in sent_received.groups()) if sent_received else (count, 0)
            self.server_paths[f"{a}-{b}"] = {"pings": sent, "lost": sent - got,
                                             "rtt_ms": float(rtt.group(1)) if rtt else None,
                                             "rtt_max_ms": float(rtt.group(2)) if rtt else None}
            one_way = f"{float(rtt.group(1)) / 2:.3g} ms one way (half the round trip)" if rtt else "no answer"
            self.progress(f"  between {a} and {b}: {one_way}, {sent - got} of {sent} pings lost")
        (self.run_dir / "cluster.json").write_text(json.dumps({
            "placement": self.placement.server_of, "tunnel": self.tunnel_kind, "mtu": TUNNEL_MTU,
            "crossing_links": [l.label for l in self.placement.crossing_links()],
            "between_servers": self.server_paths}, indent=1))

    def _control_pids(self) -> tuple[int, ...]:
        return ()                       # the wires' shells run on the servers

    def _start_switches(self) -> str:
        """Every switch process started; then per server (all servers at once) one wait in its own
        shell until all its switches are ready there (`remote_ready_test`), and their sockets
        forwarded over its shell's ssh connection; then P4Runtime checked on each."""
        for switch in self.net.switches:
            switch.start([])
        by_server: dict[str, list[ClusterSwitch]] = {}
        for switch in self.net.switches:
            by_server.setdefault(switch.cluster_server.address, []).append(switch)
        with ThreadPoolExecutor(max_workers=len(by_server)) as pool:
            for done in [pool.submit(self._ready_on, address, switches) for address, switches in by_server.items()]:
                done.result()
        with ThreadPoolExecutor(max_workers=8) as pool:        # each check waits a round trip through ssh
            for done in [pool.submit(switch.wait_ready) for switch in self.net.switches]:
                done.result()
        return f"{len(self.net.switches)} switch processes ready on {len(by_server)} servers"

    def _ready_on(self, address: str, switches: list[ClusterSwitch]) -> None:
        """Wait until `switches` are ready on their server `address`, then forward their sockets to
        this machine over the server's shell's connection (OpenSSH's `-O forward`: the connection's
        master listens here from then on, no process of its own)."""
        polls = int(switches[0].ready_timeout / 0.05)
        waits = "; ".join(f"until {s.remote_ready_test()}; do n=$((n+1)); [ $n -gt {polls} ] && "
                          f"echo 'not ready: {s.name}' && exit 0; sleep 0.05; done" for s in switches)
        out = self.admins[address].remote_shell(f"( n=0; {waits}; echo ready )")
        if "ready" not in out.split():
            late = next((s for s in switches if f"not ready: {s.name}" in out), switches[0])
            late._check_alive()
            raise nodes.SwitchStartError(late._failure(f"not ready on {address} within "
                                                       f"{late.ready_timeout:g} s ({late.remote_ready_test()})"))
        admin = self.admins[address]
        base = [arg for arg in admin.sshbase if arg != "-tt"]
        done = subprocess.run([*base, "-O", "forward", *[arg for s in switches for arg in s.forwards()],
                               admin.cluster_server.ssh_target], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise ClusterError(f"forwarding the switches' sockets of {address}: "
                               f"{done.stderr.strip() or done.returncode}")

    # --- verbs ----------------------------------------------------------------------------------
    def set_link(self, a: str, b: str, up: bool) -> None:
        link = self.topology.link_between(a, b)
        index = self.topology.links.index(link)
        by_wire: dict[ClusterWire, list[str]] = {}
        for wire, name in self.ends[index]:
            by_wire.setdefault(wire, []).append(name)
        for wire, names in by_wire.items():
            wire.set_ends(names, up)
        if self.control_plane is not None:
            (self.control_plane.link_up if up else self.control_plane.link_down)(link)

    def _stop_wires(self) -> None:
        """Each server's wire node, the run's folder there, then the server's own shell (their
        processes are the run's record: ended here, they are not left to the leftovers' clean-up).
        The switches' forwarded sockets go with the shell's ssh connection."""
        for wire in self.wires.values():
            try:
                wire.terminate()
            except Exception as error:          # noqa: BLE001 - tear-down goes on
                log.warning("wire of %s: %s", wire.cluster_server.address, error)
        self.wires = {}
        for address, admin in self.admins.items():
            if self._remote_dir:
                out = admin.remote_shell(f"rm -rf {self._remote_dir} && echo removed")
                if "removed" not in out:
                    self._left_on_servers.append(f"{address}:{self._remote_dir} ({out.strip()})")
            try:
                admin.terminate()
            except Exception as error:          # noqa: BLE001 - tear-down goes on
                log.warning("shell of %s: %s", address, error)
            admin.shell = None                  # the nodes' remote_shell opens sessions of their own from now on
        self.admins = {}

    def stop(self) -> list[str]:
        """The whole tear-down of `TestbedNetwork.stop` (with the wires, the run's folder on each
        server and the servers' shells); what could not be removed."""
        self._left_on_servers = []
        remaining = super().stop()
        if self._starter is not None:
            self._starter.shutdown()
            self._starter = None
        return remaining + self._left_on_servers


def clean_servers(cluster: ClusterFile, keep: set[str] = frozenset()) -> list[str]:
    """On every server of `cluster`: end the processes of every run folder under REMOTE_ROOT that
    this front end made and whose run is not in `keep` (by their PID files, start time checked),
    then remove the folder; other front ends' folders are left alone. What was done, a line per
    server (a server that cannot be reached says so)."""
    script = (f'cd {REMOTE_ROOT} 2>/dev/null || exit 0; for run in *; do [ -d "$run" ] || continue; '
              f'[ "$(cat "$run"/{FRONT_END_FILE} 2>/dev/null)" = "$ME" ] || continue; '
              'case " $KEEP " in *" $run "*) continue;; esac; '
              f'sh -c {shlex.quote(_SIGNAL_PID_FILES)} sh KILL "$run"/*.pid; '
              'echo "$run: $(ls "$run"/*.pid 2>/dev/null | wc -l) processes"; rm -rf "$run"; done')
    lines = []
    for server in cluster.servers:
        code, out, error = run_on(server, f"KEEP={shlex.quote(' '.join(sorted(keep)))} ME={shlex.quote(front_end())} "
                                          f"sh -c {shlex.quote(script)}", 60)
        if code != 0:
            lines.append(f"{server.address}: not reached ({error})")
            continue
        runs = [line for line in out.splitlines() if line.strip()]
        lines.append(f"{server.address}: " + ("; ".join(f"removed {line}" for line in runs) if runs else "nothing left"))
    return lines


class ServerShell(ClusterNode, Node):
    """A Mininet `RemoteMixin` node in a server's own (root) namespace: runs commands on the server
    itself, one at a time, through its open shell (a round trip each, no ssh session of their own):
    tunnels, waits, statistics, signals; or a whole testbed command (`run_testbed_command`)."""

    def __init__(self, name, **params):
        self._one_at_a_time = threading.Lock()
        super().__init__(name, inNamespace=False, **params)

    def remote_shell(self, script: str) -> str:
        with self._one_at_a_time:
            return self.cmd(script)


def run_testbed_command(server: Server, argv: list[str], files: tuple[str, ...] = (),
                        env: dict[str, str] | None = None, progress=lambda line: None) -> tuple[int, dict[str, str]]:
    """Run `python -m cli.main ARGV` on `server` (its Python, the same software as here) through a
    Mininet remote node, its output lines passed to `progress` as they come; `files` names files
    the command writes, given as `{NAME}` in `argv` and `env` values: they live in a run folder of
    the server (recorded for `clean --cluster`, removed after) and their text comes back. The
    command ends with its ssh connection (the watchdog), so a front end that dies ends it too.
    Returns the exit status and {name: text of the file} ('' when not written)."""
    import tempfile
    folder = f"{REMOTE_ROOT}/cmd-{os.getpid()}-{int(time.time() * 1000)}"
    paths = {name: f"{folder}/{name}" for name in files}
    argv = [part.format(**paths) for part in argv]
    settings = {key: value.format(**paths) for key, value in (env or {}).items()}
    with tempfile.TemporaryDirectory(prefix="mrc-ssh-") as control:
        code, _, error = run_on(server, f"mkdir -p {folder} && echo {shlex.quote(front_end())} > "
                                        f"{folder}/{FRONT_END_FILE}", 30, control)
        if code != 0:
            raise ClusterError(f"server {server.address}: ssh failed: {error}")
        shell = ServerShell(f"srv{os.getpid()}", server=server, control_dir=control, remote_dir=folder)
        try:
            cmd = ["env", *(f"{k}={v}" for k, v in settings.items()), server.python or sys.executable,
                   "-m", "cli.main", *argv]
            proc = shell.start_remote("command", cmd, stdout=subprocess.PIPE)
            try:
                for line in proc.local.stdout:
                    progress(line.decode(errors="replace").rstrip())
                code = proc.wait()
            except BaseException:
                proc.kill()
                raise
            texts = {name: shell.remote_shell(f"cat {shlex.quote(path)} 2>/dev/null") for name, path in paths.items()}
        finally:
            shell.remote_shell(f"rm -rf {folder}")
            shell.terminate()
    return code, texts
