"""The mininet backend's agent jobs (no root needed: only the job files are built).

The agents pace at the line rate their job gives them, so it must be the rate the links really
have: on the model target the backend caps what a scenario asks for at what the Python switch
forwards, and the jobs must follow the capped links (a job at the asked-for 100 Mbit/s on
20 Mbit/s links would send five times too fast).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from experiments.backends.agent_jobs import agent_jobs
from experiments.rate_caps import MODEL_MAX_RATE_BPS, target_topology
from experiments.scenario import load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[2]


def jobs_of(case, target="model"):
    topo, notes = target_topology(case, target)
    jobs, _ = agent_jobs(topo, case, Path("/nonexistent"), timeout=1.0,
                         start_file=lambda host: f"/nonexistent/{host}.start")
    return topo, notes, [(item.name, item.job.to_dict()) for item in jobs]


def test_jobs_pace_at_the_capped_link_rate_on_the_model_target():
    fast = parse_scenario({"name": "fast", "topology": "leafspine:2x2x1", "link": {"rate_bps": 100_000_000},
                           "workload": {"kind": "allreduce", "bytes": 65536, "chunk_bytes": 16384},
                           "transports": [{"name": "MRC", "mode": "mrc"}]})
    topo, notes, jobs = jobs_of(fast.cases()[0])
    assert {link.rate_bps for link in topo.links} == {MODEL_MAX_RATE_BPS}
    assert notes and "capped" in notes[0]
    assert jobs and {job["transport"]["config"]["line_rate_bps"] for _, job in jobs} == {MODEL_MAX_RATE_BPS}


@pytest.mark.slow
def test_the_failover_scenario_asks_for_what_the_model_target_forwards():
    scenario = load_scenario(ROOT / "experiments" / "failover.yaml")
    for case in scenario.cases():
        _, notes, jobs = jobs_of(case)
        assert notes == []                                       # no cap, no note on the default run
        assert {job["transport"]["config"]["line_rate_bps"] for _, job in jobs} == {MODEL_MAX_RATE_BPS}


def test_jobs_keep_the_nic_backlog_under_the_trim_threshold():
    """Veths have no rate: a host's NIC backlog lands at once in the first switch queue."""
    scenario = load_scenario(ROOT / "experiments" / "failover.yaml")
    _, _, jobs = jobs_of(scenario.cases()[0])
    trim = min(link.trim_threshold for link in target_topology(scenario.cases()[0], "model")[0].links)
    assert {job["transport"]["config"]["nic_backlog_pkts"] for _, job in jobs} == {trim // 2}


def test_progress_extrapolates_each_agent_log_from_its_own_last_record(tmp_path):
    """Two agents receiving 1000 bytes/s each; one log was flushed 0.1 s later than the other.
    Half of the 1000 expected bytes is reached at 0.25 s: counting the lagging log as if it were
    as recent as the other (300 bytes by 0.2 s) would put it at 0.33 s, too late for a "50%" fault."""
    import json as _json
    from experiments.backends.agent_logs import Progress
    start = 1000.0
    logs = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    for path, until in zip(logs, (0.2, 0.1)):
        lines = [{"kind": "goodput", "t": start + k * 0.05, "rx_bytes": 50} for k in range(1, round(until / 0.05) + 1)]
        path.write_text("".join(_json.dumps(r) + "\n" for r in lines) + '{"kind": "goodput", "t": ')  # a line being written
    progress = Progress(logs, 1000, start)
    assert progress.read() == pytest.approx(0.3)
    assert progress.eta(0.5) == pytest.approx(start + 0.25)
    assert progress.eta(0.2) == pytest.approx(start + 0.2)            # already passed: the latest record's time


@pytest.mark.parametrize("kind", ["allreduce", "permutation"])
def test_agent_jobs_number_their_qps_as_the_simulation_does(kind):
    """One QP numbering (`host_agent.transport.QpNumbers`): each pair of connections takes the next two
    numbers from QP_BASE; both ends agree, and no host uses a QP twice (flows run agents side by side)."""
    from host_agent.transport import QP_BASE

    case = parse_scenario({"name": "qps", "topology": "leafspine:2x2x2",
                           "workload": {"kind": kind, "bytes": 65536, "chunk_bytes": 16384},
                           "transports": [{"name": "MRC", "mode": "mrc"}]}).cases()[0]
    _, _, jobs = jobs_of(case)
    ends = {(job["host"], peer["qp"]): (peer["remote_qp"], job["rank"], peer["rank"])
            for _, job in jobs for peer in job["peers"]}
    assert len(ends) == sum(len(job["peers"]) for _, job in jobs)             # no host uses a QP twice
    assert sorted(qp for _, qp in ends) == list(range(QP_BASE, QP_BASE + len(ends)))
    by_qp = {qp: remote for (_, qp), (remote, _, _) in ends.items()}
    assert all(by_qp[remote] == qp for qp, remote in by_qp.items())          # the other end answers on ours


def test_no_two_agent_flows_carry_the_same_bytes():
    """Each flow's transfer job draws its bytes from a seed of its own: an incast's flows, all of one
    size, would otherwise carry the same bytes, and a packet handed to the wrong flow would pass."""
    from host_agent.collectives.data import block_bytes

    case = parse_scenario({"name": "incast", "topology": "leafspine:2x2x2", "seed": 4,
                           "workload": {"kind": "incast", "bytes": 4096, "chunk_bytes": 4096},
                           "transports": [{"name": "MRC", "mode": "mrc"}]}).cases()[0]
    _, _, jobs = jobs_of(case)
    senders = [job["workload"] for _, job in jobs if job["rank"] == 0]
    assert len(senders) > 1
    sent = {block_bytes(w["seed"], w["src"], w["dst"], w["bytes"]) for w in senders}
    assert len(sent) == len(senders)


def test_an_agent_that_began_after_the_common_start_began_its_workload_that_late():
    """Its `begin` record says when: one up long before that waited for the start file began on
    time; one up before the start that read the start file late (or one up late) did not."""
    from experiments.backends.agent_logs import start_lateness

    class Logged:                                        # what start_lateness reads of an agent
        def __init__(self, name, records):
            self.name, self._records = name, records

        def records(self):
            return self._records

    start = 1000.0
    agents = [Logged("h1", [{"kind": "start", "t": start - 2.5}, {"kind": "begin", "t": start + 0.0002},
                            {"kind": "goodput", "t": start + 0.1}]),
              Logged("h3", [{"kind": "start", "t": start - 2.5}, {"kind": "begin", "t": start + 0.7}]),
              Logged("h16", [{"kind": "start", "t": start + 6.9}, {"kind": "begin", "t": start + 6.9}]),
              Logged("h4", [{"kind": "start", "t": start - 1.0}]),      # up, stopped before it began
              Logged("h2", [])]                         # no record at all: it never began
    assert start_lateness(agents, start) == {"h1": pytest.approx(0.0002), "h3": pytest.approx(0.7),
                                             "h16": pytest.approx(6.9), "h4": None, "h2": None}
