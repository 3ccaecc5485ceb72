"""The quick failover's MRC case on the real testbed with BMv2 switches.

Needs root, mnexec, the mininet library, `simple_switch_grpc` and the compiled p4/build/mrc.json
(skipped with the reason otherwise). Slow: one network up, an all-reduce, a link killed, tear-down.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import requires_bmv2, requires_mininet
from experiments import metrics
from experiments.backends.mininet_backend import MininetBackend
from experiments.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
BMV2_JSON = ROOT / "p4" / "build" / "mrc.json"

pytestmark = [requires_mininet, requires_bmv2, pytest.mark.integration, pytest.mark.slow,
              pytest.mark.skipif(not BMV2_JSON.exists(), reason=f"needs {BMV2_JSON} (make -C p4)")]


@pytest.fixture(scope="module")
def mrc_failover(tmp_path_factory):
    scenario = load_scenario(ROOT / "experiments" / "failover.yaml", quick=True)
    backend = MininetBackend("bmv2", run_root=tmp_path_factory.mktemp("runs"))
    case = next(c for c in scenario.cases()
                if c.variant == scenario.variants[0] and c.transport.name == "MRC")
    record = backend.run_case(case)
    return metrics.summarise(record), record


def test_quick_failover_on_bmv2_mrc_survives_the_dead_link_bit_exact(mrc_failover):
    summary, record = mrc_failover
    assert [f.what for f in record.faults][:1] == ["link down"], record.faults
    assert summary["failure_time_s"] is not None and summary["failure_time_s"] > 0
    assert summary["completed"] and summary["bit_exact"], summary
    assert summary["completion_time_s"] > summary["failure_time_s"]


def test_quick_failover_on_bmv2_leaves_nothing_behind(mrc_failover):
    _, record = mrc_failover
    assert not [n for n in record.notes if n.startswith("left behind")], record.notes
