"""Named switch settings (`link.switch_profile`, experiments/switch_profiles.py)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from experiments import switch_profiles
from experiments.scenario import ScenarioError, parse_scenario

DATACENTER = Path(__file__).resolve().parents[2] / "experiments" / "datacenter.yaml"


def datacenter(**link) -> dict:
    doc = yaml.safe_load(DATACENTER.read_text(encoding="utf-8"))
    doc["link"] = {**doc["link"], **link}
    return doc


def test_htsim_defaults_are_one_bdp_and_a_ramp_from_a_fifth_to_four_fifths_of_it():
    bdp = switch_profiles.htsim_bdp_packets(4, 1e-6, 100e9, 4096)
    # htsim's RTT: 8 us of cables and 4 hops of a 4,160-byte packet and a 64-byte ACK
    assert bdp == -(-(8e-6 + 4 * 4224 * 8 / 100e9) * 100e9 / 8 // 4160)
    fields = switch_profiles.profile_fields("htsim-defaults", 4, 1e-6, 100e9, 4096)
    assert fields["queue_depth"] == fields["trim_threshold"] == bdp
    assert fields["ecn_threshold"] == -(-bdp * 2 // 10) and fields["ecn_max_threshold"] == -(-bdp * 8 // 10)


def test_a_scenario_names_the_profile_and_its_links_get_the_thresholds():
    scenario = parse_scenario(datacenter(switch_profile="htsim-defaults"), str(DATACENTER))
    expected = switch_profiles.profile_fields("htsim-defaults", 4, 1e-6, 100e9, 4096)
    for variant in scenario.variants:
        assert {k: variant.link[k] for k in expected} == expected
    plain = parse_scenario(datacenter(), str(DATACENTER))
    assert plain.variants[0].link["trim_threshold"] != expected["trim_threshold"]


def test_the_profile_follows_the_fabric():
    slower = switch_profiles.profile_fields("htsim-defaults", 4, 1e-6, 25e9, 4096)
    longer = switch_profiles.profile_fields("htsim-defaults", 4, 4e-6, 100e9, 4096)
    base = switch_profiles.profile_fields("htsim-defaults", 4, 1e-6, 100e9, 4096)
    assert slower["queue_depth"] < base["queue_depth"] < longer["queue_depth"]


@pytest.mark.parametrize("link, words", [({"switch_profile": "tofino"}, "'tofino' is not one of"),
                                         ({"switch_profile": "htsim-defaults", "rate_bps": "auto"}, "needs rate_bps")])
def test_a_bad_profile_is_named(link, words):
    with pytest.raises(ScenarioError) as error:
        parse_scenario(datacenter(**link), str(DATACENTER))
    assert "link.switch_profile" in str(error.value) and words in str(error.value)
