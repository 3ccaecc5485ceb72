"""Scenario files fuzzed: any mutation of a valid scenario parses or fails with a ScenarioError
that names a field; no other exception escapes."""
from __future__ import annotations

import copy
import json

import pytest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.scenario import ScenarioError, parse_scenario

VALID = {
    "name": "fuzz", "title": "Fuzz", "seed": 1, "horizon_s": 2.0, "sample_interval_s": 0.01,
    "topology": "leafspine:2x2x1", "link": {"rate_bps": 20_000_000, "queue_depth": 64},
    "workload": {"kind": "allreduce", "bytes": 65536, "chunk_bytes": 16384},
    "faults": [{"kind": "link_kill", "link": "auto", "at": "30%"},
               {"kind": "gray_loss", "link": ["s1", "s3"], "loss": 0.2, "at": 0.1}],
    "transports": [{"name": "MRC", "mode": "mrc", "params": {"num_evs": 32}},
                   {"name": "RoCE", "mode": "roce", "reroute_delay_s": 1.0}],
    "variants": [{"label": "a"}, {"label": "b", "workload": {"bytes": 32768}}],
    "quick": {"workload": {"bytes": 16384}},
}

junk = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                 st.text(max_size=12), st.lists(st.integers(), max_size=3),
                 st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))


def paths(doc, prefix=()):
    """Every (path, value) inside a nested dict/list."""
    yield prefix, doc
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from paths(value, prefix + (key,))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from paths(value, prefix + (i,))


ALL_PATHS = [p for p, _ in paths(VALID) if p]


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(ALL_PATHS), junk, st.booleans()), min_size=1, max_size=3),
       st.booleans())
def test_mutated_scenarios_fail_only_with_a_named_field(mutations, quick):
    doc = copy.deepcopy(VALID)
    for path, value, delete in mutations:
        parent = doc
        try:
            for key in path[:-1]:
                parent = parent[key]
            if delete and isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    try:
        scenario = parse_scenario(json.loads(json.dumps(doc, default=str)), "fuzz.yaml", quick=quick)
    except ScenarioError as error:
        assert str(error).startswith("fuzz.yaml")
        assert error.reason
    else:
        assert scenario.cases()
        assert 0 < scenario.sample_interval_s < scenario.horizon_s < float("inf")
