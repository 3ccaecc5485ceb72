"""Fuzz the files users write: topology YAML, agent job JSON, experiment scenario YAML.

Every mutation of a valid file — edits of its text (characters, lines, truncation) and edits of
its structure (a field deleted, given another type or a wild value, a list emptied) — must either
load or raise the loader's own error type (TopologyFileError, JobError, ScenarioError) whose
message names the file and where in it (a line, or a field); never a bare KeyError, TypeError,
AttributeError or anything else. (tests/experiments/test_experiments_fuzz.py already mutates scenario
*dicts*; here the files themselves are mutated, text included.)
"""
from __future__ import annotations

import copy
import json
import random
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.load_sweep import SweepError, load_sweep_spec
from experiments.scenario import ScenarioError, load_scenario
from host_agent.job import JobError, load_job
from topologies.yamlfile import TopologyFileError, load_topology

REPO = Path(__file__).resolve().parents[2]
FUZZ = settings(max_examples=120, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def valid_job() -> dict:
    """Rank 0 of an all-reduce over 3 hosts, two planes (every field kind a job has)."""
    def nic(rank, plane, own):
        entry = {"plane": plane, "mac": f"02:00:{plane:02x}:00:10:{rank:02x}",
                 "address": f"fc00:{plane}:{0x1000 + rank:x}::"}
        return {**entry, "name": f"h{rank}-eth{plane}"} if own else entry
    peers = [{"rank": r, "qp": 0x100 + r, "remote_qp": 0x200, "nics": [nic(r, 0, False), nic(r, 1, False)],
              "paths": {str(p): [f"fc00:{p}:100:{0x1000 + r:x}::", f"fc00:{p}:101:{0x1000 + r:x}::"]
                        for p in (0, 1)}} for r in (1, 2)]
    return {"rank": 0, "world_size": 3, "host": "h0", "nics": [nic(0, 0, True), nic(0, 1, True)],
            "peers": peers, "transport": {"mode": "mrc", "config": {"num_evs": 32, "qp_timeout": 10}},
            "workload": {"kind": "allreduce", "elements": 1000, "dtype": "float32", "chunk_bytes": 4096},
            "timeout": 5, "log": "/tmp/never-written.jsonl"}


class Kind:
    """One kind of file: its loader, its error type, valid examples, how it is written."""

    def __init__(self, name, load, error, texts, suffix, dump, use):
        self.name, self.load, self.error, self.texts, self.suffix, self.dump, self.use = \
            name, load, error, texts, suffix, dump, use


def use_topology(topo) -> None:
    """A loaded topology gets its switch programs and host paths computed."""
    from controller.routes import compute_programs
    from topologies.paths import host_paths
    if len(topo.hosts) > 64:              # valid but large (routes grow with hosts x switches)
        return
    compute_programs(topo)
    hosts = [h.name for h in topo.hosts]
    if len(hosts) > 1:
        host_paths(topo, hosts[0], hosts[-1])


def use_job(job) -> None:
    """A loaded job gives its transport configuration and round-trips."""
    from host_agent.job import parse_job
    job.transport_config()
    assert parse_job(json.loads(json.dumps(job.to_dict())), "again") == job


def use_scenario(scenario) -> None:
    """A loaded scenario lists its cases and each case's topology builds."""
    from experiments.workloads import variant_topology
    assert scenario.cases()
    for variant in scenario.variants:
        variant_topology(variant)


def _yaml_files(*globs, sweeps: bool = False) -> list[str]:
    """The texts of the files matching `globs`: the load sweeps' (`kind: load-sweep`) or the others'."""
    texts = [p.read_text() for g in globs for p in sorted(REPO.glob(g))]
    return [t for t in texts if ("kind: load-sweep" in t) == sweeps]


def use_sweep(spec) -> None:
    """A loaded sweep builds its topology and each sender's load generator."""
    from experiments.load_sweep import sender_specs
    topo = spec.topology_built()
    for load in spec.loads:
        sender_specs(spec, topo, load)


KINDS = {
    "topology": Kind("topology", load_topology, TopologyFileError,
                     _yaml_files("topologies/examples/*.yaml"), ".yaml",
                     lambda doc: yaml.safe_dump(doc, sort_keys=False), use_topology),
    "job": Kind("job", load_job, JobError, [json.dumps(valid_job(), indent=1)], ".json",
                lambda doc: json.dumps(doc, indent=1), use_job),
    "scenario": Kind("scenario", load_scenario, ScenarioError, _yaml_files("experiments/*.yaml"), ".yaml",
                     lambda doc: yaml.safe_dump(doc, sort_keys=False), use_scenario),
    "sweep": Kind("sweep", load_sweep_spec, SweepError, _yaml_files("experiments/*.yaml", sweeps=True), ".yaml",
                  lambda doc: yaml.safe_dump(doc, sort_keys=False), use_sweep),
}

# --- mutations ------------------------------------------------------------------------------------
SPECIAL = list(":-[]{},#'\"&*!|> \n\t0123456789.%") + ["", "null", "-1", "1e309", "true", "x"]
JUNK = [None, True, -1, 0, 2**70, 1e309, float("nan"), -0.5, "", "x", "30%", "-5%", [], [1, "a"], {}, {"a": 1},
        "leafspine:0x0x0", "fc00::", "02:00:00:00:00:00", "ff:ff", "9999999999"]


def mutate_text(text: str, rng: random.Random) -> str:
    """An edit of the file's text."""
    lines = text.splitlines(keepends=True)
    action = rng.randrange(6)
    if action == 0 and text:                          # replace a few characters
        chars = list(text)
        for _ in range(rng.randint(1, 3)):
            chars[rng.randrange(len(chars))] = rng.choice(SPECIAL)
        return "".join(chars)
    if action == 1 and lines:                         # delete a line
        del lines[rng.randrange(len(lines))]
    elif action == 2 and lines:                       # duplicate a line
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
    elif action == 3:                                 # truncate
        return text[:rng.randrange(len(text) + 1)]
    elif action == 4 and len(lines) > 1:              # swap two lines
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif action == 5 and lines:                       # re-indent a line
        i = rng.randrange(len(lines))
        lines[i] = " " * rng.randrange(5) + lines[i].lstrip(" ")
    return "".join(lines)


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from _paths(value, prefix + (i,))


def mutate_tree(doc, rng: random.Random):
    """An edit of the document's structure: a value replaced, a field deleted, a list emptied."""
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            return copy.deepcopy(rng.choice(JUNK))
        path = rng.choice(paths)
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        action = rng.randrange(4)
        if action == 0 and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == 1 and isinstance(parent[path[-1]], (list, dict)):
            parent[path[-1]] = type(parent[path[-1]])()
        elif action == 2 and isinstance(parent, dict):
            parent[rng.choice(["x", "extra", str(path[-1]).upper()])] = copy.deepcopy(rng.choice(JUNK))
        else:
            parent[path[-1]] = copy.deepcopy(rng.choice(JUNK))
    return doc


def assert_loads_or_names_where(kind: Kind, text: str, tmp_path: Path) -> None:
    path = tmp_path / f"fuzzed{kind.suffix}"
    path.write_text(text)
    try:
        loaded = kind.load(str(path))
    except kind.error as error:
        message = str(error)
        assert message.startswith(str(path)), f"the error does not name the file: {message}"
        rest = message[len(str(path)):]
        assert re.match(r"^(:\d+: |: line \d+|: [\w\[\]\.\-]+: |: )\S", rest), \
            f"the error names neither a line nor a field: {message}"
        return
    # any other exception fails the test by itself; what loads must be usable downstream
    kind.use(loaded)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(KINDS))
