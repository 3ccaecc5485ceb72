"""`run --cluster` refuses, before any network is made, what a network spread over servers cannot
run, naming the scenario's key (experiments.backends.mininet_backend)."""
from __future__ import annotations

from pathlib import Path

import pytest

from experiments.backends.mininet_backend import MininetBackend
from experiments.scenario import ScenarioError, parse_scenario

SCENARIO = {"name": "spread", "topology": "leafspine:2x2x1", "link": {"rate_bps": 100_000_000},
            "workload": {"kind": "alltoall", "bytes": 262144, "chunk_bytes": 16384},
            "transports": [{"name": "MRC", "mode": "mrc"}]}


def refusal(**changes) -> str:
    (case,) = parse_scenario({**SCENARIO, **changes}).cases()
    with pytest.raises(ScenarioError) as caught:
        MininetBackend("model", cluster=Path("no-such-cluster.yaml")).run_case(case)
    return str(caught.value)


def test_data_packets_larger_than_the_tunnels_carry_are_refused():
    text = refusal(link={"rate_bps": 100_000_000, "mtu_payload": 1400})
    assert "link.mtu_payload: frames of 1492 bytes" in text and "MTU of 1450" in text
