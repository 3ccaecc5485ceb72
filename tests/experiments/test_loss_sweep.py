"""The loss sweep (experiments/loss-sweep.yaml) on netsim: random loss on every host's last hop,
MRC against RoCE with one QP (issue 14). Quick: at data-center scale (400 Gbit/s, 2 us per hop,
4 KB packets), an 8 MiB all-reduce and a 1 MiB all-to-all at 0 and 1 % loss."""
from __future__ import annotations

from pathlib import Path

import pytest

from experiments import metrics
from experiments.backends.netsim_backend import NetsimBackend
from experiments.fault_targets import last_hops
from experiments.faults import plan_faults
from experiments.scenario import ScenarioError, load_scenario, parse_scenario
from topologies import topology_from_spec

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ROOT / "experiments" / "loss-sweep.yaml"


def goodput(summary: dict, workload_bytes: int) -> float:
    """Collective bytes per second: the workload over its completion time (0 when unfinished)."""
    t = summary["completion_time_s"]
    return workload_bytes * 8 / t if summary["completed"] and t else 0.0


@pytest.fixture(scope="module")
def quick_sweep():
    """{(variant label, transport name): (summary, record)} of the quick sweep."""
    scenario = load_scenario(SWEEP, quick=True)
    out = {}
    for case in scenario.cases():
        record = NetsimBackend().run_case(case)
        out[(case.variant.label, case.transport.name)] = (metrics.summarise(record), record, case)
    return out


def test_the_full_sweep_covers_both_collectives_three_sizes_and_three_loss_rates():
    scenario = load_scenario(SWEEP)
    kinds = {(v.workload.kind, v.workload.bytes, v.faults[0].loss if v.faults else 0.0) for v in scenario.variants}
    assert kinds == {(k, b, p) for k in ("allreduce", "alltoall") for b in (65536, 262144, 1048576)
                     for p in (0.0, 0.001, 0.01)}
    assert [(t.mode, t.params.get("qps", 1)) for t in scenario.transports] == [("mrc", 1), ("roce", 1)]


def test_random_loss_acts_on_every_last_hop_and_names_no_link(tmp_path):
    topo = topology_from_spec("leafspine:2x2x2")
    hops = last_hops(topo)
    assert len(hops) == 4 and all(topo.is_switch(s) and topo.is_host(h) for s, h in hops)
    scenario = load_scenario(SWEEP, quick=True)
    case = next(c for c in scenario.cases() if c.variant.faults)
    (planned,) = plan_faults(case, topo, scenario.horizon_s)
    assert [a.what for a in planned.actions] == ["1.00% random loss on"]
    doc = {"name": "x", "topology": "leafspine:2x2x1", "workload": {"kind": "allreduce", "bytes": 4096},
           "transports": [{"name": "MRC", "mode": "mrc"}],
           "faults": [{"kind": "random_loss", "loss": 0.01, "link": ["s1", "s3"]}]}
    with pytest.raises(ScenarioError, match="faults\\[0\\].link: a random_loss fault acts on every host's last hop"):
        parse_scenario(doc, "x.yaml")


@pytest.mark.slow
def test_every_quick_case_completes_bit_exact_and_the_loss_is_real(quick_sweep):
    for (label, transport), (summary, _, _) in quick_sweep.items():
        assert summary["completed"] and summary["bit_exact"], (label, transport, summary["notes"])
        dropped = summary["packets_dropped_by_faults"]
        if "1% loss" in label:
            assert dropped > 0, (label, transport)
        else:
            assert dropped == 0, (label, transport)
    for (label, transport), (summary, _, case) in quick_sweep.items():
        print(f"{label:28s} {transport:10s} goodput {goodput(summary, case.variant.workload.bytes) / 1e6:7.2f} "
              f"Mbit/s, retransmissions {summary['retransmissions']}")


@pytest.mark.parametrize("kind", ["allreduce", "alltoall"])
def test_mrc_goodput_at_one_percent_loss_is_at_least_twice_roces(quick_sweep, kind):
    (label,) = {v for v, _ in quick_sweep if v.startswith(kind) and v.endswith(" 1% loss")}
    mrc, _, case = quick_sweep[(label, "MRC")]
    roce, _, _ = quick_sweep[(label, "RoCE 1 QP")]
    size = case.variant.workload.bytes
    assert goodput(mrc, size) >= 2 * goodput(roce, size)

