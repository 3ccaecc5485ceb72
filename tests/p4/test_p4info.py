"""p4/build/mrc.p4info.txtpb is a valid P4Info carrying the switch pipeline contract.

The contract (docs/design.md, "Switch pipeline contract") is written out below as data: every
table with its keys and actions, every action with its parameters, every counter and register,
with their bit widths. The committed P4Info must match it exactly, so that the controller, the
reference model and BMv2 agree on names.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

REPO = Path(__file__).resolve().parents[2]
P4INFO = REPO / "p4" / "build" / "mrc.p4info.txtpb"
P4_SOURCE = REPO / "p4" / "mrc.p4"

EXACT, LPM = p4info_pb2.MatchField.EXACT, p4info_pb2.MatchField.LPM

# table -> (keys [(name, bitwidth, match type)], actions, default-only actions, const default)
TABLES = {
    "MrcIngress.usid_local": ([("dst_usid_prefix", 48, EXACT)],
                              {"MrcIngress.usid_shift", "NoAction"}, set(), "NoAction"),
    "MrcIngress.routing": ([("dst_addr", 128, LPM)],
                           {"MrcIngress.forward", "MrcIngress.ecmp_select"},
                           {"MrcIngress.drop_no_route"}, "MrcIngress.drop_no_route"),
    "MrcIngress.ecmp_member": ([("group", 16, EXACT), ("index", 16, EXACT)],
                               {"MrcIngress.forward"}, {"MrcIngress.drop_no_route"},
                               "MrcIngress.drop_no_route"),
    "MrcIngress.port_fault": ([("port", 9, EXACT)],
                              {"MrcIngress.fault_drop", "MrcIngress.fault_drop_random", "NoAction"},
                              set(), "NoAction"),
    "MrcIngress.port_config": ([("port", 9, EXACT)],
                               {"MrcIngress.set_port_config", "NoAction"}, set(), "NoAction"),
}

# action -> [(param, bitwidth)] in declaration order
ACTIONS = {
    "NoAction": [],
    "MrcIngress.usid_shift": [],
    "MrcIngress.forward": [("port", 9)],
    "MrcIngress.ecmp_select": [("group", 16), ("size", 16)],
    "MrcIngress.drop_no_route": [],
    "MrcIngress.fault_drop": [],
    "MrcIngress.fault_drop_random": [("drop_ppm", 32)],
    "MrcIngress.set_port_config": [("trim_threshold", 19), ("ecn_threshold", 19), ("host_facing", 1),
                                   ("ecn_max_threshold", 19)],
}

COUNTERS = {"MrcIngress.rx", "MrcIngress.malformed_drops", "MrcIngress.no_route_drops",
            "MrcIngress.fault_drops", "MrcIngress.trimmed", "MrcIngress.ecn_marked", "MrcEgress.tx"}
HISTOGRAMS = {"MrcIngress.queue_depth_seen": 512 * 32}      # per port x 32 queue-depth buckets
REGISTERS = {"MrcIngress.queued_low": 32}
PORT_ARRAY_SIZE = 512

# Top byte of a P4Runtime id names the kind of object (p4info.proto, P4Ids.Prefix).
PREFIX = {"tables": p4info_pb2.P4Ids.TABLE, "actions": p4info_pb2.P4Ids.ACTION,
          "counters": p4info_pb2.P4Ids.COUNTER, "registers": p4info_pb2.P4Ids.REGISTER}


@pytest.fixture(scope="module")
def p4info() -> p4info_pb2.P4Info:
    info = p4info_pb2.P4Info()
    text_format.Parse(P4INFO.read_text(), info)
    return info


@pytest.fixture(scope="module")
def actions_by_id(p4info) -> dict[int, p4info_pb2.Action]:
    return {a.preamble.id: a for a in p4info.actions}


def test_architecture_is_v1model(p4info):
    assert p4info.pkg_info.arch == "v1model"


def test_exactly_the_contract_objects(p4info):
    assert {t.preamble.name for t in p4info.tables} == set(TABLES)
    assert {a.preamble.name for a in p4info.actions} == set(ACTIONS)
    assert {c.preamble.name for c in p4info.counters} == COUNTERS | set(HISTOGRAMS)
    assert {r.preamble.name for r in p4info.registers} == set(REGISTERS)


def test_ids_are_unique_and_carry_their_kind(p4info):
    seen = set()
    for kind, prefix in PREFIX.items():
        for obj in getattr(p4info, kind):
            assert obj.preamble.id >> 24 == prefix, f"{obj.preamble.name}: id {obj.preamble.id:#x} not in {kind}"
            assert obj.preamble.id not in seen, f"{obj.preamble.name}: duplicate id"
            seen.add(obj.preamble.id)


@pytest.mark.parametrize("table_name", sorted(TABLES))
def test_table_keys_and_actions(p4info, actions_by_id, table_name):
    keys, actions, default_only, default = TABLES[table_name]
    table = next(t for t in p4info.tables if t.preamble.name == table_name)
    assert [(m.name, m.bitwidth, m.match_type) for m in table.match_fields] == keys
    assert [m.id for m in table.match_fields] == list(range(1, len(keys) + 1))
    refs = {actions_by_id[r.id].preamble.name: r.scope for r in table.action_refs}
    assert set(refs) == actions | default_only
    for name in default_only:
        assert refs[name] == p4info_pb2.ActionRef.DEFAULT_ONLY, f"{table_name}: {name} not default-only"
    for name in actions:
        assert refs[name] == p4info_pb2.ActionRef.TABLE_AND_DEFAULT, f"{table_name}: {name}"
    assert actions_by_id[table.const_default_action_id].preamble.name == default
    assert table.size > 0


@pytest.mark.parametrize("action_name", sorted(ACTIONS))
def test_action_params(p4info, action_name):
    action = next(a for a in p4info.actions if a.preamble.name == action_name)
    assert [(p.name, p.bitwidth) for p in action.params] == ACTIONS[action_name]
    assert [p.id for p in action.params] == list(range(1, len(action.params) + 1))


def test_counters_are_per_port_packets_and_bytes(p4info):
    for counter in p4info.counters:
        assert counter.size == HISTOGRAMS.get(counter.preamble.name, PORT_ARRAY_SIZE), counter.preamble.name
        assert counter.spec.unit == p4info_pb2.CounterSpec.BOTH, counter.preamble.name


def test_registers_are_per_port(p4info):
    for register in p4info.registers:
        assert register.size == PORT_ARRAY_SIZE, register.preamble.name
        width = register.type_spec.bitstring.bit.bitwidth
        assert width == REGISTERS[register.preamble.name], register.preamble.name


def test_every_contract_name_is_declared_in_the_p4_source():
    """The P4Info describes mrc.p4: its actions, tables, key names and externs are declared there."""
    source = P4_SOURCE.read_text()
    for name in set(TABLES):
        assert re.search(rf"\btable\s+{name.split('.')[-1]}\s*\{{", source), f"{P4_SOURCE}: no table {name}"
    for name, params in ACTIONS.items():
        if name == "NoAction":
            continue
        short = name.split(".")[-1]
        signature = r",\s*".join(re.escape(f"bit<{w}> {p}" if p != "port" else "port_t port") for p, w in params)
        pattern = rf"\baction\s+{short}\s*\(\s*{signature}\s*\)"
        assert re.search(pattern, source), f"{P4_SOURCE}: no action {short}({signature})"
    for keys, *_ in TABLES.values():
        for key, _, _ in keys:
            assert f'@name("{key}")' in source, f"{P4_SOURCE}: no key named {key}"
    for name in COUNTERS | set(HISTOGRAMS):
        assert re.search(rf"\)\s*{name.split('.')[-1]}\s*;", source), f"{P4_SOURCE}: no counter {name}"
    for name in REGISTERS:
        assert f'@name("{name}")' in source, f"{P4_SOURCE}: no register {name}"
