"""Lab 6: when the network lies.

`mrc-testbed lab check 6 --dir <this folder>` runs the failover and blackhole experiments on netsim
and gives your functions the EV events MRC logged (record.ev_events; see the README for their form).
"""
# TODO: predict before you run the experiments. Does the work finish (within the run) after
# the fault? True or False for each transport.
PREDICTED_COMPLETES = {
    "link killed": {"MRC": None, "RoCE": None, "RoCE + reroute 1 s": None},
    "spine blackholes": {"MRC": None, "RoCE": None, "RoCE + reroute 1 s": None},
}


def path_switches(topo, dst_hex):
    """The switch names an EV's path address (32 hex digits, as in the EV events) steers through."""
    # TODO: the address is a locator and then one uSID per switch (topo.switches[i].usid)
    return []


def suspects(topo, ev_events):
    """Switches on every path MRC retired (any cause), and on no path that was never retired."""
    # TODO: which switches do the retired paths share that the paths still working avoid?
    return set()


def out_of_service(ev_events, end):
    """Seconds each EV ((conn, ev)) spent ASSUMED_BAD up to `end`; EVs never retired are left out."""
    # TODO: walk each EV's state changes in time order
    return {}