def test_text_edits_of_valid_files_load_or_fail_naming_the_file_and_where(name, tmp_path):
    kind = KINDS[name]
    assert kind.texts, f"no valid {name} files to start from"

    @FUZZ
    @given(index=st.integers(0, len(kind.texts) - 1), seed=st.integers(0, 2**32 - 1),
           rounds=st.integers(1, 3))
    def check(index, seed, rounds):
        rng = random.Random(seed)
        text = kind.texts[index]
        for _ in range(rounds):
            text = mutate_text(text, rng)
        assert_loads_or_names_where(kind, text, tmp_path)
    check()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(KINDS))
def test_structure_edits_of_valid_files_load_or_fail_naming_the_file_and_where(name, tmp_path):
    kind = KINDS[name]
    docs = [yaml.safe_load(text) for text in kind.texts]

    @FUZZ
    @given(index=st.integers(0, len(docs) - 1), seed=st.integers(0, 2**32 - 1))
    def check(index, seed):
        doc = mutate_tree(docs[index], random.Random(seed))
        try:
            text = kind.dump(doc)
        except ValueError:                       # e.g. JSON cannot hold nan in strict mode
            return
        assert_loads_or_names_where(kind, text, tmp_path)
    check()


@pytest.mark.parametrize("name", sorted(KINDS))
def test_the_valid_files_themselves_load(name, tmp_path):
    kind = KINDS[name]
    for text in kind.texts:
        path = tmp_path / f"valid{kind.suffix}"
        path.write_text(text)
        kind.use(kind.load(str(path)))


@pytest.mark.slow
@pytest.mark.parametrize("params, field", [("{leaves: 4, spines: 2, hosts_per_leaf: 1180591620717411303424}", "hosts"),
                                           ("{leaves: 99999, spines: 2, hosts_per_leaf: 1}", "hosts"),
                                           ("{leaves: 4, spines: 99999, hosts_per_leaf: 1}", "switches")])
def test_huge_builder_counts_are_refused_before_memory_runs_out(params, field, tmp_path):
    """Found by the fuzzing above: counts beyond the addressing plan once built until memory ran out."""
    path = tmp_path / "huge.yaml"
    path.write_text(f"builder: leafspine\nparams: {params}\n")
    with pytest.raises(TopologyFileError, match=rf"huge.yaml:2: .*more than \d+ {field}"):
        load_topology(str(path))
