"""Experiments on the BMv2 target.

The planning tests need nothing. The quick failover's MRC case on the real testbed needs root, mnexec,
the mininet library, `simple_switch_grpc` and the compiled p4/build/mrc.json (skipped with the reason
otherwise); it is slow: one network up, an all-reduce, a link killed, tear-down.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import requires_bmv2, requires_mininet
from experiments import metrics
from experiments.backends.mininet_backend import MininetBackend
from experiments.horizons import estimated_duration, horizon, known_delays
from experiments.rate_caps import MAX_RATE_BPS, target_topology
from experiments.scenario import load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[2]
BMV2_JSON = ROOT / "p4" / "build" / "mrc.json"

ON_BMV2 = [requires_mininet, requires_bmv2, pytest.mark.integration, pytest.mark.slow,
           pytest.mark.skipif(not BMV2_JSON.exists(), reason=f"needs {BMV2_JSON} (make -C p4)")]


def on_bmv2(test):
    """Mark a test as needing the real testbed with BMv2."""
    for mark in ON_BMV2:
        test = mark(test)
    return test


def incast(horizon_s):
    return parse_scenario({"name": "incast", "topology": "leafspine:5x2x2", "horizon_s": horizon_s,
                           "link": {"rate_bps": 1_000_000_000},
                           "workload": {"kind": "incast", "bytes": 131072, "chunk_bytes": 65536, "senders": 7},
                           "transports": [{"name": "MRC", "mode": "mrc"}]}).cases()[0]


def test_bmv2_links_are_capped_at_what_bmv2_forwards_here():
    topo, notes = target_topology(incast(horizon_s=60.0), "bmv2")
    assert {link.rate_bps for link in topo.links} == {MAX_RATE_BPS["bmv2"]}
    assert notes == ["link rates capped at 20 Mbit/s for BMv2 on this machine (the scenario asks for 1000 Mbit/s)"]


def test_a_horizon_too_short_for_bmv2_is_stretched_and_says_so():
    case = incast(horizon_s=0.5)
    topo, notes = target_topology(case, "bmv2")
    need, _ = estimated_duration(case, topo, "bmv2")
    stretched, note = horizon(case, topo, "bmv2")
    assert need > 0.5 and stretched >= 2 * need                 # room for the workload, not just its bound
    assert len(notes) == 2 and notes[1] == note and note.startswith("horizon stretched on bmv2 here from 0.5 s"), notes
    roomy = incast(horizon_s=2.0)
    model_topo, model_notes = target_topology(roomy, "model")
    model_need, _ = estimated_duration(roomy, model_topo, "model")
    assert model_need * 1.25 <= 2.0
    assert horizon(roomy, model_topo, "model") == (2.0, None)    # room beyond what it needs: unchanged
    assert not [n for n in model_notes if n.startswith("horizon")], model_notes
    tight, _ = horizon(incast(horizon_s=0.4), model_topo, "model")    # 0.4 s for about 0.37 s of work
    assert tight == pytest.approx(3 * model_need, abs=0.05)


def test_the_failover_scenarios_horizon_on_bmv2_covers_what_each_case_needs():
    """Twice the workload's least duration there, plus the reroute and the backed-off timeout after
    it for the rerouted baseline (the quick failover's 4 s cut MRC at 3.96 s and RoCE + reroute
    while delivering: issue #30)."""
    for quick in (True, False):
        scenario = load_scenario(ROOT / "experiments" / "failover.yaml", quick=quick)
        for case in scenario.cases():
            topo, _ = target_topology(case, "bmv2")
            need, _ = estimated_duration(case, topo, "bmv2")
            delays, _ = known_delays(case, topo)
            assert (delays > 0) == (case.transport.reroute_delay_s is not None), case.label
            assert horizon(case, topo, "bmv2")[0] >= 2 * need + delays - 0.05, case.label


@pytest.fixture(scope="module")
def mrc_failover(tmp_path_factory):
    scenario = load_scenario(ROOT / "experiments" / "failover.yaml", quick=True)
    backend = MininetBackend("bmv2", run_root=tmp_path_factory.mktemp("runs"))
    case = next(c for c in scenario.cases()
                if c.variant == scenario.variants[0] and c.transport.name == "MRC")
    record = backend.run_case(case)
    return metrics.summarise(record), record


@on_bmv2
def test_quick_failover_on_bmv2_mrc_survives_the_dead_link_bit_exact(mrc_failover):
    summary, record = mrc_failover
    assert [f.what for f in record.faults][:1] == ["link down"], record.faults
    assert summary["failure_time_s"] is not None and summary["failure_time_s"] > 0
    assert summary["completed"] and summary["bit_exact"], summary
    assert summary["completion_time_s"] > summary["failure_time_s"]


@on_bmv2
def test_quick_failover_on_bmv2_leaves_nothing_behind(mrc_failover):
    _, record = mrc_failover
    assert not [n for n in record.notes if n.startswith("left behind")], record.notes
