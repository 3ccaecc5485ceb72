"""Links failing one after another during a job (experiments/cascade.yaml), quick, on netsim."""
from __future__ import annotations

from pathlib import Path

import pytest

from experiments import metrics
from experiments.backends.netsim_backend import NetsimBackend
from experiments.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_mrc_keeps_delivering_while_links_die_in_turn_and_the_baseline_stalls_for_each_reroute():
    scenario = load_scenario(ROOT / "experiments" / "cascade.yaml", quick=True)
    runs = {case.transport.name: NetsimBackend().run_case(case) for case in scenario.cases()}
    mrc, roce = runs["MRC"], runs["RoCE + reroute 1 s"]
    assert [f.what for f in mrc.faults] == ["link down"] * 3                 # the three kills, in turn
    assert [f.target for f in mrc.faults] == ["s1-s3", "s2-s4", "s1-s5"]
    assert mrc.completed and mrc.bit_exact and roce.completed and roce.bit_exact
    assert metrics.longest_delivery_gap(mrc) < 0.05                          # never stalls
    assert metrics.longest_delivery_gap(roce) > 0.5                          # waits for a reroute
    assert mrc.completion_time < roce.completion_time
    assert int(mrc.transport_stats.get("evs_retired", 0)) > 0
