"""The load sweep through one bottleneck (experiments/trim-sweep.yaml, `mrc-testbed sweep`):
its file checks, its figures from a depth histogram, and a quick run on Mininet (model; BMv2 where
it is installed) whose trims, marks and depths follow the thresholds."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import missing
from experiments.load_sweep.steps import LoadStep, run_sweep, sender_specs
from experiments.load_sweep.sweep_file import SweepError, load_sweep_spec

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ROOT / "experiments" / "trim-sweep.yaml"


def write(tmp_path, **changes) -> Path:
    doc = yaml.safe_load(SWEEP.read_text())
    doc.update(changes)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_sweep_file_reads_and_quick_overrides_loads():
    spec = load_sweep_spec(SWEEP)
    quick = load_sweep_spec(SWEEP, quick=True)
    assert len(spec.loads) >= 6 and min(spec.loads) < 1 < max(spec.loads)
    assert quick.loads == [0.5, 1.5] and quick.step_s < spec.step_s


@pytest.mark.parametrize("changes, message", [
    ({"bottleneck": ["s1", "h3"]}, "no link between s1 and h3"),
    ({"bottleneck": ["h1", "s1"]}, "h1 is not a switch"),
    ({"senders": ["h1", "h9"]}, r"senders\[1\]: no host 'h9' in dumbbell:2"),
    ({"receiver": "h7"}, "receiver: no host 'h7'"),
    ({"receiver": "h1"}, "receiver: h1 is also a sender"),
    ({"loads": [0.5, -1]}, r"loads\[1\]: -1 must be positive"),
    ({"loads": []}, "loads: expected a non-empty list"),
    ({"bottleneck": ["s1"]}, r"bottleneck: expected at least 2 items, got list \['s1'\]"),
    ({"link": {"rate_bps": 4000000, "ecn_threshold": 9}}, "ecn_threshold = 9 exceeds trim_threshold"),
    ({"link": {"delay_s": 1e-6}}, "link.delay_s: unknown field; expected one of rate_bps, queue_depth"),
    ({"link": {"queue_depth": "deep"}}, "link.queue_depth: expected an integer, got str 'deep'"),
    ({"speed": 3}, "speed: unknown field; expected one of bottleneck, description,"),
    ({"step_s": 0}, "step_s: 0 must be positive"),
])
def test_a_bad_sweep_file_names_the_key(tmp_path, changes, message):
    with pytest.raises(SweepError, match=message):
        load_sweep_spec(write(tmp_path, **changes))


def test_the_senders_share_the_load_on_paths_through_the_bottleneck():
    spec = load_sweep_spec(SWEEP)
    topo = spec.topology_built()
    gens = sender_specs(spec, topo, 1.5)
    frame_bits = 8 * (spec.payload_bytes + 106)
    assert sum(g["rate_pps"] for g in gens.values()) * frame_bits == pytest.approx(1.5 * spec.link["rate_bps"])
    assert all(g["paths"] for g in gens.values())


def test_depth_figures_come_from_the_histogram():
    step = LoadStep(1.0, 1.0, 10, 0, 0, 10, depth_hist=[4, 0, 3, 0, 2, 1] + [0] * 26, sender_late_max_s=0.0)
    assert step.depth_quantile(0.5) == 2 and step.depth_quantile(0.99) == 5
    assert step.depth_mean == pytest.approx((0 * 4 + 2 * 3 + 4 * 2 + 5) / 10)


TARGETS = [pytest.param("model"),
           pytest.param("bmv2", marks=pytest.mark.skipif(bool(missing("requires_bmv2")),
                                                         reason=str(missing("requires_bmv2"))))]


@pytest.mark.requires_mininet
@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_quick_sweep_trims_and_marks_only_above_the_link_rate(tmp_path, target):
    spec = load_sweep_spec(SWEEP, quick=True)
    link = spec.topology_built().link_between(*spec.bottleneck)
    light, heavy = run_sweep(spec, target, tmp_path, progress=lambda line: None)
    assert light.offered_load == pytest.approx(0.5, abs=0.1) and heavy.offered_load == pytest.approx(1.5, abs=0.15)
    assert light.trimmed == 0 and light.depth_quantile(0.99) < link.trim_threshold
    # above the rate about a third must go: trimmed, not lost (the bottleneck sent every arrival)
    assert 0.2 < heavy.trimmed_share < 0.5
    assert heavy.tx == heavy.arrived
    assert heavy.ecn_share > 0.2
    assert link.ecn_threshold <= heavy.depth_quantile(0.99) <= link.trim_threshold
    assert sum(heavy.depth_hist) == heavy.arrived


def test_a_sweep_file_is_not_a_scenario_and_each_loader_says_which_command_runs_it(tmp_path):
    from experiments.scenario import ScenarioError, load_scenario
    with pytest.raises(ScenarioError, match="run it with `mrc-testbed sweep"):
        load_scenario(SWEEP)
    with pytest.raises(SweepError, match="scenarios run with `mrc-testbed run`"):
        load_sweep_spec(ROOT / "experiments" / "failover.yaml")
