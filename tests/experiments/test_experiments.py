"""Experiments on the netsim backend: the expected outcomes of issue 4, each as an assertion.

Fast versions: the shipped scenario files with their `quick:` overrides, a variant or two each.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from experiments import metrics
from experiments.backends.netsim_backend import NetsimBackend
from experiments.scenario import load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted(p for p in (ROOT / "experiments").glob("*.yaml")
                   if "kind: load-sweep" not in p.read_text())          # trim-sweep.yaml: `mrc-testbed sweep`


def run_cases(name: str, variant: int = 0, transports=None, quick: bool = True) -> dict:
    """Summaries (and records) of one scenario variant (quick unless asked), by transport name."""
    scenario = load_scenario(ROOT / "experiments" / f"{name}.yaml", quick=quick)
    out = {}
    for case in scenario.cases():
        if case.variant != scenario.variants[variant]:
            continue
        if transports is not None and case.transport.name not in transports:
            continue
        record = NetsimBackend().run_case(case)
        out[case.transport.name] = (metrics.summarise(record), record)
    return out


@pytest.fixture(scope="module")
def failover():
    return run_cases("failover")


def test_shipped_scenarios_are_the_seven_of_the_issue():
    assert {p.stem for p in SCENARIOS} >= {"failover", "flap", "blackhole", "gray", "incast", "permutation", "scale"}
    for path in SCENARIOS:
        for quick in (False, True):
            scenario = load_scenario(path, quick=quick)
            assert scenario.cases(), path


@pytest.mark.slow
def test_failover_mrc_recovers_within_50ms_and_is_bit_exact(failover):
    mrc, record = failover["MRC"]
    assert mrc["failure_time_s"] is not None and mrc["failure_time_s"] > 0        # the kill happened mid-run
    assert mrc["completed"] and mrc["bit_exact"], mrc
    assert mrc["app_duplicates"] == 0 and mrc["app_missing"] == 0
    assert mrc["failure_time_s"] < mrc["completion_time_s"]
    assert mrc["time_to_recover_s"] is not None and mrc["time_to_recover_s"] <= 0.05, mrc["time_to_recover_s"]
    assert any(f.what == "link down" for f in record.faults)


def test_failover_baseline_stalls_until_reroute_or_never_completes(failover):
    plain, _ = failover["RoCE"]
    assert not plain["completed"] and not plain["bit_exact"]          # no reroute: stuck until the horizon
    assert plain["time_to_recover_s"] is None
    rerouted, record = failover["RoCE + reroute 1 s"]
    assert rerouted["completed"] and rerouted["bit_exact"]
    t_fail = rerouted["failure_time_s"]
    assert record.reroutes and record.reroutes[0] == pytest.approx(t_fail + 1.0)
    # it stalls until the control plane moves the routes: recovery takes at least the reroute delay
    assert rerouted["time_to_recover_s"] is not None and rerouted["time_to_recover_s"] >= 1.0 - 0.02
    assert rerouted["completion_time_s"] > t_fail + 1.0
    mrc, _ = failover["MRC"]
    assert mrc["completion_time_s"] < rerouted["completion_time_s"]


@pytest.mark.slow
def test_incast_trimming_loses_nothing_and_beats_drop_tail():
    # The full sizes (256 KB per sender): at the quick ones drop-tail can finish first.
    runs = run_cases("incast", transports=("MRC + trimming", "MRC drop-tail"), quick=False)
    trim, _ = runs["MRC + trimming"]
    tail, _ = runs["MRC drop-tail"]
    assert trim["completed"] and trim["bit_exact"]
    assert trim["packets_dropped_queue_full"] == 0 and trim["packets_trimmed"] > 0
    assert trim["retransmissions"]["timeout"] == 0 and trim["retransmissions"]["trim"] > 0
    assert tail["packets_dropped_queue_full"] > 0 and tail["packets_trimmed"] == 0
    assert trim["completion_time_s"] < tail["completion_time_s"]
    assert "victim" in trim["throughput_by_role_bps"]


@pytest.mark.slow
def test_permutation_spraying_balances_links_better_than_ecmp():
    runs = run_cases("permutation")
    spray, _ = runs["MRC spraying"]
    ecmp, _ = runs["RoCE ECMP"]
    assert spray["completed"] and spray["bit_exact"] and ecmp["completed"]
    assert spray["link_utilisation"]["max_over_mean"] < ecmp["link_utilisation"]["max_over_mean"]
    assert spray["flow_throughput_bps"]["spread_max_over_min"] < ecmp["flow_throughput_bps"]["spread_max_over_min"]
    qps, _ = runs["RoCE ECMP, 4 QPs"]                     # more QPs: the hash has more to spread, still not spraying
    assert qps["completed"] and qps["bit_exact"]
    balance = [r["link_utilisation"]["max_over_mean"] for r in (spray, qps, ecmp)]
    assert balance == sorted(balance) and balance[0] < balance[1] < balance[2]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["flap", "blackhole", "gray", "scale"])
def test_mrc_completes_bit_exact_in_every_scenario(name):
    scenario = load_scenario(ROOT / "experiments" / f"{name}.yaml", quick=True)
    mrc = [c for c in scenario.cases() if c.transport.mode == "mrc"]
    assert mrc
    for case in mrc[:2]:
        record = NetsimBackend().run_case(case)
        s = metrics.summarise(record)
        assert record.faults, f"{case.label}: no fault happened"
        assert s["completed"] and s["bit_exact"], (case.label, s)
        assert s["app_duplicates"] == 0 and s["app_missing"] == 0


def test_same_seed_same_result():
    scenario = parse_scenario({"name": "seeded", "topology": "leafspine:2x2x1", "link": {"rate_bps": 100_000_000},
                               "workload": {"kind": "alltoall", "bytes": 131072, "chunk_bytes": 16384},
                               "faults": [{"kind": "gray_loss", "loss": 0.05, "at": 0.001}],
                               "transports": [{"name": "MRC", "mode": "mrc"}]})
    case = scenario.cases()[0]
    a, b = NetsimBackend().run_case(case), NetsimBackend().run_case(case)
    assert a.samples == b.samples and a.completion_time == b.completion_time
    other = dataclasses.replace(case, scenario=dataclasses.replace(scenario, seed=scenario.seed + 1))
    assert NetsimBackend().run_case(other).samples != a.samples


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3, 4])
def test_failover_mrc_recovery_holds_for_other_seeds(seed):
    scenario = load_scenario(ROOT / "experiments" / "failover.yaml", quick=True, seed=seed)
    for case in scenario.cases():
        if case.transport.mode != "mrc":
            continue
        s = metrics.summarise(NetsimBackend().run_case(case))
        assert s["completed"] and s["bit_exact"], (case.label, seed)
        # Goodput back within 75 ms: MRC retires a path for loss that is its own (pathloss), which at
        # this 20 Mbit/s takes several of its packets, so the last connection's dead-path EVs go up
        # to 68 ms after the kill (seed 4; seeds 1-6: recovery 8-68 ms; 10-20 ms when one loss
        # retired an EV, before docs/transport.md's "Whose loss").
        assert s["time_to_recover_s"] is not None and s["time_to_recover_s"] <= 0.075, (case.label, seed, s)


def slowest_over_ideal(record, case) -> float:
    """The slowest flow's completion time over its ideal: the bytes into its receiver at its NIC
    rate, plus the one-way delay of its path (`metrics.flows_over_ideal`)."""
    from experiments.transport_sizing import line_rate_and_one_way_delay
    return metrics.slowest_over_ideal(record, *line_rate_and_one_way_delay(case))


@pytest.mark.slow
def test_datacenter_gray_spine_mrc_keeps_its_slowest_flow_within_the_issue_target():
    """One spine's links at 25 % (datacenter.yaml, full size: 2 MB flows, a few seconds): steering,
    the path cap and the data-center sizing keep MRC's slowest flow within the issue's 1.4x of its
    ideal (last byte's arrival over the receiver's bytes at its NIC rate plus the path's one-way
    delay) and the median flow a little under. docs/transport.md ("Path cap", "NSCC at data-center
    speed") gives the steps between."""
    import statistics
    from experiments.metrics import flows_over_ideal
    from experiments.transport_sizing import line_rate_and_one_way_delay
    scenario = load_scenario(ROOT / "experiments" / "datacenter.yaml")
    case = next(c for c in scenario.cases() if c.variant.label == "permutation, gray spine" and c.transport.mode == "mrc")
    record = NetsimBackend().run_case(case)
    s = metrics.summarise(record)
    assert s["completed"] and s["bit_exact"], s
    assert slowest_over_ideal(record, case) <= 1.4
    ratios = flows_over_ideal(record, *line_rate_and_one_way_delay(case))
    assert statistics.median(ratios) <= 1.35


@pytest.mark.slow
@pytest.mark.parametrize("label, bound", [("permutation", 1.3), ("incast", 1.15)])
def test_datacenter_quick_mrc_flows_finish_near_ideal(label, bound):
    """100 Gbit/s, 1 us cables, 4 KB packets (datacenter.yaml, quick): the transport's timers and
    windows follow the base RTT and BDP, so MRC's slowest flow is near its ideal time."""
    scenario = load_scenario(ROOT / "experiments" / "datacenter.yaml", quick=True)
    case = next(c for c in scenario.cases() if c.variant.label == label and c.transport.mode == "mrc")
    record = NetsimBackend().run_case(case)
    s = metrics.summarise(record)
    assert s["completed"] and s["bit_exact"], s
    assert slowest_over_ideal(record, case) <= bound
