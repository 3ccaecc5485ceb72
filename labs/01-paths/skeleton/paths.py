"""Lab 1: uSID paths, the uSID shift, and link imbalance.

Fill in the three functions. `mrc-testbed lab check 1 --dir <this folder>` calls them with real
topologies (topologies.spec.topology_from_spec) and a permutation run on netsim.
You may use the topology model (topo.host_nics, topo.switch(name).usid, topo.host(name).usid) and
topologies.graph.PlaneGraph(topo, plane).shortest_paths(a, b); build the address yourself (do not
call topologies.paths or topologies.addressing: the encoding is what this lab is about).
"""


LOCATOR_PREFIX = 0xFC00     # the first 16 bits of every MRC path address
USID_BITS = 16


def usid_paths(topo, src, dst):
    """Every shortest path from host `src` to host `dst`, on every plane both hosts are on.

    Returns a list of (switch names, uSID address as text), e.g.
    (("s1", "s3", "s2"), "fc00:0:100:102:101:1002::").
    """
    # TODO: for each NIC of src, find the NIC of dst on the same plane, the shortest switch paths
    # between their leaves, and the address: 32-bit locator, one uSID per switch, the host's uSID.
    return []


def after_each_switch(address):
    """The destination address a packet carries after each switch on its path has shifted it.

    Returns one address (text) per switch, in path order.
    """
    # TODO: what does a switch do to the destination address when the first uSID is its own?
    return [address]


def link_imbalance(tx_bytes):
    """max / mean of the bytes sent on every link direction ({link name: bytes})."""
    # TODO
    return 1.0
