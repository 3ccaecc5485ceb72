"""The cluster file: the servers that share a run, how to reach them over SSH, and what runs where.

    # cluster.yaml
    scheduler:                    # optional: where this machine (the front end) listens for the servers
      address: 10.0.0.1           # an address of this machine the servers can reach (default: the one
                                  # this machine uses towards the first server)
      port: 8786                  # default 0: any free port
    servers:
      - address: node1.lab        # host name or IP address to reach by SSH
        user: alice               # optional (default: the SSH client's, i.e. your login name)
        cores: 16                 # optional: how many cases run there at once (default 1)
        python: /opt/mrc/.venv/bin/python   # optional: the Python with mrc-testbed installed there
                                  # (default: the path of this machine's)
        ssh_options:              # optional, OpenSSH names: Port, IdentityFile, UserKnownHostsFile,
          Port: 2222              # StrictHostKeyChecking (yes/no), ConnectTimeout (seconds)
      - {address: node2.lab, cores: 8}
    placement:                    # optional: which server runs which node (the Mininet cluster mode)
      s1: node1.lab
      h1: node2.lab

`mrc-testbed run --cluster cluster.yaml` runs a scenario's netsim cases on these servers
(experiments/parallel.py); every server needs the same revision of mrc-testbed installed for its
`python`. `load_cluster_file` checks the whole file and raises `ClusterFileError` naming the file
and the key at fault.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import yaml

# The OpenSSH client options a server may set, with what each value must be.
SSH_OPTIONS = ("Port", "IdentityFile", "UserKnownHostsFile", "StrictHostKeyChecking", "ConnectTimeout")
TOP_KEYS = ("scheduler", "servers", "placement")
SERVER_KEYS = ("address", "user", "cores", "python", "ssh_options")
SCHEDULER_KEYS = ("address", "port")


class ClusterFileError(ValueError):
    """A cluster file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Server:
    """One machine of the cluster, reached by SSH."""

    address: str
    user: Optional[str] = None
    cores: int = 1
    python: Optional[str] = None
    ssh_options: dict = field(default_factory=dict)

    @property
    def ssh_target(self) -> str:
        """`user@address`, or the address alone when no user is given."""
        return f"{self.user}@{self.address}" if self.user else self.address

    def ssh_args(self) -> list[str]:
        """Arguments of the OpenSSH client reaching this server: `ssh <these> <command>`."""
        args = []
        for key, value in self.ssh_options.items():
            args += ["-o", f"{key}={value}"]
        return args + [self.ssh_target]

    def connect_options(self) -> dict[str, Any]:
        """Keyword arguments of `asyncssh.connect` reaching this server (what Dask's SSH
        deployment takes): the user, port, key, known-hosts file and timeout of the file."""
        options: dict[str, Any] = {}
        if self.user:
            options["username"] = self.user
        opts = self.ssh_options
        if "Port" in opts:
            options["port"] = opts["Port"]
        if "IdentityFile" in opts:
            options["client_keys"] = [opts["IdentityFile"]]
        if "UserKnownHostsFile" in opts:
            options["known_hosts"] = opts["UserKnownHostsFile"]
        if opts.get("StrictHostKeyChecking") == "no":
            options["known_hosts"] = None
        if "ConnectTimeout" in opts:
            options["connect_timeout"] = opts["ConnectTimeout"]
        return options


@dataclass(frozen=True)
class ClusterFile:
    """A parsed, checked cluster file."""

    path: str
    servers: tuple
    scheduler_address: Optional[str] = None
    scheduler_port: int = 0
    placement: dict = field(default_factory=dict)     # node name -> server address

    @property
    def cores(self) -> int:
        """How many cases the whole cluster runs at once."""
        return sum(s.cores for s in self.servers)

    def server(self, address: str) -> Server:
        """The server reached at `address`."""
        for s in self.servers:
            if s.address == address:
                return s
        raise KeyError(f"{self.path}: no server has the address {address!r}")


def load_cluster_file(path: Union[str, Path]) -> ClusterFile:
    """Read and check the cluster file at `path`."""
    path = str(path)
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise ClusterFileError(f"{path}: cannot read the cluster file ({error.strerror or error})") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ClusterFileError(f"{path}: not valid YAML: {error}") from None
    return parse_cluster(doc, path)


