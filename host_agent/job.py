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
      "timeout": 60.0, "goodput_interval": 0.01, "log": "h0.jsonl", "start_at": 0
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
Every error names the file and the field (`peers[0].nics[1].mac: ...`).

This module is the file contract: `parse_job`/`load_job` read a job (the agent), `Job.write`
saves one. `host_agent.topology_jobs` makes jobs from a topology (the testbed's launcher, experiments).
"""
from __future__ import annotations

import dataclasses
import ipaddress
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from host_agent.transport import kinds
from host_agent.transport.config import TransportConfig

_MAC_RE = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
_IFNAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,15}$")

WORKLOAD_FIELDS = {
    # kind: {field: (type, required, default)}
    "allreduce": {"elements": (int, True, None), "dtype": (str, False, "float32"),
                  "chunk_bytes": (int, False, 65536), "seed": (int, False, 0)},
    "alltoall": {"block_bytes": (int, True, None), "chunk_bytes": (int, False, 65536),
                 "seed": (int, False, 0)},
    "transfer": {"src": (int, True, None), "dst": (int, True, None), "bytes": (int, True, None),
                 "chunk_bytes": (int, False, 65536), "seed": (int, False, 0)},
}


class JobError(ValueError):
    """A job file that cannot be run; the message names the file and the field."""


@dataclass(frozen=True)
class NicSpec:
    """One NIC: interface name (own NICs only), MAC, IPv6 address, plane."""

    plane: int
    mac: str
    address: str
    name: str = ""

    @property
    def mac_bytes(self) -> bytes:
        return bytes.fromhex(self.mac.replace(":", ""))

    @property
    def address_bytes(self) -> bytes:
        return ipaddress.IPv6Address(self.address).packed


@dataclass(frozen=True)
class PeerSpec:
    """One peer: its rank, the QPs of the connection, its NICs and the paths to it per plane."""

    rank: int
    qp: int
    remote_qp: int
    nics: tuple[NicSpec, ...]
    paths: dict[int, tuple[str, ...]]

    def nic_on(self, plane: int) -> NicSpec | None:
        """The peer's NIC on `plane`, or None."""
        return next((n for n in self.nics if n.plane == plane), None)


@dataclass(frozen=True)
class JobWorkload:
    """What to run: a collective kind and its parameters."""

    kind: str
    params: dict[str, Any]


@dataclass(frozen=True)
class Job:
    """Everything one agent needs."""

    rank: int
    world_size: int
    nics: tuple[NicSpec, ...]
    peers: tuple[PeerSpec, ...]
    workload: JobWorkload
    mode: str = "mrc"
    config: dict[str, Any] = field(default_factory=dict)
    host: str = ""
    timeout: float = 60.0
    goodput_interval: float = 0.01
    log: str = ""
    start_at: float = 0.0

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
        return {
            "rank": self.rank, "world_size": self.world_size, "host": self.host,
            "nics": [dataclasses.asdict(n) for n in self.nics],
            "peers": [{"rank": p.rank, "qp": p.qp, "remote_qp": p.remote_qp,
                       "nics": [{"plane": n.plane, "mac": n.mac, "address": n.address} for n in p.nics],
                       "paths": {str(pl): list(a) for pl, a in p.paths.items()}} for p in self.peers],
            "transport": {"mode": self.mode, "config": dict(self.config)},
            "workload": {"kind": self.workload.kind, **self.workload.params},
            "timeout": self.timeout, "goodput_interval": self.goodput_interval, "log": self.log,
            "start_at": self.start_at,
        }


# --- parsing -------------------------------------------------------------------------------------

class _Fields:
    """Typed access to one JSON object, with errors naming `where` and the field."""

    def __init__(self, obj: Any, where: str, source: str) -> None:
        self.source = source
        self.where = where
        if not isinstance(obj, dict):
            raise self.error("", f"must be an object, not {type(obj).__name__}")
        self.obj = obj

    def error(self, key: str, what: str) -> JobError:
        name = f"{self.where}.{key}" if self.where and key else (key or self.where or "job")
        return JobError(f"{self.source}: {name}: {what}")

    def get(self, key: str, kind: type | tuple, default: Any = ..., check=None) -> Any:
        if key not in self.obj:
            if default is ...:
                raise self.error(key, "is missing")
            return default
        value = self.obj[key]
        ok = isinstance(value, kind) and not (isinstance(value, bool) and kind in (int, float, (int, float)))
        if not ok:
            names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise self.error(key, f"{value!r} must be of type {names}")
        if check is not None:
            problem = check(value)
            if problem:
                raise self.error(key, f"{value!r} {problem}")
        return value

    def unknown(self, allowed) -> None:
        extra = sorted(set(self.obj) - set(allowed))
        if extra:
            raise self.error(extra[0], f"is not a known field (known: {', '.join(sorted(allowed))})")


def _nonneg(v):
    return None if v >= 0 else "must be >= 0"


def _positive(v):
    return None if v > 0 else "must be > 0"


def _qp(v):
    return None if 0 <= v < 1 << 24 else "is not a 24-bit QP number"


def _mac(v):
    return None if _MAC_RE.match(v) else "is not a MAC address (aa:bb:cc:dd:ee:ff)"


def _ipv6(v):
    try:
        ipaddress.IPv6Address(v)
    except ValueError:
        return "is not an IPv6 address"
    return None


def _ifname(v):
    return None if _IFNAME_RE.match(v) else "is not a valid interface name"


def _parse_nic(obj: Any, where: str, source: str, own: bool) -> NicSpec:
    f = _Fields(obj, where, source)
    f.unknown(("name", "mac", "address", "plane") if own else ("mac", "address", "plane", "name"))
    return NicSpec(plane=f.get("plane", int, check=_nonneg), mac=f.get("mac", str, check=_mac).lower(),
                   address=str(ipaddress.IPv6Address(f.get("address", str, check=_ipv6))),
                   name=f.get("name", str, check=_ifname) if own else f.get("name", str, ""))


def _parse_peer(obj: Any, where: str, source: str, world: int) -> PeerSpec:
    f = _Fields(obj, where, source)
    f.unknown(("rank", "qp", "remote_qp", "nics", "paths", "host"))
    rank = f.get("rank", int, check=lambda v: None if 0 <= v < world else f"is outside 0..{world - 1}")
    nics_raw = f.get("nics", list, check=lambda v: None if v else "must list at least one NIC")
    nics = tuple(_parse_nic(n, f"{where}.nics[{i}]", source, own=False) for i, n in enumerate(nics_raw))
    raw_paths = f.get("paths", dict, {})
    paths: dict[int, tuple[str, ...]] = {}
    for key, addrs in raw_paths.items():
        pw = f"{where}.paths.{key}"
        if not (isinstance(key, str) and key.isdigit()):
            raise JobError(f"{source}: {pw}: plane key {key!r} is not a plane number")
        if not isinstance(addrs, list) or not all(isinstance(a, str) for a in addrs):
            raise JobError(f"{source}: {pw}: must be a list of IPv6 address strings")
        for i, a in enumerate(addrs):
            if _ipv6(a):
                raise JobError(f"{source}: {pw}[{i}]: {a!r} is not an IPv6 address")
        paths[int(key)] = tuple(str(ipaddress.IPv6Address(a)) for a in addrs)
    return PeerSpec(rank=rank, qp=f.get("qp", int, check=_qp), remote_qp=f.get("remote_qp", int, check=_qp),
                    nics=nics, paths=paths)


def _parse_workload(obj: Any, source: str) -> JobWorkload:
    f = _Fields(obj, "workload", source)
    kind = f.get("kind", str, check=lambda v: None if v in WORKLOAD_FIELDS else
                 f"is not one of {sorted(WORKLOAD_FIELDS)}")
    spec = WORKLOAD_FIELDS[kind]
    f.unknown(("kind", *spec))
    params = {}
    for name, (kind_type, required, default) in spec.items():
        value = f.get(name, kind_type, ... if required else default)
        if kind_type is int and name != "seed" and name not in ("src", "dst") and value <= 0:
            raise f.error(name, f"{value!r} must be > 0")
        params[name] = value
    if kind == "allreduce":
        from host_agent.collectives.data import DTYPES
        if params["dtype"] not in DTYPES:
            raise f.error("dtype", f"{params['dtype']!r} is not one of {DTYPES}")
    return JobWorkload(kind, params)


def _parse_transport(obj: Any, source: str) -> tuple[str, dict]:
    f = _Fields(obj, "transport", source)
    f.unknown(("mode", "config"))
    mode = f.get("mode", str, "mrc", check=lambda v: None if v in kinds.TRANSPORTS else f"is not one of {tuple(kinds.TRANSPORTS)}")
    config = f.get("config", dict, {})
    known = {fl.name: fl for fl in dataclasses.fields(TransportConfig)}
    for key, value in config.items():
        if key not in known or key == "mode":
            raise JobError(f"{source}: transport.config.{key}: is not a TransportConfig field")
        default = known[key].default
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, (int, float)):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            ok = True
        if not ok:
            raise JobError(f"{source}: transport.config.{key}: {value!r} must be of type {type(default).__name__}")
    try:
        TransportConfig(mode=mode, **config)
    except (TypeError, ValueError) as err:
        raise JobError(f"{source}: transport.config: {err}") from None
    return mode, dict(config)


