"""Which ECMP member a flow takes agrees across the targets: netsim's switch, the reference switch
(and so BMv2, which the conformance suite holds to the same hash), and docs/design.md's definition."""
from __future__ import annotations

import ipaddress
import re
from pathlib import Path

import pytest

from hypothesis import given, settings, strategies as st

from pipeline_contract.entries import TableEntry
from wire import codec, constants
from wire.packets import DataPacket
from netsim.link import SimLink
from netsim.sim import Simulator
from netsim.switch import SimSwitch
from pipeline_contract.p4info import load_p4info
from pipeline_contract.ecmp import crc16, ecmp_index, entropy_member
from refswitch.switch import SwitchCore

DESIGN = Path(__file__).resolve().parents[2] / "docs" / "design.md"
MAC_A, MAC_B = bytes.fromhex("020001000000"), bytes.fromhex("020001000001")
LOCAL_USID = 0x0105                                # the switch under test
DST_HOST = ipaddress.IPv6Address("fc00:1:1001::")   # after the switch consumes its uSID
SRC = ipaddress.IPv6Address("fc00:1:1000::").packed


def documented_check_value() -> int:
    """The check value docs/design.md gives for the ECMP hash: crc16(b"123456789") == 0x...."""
    found = re.search(r'crc16\(b"123456789"\)\s*==\s*(0x[0-9A-Fa-f]+)', DESIGN.read_text())
    assert found, f"{DESIGN} no longer states the ECMP hash's check value"
    return int(found.group(1), 16)


def ecmp_program(size: int) -> list[TableEntry]:
    """Consume uSID 0x0105, then route fc00:1:1001::/48 to a group of `size` members on ports 1..size."""
    local = ipaddress.IPv6Address(f"fc00:1:{LOCAL_USID:x}::")
    entries = [
        TableEntry("MrcIngress.usid_local", {"dst_usid_prefix": int(local) >> 80}, "MrcIngress.usid_shift"),
        TableEntry("MrcIngress.routing", {"dst_addr": (int(DST_HOST), 48)}, "MrcIngress.ecmp_select",
                   {"group": 1, "size": size}),
    ]
    entries += [TableEntry("MrcIngress.ecmp_member", {"group": 1, "index": i}, "MrcIngress.forward",
                           {"port": i + 1}) for i in range(size)]
    return entries


def packet(ev: int) -> DataPacket:
    dst = ipaddress.IPv6Address(f"fc00:1:{LOCAL_USID:x}:1001::").packed
    return DataPacket(src=SRC, dst=dst, ev=ev, qp=1, psn=0, va=0, rkey=1, length=64, msg_id=1, msg_len=64,
                      tsval=0, payload=bytes(64), flags=0, dscp=constants.DSCP_TRIMMABLE, ecn=constants.ECN_ECT0)


def netsim_port(size: int, ev: int) -> int:
    """The egress port the netsim switch picks: the one link of `size` that was offered the packet."""
    sim = Simulator()
    sw = SimSwitch(sim, "s5", LOCAL_USID)
    for port in range(1, size + 1):
        sw.plug(port, SimLink(sim, f"s5-eth{port}", 1e9, 0.0, 8))
    sw.install(ecmp_program(size))
    sw.receive(packet(ev), 9)
    (port,) = [port for port, link in sw.links.items() if link.offered]
    return port


def refswitch_port(size: int, ev: int) -> int:
    out: list[int] = []
    core = SwitchCore(lambda port, frame, prio: out.append(port) or True, load_p4info())
    core.tables.install(ecmp_program(size))
    core.receive(codec.encode(packet(ev), MAC_A, MAC_B), 9)
    (port,) = out
    return port


def test_the_hash_has_the_check_value_of_the_design_document():
    assert crc16(b"123456789") == documented_check_value()


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(size=st.integers(1, 8), ev=st.integers(0, (1 << 32) - 1))
def test_netsim_and_the_reference_switch_pick_the_same_member(size, ev):
    expected = ecmp_index(SRC, DST_HOST.packed, constants.IPPROTO_UDP, ev & 0xFFFF, constants.ROCEV2_UDP_PORT, size)
    assert entropy_member(SRC, DST_HOST.packed, ev, size) == expected
    assert netsim_port(size, ev) == refswitch_port(size, ev) == expected + 1


def test_a_four_way_group_is_used_whole_by_evs_over_all_16_bits():
    """Both targets spread flows over every member (and agree doing it), not only over a half."""
    ports = {netsim_port(4, ev << 11 | ev) for ev in range(32)}
    assert ports == {refswitch_port(4, ev << 11 | ev) for ev in range(32)} == {1, 2, 3, 4}
