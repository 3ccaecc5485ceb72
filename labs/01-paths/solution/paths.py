"""Lab 1: uSID paths, the uSID shift, and link imbalance (solution)."""
import ipaddress

from topologies.graph import PlaneGraph

LOCATOR_PREFIX = 0xFC00     # the first 16 bits of every MRC path address
USID_BITS = 16


def usid_paths(topo, src, dst):
    """Every shortest path from host `src` to host `dst`, on every plane both hosts are on.

    Returns a list of (switch names, uSID address as text), e.g.
    (("s1", "s3", "s2"), "fc00:0:100:102:101:1002::").
    """
    dst_nics = {nic.plane: nic for nic in topo.host_nics(dst)}
    out = []
    for nic in topo.host_nics(src):
        far = dst_nics.get(nic.plane)
        if far is None:
            continue
        graph = PlaneGraph(topo, nic.plane)
        for switches in graph.shortest_paths(nic.switch, far.switch):
            usids = [topo.switch(name).usid for name in switches] + [topo.host(dst).usid]
            value = (LOCATOR_PREFIX << 16) | nic.plane
            for usid in usids:
                value = (value << USID_BITS) | usid
            value <<= 128 - 32 - USID_BITS * len(usids)
            out.append((tuple(switches), str(ipaddress.IPv6Address(value))))
    return out


def after_each_switch(address):
    """The destination address a packet carries after each switch on its path has shifted it.

    A switch whose own uSID is the first one after the 32-bit locator removes it: the 16-bit uSIDs
    behind it move left by 16 bits and zeros come in at the end. The walk stops when the next uSID
    is the destination host's (0x1000 and up), which no switch removes.
    """
    value = int(ipaddress.IPv6Address(address))
    locator = value >> 96
    rest = value & ((1 << 96) - 1)
    out = []
    while 0 < (rest >> 80) < 0x1000:            # the next uSID is a switch's
        rest = (rest << USID_BITS) & ((1 << 96) - 1)
        out.append(str(ipaddress.IPv6Address((locator << 96) | rest)))
    return out


def link_imbalance(tx_bytes):
    """max / mean of the bytes sent on every link direction (idle links count, as zeros)."""
    values = list(tx_bytes.values())
    mean = sum(values) / len(values)
    return max(values) / mean
