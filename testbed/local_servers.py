"""Servers on one machine: network namespaces on a private bridge, each with its own address and sshd.

A stand-in for a cluster of machines, for the cluster modes' tests and for trying them on a laptop::

    sudo .venv/bin/python -m testbed.local_servers --servers 3 --dir /tmp/mrc-servers
    # ... prints the cluster file (/tmp/mrc-servers/cluster.yaml) and an ssh command per server;
    # runs until Ctrl-C, then removes everything it made

What `NamespaceServers` makes, in named phases (`build`, `start`, `ready`, `stop`):

- in `folder`: a client key and its `authorized_keys`, per server a host key and an `sshd_config`,
  a `known_hosts` file with every host key, an `ssh_config` naming each server, a `python` that
  runs this checkout's code (a server's login shell would import what the Python's own
  installation points to: another checkout's agents and switches than the front end's), and
  `cluster.yaml` (testbed/clusterfile.py's format) listing them. Nothing is written to the
  machine's own ssh configuration or to ~/.ssh.
- a *fabric* namespace holding a Linux bridge, linked to this machine's namespace by one veth
  (`mrcfab0`, or the next free name, with the front end's address, .1 of `subnet`: the first free
  of 10.213.7.0/24, 10.213.8.0/24, ...), and one namespace per server linked to the
  bridge (address .11, .12, ...), each running Debian's `sshd` on that address, port 22. They keep this machine's host name
  (a name of their own would not resolve, and sudo complains of that on every command).

Every namespace is held by a process of ours (`unshare --net`), not by a name in /run/netns: when
the holders die, the namespaces and every veth in them go too, also the root end of `mrcfab0`.
Holders and sshds are started with `PR_SET_PDEATHSIG` (`setpriv --pdeathsig`), so a SIGKILL of the process that made them
ends them, and each is recorded in the run registry (testbed/registry.py) for `mrc-testbed clean`.
`stop` also ends whatever still runs inside a server's namespace (what an ssh session started).
The namespaces share this machine's kernel, PIDs and /tmp: keep ports and paths unique per server.
"""
from __future__ import annotations

import argparse
import ipaddress
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from testbed.processes import DIE_WITH_PARENT, descendants
from testbed.registry import RunRegistry

REPO = Path(__file__).resolve().parent.parent   # the checkout whose code the servers run

SSHD = "/usr/sbin/sshd"
LINK_PREFIX = "mrcfab"               # the front end's veth into a fabric namespace: mrcfab0, mrcfab1, ...
SUBNETS = [f"10.213.{7 + n}.0/24" for n in range(16)]    # tried in turn: the first with no route on it
FIRST_SERVER_HOST = 11               # server i gets host number FIRST_SERVER_HOST + i in the subnet
READY_TIMEOUT_S = 20.0


class LocalServersError(RuntimeError):
    """Namespace servers that cannot be made; the message names what is missing or in the way."""




def _link_exists(name: str) -> bool:
    return Path(f"/sys/class/net/{name}").exists()


def _route_over(subnet) -> str:
    """An IPv4 route of this machine overlapping `subnet` (not the default route), or ''."""
    for line in _run(["ip", "-4", "route", "show"], "the routing table").splitlines():
        prefix = line.split()[0]
        try:
            if prefix != "default" and ipaddress.ip_network(prefix, strict=False).overlaps(subnet):
                return line.strip()
        except ValueError:
            continue
    return ""


def _free_subnet() -> str:
    """The first of SUBNETS no route of this machine overlaps (others' namespace servers included)."""
    for candidate in SUBNETS:
        if not _route_over(ipaddress.ip_network(candidate)):
            return candidate
    raise LocalServersError(f"every subnet of {SUBNETS[0]}..{SUBNETS[-1]} is in use: give one with --subnet")