def parse_cluster(doc: Any, path: str = "<cluster>") -> ClusterFile:
    """Check a cluster file's parsed YAML `doc` (`path` names it in errors)."""
    def fail(key: str, message: str) -> ClusterFileError:
        return ClusterFileError(f"{path}: {key}: {message}")

    if not isinstance(doc, dict):
        raise ClusterFileError(f"{path}: expected a mapping with `servers:` (see testbed/clusterfile.py)")
    _no_unknown(doc, TOP_KEYS, "", fail)
    servers = doc.get("servers")
    if not isinstance(servers, list) or not servers:
        raise fail("servers", "expected a non-empty list of servers, each with an `address`")
    parsed = tuple(_server(entry, f"servers[{i}]", fail) for i, entry in enumerate(servers))
    seen = {}
    for i, s in enumerate(parsed):
        where = (s.address, s.ssh_options.get("Port", 22))
        if where in seen:
            raise fail(f"servers[{i}].address", f"{s.address!r} (port {where[1]}) is already servers[{seen[where]}]")
        seen[where] = i
    address, port = _scheduler(doc.get("scheduler"), fail)
    placement = doc.get("placement") or {}
    if not isinstance(placement, dict):
        raise fail("placement", "expected a mapping of node name to server address")
    known = [s.address for s in parsed]
    for node, server in placement.items():
        if not isinstance(node, str) or not isinstance(server, str) or server not in known:
            raise fail(f"placement.{node}", f"{server!r} is not the address of a server "
                       f"(the servers: {', '.join(known)})")
    return ClusterFile(path, parsed, address, port, dict(placement))


def _no_unknown(entry: dict, known: tuple, prefix: str, fail) -> None:
    for key in entry:
        if key not in known:
            raise fail(f"{prefix}{key}", f"unknown key (expected one of {', '.join(known)})")


def _server(entry: Any, key: str, fail) -> Server:
    if isinstance(entry, str):
        entry = {"address": entry}
    if not isinstance(entry, dict):
        raise fail(key, "expected a mapping with `address` (or an address alone)")
    _no_unknown(entry, SERVER_KEYS, f"{key}.", fail)
    address = entry.get("address")
    if not isinstance(address, str) or not address.strip() or any(c.isspace() for c in address):
        raise fail(f"{key}.address", f"expected a host name or IP address, got {address!r}")
    user = entry.get("user")
    if user is not None and (not isinstance(user, str) or not user or any(c.isspace() for c in user)):
        raise fail(f"{key}.user", f"expected a user name, got {user!r}")
    cores = entry.get("cores", 1)
    if not isinstance(cores, int) or isinstance(cores, bool) or cores < 1:
        raise fail(f"{key}.cores", f"expected a positive integer, got {cores!r}")
    python = entry.get("python")
    if python is not None and (not isinstance(python, str) or not python.strip()):
        raise fail(f"{key}.python", f"expected the path of Python on that server, got {python!r}")
    return Server(address, user, cores, python, _ssh_options(entry.get("ssh_options"), f"{key}.ssh_options", fail))


def _ssh_options(options: Any, key: str, fail) -> dict:
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise fail(key, "expected a mapping of OpenSSH option to value")
    out: dict[str, Any] = {}
    for name, value in options.items():
        where = f"{key}.{name}"
        if name not in SSH_OPTIONS:
            raise fail(where, f"not supported (supported: {', '.join(SSH_OPTIONS)})")
        if name == "Port":
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 65535:
                raise fail(where, f"expected a port number 1..65535, got {value!r}")
        elif name == "ConnectTimeout":
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise fail(where, f"expected seconds > 0, got {value!r}")
        elif name == "StrictHostKeyChecking":
            value = {True: "yes", False: "no"}.get(value, value)     # YAML reads yes/no as booleans
            if value not in ("yes", "no"):
                raise fail(where, f"expected yes or no, got {value!r}")
        else:
            if not isinstance(value, str) or not value:
                raise fail(where, f"expected a file path, got {value!r}")
            value = os.path.expanduser(value)
            if name == "IdentityFile" and not os.path.isfile(value):
                raise fail(where, f"no such key file: {value}")
        out[name] = value
    return out


def _scheduler(entry: Any, fail) -> tuple[Optional[str], int]:
    if entry is None:
        return None, 0
    if not isinstance(entry, dict):
        raise fail("scheduler", "expected a mapping with `address` and/or `port`")
    _no_unknown(entry, SCHEDULER_KEYS, "scheduler.", fail)
    address = entry.get("address")
    if address is not None and (not isinstance(address, str) or not address or any(c.isspace() for c in address)):
        raise fail("scheduler.address", f"expected a host name or IP address of this machine, got {address!r}")
    port = entry.get("port", 0)
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise fail("scheduler.port", f"expected a port number 0..65535 (0: any free port), got {port!r}")
    return address, port
