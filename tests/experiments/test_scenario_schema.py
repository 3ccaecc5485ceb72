"""The scenario models: the shipped JSON Schema is current and agrees with the loader, and a
transport registered at run time is a valid mode."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from experiments import schema
from experiments.scenario import ScenarioError, parse_scenario
from host_agent.transport import kinds

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = [p for p in sorted((ROOT / "experiments").glob("*.yaml"))
             if yaml.safe_load(p.read_text()).get("kind") != "load-sweep"]


def test_the_shipped_schema_is_what_the_models_export():
    assert schema.is_current(), "experiments/scenario.schema.json is stale: run `python -m experiments.schema`"


def test_a_stale_schema_file_is_told_apart(tmp_path):
    stale = tmp_path / "scenario.schema.json"
    stale.write_text(schema.schema_text().replace('"minimum": 0', '"minimum": 1', 1))
    assert not schema.is_current(stale)
    assert schema.is_current(schema.write(tmp_path / "fresh.json"))


def test_every_shipped_scenario_fits_the_schema_and_a_broken_one_does_not():
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json.loads(schema.SCHEMA_FILE.read_text()))
    assert len(SCENARIOS) >= 5
    for path in SCENARIOS:
        doc = yaml.safe_load(path.read_text())
        assert [e.message for e in validator.iter_errors(doc)] == [], path.name
    doc = yaml.safe_load((ROOT / "experiments" / "failover.yaml").read_text())
    doc["faults"] = [{"kind": "link_kill", "at": "soon"}]
    doc["horizon_s"] = "long"
    assert len(list(validator.iter_errors(doc))) == 2


def test_every_shipped_scenario_names_the_schema_for_editors():
    for path in SCENARIOS:
        assert path.read_text().startswith("# yaml-language-server: $schema=scenario.schema.json\n"), path.name


def test_a_registered_transport_is_a_valid_mode_and_an_unknown_one_is_named():
    doc = {"name": "x", "topology": "dumbbell:2", "workload": {"kind": "allreduce", "bytes": 4096},
           "transports": [{"mode": "mrc-test-kind"}]}
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc)
    assert info.value.field == "transports[0].mode" and "'mrc-test-kind' is not one of mrc, roce" in str(info.value)
    kinds.register_transport("mrc-test-kind", kinds.builder("mrc"))
    try:
        scenario = parse_scenario(doc)
    finally:
        del kinds.TRANSPORTS["mrc-test-kind"]
    assert scenario.transports[0].mode == "mrc-test-kind" and scenario.transports[0].name == "mrc-test-kind"
