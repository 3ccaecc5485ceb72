"""The htsim exporter: netsim cases as htsim_uec's topology file, connection matrix and options
(golden files in tests/data/htsim/export/), and the settings it refuses, each named.

Regenerate the golden files after an intended change with
    MRC_REGEN_HTSIM_GOLDEN=1 python -m pytest -q tests/experiments/test_htsim_inputs.py
and read the diff before committing it.
"""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from experiments.backends.htsim import Unmappable, export_case
from experiments.backends.htsim.inputs import FabricShape
from experiments.scenario import load_scenario
from experiments.workloads import variant_topology

ROOT = Path(__file__).resolve().parents[2]
DATACENTER = ROOT / "experiments" / "datacenter.yaml"
GOLDEN = ROOT / "tests" / "data" / "htsim" / "export"
REGEN = os.environ.get("MRC_REGEN_HTSIM_GOLDEN") == "1"


def case_of(path: Path, variant: str, mode: str = "mrc", seed: int = 1):
    scenario = load_scenario(path, seed=seed)
    return next(c for c in scenario.cases() if c.variant.label == variant and c.transport.mode == mode)


def scenario_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(body))
    return path


FAT_TREE = """
    name: ft
    title: fat-tree
    seed: 3
    horizon_s: 0.01
    topology: fattree:4
    link: {rate_bps: 100000000000, delay_s: 5.0e-7, mtu_payload: 4096, queue_depth: 64, trim_threshold: 32,
           ecn_threshold: 8}
    workload: {kind: permutation, bytes: 1048576, chunk_bytes: 262144}
    transports: [{name: MRC, mode: mrc, params: {num_evs: 64}}]
    variants: [{label: permutation}]
"""


def check_golden(name: str, inputs) -> None:
    folder = GOLDEN / name
    files = {"topology.topo": inputs.topology_text, "flows.cm": inputs.matrix_text,
             "options.txt": " ".join(inputs.options) + "\n"}
    if REGEN:
        folder.mkdir(parents=True, exist_ok=True)
        for file, text in files.items():
            (folder / file).write_text(text)
    for file, text in files.items():
        assert text == (folder / file).read_text(), f"{name}/{file} differs from the golden file"


@pytest.mark.parametrize("variant, name", [("incast", "incast"), ("permutation", "permutation"),
                                           ("permutation, gray spine", "permutation-gray-spine")])
def test_datacenter_cases_export_as_the_golden_files(variant, name):
    check_golden(name, export_case(case_of(DATACENTER, variant)))


def test_a_fat_tree_exports_three_tiers_pod_by_pod(tmp_path):
    inputs = export_case(case_of(scenario_file(tmp_path, FAT_TREE), "permutation", seed=3))
    check_golden("fattree4-permutation", inputs)
    assert "Tiers 3" in inputs.topology_text and "-paths 64" in " ".join(inputs.options)
    assert "-ecn 8 8" in " ".join(inputs.options)          # a step: no ecn_max_threshold


