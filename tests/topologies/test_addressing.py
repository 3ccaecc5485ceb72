"""Addressing plan of docs/design.md: uSIDs, locators, NIC addresses and MACs, uSID path addresses."""
import ipaddress

import pytest

from wire import constants
from topologies import addressing


def test_usids_follow_the_plan():
    assert addressing.switch_usid(0) == constants.SWITCH_USID_BASE == 0x0100
    assert addressing.switch_usid(7) == 0x0107
    assert addressing.host_usid(0) == constants.HOST_USID_BASE == 0x1000
    assert addressing.host_usid(3) == 0x1003


def test_usid_ranges_do_not_overlap():
    last_switch = addressing.switch_usid(addressing.MAX_SWITCHES - 1)
    assert last_switch < addressing.host_usid(0)
    with pytest.raises(addressing.AddressingError, match="switch index"):
        addressing.switch_usid(addressing.MAX_SWITCHES)
    with pytest.raises(addressing.AddressingError, match="host index"):
        addressing.host_usid(-1)
    with pytest.raises(addressing.AddressingError, match="host index"):
        addressing.host_usid(addressing.MAX_HOSTS)


def test_locator_and_nic_address_example_from_design():
    assert addressing.locator(1) == 0xFC000001
    assert addressing.nic_address(3, 1) == ipaddress.IPv6Address("fc00:1:1003::")
    assert addressing.nic_address(0, 0) == ipaddress.IPv6Address("fc00:0:1000::")
    with pytest.raises(addressing.AddressingError, match="plane"):
        addressing.locator(0x10000)


def test_nic_mac_and_ifnames():
    assert addressing.nic_mac(0, 0) == "02:00:00:00:00:00"
    assert addressing.nic_mac(0x1A2, 3) == "02:00:03:00:01:a2"
    macs = {addressing.nic_mac(h, p) for h in range(300) for p in range(4)}
    assert len(macs) == 1200
    assert addressing.nic_ifname("h3", 1) == "h3-eth1"
    assert addressing.switch_ifname("s2", 4) == "s2-eth4"


def test_usid_path_address_layout():
    addr = addressing.usid_path_address(2, [0x100, 0x105, 0x101], 0x1003)
    assert addr == ipaddress.IPv6Address("fc00:2:100:105:101:1003::")
    full = addressing.usid_path_address(0, [0x100, 0x108, 0x110, 0x10E, 0x107], 0x100F)
    assert full == ipaddress.IPv6Address("fc00:0:100:108:110:10e:107:100f")
    with pytest.raises(addressing.AddressingError, match="at most 5 switches"):
        addressing.usid_path_address(0, [0x100] * 6, 0x1000)


@pytest.mark.parametrize("plane,usids,host", [
    (0, [], 0x1000), (1, [0x100], 0x1001), (7, [0x100, 0x120, 0x103, 0x104, 0x1FF], 0x1FFF)])
def test_parse_is_the_inverse(plane, usids, host):
    addr = addressing.usid_path_address(plane, usids, host)
    assert addressing.parse_usid_address(addr) == (plane, usids + [host])
    assert addressing.parse_usid_address(str(addr)) == (plane, usids + [host])


def test_parse_rejects_foreign_addresses():
    with pytest.raises(addressing.AddressingError, match="fc00::/16"):
        addressing.parse_usid_address("2001:db8::1")


def test_node_prefix_is_the_top_48_bits_of_the_node_address():
    prefix = addressing.node_prefix(1, 0x103)
    assert prefix == 0xFC0000010103
    assert int(addressing.node_address(1, 0x103)) >> 80 == prefix
