"""YAML topology files: examples load, round trip, and bad files name the file, line and reason."""
import glob
import os
import re
import textwrap

import pytest

from topologies.builders import dumbbell, fat_tree, leaf_spine, multi_plane
from topologies.spec import topology_from_spec
from topologies.yamlfile import (TopologyFileError, dumps_topology, format_rate, load_topology,
                                 loads_topology, parse_rate, save_topology)

EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "topologies", "examples")


def test_every_builder_has_an_example_and_examples_load():
    files = sorted(glob.glob(os.path.join(EXAMPLES, "*.yaml")))
    names = {os.path.basename(f) for f in files}
    assert {"dumbbell.yaml", "leafspine.yaml", "fattree.yaml", "multiplane.yaml", "triangle.yaml"} <= names
    for path in files:
        topo = topology_from_spec(path)
        assert topo.hosts and topo.switches


def test_builder_examples_equal_their_specs():
    assert load_topology(os.path.join(EXAMPLES, "leafspine.yaml")) == topology_from_spec("leafspine:4x2x2")
    assert load_topology(os.path.join(EXAMPLES, "fattree.yaml")) == fat_tree(4)
    assert load_topology(os.path.join(EXAMPLES, "multiplane.yaml")) == multi_plane(2, 2, 2, 2)
    assert load_topology(os.path.join(EXAMPLES, "dumbbell.yaml")) == dumbbell(2, bottleneck_rate_bps=10_000_000)


def test_hand_written_example():
    topo = load_topology(os.path.join(EXAMPLES, "triangle.yaml"))
    assert topo.name == "triangle"
    assert topo.neighbor("s1", 1) == ("h1", 0) and topo.neighbor("s3", 2) == ("h6", 0)
    slow = topo.link_between("s2", "s3")
    assert (slow.rate_bps, slow.queue_depth, slow.trim_threshold) == (10_000_000, 32, 8)


@pytest.mark.parametrize("topo", [dumbbell(3, bottleneck_rate_bps=1_500_000), leaf_spine(3, 2, 1),
                                  fat_tree(4), multi_plane(3, 2, 1, 2)], ids=lambda t: t.name)
def test_round_trip(topo, tmp_path):
    path = tmp_path / "t.yaml"
    save_topology(topo, str(path))
    assert load_topology(str(path)) == topo
    assert loads_topology(dumps_topology(topo)) == topo


@pytest.mark.parametrize("text,rate", [("20Mbit", 20_000_000), ("1.5 Gbit/s", 1_500_000_000),
                                       ("500kbps", 500_000), (2_000_000, 2_000_000), ("64000", 64_000)])
def test_parse_rate(text, rate):
    assert parse_rate(text) == rate


@pytest.mark.parametrize("text", ["fast", "20MB", True, "1.0000005kbit", ""])
def test_parse_rate_rejects(text):
    with pytest.raises(ValueError):
        parse_rate(text)


def test_format_rate():
    assert [format_rate(r) for r in (20_000_000, 1_000_000_000, 1_500, 1_234_567)] == [
        "20Mbit", "1Gbit", "1500", "1234567"]
    for rate in (1, 999, 64_000, 1_234_567, 7 * 10**9):
        assert parse_rate(format_rate(rate)) == rate


GOOD = """\
name: pair
hosts: 2
switches:
  - {name: s1}
  - {name: s2, tier: leaf}
links:
  - {a: h1, b: s1}
  - {a: h2, b: s2}
  - {a: s1, b: s2, rate: 5Mbit}
"""


def test_small_explicit_file_with_auto_ports():
    topo = loads_topology(GOOD)
    assert [l.label for l in topo.links] == ["h1:0-s1:1", "h2:0-s2:1", "s1:2-s2:2"]
    assert topo.links[2].rate_bps == 5_000_000
    # automatic ports skip the ones given explicitly anywhere in the file
    topo = loads_topology(GOOD.replace("rate: 5Mbit}", "a_port: 1}"))
    assert [l.label for l in topo.links] == ["h1:0-s1:2", "h2:0-s2:1", "s1:1-s2:2"]


