"""The scenario and sweep models: the shipped JSON Schemas are current and agree with the loaders,
and a transport registered at run time is a valid mode."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from experiments import schema
from experiments.scenario import ScenarioError, parse_scenario
from host_agent.transport import kinds

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "experiments").glob("*.yaml"))
SWEEPS = [p for p in FILES if yaml.safe_load(p.read_text()).get("kind") == "load-sweep"]
SCENARIOS = [p for p in FILES if p not in SWEEPS]


def test_the_shipped_schemas_are_what_the_models_export():
    for path in (schema.SCHEMA_FILE, schema.SWEEP_SCHEMA_FILE):
        assert schema.is_current(path), f"{path.name} is stale: run `python -m experiments.schema`"


def test_a_stale_schema_file_is_told_apart(tmp_path):
    stale = tmp_path / "scenario.schema.json"
    stale.write_text(schema.schema_text().replace('"minimum": 0', '"minimum": 1', 1))
    assert not schema.is_current(stale)
    assert schema.is_current(schema.write(stale))
    assert not schema.is_current(tmp_path / "sweep.schema.json")             # missing
    assert schema.is_current(schema.write(tmp_path / "fresh.json", "sweep.schema.json"), "sweep.schema.json")


def test_every_shipped_file_fits_its_schema_and_a_broken_one_does_not():
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json.loads(schema.SCHEMA_FILE.read_text()))
    sweeps = jsonschema.Draft202012Validator(json.loads(schema.SWEEP_SCHEMA_FILE.read_text()))
    assert len(SCENARIOS) >= 5 and SWEEPS
    for path in SCENARIOS:
        doc = yaml.safe_load(path.read_text())
        assert [e.message for e in validator.iter_errors(doc)] == [], path.name
        assert list(sweeps.iter_errors(doc)), f"{path.name} passes for a sweep file"
    for path in SWEEPS:
        assert [e.message for e in sweeps.iter_errors(yaml.safe_load(path.read_text()))] == [], path.name
    doc = yaml.safe_load((ROOT / "experiments" / "failover.yaml").read_text())
    doc["faults"] = [{"kind": "link_kill", "at": "soon"}]
    doc["horizon_s"] = "long"
    assert len(list(validator.iter_errors(doc))) == 2


def test_every_shipped_file_names_its_schema_for_editors():
    for paths, name in ((SCENARIOS, "scenario"), (SWEEPS, "sweep")):
        for path in paths:
            assert path.read_text().startswith(f"# yaml-language-server: $schema={name}.schema.json\n"), path.name


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
