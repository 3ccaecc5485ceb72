"""Lab 6: when the network lies (solution)."""
# Does the work finish (within the run) after the fault? True or False for each transport.
PREDICTED_COMPLETES = {
    "link killed": {"MRC": True, "RoCE": False, "RoCE + reroute 1 s": True},
    "spine blackholes": {"MRC": True, "RoCE": False, "RoCE + reroute 1 s": False},
}


def path_switches(topo, dst_hex):
    """The switch names an EV's path address (32 hex digits, as in the EV events) steers through."""
    value = int(dst_hex, 16)
    by_usid = {switch.usid: switch.name for switch in topo.switches}
    names = []
    for slot in range(6):
        usid = (value >> (96 - 16 * (slot + 1))) & 0xFFFF
        if usid not in by_usid:
            break
        names.append(by_usid[usid])
    return names


def suspects(topo, ev_events):
    """Switches on every path MRC retired (any cause), and on no path that was never retired."""
    retired = [e for e in ev_events if e["kind"] == "ev_state" and e["new"] == "ASSUMED_BAD"]
    if not retired:
        return set()
    bad_evs = {(e["conn"], e["ev"]) for e in retired}
    on_every_bad = set.intersection(*(set(path_switches(topo, e["dst"])) for e in retired))
    healthy = set()
    for record in ev_events:
        if record["kind"] == "ev_set":
            for ev in record["evs"]:
                if (record["conn"], ev["ev"]) not in bad_evs:
                    healthy.update(path_switches(topo, ev["dst"]))
    return on_every_bad - healthy


def out_of_service(ev_events, end):
    """Seconds each EV ((conn, ev)) spent ASSUMED_BAD up to `end`; EVs never retired are left out."""
    since = {}
    total = {}
    for e in sorted((e for e in ev_events if e["kind"] == "ev_state"), key=lambda e: e["t"]):
        key = (e["conn"], e["ev"])
        if e["new"] == "ASSUMED_BAD" and key not in since:
            since[key] = e["t"]
            total.setdefault(key, 0.0)
        elif e["new"] != "ASSUMED_BAD" and key in since:
            total[key] += e["t"] - since.pop(key)
    for key, start in since.items():
        total[key] += end - start
    return total