def test_hosts_are_numbered_leaf_by_leaf_as_htsim_places_them():
    topo = variant_topology(case_of(DATACENTER, "permutation").variant)
    shape = FabricShape.of(topo)
    for i, host in enumerate(shape.hosts):
        leaf = topo.host_nics(host)[0].switch
        assert [topo.host_nics(h)[0].switch for h in shape.hosts[(i // 4) * 4:(i // 4) * 4 + 4]] == [leaf] * 4


def test_the_matrix_carries_every_flow_with_its_id_and_size():
    case = case_of(DATACENTER, "incast")
    inputs = export_case(case)
    lines = [line for line in inputs.matrix_text.splitlines() if "->" in line]
    assert len(lines) == len(inputs.flows) == 7
    receiver = inputs.hosts.index(inputs.flows[0].dst)
    assert all(line.split()[0].endswith(f"->{receiver}") for line in lines)
    assert [int(line.split()[2]) for line in lines] == list(range(1, 8))


def test_htsim_default_settings_leave_the_thresholds_to_htsim():
    options = " ".join(export_case(case_of(DATACENTER, "permutation"), settings="htsim").options)
    assert "-q " not in options and "-ecn" not in options


def test_no_trimming_maps_to_a_drop_tail_queue_of_the_queue_depth(tmp_path):
    body = FAT_TREE.replace("params: {num_evs: 64}", "trimming: false")
    options = export_case(case_of(scenario_file(tmp_path, body), "permutation", seed=3)).options
    assert "-disable_trim" in options and options[options.index("-q") + 1] == "64"


@pytest.mark.parametrize("body_change, words", [
    (("topology: fattree:4", "topology: multiplane:2x2x2x2"), "2 planes"),
    (("topology: fattree:4", "topology: dumbbell:2"), "tiers"),
    (("variants: [{label: permutation}]",
      "variants: [{label: permutation, faults: [{kind: link_kill, link: auto, at: 0}]}]"), "link_kill"),
    (("variants: [{label: permutation}]",
      "variants: [{label: permutation, faults: [{kind: switch_slow, switch: auto, share: 0.5, at: 0}]}]"), "share 0.5"),
    (("variants: [{label: permutation}]",
      "variants: [{label: permutation, workload: {kind: allreduce}}]"), "collective"),
    (("mode: mrc, params: {num_evs: 64}", "mode: roce"), "RoCE-style baseline"),
    (("delay_s: 5.0e-7", "delay_s: 5.0e-10"), "nanoseconds"),
])
def test_what_htsim_cannot_express_is_refused_by_name(tmp_path, body_change, words):
    body = FAT_TREE.replace(*body_change)
    assert body != FAT_TREE
    scenario = load_scenario(scenario_file(tmp_path, body), seed=3)
    with pytest.raises(Unmappable, match=words):
        export_case(scenario.cases()[0])


def test_a_slowed_spine_on_three_tiers_and_a_slowed_leaf_are_refused(tmp_path):
    slow = "variants: [{label: permutation, faults: [{kind: switch_slow, switch: auto, share: 0.25, at: 0}]}]"
    scenario = load_scenario(scenario_file(tmp_path, FAT_TREE.replace("variants: [{label: permutation}]", slow)), seed=3)
    with pytest.raises(Unmappable, match="two tiers only"):
        export_case(scenario.cases()[0])
    leaf = DATACENTER.read_text().replace("switch_slow, switch: auto", "switch_slow, switch: s1")   # s1: a leaf (the leaves come first)
    path = tmp_path / "dc.yaml"
    path.write_text(leaf)
    with pytest.raises(Unmappable, match="not a spine"):
        export_case(case_of(path, "permutation, gray spine"))


def test_reps_on_drop_tail_is_refused_and_the_other_balancers_are_not(tmp_path):
    # htsim_uec's REPS exits at its first path timeout without trimming ("REPS currently requires
    # trimming in this implementation"): refused before any run, not a failure half-way
    case = case_of(scenario_file(tmp_path, FAT_TREE.replace("params: {num_evs: 64}", "trimming: false")),
                   "permutation", seed=3)
    with pytest.raises(Unmappable, match="trimming off.*reps.*needs trimming"):
        export_case(case, balancer="reps")
    for balancer in ("oblivious", "bitmap", "mixed"):
        assert "-disable_trim" in export_case(case, balancer=balancer).options
    assert "reps" in export_case(case_of(DATACENTER, "incast"), balancer="reps").options


def test_an_unknown_balancer_or_settings_is_refused():
    case = case_of(DATACENTER, "incast")
    with pytest.raises(Unmappable, match="load balancer 'ecmp'"):
        export_case(case, balancer="ecmp")
    with pytest.raises(Unmappable, match="switch settings 'tuned'"):
        export_case(case, settings="tuned")


def test_named_spines_count_one_each_and_auto_with_names_is_refused(tmp_path):
    topo = variant_topology(case_of(DATACENTER, "permutation").variant)
    spines = [s.name for s in topo.switches if s.tier == 1][:2]
    one = "{kind: switch_slow, switch: auto, share: 0.25, at: 0}"
    two = ", ".join(f"{{kind: switch_slow, switch: {name}, share: 0.25, at: 0}}" for name in spines)
    path = tmp_path / "dc.yaml"
    path.write_text(DATACENTER.read_text().replace(one, two))
    options = export_case(case_of(path, "permutation, gray spine")).options
    assert options[options.index("-failed") + 1] == "2"
    path.write_text(DATACENTER.read_text().replace(one, f"{one}, {two.split('}, ')[0]}}}"))
    with pytest.raises(Unmappable, match="named and 'auto' together"):
        export_case(case_of(path, "permutation, gray spine"))


def test_netsim_sizes_give_htsim_netsims_headers_around_the_same_payload():
    from experiments.backends.htsim.inputs import netsim_packet_sizes
    from wire.packets import Nack, Sack, wire_size
    case = case_of(DATACENTER, "incast")
    own = export_case(case)
    assert own.options[own.options.index("-mtu") + 1] == str(4096 + 64)
    assert "-trimsize" not in own.options and own.env == {}
    sizes = netsim_packet_sizes()
    # the sizes netsim's links count (wire.packets.wire_size), not figures typed in twice
    host = bytes(16)
    sack = Sack(host, host, ev=0, qp=0, cum_psn=0, sack_base=0, bitmap=0, ev_echo=0, ts_echo=0)
    nack = Nack(host, host, ev=0, qp=0, psn=0, cum_psn=0, reason=0, ev_echo=0, ts_echo=0)
    assert (sizes.ack, sizes.nack) == (wire_size(sack), wire_size(nack)) == (102, 94)
    assert (sizes.data_header, sizes.trimmed) == (106, 102)
    assert sizes.data_header - sizes.trimmed == 4          # a trim keeps the headers, not the ICRC
    inputs = export_case(case, sizes=sizes)
    assert inputs.options[inputs.options.index("-mtu") + 1] == str(4096 + 106)
    assert inputs.options[inputs.options.index("-trimsize") + 1] == "102"
    assert inputs.env == {"MRC_DATA_HEADER_BYTES": "106", "MRC_ACK_BYTES": "102", "MRC_NACK_BYTES": "94"}
    assert any("data headers 106" in note for note in inputs.notes)
