"""The deterministic addressing plan of docs/design.md ("Addressing plan").

Switch *i* (0-based, topology order) has uSID ``SWITCH_USID_BASE + i``; host *i* has uSID
``HOST_USID_BASE + i``. Plane *p* has the 32-bit locator ``fc00:p``. A host NIC on plane *p* has the
address ``fc00:p:<host uSID>::``; a uSID path through switches s1..sk to host B on plane *p* is the
address ``fc00:p:<us1>:...:<usk>:<B>::``. Every number comes from wire/constants.py.
"""
from __future__ import annotations

import ipaddress

from wire import constants

LOCATOR_BITS = 32
ADDRESS_BITS = 128
USID_MASK = (1 << constants.USID_BITS) - 1
MAX_PLANE = 0xFFFF
MAX_PATH_SWITCHES = constants.MAX_USIDS - 1          # one uSID slot is kept for the destination host
# beyond this many switches, switch uSIDs would collide with the hosts' uSIDs
MAX_SWITCHES = constants.HOST_USID_BASE - constants.SWITCH_USID_BASE
MAX_HOSTS = (USID_MASK + 1) - constants.HOST_USID_BASE
# Prefix length that identifies one node: locator + one uSID (what usid_local and routing match).
NODE_PREFIX_LEN = LOCATOR_BITS + constants.USID_BITS


class AddressingError(ValueError):
    """A number outside the addressing plan (plane, index, too many uSIDs, foreign address)."""


def switch_usid(index: int) -> int:
    """uSID of the switch at 0-based position `index` in the topology."""
    if not 0 <= index < MAX_SWITCHES:
        raise AddressingError(f"switch index {index} outside 0..{MAX_SWITCHES - 1}")
    return constants.SWITCH_USID_BASE + index


def host_usid(index: int) -> int:
    """uSID of the host at 0-based position `index` in the topology."""
    if not 0 <= index < MAX_HOSTS:
        raise AddressingError(f"host index {index} outside 0..{MAX_HOSTS - 1}")
    return constants.HOST_USID_BASE + index


def locator(plane: int) -> int:
    """32-bit locator of a plane: fc00:<plane>."""
    _check_plane(plane)
    return (constants.LOCATOR_PREFIX << 16) | plane


def node_prefix(plane: int, usid: int) -> int:
    """48-bit locator+uSID value matched by `MrcIngress.usid_local` for a node of `plane`."""
    _check_usid(usid)
    return (locator(plane) << constants.USID_BITS) | usid


def node_address(plane: int, usid: int) -> ipaddress.IPv6Address:
    """The /48 network address of a node: fc00:<plane>:<usid>::."""
    return ipaddress.IPv6Address(node_prefix(plane, usid) << (ADDRESS_BITS - NODE_PREFIX_LEN))


def nic_address(host_index: int, plane: int) -> ipaddress.IPv6Address:
    """Address of host `host_index`'s NIC on `plane`: fc00:<plane>:<host uSID>::."""
    return node_address(plane, host_usid(host_index))


def nic_mac(host_index: int, plane: int) -> str:
    """MAC of host `host_index`'s NIC on `plane`: 02:00:<plane>:00:<hi>:<lo> (index bytes)."""
    _check_plane(plane)
    if plane > 0xFF:
        raise AddressingError(f"plane {plane} does not fit the one MAC byte reserved for it")
    host_usid(host_index)   # range check
    return f"02:00:{plane:02x}:00:{host_index >> 8:02x}:{host_index & 0xFF:02x}"


def nic_ifname(host_name: str, plane: int) -> str:
    """Interface name of a host's NIC on `plane`: h<N>-eth<plane>."""
    return f"{host_name}-eth{plane}"


def switch_ifname(switch_name: str, port: int) -> str:
    """Interface name of a switch port: s<N>-eth<port> (P4 port number = port)."""
    return f"{switch_name}-eth{port}"


def usid_path_address(plane: int, switch_usids, dst_host_usid: int) -> ipaddress.IPv6Address:
    """The address that steers a packet on `plane` through `switch_usids` to host `dst_host_usid`."""
    return ipaddress.IPv6Address(usid_path_value(plane, switch_usids, dst_host_usid))


def usid_path_value(plane: int, switch_usids, dst_host_usid: int) -> int:
    """`usid_path_address` as a 128-bit number."""
    usids = list(switch_usids)
    packed = 0
    for usid in usids:
        _check_usid(usid)
        packed = (packed << constants.USID_BITS) | usid
    return packed_path_value(plane, len(usids), packed, dst_host_usid)


def packed_path_value(plane: int, count: int, packed_usids: int, dst_host_usid: int) -> int:
    """`usid_path_value` of `count` switch uSIDs given as one number, USID_BITS each, the first
    switch's highest (as `topologies.graph.PlaneGraph.shortest_path_usids` gives them; not checked
    one by one: a topology's uSIDs are checked when it is made)."""
    if count > MAX_PATH_SWITCHES:
        raise AddressingError(f"a uSID path holds at most {MAX_PATH_SWITCHES} switches, got {count}")
    _check_usid(dst_host_usid)
    value = (((locator(plane) << (constants.USID_BITS * count)) | packed_usids) << constants.USID_BITS) | dst_host_usid
    return value << (ADDRESS_BITS - LOCATOR_BITS - constants.USID_BITS * (count + 1))


def parse_usid_address(addr) -> tuple[int, list[int]]:
    """Inverse of `usid_path_address`: (plane, the uSIDs up to the first empty slot)."""
    value = int(ipaddress.IPv6Address(addr))
    if value >> (ADDRESS_BITS - 16) != constants.LOCATOR_PREFIX:
        raise AddressingError(f"{ipaddress.IPv6Address(value)} is not in fc00::/16 (no MRC locator)")
    plane = (value >> (ADDRESS_BITS - LOCATOR_BITS)) & USID_MASK
    usids = []
    for slot in range(constants.MAX_USIDS):
        shift = ADDRESS_BITS - LOCATOR_BITS - constants.USID_BITS * (slot + 1)
        usid = (value >> shift) & USID_MASK
        if usid == 0:
            break
        usids.append(usid)
    return plane, usids


def _check_plane(plane: int) -> None:
    if not 0 <= plane <= MAX_PLANE:
        raise AddressingError(f"plane {plane} outside 0..{MAX_PLANE}")


def _check_usid(usid: int) -> None:
    if not 0 < usid <= USID_MASK:
        raise AddressingError(f"uSID {usid:#x} outside 1..{USID_MASK:#x}")