def parse_job(data: Any, source: str = "job") -> Job:
    """Check a decoded JSON job and return it; JobError names `source` and the bad field."""
    f = _Fields(data, "", source)
    f.unknown(("rank", "world_size", "host", "nics", "peers", "transport", "workload", "timeout",
               "goodput_interval", "log", "start_at"))
    world = f.get("world_size", int, check=lambda v: None if v >= 1 else "must be >= 1")
    rank = f.get("rank", int, check=lambda v: None if 0 <= v < world else f"is outside 0..{world - 1}")
    nics_raw = f.get("nics", list, check=lambda v: None if v else "must list at least one NIC")
    nics = tuple(_parse_nic(n, f"nics[{i}]", source, own=True) for i, n in enumerate(nics_raw))
    planes = [n.plane for n in nics]
    if len(set(planes)) != len(planes):
        raise JobError(f"{source}: nics: two NICs on the same plane ({planes})")
    peers = tuple(_parse_peer(p, f"peers[{i}]", source, world)
                  for i, p in enumerate(f.get("peers", list, [])))
    seen = set()
    for i, p in enumerate(peers):
        if p.rank == rank:
            raise JobError(f"{source}: peers[{i}].rank: {p.rank} is this agent's own rank")
        if p.rank in seen:
            raise JobError(f"{source}: peers[{i}].rank: rank {p.rank} is listed twice")
        seen.add(p.rank)
        for plane in p.paths:
            if plane not in planes:
                raise JobError(f"{source}: peers[{i}].paths.{plane}: this agent has no NIC on plane {plane}")
            if p.nic_on(plane) is None:
                raise JobError(f"{source}: peers[{i}].paths.{plane}: the peer has no NIC on plane {plane}")
        if not any(p.nic_on(pl) for pl in planes):
            raise JobError(f"{source}: peers[{i}].nics: the peer shares no plane with this agent")
    mode, config = _parse_transport(f.get("transport", dict, {}), source)
    if mode == "mrc":
        for i, p in enumerate(peers):
            if not any(p.paths.values()):
                raise JobError(f"{source}: peers[{i}].paths: MRC mode needs at least one path")
    workload = _parse_workload(f.get("workload", dict), source)
    _check_workload_peers(workload, rank, world, seen, source)
    return Job(rank=rank, world_size=world, nics=nics, peers=peers, workload=workload, mode=mode,
               config=config, host=f.get("host", str, ""),
               timeout=float(f.get("timeout", (int, float), 60.0, check=_positive)),
               goodput_interval=float(f.get("goodput_interval", (int, float), 0.01, check=_positive)),
               log=f.get("log", str, ""),
               start_at=float(f.get("start_at", (int, float), 0.0, check=_nonneg)))


def _check_workload_peers(workload: JobWorkload, rank: int, world: int, peers: set[int], source: str) -> None:
    """The peers the workload needs must be in the job."""
    kind, params = workload.kind, workload.params
    if kind == "allreduce":
        needed = {(rank - 1) % world, (rank + 1) % world} - {rank}
    elif kind == "alltoall":
        needed = set(range(world)) - {rank}
    else:
        for name in ("src", "dst"):
            if not 0 <= params[name] < world:
                raise JobError(f"{source}: workload.{name}: {params[name]} is outside 0..{world - 1}")
        if params["src"] == params["dst"]:
            raise JobError(f"{source}: workload.dst: same rank as src ({params['src']})")
        needed = ({params["dst"]} if rank == params["src"] else
                  {params["src"]} if rank == params["dst"] else set())
    missing = sorted(needed - peers)
    if missing:
        raise JobError(f"{source}: peers: the {kind} workload needs a peer of rank {missing[0]}")


def load_job(path: str | Path) -> Job:
    """Read and check a job file."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise JobError(f"{path}: cannot read the job file: {err.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise JobError(f"{path}: line {err.lineno}: not valid JSON: {err.msg}") from None
    return parse_job(data, str(path))
