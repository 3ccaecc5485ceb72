"""The host agents a case runs on the testbed: one job per agent, and which log tells each flow's story.

A collective runs one agent per host (rank = host order, a connection to every other host);
incast and permutation run a pair of agents per flow (a two-rank transfer), so a host may run
several agents side by side, each with its own QPs. Jobs are `host_agent.job.Job`s.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from experiments.backends.mininet_limits import agent_sample_interval
from experiments.record import FlowRecord
from experiments.scenario import Case
from experiments.transport_sizing import nic_backlog, transport_params
from experiments.workloads import COLLECTIVES, collective_flows, collective_params, point_to_point_flows
from host_agent.job import Job, job_workload
from host_agent.topology_jobs import build_job, peer_spec
from host_agent.transport import QpNumbers
from topologies.model import Topology


@dataclass(frozen=True)
class AgentJob:
    """One agent to start: its name (also its log's) and its job."""

    name: str
    job: Job


@dataclass(frozen=True)
class FlowLog:
    """A flow of the case and the log of the agent that receives it."""

    flow: FlowRecord
    log: Path


def agent_jobs(topo: Topology, case: Case, log_dir: Path, timeout: float, start_file: Callable[[str], str]
               ) -> tuple[list[AgentJob], list[FlowLog]]:
    """The agents to start and the flows with the log of the agent that receives each; every agent
    waits for the start file `start_file(host)` names (`testbed.agents.AgentLauncher.start_file`)."""
    common = {"timeout": timeout, "goodput_interval": agent_sample_interval(case)}
    config = transport_params(case, topo, nic_backlog_pkts=nic_backlog(topo))
    mode = case.transport.mode
    if case.variant.workload.kind in COLLECTIVES:
        return _collective_jobs(topo, case, log_dir, mode, config, common, start_file)
    return _flow_jobs(topo, case, log_dir, mode, config, common, start_file)


def _collective_jobs(topo: Topology, case: Case, log_dir: Path, mode: str, config: dict, common: dict,
                     start_file: Callable[[str], str]):
    w = case.variant.workload
    hosts = [h.name for h in topo.hosts]
    workload = job_workload(w.kind, collective_params(w, case.scenario.seed))
    qps: dict[tuple[int, int], tuple[int, int]] = {}      # (rank, other rank) -> (its QP, the other's)
    numbers = QpNumbers()                                  # the one QP numbering (the simulation's too)
    for rank in range(len(hosts)):
        for other in range(rank + 1, len(hosts)):
            qps[rank, other] = numbers.pair()
            qps[other, rank] = qps[rank, other][::-1]
    jobs = []
    for rank, host in enumerate(hosts):
        peers = [peer_spec(topo, host, peer, other, *qps[rank, other])
                 for other, peer in enumerate(hosts) if other != rank]
        jobs.append(AgentJob(host, build_job(topo, host, rank, len(hosts), peers, workload, mode, config,
                                             log=log_dir / f"{host}.jsonl", start_file=start_file(host),
                                             **common)))
    received = Counter()
    for flow in collective_flows(topo, w):
        received[flow.dst] += flow.nbytes
    flows = [FlowLog(FlowRecord("*", host, received[host], "data"), log_dir / f"{host}.jsonl")
             for host in hosts if received[host]]
    return jobs, flows


def _flow_jobs(topo: Topology, case: Case, log_dir: Path, mode: str, config: dict, common: dict,
               start_file: Callable[[str], str]):
    w = case.variant.workload
    jobs, flows = [], []
    numbers = QpNumbers()                                  # the one QP numbering: a pair per flow
    for index, flow in enumerate(point_to_point_flows(topo, w, case.scenario.seed)):
        qps = numbers.pair()
        # seeded with the case's seed plus the flow's index: no two flows of the case carry the same
        # bytes (a packet handed to another flow's agent would pass that agent's check)
        workload = job_workload("transfer", {"src": 0, "dst": 1, "bytes": flow.nbytes,
                                             "chunk_bytes": w.chunk_bytes, "seed": case.scenario.seed + index})
        for rank, (host, peer) in enumerate(((flow.src, flow.dst), (flow.dst, flow.src))):
            name = f"{host}-flow{index}-{'tx' if rank == 0 else 'rx'}"
            peers = [peer_spec(topo, host, peer, 1 - rank, qps[rank], qps[1 - rank])]
            jobs.append(AgentJob(name, build_job(topo, host, rank, 2, peers, workload, mode, config,
                                                 log=log_dir / f"{name}.jsonl", start_file=start_file(host),
                                                 **common)))
        flows.append(FlowLog(FlowRecord(flow.src, flow.dst, flow.nbytes, flow.role),
                             log_dir / f"{flow.dst}-flow{index}-rx.jsonl"))
    return jobs, flows
