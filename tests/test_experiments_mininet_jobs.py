"""The mininet backend's agent jobs (no root needed: only the job files are built).

The agents pace at the line rate their job gives them, so it must be the rate the links really
have: on the model target the backend caps what a scenario asks for at what the Python switch
forwards, and the jobs must follow the capped links (a job at the asked-for 100 Mbit/s on
20 Mbit/s links would send five times too fast).
"""
from __future__ import annotations

from pathlib import Path

from experiments.backends.mininet_backend import MODEL_MAX_RATE_BPS, MininetBackend, agent_jobs
from experiments.scenario import load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parent.parent


def jobs_of(case, target="model"):
    topo, notes = MininetBackend(target)._topology(case)
    jobs, _ = agent_jobs(topo, case, Path("/nonexistent"), start_at=0.0, timeout=1.0)
    return topo, notes, jobs


def test_jobs_pace_at_the_capped_link_rate_on_the_model_target():
    fast = parse_scenario({"name": "fast", "topology": "leafspine:2x2x1", "link": {"rate_bps": 100_000_000},
                           "workload": {"kind": "allreduce", "bytes": 65536, "chunk_bytes": 16384},
                           "transports": [{"name": "MRC", "mode": "mrc"}]})
    topo, notes, jobs = jobs_of(fast.cases()[0])
    assert {link.rate_bps for link in topo.links} == {MODEL_MAX_RATE_BPS}
    assert notes and "capped" in notes[0]
    assert jobs and {job["transport"]["config"]["line_rate_bps"] for _, job in jobs} == {MODEL_MAX_RATE_BPS}


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
    trim = min(link.trim_threshold for link in MininetBackend("model")._topology(scenario.cases()[0])[0].links)
    assert {job["transport"]["config"]["nic_backlog_pkts"] for _, job in jobs} == {trim // 2}
