"""The job an agent runs, read from a JSON file and checked field by field.

A job tells one agent who it is, which NICs it owns, how to reach each peer and what to run::

    {
      "rank": 0, "world_size": 2, "host": "h0",
      "nics": [{"name": "h0-eth0", "mac": "02:00:00:00:10:00", "address": "fc00:0:1000::", "plane": 0}],
      "peers": [{
        "rank": 1, "qp": 1, "remote_qp": 1,
        "nics": [{"plane": 0, "mac": "02:00:00:00:10:01", "address": "fc00:0:1001::"}],
        "paths": {"0": ["fc00:0:100:1001::", "fc00:0:101:1001::"]}
      }],
      "transport": {"mode": "mrc", "config": {"num_evs": 64}},
      "workload": {"kind": "allreduce", "elements": 262144, "dtype": "float32", "chunk_bytes": 65536, "seed": 1},
      "timeout": 60.0, "goodput_interval": 0.01, "log": "h0.jsonl", "start_at": 0, "start_file": null
    }

- `qp` is this agent's QP of the connection (the BTH dest QP of what the peer sends it);
  `remote_qp` is the peer's (the BTH dest QP of what this agent sends).
- `paths` maps a plane to the destination addresses of the uSID paths on it
  (`topologies.paths.host_paths`); packets on plane p leave by this agent's NIC of plane p and
  carry the MAC of the peer's NIC of plane p. In baseline ("roce") mode the peer's NIC
  addresses are the destinations and `paths` may be empty.
- `transport.config` holds `host_agent.transport.TransportConfig` fields (times in seconds).
- `workload.kind` is "allreduce" (elements, dtype, chunk_bytes, seed), "alltoall" (block_bytes,
  chunk_bytes, seed) or "transfer" (src, dst, bytes, chunk_bytes, seed).
- `timeout` (s) bounds the workload; `start_at` (UNIX time, 0 = at once) lets the agents of a
  run open their sockets first and start the workload together.
- `start_file` (optional) starts them together once every one is up: the agent writes its
  `start` record, then waits (at most 10 minutes) for this file to hold the UNIX time to start at
  (`host_agent.start_file`); `start_at` is then not read.
The models below (`Job` and its parts) are the file's one description and what the agent
reads from it; every error names the file and
the field (`peers[0].nics[1].mac: ...`) and says what was expected (wire/schema.py).

This module is the file contract: `parse_job`/`load_job` read a job (the agent), `Job.write`
saves one. `host_agent.topology_jobs` makes jobs from a topology (the testbed's launcher, experiments).
"""
from __future__ import annotations

import dataclasses
import ipaddress
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import Discriminator, Field, PlainValidator, Strict, Tag, TypeAdapter, WithJsonSchema, model_validator

from host_agent.collectives.data import DTYPES
from host_agent.transport import kinds
from host_agent.transport.config import TransportConfig
from wire.schema import Schema, SchemaError, UnreadableDocument, check, describe, invalid, read_document

_MAC_RE = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
_IFNAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,15}$")


class JobError(ValueError):
    """A job file that cannot be run; the message names the file and the field."""


# --- the file, described once ---------------------------------------------------------------------

def _mode(value: Any) -> str:
    if not isinstance(value, str) or value not in kinds.TRANSPORTS:
        raise invalid(f"{value!r} is not one of {', '.join(kinds.TRANSPORTS)}")
    return value


Mode = Annotated[str, PlainValidator(_mode), WithJsonSchema({
    "type": "string", "examples": list(kinds.BUILT_IN),
    "description": "a transport mode: built in, or added with host_agent.transport.register_transport"})]
TRANSPORT_PARAMS = tuple(sorted(f.name for f in dataclasses.fields(TransportConfig) if f.name != "mode"))


def check_transport_params(mode: str, params: dict, key: str) -> None:
    """`params` (TransportConfig fields under `key`) known, of their field's type, and accepted by
    TransportConfig for `mode`; `invalid` naming the parameter otherwise."""
    known = {f.name: f for f in dataclasses.fields(TransportConfig)}
    for name, value in params.items():
        if name not in TRANSPORT_PARAMS:
            raise invalid(f"not a transport parameter; known: {', '.join(TRANSPORT_PARAMS)}", f"{key}.{name}")
        default = known[name].default
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, (int, float)):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            ok = True
        if not ok:
            words = "true or false" if isinstance(default, bool) else "a number"
            raise invalid(f"expected {words}, got {describe(value)}", f"{key}.{name}")
    try:
        TransportConfig(mode=mode, **params)
    except (TypeError, ValueError) as error:
        field, _, reason = str(error).removeprefix("TransportConfig.").partition(": ")
        if field in params:                 # its own check of a field given here: the path ends at it
            raise invalid(reason, f"{key}.{field}") from None
        raise invalid(str(error), key) from None


def _mac(value: Any) -> str:
    if not isinstance(value, str) or not _MAC_RE.match(value):
        raise invalid(f"{value!r} is not a MAC address (aa:bb:cc:dd:ee:ff)")
    return value.lower()


