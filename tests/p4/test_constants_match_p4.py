"""The numbers p4/mrc.p4 declares as `const` are the numbers of wire/constants.py."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from wire import constants

P4_SOURCE = Path(__file__).resolve().parents[2] / "p4" / "mrc.p4"

# `const bit<16> ETHERTYPE_IPV6 = 0x86DD;`
CONST_RE = re.compile(r"^\s*const\s+bit<(\d+)>\s+(\w+)\s*=\s*(0[xX][0-9a-fA-F]+|0[bB][01]+|\d+)\s*;",
                      re.MULTILINE)

# Constants that exist only in the P4 program (not part of the wire format).
P4_ONLY = {"IPV6_VERSION", "NUM_PORTS", "PPM_MAX", "DROP_ALWAYS_PPM", "DEPTH_BUCKETS", "DEPTH_BUCKET_LAST"}


def _name_of(value: int, prefix: str) -> str:
    """The constants.py name with `prefix` whose value is `value`."""
    names = [n for n in dir(constants) if n.startswith(prefix) and getattr(constants, n) == value]
    assert len(names) == 1, f"no single constants.py name {prefix}* = {value}: {names}"
    return names[0]


# What the pipeline contract needs from constants.py; the control opcodes and DSCP classes
# are derived from the tuples so that a class added there must be added to the P4 program too.
REQUIRED = {
    "ETHERTYPE_IPV6", "IPPROTO_UDP", "ROCEV2_UDP_PORT", "UDP_OFFSET", "DATA_HEADERS_LEN",
    "TRIMMED_UDP_LEN", "OP_RC_WRITE_ONLY", "MRCH_FLAG_TRIMMED", "ECN_NOT_ECT", "ECN_CE",
    "PRIORITY_LOW", "PRIORITY_HIGH", "DSCP_NO_TRIM",
    *(_name_of(op, "OP_") for op in constants.CONTROL_OPCODES),
    *(_name_of(d, "DSCP_") for d in constants.HIGH_PRIORITY_DSCP),
    *(_name_of(d, "DSCP_") for d in constants.TRIMMABLE_DSCP),
}


@pytest.fixture(scope="module")
def p4_text() -> str:
    return P4_SOURCE.read_text()


@pytest.fixture(scope="module")
def p4_consts(p4_text) -> dict[str, tuple[int, int]]:
    """name -> (bit width, value) of every `const bit<W>` in mrc.p4."""
    found = {}
    for width, name, literal in CONST_RE.findall(p4_text):
        assert name not in found, f"{P4_SOURCE}: const {name} declared twice"
        found[name] = (int(width), int(literal, 0))
    return found


def test_parser_finds_the_constants(p4_consts):
    assert len(p4_consts) >= len(REQUIRED)


def test_every_required_constant_is_declared(p4_consts):
    missing = sorted(REQUIRED - set(p4_consts))
    assert not missing, f"{P4_SOURCE} lacks const declarations for {missing}"


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_value_equals_constants_py(p4_consts, name):
    width, value = p4_consts[name]
    assert value == getattr(constants, name), f"{P4_SOURCE}: {name} = {value}, constants.py says otherwise"
    assert value < (1 << width), f"{P4_SOURCE}: {name} = {value} does not fit bit<{width}>"


def test_no_unknown_constant(p4_consts):
    """A P4 const is either a constants.py number (equal) or a declared P4-only one."""
    for name, (width, value) in p4_consts.items():
        if name in P4_ONLY:
            continue
        assert hasattr(constants, name), f"{P4_SOURCE}: const {name} is not in wire/constants.py"
        assert value == getattr(constants, name), f"{P4_SOURCE}: {name} = {value} differs from constants.py"


def test_classes_are_used_not_only_declared(p4_text, p4_consts):
    """Each opcode, DSCP class and ECN value declared is referenced by the pipeline."""
    for name in p4_consts:
        if name.startswith(("OP_", "DSCP_", "ECN_", "PRIORITY_")) and name != "DSCP_NO_TRIM":
            uses = len(re.findall(rf"\b{name}\b", p4_text))
            assert uses >= 2, f"{P4_SOURCE}: const {name} is declared but never used"


def test_widths_match_the_header_fields(p4_consts):
    """DSCP is 6 bits, ECN 2, opcode 8, priority 3 (standard_metadata.priority)."""
    for name, (width, _) in p4_consts.items():
        if name.startswith("DSCP_"):
            assert width == 6, name
        elif name.startswith("ECN_"):
            assert width == 2, name
        elif name.startswith("OP_"):
            assert width == 8, name
        elif name.startswith("PRIORITY_"):
            assert width == 3, name


def test_depth_buckets_match_the_contract(p4_consts):
    """queue_depth_seen's cells per port: the P4 program and pipeline_contract.names agree."""
    from pipeline_contract import names
    assert p4_consts["DEPTH_BUCKETS"][1] == names.DEPTH_BUCKETS
    assert p4_consts["DEPTH_BUCKET_LAST"][1] == names.DEPTH_BUCKETS - 1
    assert p4_consts["NUM_PORTS"][1] == names.COUNTER_SIZE
