"""The striped rotation (`TransportConfig.stripe_paths`, `evset.striped`) and trim resends that do
not advance the pacing clock (`pace_trim_resends` off): what sizing turns on at data-center speed
(docs/transport.md, "Without tuned switches")."""
from __future__ import annotations

import random

import pytest
import yaml

from host_agent.transport import sizing
from host_agent.transport.peers import PathInfo
from host_agent.transport.evset import Ev, EvSet, striped


def paths(count: int, planes: int = 1) -> list[PathInfo]:
    return [PathInfo(plane=i % planes, nic=i % planes, src=bytes(16), dst=bytes([i + 1]) + bytes(15))
            for i in range(count)]


@pytest.mark.parametrize("num_paths, planes, num_evs", [(4, 1, 128), (3, 1, 64), (8, 2, 128), (5, 1, 17)])
def test_a_striped_rotation_takes_every_path_of_a_plane_in_turn(num_paths, planes, num_evs):
    evset = EvSet(paths(num_paths, planes), num_evs, num_evs // 4, random.Random(7), stripe=True)
    per_plane = num_paths // planes
    for plane in range(planes):
        keys = [s.home.path_key for s in evset.slots if s.home.plane == plane]
        assert all(a != b for a, b in zip(keys, keys[1:]))          # neighbours never share a path
        assert len(set(keys[:per_plane])) == per_plane               # the first turn takes every path
        if len(keys) % per_plane == 0 and len(set(keys.count(k) for k in set(keys))) == 1:
            for start in range(0, len(keys), per_plane):             # equal shares: every turn takes each
                assert len(set(keys[start:start + per_plane])) == per_plane


def test_striping_reorders_the_same_draws():
    """Same EVs, same paths, one order: only where each EV sits in the rotation changes."""
    plain = EvSet(paths(4), 128, 32, random.Random(3))
    stripe = EvSet(paths(4), 128, 32, random.Random(3), stripe=True)
    assert sorted(s.home.value for s in plain.slots) == sorted(s.home.value for s in stripe.slots)
    unstriped = [s.home.path_key for s in plain.slots]
    assert any(a == b for a, b in zip(unstriped, unstriped[1:]))   # random order: neighbours share paths


def test_striped_keeps_paths_with_fewer_evs_in_the_turn():
    evs = [Ev(value=0x100 + i, plane=0, path_key=key) for i, key in enumerate((0, 0, 0, 1, 2, 2))]
    assert [e.path_key for e in striped(evs)] == [0, 2, 1, 0, 2, 0]


def test_sizing_turns_both_on_for_spraying_only():
    sprayed = sizing.for_network(100e9, 9.4e-6, 4096, spraying=True)
    single = sizing.for_network(100e9, 9.4e-6, 4096, spraying=False)
    assert sprayed["stripe_paths"] is True and sprayed["pace_trim_resends"] is False
    assert sprayed["fi"] > 1
    assert "stripe_paths" not in single and "pace_trim_resends" not in single and "fi" not in single


def quick_run(label: str, params: dict) -> tuple[float, dict]:
    """MRC's slowest flow / ideal on datacenter.yaml's quick `label` with htsim's default switch
    settings, with transport `params` over the sizing's, and its summed counters."""
    from pathlib import Path

    from experiments import metrics
    from experiments.backends.netsim_backend import NetsimBackend
    from experiments.scenario import parse_scenario
    from experiments.transport_sizing import line_rate_and_base_rtt
    path = Path(__file__).resolve().parents[2] / "experiments" / "datacenter.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    doc["link"]["switch_profile"] = "htsim-defaults"
    doc["transports"] = [{"name": "MRC", "mode": "mrc", "params": params}]
    scenario = parse_scenario(doc, str(path), quick=True, seed=1)
    case = next(c for c in scenario.cases() if c.variant.label == label)
    record = NetsimBackend().run_case(case)
    assert record.completed and record.bit_exact
    return metrics.slowest_over_ideal(record, *line_rate_and_base_rtt(case)), record.transport_stats


def test_a_striped_permutation_beats_a_random_rotation_at_htsims_settings():
    """Queue and trim point one BDP: spraying in random order makes the leaf uplinks' queues a
    random walk; striped, the flows finish sooner."""
    striped_ratio, _ = quick_run("permutation", {})
    random_ratio, _ = quick_run("permutation", {"stripe_paths": False})
    assert striped_ratio < random_ratio - 0.03


def test_trim_resends_that_do_not_pace_finish_an_incast_sooner():
    """A trim storm at the last hop (without the window penalty, which stops it after the first
    round trip): resends charged to the pacing clock push it tens of us ahead and leave the
    receiver's link idle once the storm is over."""
    unpaced, _ = quick_run("incast", {"window_penalty": False})
    paced, stats = quick_run("incast", {"window_penalty": False, "pace_trim_resends": True})
    assert stats.get("retx_trim", 0) > 0                 # the case does have a trim storm
    assert unpaced < paced - 0.03