def _ipv6(value: Any) -> str:
    try:
        return str(ipaddress.IPv6Address(value))
    except (ValueError, TypeError):
        raise invalid(f"{value!r} is not an IPv6 address") from None


def _qp(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise invalid(f"expected an integer, got {describe(value)}")
    if not 0 <= value < 1 << 24:
        raise invalid(f"{value} is not a 24-bit QP number")
    return value


Mac = Annotated[str, PlainValidator(_mac), WithJsonSchema({"type": "string", "pattern": _MAC_RE.pattern})]
Ipv6 = Annotated[str, PlainValidator(_ipv6), WithJsonSchema({"type": "string", "format": "ipv6"})]
Qp = Annotated[int, PlainValidator(_qp), WithJsonSchema({"type": "integer", "minimum": 0, "maximum": (1 << 24) - 1})]


class NicSpec(Schema):
    """One NIC: plane, MAC, IPv6 address and, for this agent's own NICs, the interface name."""

    plane: int = Field(ge=0)
    mac: Mac
    address: Ipv6
    name: str = ""

    @property
    def mac_bytes(self) -> bytes:
        return bytes.fromhex(self.mac.replace(":", ""))

    @property
    def address_bytes(self) -> bytes:
        return ipaddress.IPv6Address(self.address).packed


class PeerSpec(Schema):
    """One peer: its rank, the QPs of the connection, its NICs and the paths to it per plane
    (in the file, `paths` maps a plane number written as text to the path addresses)."""

    rank: int = Field(ge=0)
    qp: Qp = Field(description="this agent's QP of the connection (the dest QP of what the peer sends)")
    remote_qp: Qp = Field(description="the peer's QP (the dest QP of what this agent sends)")
    nics: Annotated[tuple[NicSpec, ...], Strict(False)] = Field(min_length=1)
    paths: dict[int, Annotated[tuple[Ipv6, ...], Strict(False)]] = Field(
        default_factory=dict, description="plane -> destination addresses of the uSID paths on it")
    host: str = ""

    @model_validator(mode="before")
    @classmethod
    def _plane_numbers(cls, data: Any) -> Any:
        paths = data.get("paths") if isinstance(data, dict) else None
        if isinstance(paths, dict):
            planes = {}
            for key, addresses in paths.items():
                if isinstance(key, str) and key.isdigit():
                    key = int(key)
                elif not isinstance(key, int) or isinstance(key, bool):
                    raise invalid(f"plane key {key!r} is not a plane number", f"paths.{key}")
                planes[key] = addresses
            data = {**data, "paths": planes}
        return data

    def nic_on(self, plane: int) -> NicSpec | None:
        """The peer's NIC on `plane`, or None."""
        return next((n for n in self.nics if n.plane == plane), None)


class _Work(Schema):
    """A workload; `params` are its fields but the kind."""

    @property
    def params(self) -> dict[str, Any]:
        return self.model_dump(exclude={"kind"})


class AllreduceWork(_Work):
    """A ring all-reduce of `elements` values of `dtype`."""

    kind: Literal["allreduce"]
    elements: int = Field(gt=0)
    dtype: Literal[DTYPES] = "float32"
    chunk_bytes: int = Field(65536, gt=0)
    seed: int = 0


class AlltoallWork(_Work):
    """An all-to-all: `block_bytes` to every other rank."""

    kind: Literal["alltoall"]
    block_bytes: int = Field(gt=0)
    chunk_bytes: int = Field(65536, gt=0)
    seed: int = 0


class TransferWork(_Work):
    """One transfer of `bytes` from rank `src` to rank `dst`."""

    kind: Literal["transfer"]
    src: int = Field(ge=0)
    dst: int = Field(ge=0)
    bytes: int = Field(gt=0)
    chunk_bytes: int = Field(65536, gt=0)
    seed: int = 0

    @model_validator(mode="after")
    def _two_ranks(self) -> "TransferWork":
        if self.src == self.dst:
            raise invalid(f"same rank as src ({self.src})", "dst")
        return self


def _workload_kind(data: Any) -> Optional[str]:
    kind = data.get("kind") if isinstance(data, dict) else getattr(data, "kind", None)
    return f"<{kind}>" if isinstance(kind, str) else None


JobWorkload = Annotated[Union[Annotated[AllreduceWork, Tag("<allreduce>")], Annotated[AlltoallWork, Tag("<alltoall>")],
                              Annotated[TransferWork, Tag("<transfer>")]], Discriminator(_workload_kind)]
_WORKLOADS = TypeAdapter(JobWorkload)


def job_workload(kind: str, params: dict[str, Any]) -> JobWorkload:
    """The workload of `kind` with `params` (its fields), checked."""
    return _WORKLOADS.validate_python({"kind": kind, **params})


class JobTransport(Schema):
    """The transport: its mode and TransportConfig fields (times in seconds)."""

    mode: Mode = "mrc"
    config: dict[str, Any] = Field(default_factory=dict, description="TransportConfig fields")

    @model_validator(mode="after")
    def _config_fits(self) -> "JobTransport":
        check_transport_params(self.mode, self.config, "config")
        return self


class Job(Schema):
    """Everything one agent needs: who it is, its NICs, its peers, the transport and the workload."""

    rank: int = Field(ge=0)
    world_size: int = Field(ge=1)
    host: str = ""
    nics: Annotated[tuple[NicSpec, ...], Strict(False)] = Field(min_length=1, description="this agent's own NICs")
    peers: Annotated[tuple[PeerSpec, ...], Strict(False)] = ()
    transport: JobTransport = JobTransport()
    workload: JobWorkload
    timeout: float = Field(60.0, gt=0, description="seconds the workload may take")
    goodput_interval: float = Field(0.01, gt=0)
    log: str = ""
    start_at: float = Field(0.0, ge=0, description="UNIX time to start at (0: at once)")
    start_file: Optional[str] = Field(None, min_length=1, description=(
        "a file to wait for before starting: it holds the UNIX start time; the agent writes its start "
        "record, then waits for the file (at most 10 minutes); `start_at` is then not read"))

    @property
    def mode(self) -> str:
        return self.transport.mode

    @property
    def config(self) -> dict[str, Any]:
        return self.transport.config

    def transport_config(self) -> TransportConfig:
        """The TransportConfig of this job (mode plus the given fields)."""
        return TransportConfig(mode=self.mode, **self.config)

    def nic_on(self, plane: int) -> NicSpec | None:
        """This agent's NIC on `plane`, or None."""
        return next((n for n in self.nics if n.plane == plane), None)

    def peer(self, rank: int) -> PeerSpec:
        """The peer with rank `rank`."""
        for p in self.peers:
            if p.rank == rank:
                return p
        raise KeyError(f"job has no peer of rank {rank}")

    def write(self, path: str | Path) -> Path:
        """Save this job as a JSON file (what `load_job` reads); return the path."""
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=1))
        return path

    def to_dict(self) -> dict:
        """The JSON form of this job (what `parse_job` reads)."""
        return self.model_dump(mode="json")

    @model_validator(mode="after")
    def _consistent(self) -> "Job":
        world = self.world_size
        if self.rank >= world:
            raise invalid(f"{self.rank} is outside 0..{world - 1}", "rank")
        for i, nic in enumerate(self.nics):
            if not _IFNAME_RE.match(nic.name):
                raise invalid(f"{nic.name!r} is not a valid interface name (1-15 letters, digits, '_', '.', '-')",
                              f"nics[{i}].name")
        planes = [n.plane for n in self.nics]
        if len(set(planes)) != len(planes):
            raise invalid(f"two NICs on the same plane ({planes})", "nics")
        seen: set[int] = set()
        for i, peer in enumerate(self.peers):
            where = f"peers[{i}]"
            if peer.rank >= world:
                raise invalid(f"{peer.rank} is outside 0..{world - 1}", f"{where}.rank")
            if peer.rank == self.rank:
                raise invalid(f"{peer.rank} is this agent's own rank", f"{where}.rank")
            if peer.rank in seen:
                raise invalid(f"rank {peer.rank} is listed twice", f"{where}.rank")
            seen.add(peer.rank)
            for plane in peer.paths:
                if plane not in planes:
                    raise invalid(f"this agent has no NIC on plane {plane}", f"{where}.paths[{plane}]")
                if peer.nic_on(plane) is None:
                    raise invalid(f"the peer has no NIC on plane {plane}", f"{where}.paths[{plane}]")
            if not any(peer.nic_on(plane) for plane in planes):
                raise invalid("the peer shares no plane with this agent", f"{where}.nics")
            if self.transport.mode == "mrc" and not any(peer.paths.values()):
                raise invalid("MRC mode needs at least one path", f"{where}.paths")
        self._check_workload_peers(seen)
        return self

    def _check_workload_peers(self, peers: set[int]) -> None:
        """The peers the workload needs must be in the job."""
        rank, world, work = self.rank, self.world_size, self.workload
        if work.kind == "allreduce":
            needed = {(rank - 1) % world, (rank + 1) % world} - {rank}
        elif work.kind == "alltoall":
            needed = set(range(world)) - {rank}
        else:
            for name in ("src", "dst"):
                if getattr(work, name) >= world:
                    raise invalid(f"{getattr(work, name)} is outside 0..{world - 1}", f"workload.{name}")
            needed = {work.dst} if rank == work.src else {work.src} if rank == work.dst else set()
        missing = sorted(needed - peers)
        if missing:
            raise invalid(f"the {work.kind} workload needs a peer of rank {missing[0]}", "peers")


def parse_job(data: Any, source: str = "job") -> Job:
    """Check a decoded JSON job and return it; JobError names `source` and the bad field."""
    if not isinstance(data, dict):
        raise JobError(f"{source}: job: must be an object, not {type(data).__name__}")
    try:
        return check(Job, data)
    except SchemaError as error:
        raise JobError(f"{source}: {error}") from None


def load_job(path: str | Path) -> Job:
    """Read and check a job file."""
    try:
        data = read_document(path, json_format=True)
    except UnreadableDocument as error:
        raise JobError(str(error)) from None
    return parse_job(data, str(path))