def bad(text, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(textwrap.dedent(text))
    with pytest.raises(TopologyFileError) as info:
        load_topology(str(path))
    assert str(info.value).startswith(f"{path}:") or str(info.value).startswith(str(path))
    return info.value


@pytest.mark.parametrize("text,line,reason", [
    (GOOD.replace("{a: s1, b: s2, rate: 5Mbit}", "{a: s1, b: s9}"), 9, "unknown node 's9'"),
    (GOOD.replace("rate: 5Mbit", "rate: fast"), 9, "rate 'fast'"),
    (GOOD.replace("{a: h2, b: s2}", "{a: h2, b: s2, colour: red}"), 8, "unknown key 'colour'"),
    (GOOD.replace("{name: s2, tier: leaf}", "{name: s2, tier: top}"), 5, "tier 'top'"),
    (GOOD.replace("{a: h2, b: s2}", "{a: h1, b: s2}"), 8, "host h1 already has a NIC on plane 0"),
    (GOOD.replace("{a: h2, b: s2}", "{a: h2, b: s2, b_port: 1, a_port: 0, trim_threshold: 100}"), 8,
     "trim_threshold = 100 exceeds queue_depth"),
    (GOOD.replace("{a: h1, b: s1}", "{a: h1, b: s1, b_port: 1}").replace("rate: 5Mbit}", "a_port: 1}"), 9,
     "port 1 of s1 already used by link h1:0-s1:1"),
    (GOOD.replace("s2", "s7"), 5, "must be named s2"),
    (GOOD.replace("hosts: 2", "hosts: two"), 2, "hosts must be an integer"),
    (GOOD.replace("switches:", "switchs:"), 3, "unknown key 'switchs'"),
    (GOOD.replace("rate: 5Mbit}", "rate: 5Mbit]"), 9, "not valid YAML"),
    ("builder: ring\n", 1, "unknown builder 'ring'"),
    ("builder: fattree\nparams: {k: 3}\n", 2, "even"),
    ("builder: fattree\nparams: {k: 4, pods: 2}\n", 2, "unknown key 'pods'"),
    ("builder: leafspine\nparams: {leaves: 2, spines: 2, hosts_per_leaf: 1}\ndefaults: {ecn_threshold: 9}\n",
     2, "ecn_threshold = 9 exceeds"),
    ("name: x\n", 1, "lacks 'hosts'"),
    ("- 1\n- 2\n", 1, "must be a mapping"),
])
def test_bad_files_name_line_and_reason(text, line, reason, tmp_path):
    error = bad(text, tmp_path)
    assert error.line == line, str(error)
    assert re.search(reason, error.reason), str(error)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(TopologyFileError, match="cannot read"):
        load_topology(str(tmp_path / "none.yaml"))
    (tmp_path / "empty.yaml").write_text("")
    with pytest.raises(TopologyFileError, match="empty file"):
        load_topology(str(tmp_path / "empty.yaml"))


def test_a_tagged_value_that_cannot_be_built_is_named_with_its_line():
    """Found by the file fuzzer: `!!binary` of text that is not base64 escaped as a YAML error."""
    with pytest.raises(TopologyFileError, match=r"t.yaml:3: .*base64"):
        loads_topology("name: x\nbuilder: leafspine\nparams: {leaves: !!binary xx}\n", "t.yaml")


def test_spec_parsing_sits_above_builders_and_files():
    """The dependency goes one way: spec -> yamlfile -> builders; builders imports neither."""
    import ast
    import pathlib

    def imported(module):
        tree = ast.parse(pathlib.Path(__file__).resolve().parents[2].joinpath(
            "topologies", f"{module}.py").read_text())
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
                names.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
        return names

    assert not {"topologies.yamlfile", "topologies.spec"} & imported("builders")
    assert "topologies.spec" not in imported("yamlfile")
