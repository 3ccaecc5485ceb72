"""Jobs made from a topology: what each host's agent is told about its NICs, its peers and their uSID paths.

The file contract itself (fields, checks, `parse_job`) is `host_agent.job`; this module fills it in
from a `Topology`, a workload and a transport, for the testbed's launcher and the experiments.
"""
from __future__ import annotations

from pathlib import Path

from host_agent.job import Job, JobWorkload, NicSpec, PeerSpec, parse_job
from topologies.model import HostNic, Topology
from topologies.paths import host_paths


def nic_spec(nic: HostNic, own: bool) -> NicSpec:
    """A topology NIC as a job lists it (own NICs carry their interface name)."""
    return NicSpec(plane=nic.plane, mac=nic.mac, address=str(nic.address), name=nic.ifname if own else "")


def peer_spec(topo: Topology, host: str, peer: str, rank: int, qp: int, remote_qp: int) -> PeerSpec:
    """How `host` reaches `peer` (of rank `rank`) in `topo`: its NICs and the uSID paths per plane."""
    paths: dict[int, list[str]] = {}
    for path in host_paths(topo, host, peer):
        paths.setdefault(path.plane, []).append(str(path.address))
    return PeerSpec(rank=rank, qp=qp, remote_qp=remote_qp,
                    nics=tuple(nic_spec(n, own=False) for n in topo.host_nics(peer)),
                    paths={plane: tuple(addrs) for plane, addrs in paths.items()})


def build_job(topo: Topology, host: str, rank: int, world_size: int, peers: list[PeerSpec],
              workload: JobWorkload, mode: str = "mrc", config: dict | None = None, *,
              timeout: float = 60.0, log: str | Path = "", goodput_interval: float = 0.01,
              start_at: float = 0.0, start_file: str | None = None) -> Job:
    """The job of the agent of rank `rank` on `host`, checked as `parse_job` checks a file."""
    return parse_job({"rank": rank, "world_size": world_size, "host": host,
                      "nics": tuple(nic_spec(n, own=True) for n in topo.host_nics(host)), "peers": tuple(peers),
                      "workload": workload, "transport": {"mode": mode, "config": dict(config or {})},
                      "timeout": float(timeout), "goodput_interval": float(goodput_interval), "log": str(log),
                      "start_at": float(start_at), "start_file": start_file}, f"job of {host} rank {rank}")
