"""Addressing plan of docs/design.md: uSIDs, locators, NIC addresses and MACs, uSID path addresses."""
import ipaddress

import pytest

from wire import constants as C
from topologies import addressing as A


def test_usids_follow_the_plan():
    assert A.switch_usid(0) == C.SWITCH_USID_BASE == 0x0100
    assert A.switch_usid(7) == 0x0107
    assert A.host_usid(0) == C.HOST_USID_BASE == 0x1000
    assert A.host_usid(3) == 0x1003


def test_usid_ranges_do_not_overlap():
    last_switch = A.switch_usid(A.MAX_SWITCHES - 1)
    assert last_switch < A.host_usid(0)
    with pytest.raises(A.AddressingError, match="switch index"):
        A.switch_usid(A.MAX_SWITCHES)
    with pytest.raises(A.AddressingError, match="host index"):
        A.host_usid(-1)
    with pytest.raises(A.AddressingError, match="host index"):
        A.host_usid(A.MAX_HOSTS)


def test_locator_and_nic_address_example_from_design():
    assert A.locator(1) == 0xFC000001
    assert A.nic_address(3, 1) == ipaddress.IPv6Address("fc00:1:1003::")
    assert A.nic_address(0, 0) == ipaddress.IPv6Address("fc00:0:1000::")
    with pytest.raises(A.AddressingError, match="plane"):
        A.locator(0x10000)


def test_nic_mac_and_ifnames():
    assert A.nic_mac(0, 0) == "02:00:00:00:00:00"
    assert A.nic_mac(0x1A2, 3) == "02:00:03:00:01:a2"
    macs = {A.nic_mac(h, p) for h in range(300) for p in range(4)}
    assert len(macs) == 1200
    assert A.nic_ifname("h3", 1) == "h3-eth1"
    assert A.switch_ifname("s2", 4) == "s2-eth4"


def test_usid_path_address_layout():
    addr = A.usid_path_address(2, [0x100, 0x105, 0x101], 0x1003)
    assert addr == ipaddress.IPv6Address("fc00:2:100:105:101:1003::")
    full = A.usid_path_address(0, [0x100, 0x108, 0x110, 0x10E, 0x107], 0x100F)
    assert full == ipaddress.IPv6Address("fc00:0:100:108:110:10e:107:100f")
    with pytest.raises(A.AddressingError, match="at most 5 switches"):
        A.usid_path_address(0, [0x100] * 6, 0x1000)


@pytest.mark.parametrize("plane,usids,host", [
    (0, [], 0x1000), (1, [0x100], 0x1001), (7, [0x100, 0x120, 0x103, 0x104, 0x1FF], 0x1FFF)])
def test_parse_is_the_inverse(plane, usids, host):
    addr = A.usid_path_address(plane, usids, host)
    assert A.parse_usid_address(addr) == (plane, usids + [host])
    assert A.parse_usid_address(str(addr)) == (plane, usids + [host])


def test_parse_rejects_foreign_addresses():
    with pytest.raises(A.AddressingError, match="fc00::/16"):
        A.parse_usid_address("2001:db8::1")


def test_node_prefix_is_the_top_48_bits_of_the_node_address():
    prefix = A.node_prefix(1, 0x103)
    assert prefix == 0xFC0000010103
    assert int(A.node_address(1, 0x103)) >> 80 == prefix
