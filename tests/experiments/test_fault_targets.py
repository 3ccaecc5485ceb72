"""Fault targets chosen from the topology, the workload and the pipeline contract (no simulated
network): `auto` picks what it picked when it traced the baseline through a second simulated
network, on every shipped scenario; the baseline's entropy values are the ones the netsim driver's
connections draw."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from experiments.backends.netsim_traffic import Traffic
from experiments.fault_targets import baseline_entropies, busiest_targets, connection_order
from experiments.scenario import load_scenario, parse_scenario
from experiments.transport_sizing import transport_config
from experiments.workloads import variant_topology
from netsim import Simulator
from simulation import network
from topologies import topology_from_spec
from topologies.paths import ecmp_path

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = json.loads((Path(__file__).parent / "data" / "auto_targets.json").read_text())


def scenario_files() -> list[str]:
    return sorted({row["file"] for row in EXPECTED["targets"]})


def test_the_expected_data_cover_every_shipped_scenario():
    import yaml
    shipped = {p.name for p in (ROOT / "experiments").glob("*.yaml") if not yaml.safe_load(p.read_text()).get("kind")}
    assert set(scenario_files()) == shipped


@pytest.mark.parametrize("name", scenario_files())
def test_auto_picks_the_targets_it_picked_before_on_a_shipped_scenario(name):
    """Every variant, full and --quick, at its own seed and seeds 1-4 (tests/experiments/data/
    auto_targets_before.py says how the expected data were made)."""
    chosen: dict = {}
    for row in [r for r in EXPECTED["targets"] if r["file"] == name]:
        scenario = load_scenario(ROOT / "experiments" / name, quick=row["quick"], seed=row["seed"])
        case = next(c for c in scenario.cases() if c.variant.label == row["variant"])
        key = (case.variant.topology, repr(case.variant.link_fields), repr(case.variant.workload), row["seed"])
        if key not in chosen:
            link, spine = busiest_targets(case, variant_topology(case.variant))
            chosen[key] = [list(link), spine]
        assert chosen[key] == [row["link"], row["spine"]], row


@pytest.mark.parametrize("workload", [
    {"kind": "allreduce", "bytes": 65536},
    {"kind": "alltoall", "bytes": 16384},
    {"kind": "permutation", "bytes": 16384},
    {"kind": "incast", "bytes": 16384, "senders": 3, "victim": True},
])
def test_the_baseline_entropies_are_those_the_netsim_driver_draws(workload):
    """Opened on bare endpoints in `connection_order`, each connection draws the EV it draws in the
    netsim driver, for every workload kind."""
    case = parse_scenario({"name": "order", "topology": "leafspine:3x2x2", "seed": 7, "workload": workload,
                           "transports": [{"name": "RoCE", "mode": "roce"}]}).cases()[0]
    topo = variant_topology(case.variant)
    traffic = Traffic(network(topo, Simulator(7)), case, transport_config(case, topo))
    drawn = {(host, conn.peer): conn.evset.slots[0].current.value
             for host, ep in traffic.endpoints.items() for conn in ep.connections.values()}
    assert baseline_entropies(case, topo) == drawn
    assert {frozenset(pair) for pair in connection_order(case, topo)} == {frozenset(key) for key in traffic.pairs}


def test_an_ecmp_path_goes_up_and_down_and_its_entropy_picks_the_spine():
    topo = topology_from_spec("leafspine:2x4x1")
    spines = set()
    rng = random.Random(1)
    for ev in [rng.getrandbits(32) for _ in range(64)]:
        path = ecmp_path(topo, "h1", "h2", 0, ev)
        assert len(path) == 3 and path[0] == topo.host_nic("h1", 0).switch and path[2] == topo.host_nic("h2", 0).switch
        spines.add(path[1])
    assert spines == {s.name for s in topo.switches if s.tier != 0}        # the hash spreads over all four
    assert ecmp_path(topo, "h1", "h2", 0, 5) == ecmp_path(topo, "h1", "h2", 0, 5 + 0x10000)   # 16 bits hashed


def test_planning_faults_builds_no_simulated_network():
    """Planning a case's `auto` faults (as the Mininet backend does) loads nothing of netsim."""
    import subprocess
    import sys
    code = ("import sys\n"
            "from experiments.faults import FaultSchedule\n"
            "from experiments.scenario import load_scenario\n"
            "from experiments.workloads import variant_topology\n"
            "case = load_scenario('experiments/failover.yaml', quick=True).cases()[0]\n"
            "schedule = FaultSchedule.of_case(case, variant_topology(case.variant), 1.0)\n"
            "assert [a.target for f in schedule.faults for a in f.actions] == ['s1-s3']\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'netsim'))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
