"""Lab 6's figures for the instructor guide (labs/answer_key.py): the failover, blackhole and gray
runs (quick, netsim), the switches the solution's `suspects` finds. Lab 4's guide quotes the
failover's figures too."""
from collections import Counter

from experiments.metrics import longest_delivery_gap, time_to_recover
from labs.checking import Workspace

NAMES = ("table", "suspects", "failover.two_planes", "gray.table",
         *(f"gray.{v}.{f}" for v in ("1", "5", "20") for f in ("evs", "retirements", "reinstated", "share", "mrc_s", "roce_s")),
         *(f"failover.{k}" for k in ("mrc_s", "recover_ms", "evs", "planes_mrc_s", "planes_evs", "planes_dip",
                                     "reroute_s", "gap_ms")))


def _done(record) -> str:
    return f"done {record.completion_time:.3f} s" if record.completed else "never"


def figures(lab, scratch):
    check = lab.check_module()
    out = {}
    rows = ["| fault | MRC | RoCE | RoCE + reroute 1 s |", "|---|---|---|---|"]
    for label, scenario, variant in (("link killed (failover.yaml, leaf-spine)", "failover.yaml", "leaf-spine"),
                                     ("spine blackholes (blackhole.yaml)", "blackhole.yaml", "spine blackholes"),
                                     ("spine process killed (blackhole.yaml)", "blackhole.yaml", "spine process killed")):
        cells = []
        for transport in ("MRC", "RoCE", "RoCE + reroute 1 s"):
            record = check._run(scenario, variant, transport)
            cell = _done(record)
            if record.completed and transport == "MRC":
                recover = time_to_recover(record)
                cell += (f", recovered in {recover * 1e3:.0f} ms" if recover is not None else ", no dip below 90 %")
                cell += f", {int(record.transport_stats.get('evs_retired', 0))} EVs retired"
            elif record.completed:
                cell += f", longest gap {longest_delivery_gap(record) * 1e3:.0f} ms"
            cells.append(cell)
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    out["table"] = "\n\n" + "\n".join(rows) + "\n\n"
    mrc = check._run("failover.yaml", "leaf-spine", "MRC")
    planes = check._run("failover.yaml", "multi-plane", "MRC")
    reroute = check._run("failover.yaml", "leaf-spine", "RoCE + reroute 1 s")
    recover, planes_recover = time_to_recover(mrc), time_to_recover(planes)
    out.update({"failover.mrc_s": f"{mrc.completion_time:.2f}", "failover.recover_ms": f"{recover * 1e3:.0f}",
                "failover.evs": str(int(mrc.transport_stats.get("evs_retired", 0))),
                "failover.planes_mrc_s": f"{planes.completion_time:.2f}",
                "failover.planes_evs": str(int(planes.transport_stats.get("evs_retired", 0))),
                "failover.planes_dip": ("no dip below 90 %" if planes_recover is None
                                        else f"recovered in {planes_recover * 1e3:.0f} ms"),
                "failover.two_planes": _done(planes),
                "failover.reroute_s": f"{reroute.completion_time:.2f}",
                "failover.gap_ms": f"{longest_delivery_gap(reroute) * 1e3:.0f}"})
    found = check.check_suspects(Workspace(lab.solution))
    out["suspects"] = found.split("(")[1].rstrip(")")
    gray_rows = ["| gray link | EVs retired at least once | retirements | reinstated by probes | "
                 "out of service (mean share of the run) | MRC | RoCE |", "|---|---|---|---|---|---|---|"]
    for variant, changes in check.GRAY_CASES:
        loss = variant.split("%")[0]
        record = check._run("gray.yaml", variant, "MRC", changes)
        roce = check._run("gray.yaml", variant, "RoCE", changes)
        changes = Counter(e["new"] for e in record.ev_events if e["kind"] == "ev_state")
        bad = check._time_bad(record.ev_events, record.end)
        share = sum(bad.values()) / (len(bad) * record.end) if bad else 0.0
        figs = {"evs": str(len(bad)), "retirements": str(changes["ASSUMED_BAD"]),
                "reinstated": str(sum(1 for e in record.ev_events if e["kind"] == "ev_state"
                                      and e["new"] == "GOOD" and e.get("cause") == "probe")),
                "share": f"{share:.0%}", "mrc_s": _done(record), "roce_s": _done(roce)}
        out.update({f"gray.{loss}.{k}": v for k, v in figs.items()})
        gray_rows.append(f"| {variant} | {figs['evs']} | {figs['retirements']} | {figs['reinstated']} | "
                         f"{figs['share']} | {figs['mrc_s']} | {figs['roce_s']} |")
    out["gray.table"] = "\n\n" + "\n".join(gray_rows) + "\n\n"
    return out
