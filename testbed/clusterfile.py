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
`python`. The models below describe the file once; `load_cluster_file` checks the whole file against
them and raises `ClusterFileError` naming the file and the key at fault (wire/schema.py).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Optional, Union

from pydantic import Field, PlainValidator, model_validator

from wire.schema import Schema, SchemaError, UnreadableDocument, check, invalid, read_document

# The OpenSSH client options a server may set, with what each value must be.
SSH_OPTIONS = ("Port", "IdentityFile", "UserKnownHostsFile", "StrictHostKeyChecking", "ConnectTimeout")


class ClusterFileError(ValueError):
    """A cluster file that cannot be used; the message names the file and the key."""


def _host(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or any(c.isspace() for c in value):
        raise invalid(f"expected a host name or IP address, got {value!r}")
    return value


def _user(value: Any) -> str:
    if not isinstance(value, str) or not value or any(c.isspace() for c in value):
        raise invalid(f"expected a user name, got {value!r}")
    return value


def _cores(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise invalid(f"expected a positive integer, got {value!r}")
    return value


def _python(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid(f"expected the path of Python on that server, got {value!r}")
    return value


def _port(value: Any, lowest: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lowest <= value <= 65535:
        any_port = " (0: any free port)" if lowest == 0 else ""
        raise invalid(f"expected a port number {lowest}..65535{any_port}, got {value!r}")
    return value


def _ssh_option(name: str, value: Any) -> Any:
    """An OpenSSH option's value, checked (and yes/no, ~ expanded); `invalid` otherwise."""
    key = f"ssh_options.{name}"
    if name not in SSH_OPTIONS:
        raise invalid(f"not supported (supported: {', '.join(SSH_OPTIONS)})", key)
    if name == "Port":
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 65535:
            raise invalid(f"expected a port number 1..65535, got {value!r}", key)
        return value
    if name == "ConnectTimeout":
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise invalid(f"expected seconds > 0, got {value!r}", key)
        return value
    if name == "StrictHostKeyChecking":
        value = {True: "yes", False: "no"}.get(value, value)     # YAML reads yes/no as booleans
        if value not in ("yes", "no"):
            raise invalid(f"expected yes or no, got {value!r}", key)
        return value
    if not isinstance(value, str) or not value:
        raise invalid(f"expected a file path, got {value!r}", key)
    value = os.path.expanduser(value)
    if name == "IdentityFile" and not os.path.isfile(value):
        raise invalid(f"no such key file: {value}", key)
    return value


Host = Annotated[str, PlainValidator(_host)]


class Server(Schema):
    """One machine of the cluster, reached by SSH (in the file: a mapping, or its address alone)."""

    address: Host
    user: Optional[Annotated[str, PlainValidator(_user)]] = None
    cores: Annotated[int, PlainValidator(_cores)] = Field(1, description="cases run there at once")
    python: Optional[Annotated[str, PlainValidator(_python)]] = None
    ssh_options: dict = Field(default_factory=dict, description="OpenSSH options: " + ", ".join(SSH_OPTIONS))

    @model_validator(mode="before")
    @classmethod
    def _address_alone_and_ssh_options(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"address": data}
        if not isinstance(data, dict):
            raise invalid("expected a mapping with `address` (or an address alone)")
        options = data.get("ssh_options")
        if options is None:
            return {k: v for k, v in data.items() if k != "ssh_options"}
        if not isinstance(options, dict):
            raise invalid("expected a mapping of OpenSSH option to value", "ssh_options")
        return {**data, "ssh_options": {name: _ssh_option(name, value) for name, value in options.items()}}

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


class Scheduler(Schema):
    """Where this machine (the front end) listens for the servers."""

    address: Optional[Annotated[str, PlainValidator(_host)]] = Field(
        None, description="an address of this machine the servers reach (default: the one towards the first server)")
    port: Annotated[int, PlainValidator(lambda v: _port(v, 0))] = Field(0, description="0: any free port")


class ClusterFileKeys(Schema):
    """A cluster file as written: the servers, the scheduler, the placement of nodes."""

    scheduler: Optional[Scheduler] = None
    servers: list[Server] = Field(min_length=1, description="each with an `address` (or the address alone)")
    placement: Optional[dict[str, str]] = Field(None, description="node name -> server address (Mininet cluster mode)")

    @model_validator(mode="after")
    def _consistent(self) -> "ClusterFileKeys":
        seen: dict[tuple, int] = {}
        for i, server in enumerate(self.servers):
            where = (server.address, server.ssh_options.get("Port", 22))
            if where in seen:
                raise invalid(f"{server.address!r} (port {where[1]}) is already servers[{seen[where]}]",
                              f"servers[{i}].address")
            seen[where] = i
        known = [s.address for s in self.servers]
        for node, server in (self.placement or {}).items():
            if server not in known:
                raise invalid(f"{server!r} is not the address of a server (the servers: {', '.join(known)})",
                              f"placement.{node}")
        return self


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
    try:
        doc = read_document(path)
    except UnreadableDocument as error:
        raise ClusterFileError(str(error)) from None
    return parse_cluster(doc, str(path))


def parse_cluster(doc: Any, path: str = "<cluster>") -> ClusterFile:
    """Check a cluster file's parsed YAML `doc` (`path` names it in errors)."""
    if not isinstance(doc, dict):
        raise ClusterFileError(f"{path}: expected a mapping with `servers:` (see testbed/clusterfile.py)")
    try:
        keys = check(ClusterFileKeys, doc)
    except SchemaError as error:
        raise ClusterFileError(f"{path}: {error}") from None
    scheduler = keys.scheduler or Scheduler()
    return ClusterFile(path, tuple(keys.servers), scheduler.address, scheduler.port, dict(keys.placement or {}))
