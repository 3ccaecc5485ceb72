"""`python -m experiments.datacenter_seeds --table` and `--switch-profile`: which runs they make
(the runs themselves are the sweep's; one cheap one runs here)."""
from __future__ import annotations

from experiments import datacenter_seeds
from experiments import switch_profiles
from experiments.scenario import parse_scenario


def test_the_table_runs_both_settings_the_big_incast_and_held_out_cases():
    items = datacenter_seeds.table_items()
    tuned_on = [i for group, i in items if group == "tuned on"]
    held_out = [i for group, i in items if group == "held out"]
    assert {i.profile for i in tuned_on} == {i.profile for i in held_out} == set(datacenter_seeds.PROFILES)
    for profile in datacenter_seeds.PROFILES:
        for variant in datacenter_seeds.VARIANTS:
            assert sorted(i.seed for i in tuned_on if i.profile == profile and i.name == variant) == list(datacenter_seeds.TABLE_SEEDS)
        big = [i for i in tuned_on if i.profile == profile and i.topology == datacenter_seeds.BIG_INCAST["topology"]]
        assert len(big) == len(datacenter_seeds.TABLE_SEEDS)
    assert not {i.seed for i in held_out if not i.quick and i.name.endswith("seeds 9-16")} & set(datacenter_seeds.TABLE_SEEDS)
    assert {dict(i.workload).get("kind") for i in held_out} >= {"allreduce", "alltoall"}


def test_an_item_carries_its_switch_profile_and_changes_into_the_scenario():
    item = datacenter_seeds.Item("incast", 3, profile=switch_profiles.HTSIM_DEFAULTS, topology="leafspine:8x8x8",
                  workload=(("senders", 15),))
    scenario = parse_scenario(datacenter_seeds.scenario_doc(item), str(datacenter_seeds.DATACENTER), seed=item.seed)
    variant = next(v for v in scenario.variants if v.label == "incast")
    assert variant.topology == "leafspine:8x8x8" and variant.workload.senders == 15
    profiled = switch_profiles.profile_fields(switch_profiles.HTSIM_DEFAULTS, 4, 1e-6, 100e9, 4096)
    assert variant.link["trim_threshold"] == profiled["trim_threshold"]
    plain = parse_scenario(datacenter_seeds.scenario_doc(datacenter_seeds.Item("incast", 3)), str(datacenter_seeds.DATACENTER), seed=3)
    assert next(v for v in plain.variants if v.label == "incast").link["trim_threshold"] != profiled["trim_threshold"]


def test_both_settings_print_one_block_each(capsys):
    assert datacenter_seeds.main(["--quick", "--variant", "incast", "--seeds", "1",
                   "--switch-profile", "scenario", "--switch-profile", "htsim-defaults"]) == 0
    out = capsys.readouterr().out
    assert "scenario: incast" in out and "htsim-defaults: incast" in out