def _run(args: list[str], what: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        raise LocalServersError(f"{what}: {' '.join(args)} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


@dataclass(frozen=True)
class LocalServer:
    """One namespace server: its name, address and the processes holding it."""

    name: str
    address: str
    folder: Path

    @property
    def host_key(self) -> Path:
        return self.folder / "ssh_host_ed25519_key"

    @property
    def sshd_config(self) -> Path:
        return self.folder / "sshd_config"


class NamespaceServers:
    """`count` servers in network namespaces of this machine, reachable by ssh from it as root."""

    def __init__(self, count: int, folder: Path | str, subnet: str | None = None,
                 registry: RunRegistry | None = None) -> None:
        if not 1 <= count <= 50:
            raise LocalServersError(f"--servers {count}: between 1 and 50 servers")
        self.folder = Path(folder).resolve()
        self.link = next((f"{LINK_PREFIX}{n}" for n in range(64) if not _link_exists(f"{LINK_PREFIX}{n}")), "")
        if not self.link:
            raise LocalServersError(f"interfaces {LINK_PREFIX}0..63 all exist: stop other namespace servers")
        self.subnet = ipaddress.ip_network(subnet or _free_subnet())
        if self.subnet.version != 4 or self.subnet.num_addresses < FIRST_SERVER_HOST + count + 1:
            raise LocalServersError(f"subnet {subnet}: an IPv4 subnet with room for {count} servers is needed")
        hosts = list(self.subnet.hosts())
        self.front_end_address = str(hosts[0])
        self.servers = [LocalServer(f"srv{i + 1}", str(hosts[FIRST_SERVER_HOST - 1 + i]), self.folder / f"srv{i + 1}")
                        for i in range(count)]
        self.registry = registry
        self._own_registry = registry is None
        self._holders: dict[str, subprocess.Popen] = {}     # "fabric" and each server's name
        self._sshds: dict[str, subprocess.Popen] = {}
        self._made_link = False                               # self.link is ours to delete

    # --- phases ---------------------------------------------------------------------------------
    def build(self) -> None:
        """Keys and configuration files in `folder` (no namespace yet)."""
        for tool in ("ssh-keygen", "ssh", "unshare", "nsenter", "ip"):
            if shutil.which(tool) is None:
                raise LocalServersError(f"'{tool}' is not on PATH (packages openssh-client, util-linux, iproute2)")
        if not os.access(SSHD, os.X_OK):
            raise LocalServersError(f"{SSHD} is missing: install Debian's openssh-server "
                                    "(scripts/setup.sh --dev does)")
        self._check_subnet_is_free()
        self.folder.mkdir(parents=True, exist_ok=True)
        client_key = self.folder / "id_ed25519"
        if not client_key.exists():
            _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "mrc-testbed local servers",
                  "-f", str(client_key)], "the client key")
        (self.folder / "authorized_keys").write_text((self.folder / "id_ed25519.pub").read_text())
        known = []
        for server in self.servers:
            server.folder.mkdir(exist_ok=True)
            if not server.host_key.exists():
                _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", server.name, "-f", str(server.host_key)],
                     f"the host key of {server.name}")
            server.sshd_config.write_text(self._sshd_config(server))
            public = (server.folder / "ssh_host_ed25519_key.pub").read_text().split()
            known.append(f"{server.address} {public[0]} {public[1]}")
        (self.folder / "known_hosts").write_text("\n".join(known) + "\n")
        (self.folder / "ssh_config").write_text(self._ssh_config())
        python = self.folder / "python"      # the servers' Python: this checkout's code, as the front end's
        python.write_text(f"#!/bin/sh\nPYTHONPATH={shlex.quote(str(REPO))}${{PYTHONPATH:+:$PYTHONPATH}} "
                          f"exec {shlex.quote(sys.executable)} \"$@\"\n")
        python.chmod(0o755)
        with open(self.folder / "cluster.yaml", "w") as out:
            out.write("# Namespace servers of this machine (python -m testbed.local_servers); removed on exit.\n")
            yaml.safe_dump(self.cluster_document(), out, sort_keys=False)
        os.makedirs("/run/sshd", exist_ok=True)          # sshd's privilege separation directory

    def start(self) -> None:
        """The fabric namespace and its bridge, then each server's namespace, link and sshd."""
        if self.registry is None:
            self.registry = RunRegistry(supervised=True)      # gone with this process, SIGKILL included
        self.registry.record_interface(self.link)
        fabric = self._hold("fabric")
        prefix = self.subnet.prefixlen
        _run(["ip", "link", "add", self.link, "type", "veth", "peer", "name", "up0", "netns", str(fabric.pid)],
             "the front end's link")
        self._made_link = True
        self._in(fabric, ["ip", "link", "add", "br0", "type", "bridge"])
        self._in(fabric, ["ip", "link", "set", "up0", "master", "br0"])
        for name in ("br0", "up0", "lo"):
            self._in(fabric, ["ip", "link", "set", name, "up"])
        _run(["ip", "addr", "add", f"{self.front_end_address}/{prefix}", "dev", self.link], "the front end's address")
        _run(["ip", "link", "set", self.link, "up"], "the front end's link")
        for index, server in enumerate(self.servers):
            holder = self._hold(server.name)
            port = f"p{index + 1}"
            _run(["ip", "link", "add", "cl0", "netns", str(holder.pid), "type", "veth", "peer", "name", port,
                  "netns", str(fabric.pid)], f"the link of {server.name}")
            self._in(fabric, ["ip", "link", "set", port, "master", "br0"])
            self._in(fabric, ["ip", "link", "set", port, "up"])
            self._in(holder, ["ip", "addr", "add", f"{server.address}/{prefix}", "dev", "cl0"])
            self._in(holder, ["ip", "link", "set", "cl0", "up"])
            self._in(holder, ["ip", "link", "set", "lo", "up"])
            self._in(holder, ["ip", "route", "add", "default", "via", self.front_end_address])
            _run(["nsenter", f"--net=/proc/{holder.pid}/ns/net", SSHD, "-t", "-f", str(server.sshd_config)],
                 f"the sshd configuration of {server.name}")
            log = open(server.folder / "sshd.log", "ab")
            sshd = subprocess.Popen([*DIE_WITH_PARENT, "nsenter", f"--net=/proc/{holder.pid}/ns/net", SSHD, "-D",
                                     "-e", "-f", str(server.sshd_config)], stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=log)
            log.close()
            self._sshds[server.name] = sshd
            self.registry.record_process(sshd.pid, f"sshd of {server.name}")

    def ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Wait until every server answers `ssh SERVER true` with the made keys, or raise."""
        deadline = time.monotonic() + timeout
        waiting = list(self.servers)
        while waiting:
            for server in list(waiting):
                sshd = self._sshds[server.name]
                if sshd.poll() is not None:
                    log = (server.folder / "sshd.log").read_text(errors="replace").strip()
                    raise LocalServersError(f"sshd of {server.name} exited with {sshd.returncode}: {log[-400:]}")
                if subprocess.run(self.ssh_command(server, "true"), capture_output=True, timeout=10).returncode == 0:
                    waiting.remove(server)
            if waiting and time.monotonic() > deadline:
                names = ", ".join(s.name for s in waiting)
                raise LocalServersError(f"no ssh answer from {names} within {timeout:g} s (see sshd.log in {self.folder})")
            if waiting:
                time.sleep(0.1)          # polling a condition with a deadline: the next ssh attempt

    def stop(self) -> list[str]:
        """End what ssh sessions left running, every process in the servers' namespaces, the sshds
        and the holders; return what stayed."""
        for line in self.session_processes():
            try:
                os.kill(int(line.split()[0]), signal.SIGKILL)
            except OSError:
                pass
        for server in self.servers:
            holder = self._holders.get(server.name)
            if holder is not None and holder.poll() is None:
                self._end_namespace_processes(holder.pid)
        for proc in [*self._sshds.values(), *self._holders.values()]:
            if proc.poll() is None:
                proc.terminate()
        for proc in [*self._sshds.values(), *self._holders.values()]:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if self.registry is not None:
                self.registry.forget_process(proc.pid)
        self._sshds.clear()
        self._holders.clear()
        if self._made_link and _link_exists(self.link):
            # The kernel removes a dead namespace's veths a moment later; deleting our end now makes
            # the teardown finish before stop() returns.
            subprocess.run(["ip", "link", "del", self.link], capture_output=True)
        left = [self.link] if self._made_link and _link_exists(self.link) else []
        self._made_link = False
        if self.registry is not None and self._own_registry:
            self.registry.close()
        return left

    def __enter__(self) -> "NamespaceServers":
        try:
            self.build()
            self.start()
            self.ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- what callers use ------------------------------------------------------------------------
    @property
    def cluster_file(self) -> Path:
        return self.folder / "cluster.yaml"

    def ssh_command(self, server: LocalServer, command: str) -> list[str]:
        """`ssh` reaching `server` with this folder's keys and known hosts, running `command`."""
        return ["ssh", "-F", str(self.folder / "ssh_config"), server.name, command]

    def session_processes(self) -> list[str]:
        """What ssh sessions left running on the servers: every process descending from a server's
        sshd that is not an sshd itself, as 'pid args' lines (empty when nothing runs there)."""
        found = []
        for pid in descendants(*(p.pid for p in self._sshds.values())):
            try:
                args = (Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip())
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            if comm != "sshd" and args:
                found.append(f"{pid} {args}")
        return found

    def cluster_document(self) -> dict:
        """The cluster file's content (testbed/clusterfile.py's format)."""
        options = {"IdentityFile": str(self.folder / "id_ed25519"),
                   "UserKnownHostsFile": str(self.folder / "known_hosts"),
                   "StrictHostKeyChecking": "yes", "ConnectTimeout": 5}
        return {"scheduler": {"address": self.front_end_address},
                "servers": [{"address": s.address, "user": "root", "cores": 1, "python": str(self.folder / "python"),
                             "ssh_options": dict(options)} for s in self.servers]}

    # --- helpers ---------------------------------------------------------------------------------
    def _hold(self, name: str) -> subprocess.Popen:
        """A process holding a new network namespace for `name`."""
        holder = subprocess.Popen([*DIE_WITH_PARENT, "unshare", "--net", "--", "sleep", "infinity"],
                                  stdin=subprocess.DEVNULL)
        self._holders[name] = holder
        self.registry.record_process(holder.pid, f"namespace of {name}")
        own = os.readlink("/proc/self/ns/net")
        deadline = time.monotonic() + 5
        while os.readlink(f"/proc/{holder.pid}/ns/net") == own:     # unshare has not switched yet
            if holder.poll() is not None or time.monotonic() > deadline:
                raise LocalServersError(f"'unshare --net' did not make a namespace for {name}")
            time.sleep(0.005)
        return holder

    @staticmethod
    def _in(holder: subprocess.Popen, args: list[str]) -> None:
        _run(["nsenter", f"--net=/proc/{holder.pid}/ns/net", *args], "inside a server namespace")

    @staticmethod
    def _end_namespace_processes(holder_pid: int) -> None:
        """SIGKILL every process (but the holder) that lives in the holder's network namespace."""
        try:
            target = os.readlink(f"/proc/{holder_pid}/ns/net")
        except OSError:
            return
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) in (holder_pid, os.getpid()):
                continue
            try:
                if os.readlink(entry / "ns" / "net") == target:
                    os.kill(int(entry.name), signal.SIGKILL)
            except OSError:
                continue

    def _check_subnet_is_free(self) -> None:
        if _link_exists(self.link):
            raise LocalServersError(f"interface {self.link} exists already: other namespace servers run "
                                    "(stop them, or 'mrc-testbed clean' after a crash)")
        route = _route_over(self.subnet)
        if route:
            raise LocalServersError(f"subnet {self.subnet} overlaps the route '{route}': choose another with --subnet")

    def _sshd_config(self, server: LocalServer) -> str:
        return "\n".join([
            f"ListenAddress {server.address}", "Port 22",
            f"HostKey {server.host_key}", f"PidFile {server.folder / 'sshd.pid'}",
            f"AuthorizedKeysFile {self.folder / 'authorized_keys'}",
            "PubkeyAuthentication yes", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password", "UsePAM no", "UseDNS no", "StrictModes no", "PrintMotd no",
            "AcceptEnv MRC_*", "Subsystem sftp internal-sftp", ""])

    def _ssh_config(self) -> str:
        lines = []
        for server in self.servers:
            lines += [f"Host {server.name} {server.address}", f"    HostName {server.address}", "    User root",
                      f"    IdentityFile {self.folder / 'id_ed25519'}", "    IdentitiesOnly yes",
                      f"    UserKnownHostsFile {self.folder / 'known_hosts'}", "    StrictHostKeyChecking yes",
                      "    BatchMode yes", "    ConnectTimeout 5", ""]
        return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed.local_servers",
                                     description="Run N namespace servers with their own sshd on this machine "
                                                 "until Ctrl-C (a stand-in cluster for --cluster).")
    parser.add_argument("--servers", type=int, default=2, help="how many servers (default 2)")
    parser.add_argument("--dir", required=True, type=Path, help="folder for keys, configs and cluster.yaml")
    parser.add_argument("--subnet", help=f"IPv4 subnet of the bridge (default: the first free of "
                                          f"{SUBNETS[0]}, {SUBNETS[1]}, ...)")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("testbed.local_servers: error: namespaces and sshd need root", file=sys.stderr)
        return 2
    servers = NamespaceServers(args.servers, args.dir, args.subnet)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with servers:
            print(f"{len(servers.servers)} servers up behind {servers.link} ({servers.subnet}); "
                  f"cluster file: {servers.cluster_file}")
            for server in servers.servers:
                print(f"  {server.name} {server.address}: {' '.join(servers.ssh_command(server, 'hostname'))}")
            print("Ctrl-C removes them.", flush=True)
            while True:
                signal.pause()
    except KeyboardInterrupt:
        return 0
    except LocalServersError as error:
        print(f"testbed.local_servers: error: {error}", file=sys.stderr)
        return 1


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
