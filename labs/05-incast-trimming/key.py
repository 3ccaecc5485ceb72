"""Lab 5's figures for the instructor guide (labs/answer_key.py): the quick incast on netsim for the
three transports, and the trim threshold swept."""
from experiments.metrics import retransmissions

SWEEP = (1, 2, 4, 8, 12, 16)
NAMES = ("table", "predictions", "slowest_incast", "victim_order", "fastest_victim", "fastest_victim_mbps", "slowest_victim", "slowest_victim_mbps",
         "sweep", "sweep_drops", "sweep_incast_ms", "solution_sweep", *(f"trims_at_{t}" for t in SWEEP))


def figures(lab, scratch):
    check = lab.check_module()
    runs = check._runs_at()
    rows = ["| transport | incast done | victim | trimmed | dropped (full queue) | EVs retired | "
            "retx trim/timeout/nack/sack |", "|---|---|---|---|---|---|---|"]
    victims = {}
    for name, record in runs.items():
        ref = check._reference(record)
        retx = retransmissions(record)
        victims[name] = ref["victim_bps"]
        done = "never" if ref["incast_s"] is None else f"{ref['incast_s'] * 1e3:.1f} ms"
        rows.append(f"| {name} | {done} | {ref['victim_bps'] / 1e6:.0f} Mb/s | {ref['trimmed']} | {ref['dropped']} | "
                    f"{int(record.transport_stats.get('evs_retired', 0))} | "
                    f"{retx.get('trim', 0)}/{retx.get('timeout', 0)}/{retx.get('nack', 0)}/"
                    f"{retx.get('sack', 0) + retx.get('tail_probe', 0)} |")
    measured = check._measured_outcomes(runs)
    order = sorted(victims, key=victims.get, reverse=True)
    out = {"predictions": "; ".join(f"{k}: {v}" for k, v in measured.items()),
           "slowest_incast": measured["slowest incast"],
           "table": "\n\n" + "\n".join(rows) + "\n\n", "victim_order": " > ".join(order),
           "fastest_victim": order[0], "fastest_victim_mbps": f"{victims[order[0]] / 1e6:.0f}",
           "slowest_victim": order[-1], "slowest_victim_mbps": f"{victims[order[-1]] / 1e6:.0f}"}
    trims, drops, incast = {}, 0, []
    for threshold in SWEEP:
        ref = check._reference(check._runs_at(threshold, (check.TRIMMING,))[check.TRIMMING])
        trims[threshold] = ref["trimmed"]
        drops += ref["dropped"]
        if ref["incast_s"] is not None:
            incast.append(ref["incast_s"] * 1e3)
        out[f"trims_at_{threshold}"] = str(ref["trimmed"])
    out["sweep"] = ", ".join(f"{t}: {n}" for t, n in trims.items())
    out["sweep_drops"] = "no" if drops == 0 else str(drops)
    out["sweep_incast_ms"] = f"{min(incast):.1f}-{max(incast):.1f}"
    module = lab.solution / "incast.py"
    namespace: dict = {}
    exec(compile(module.read_text(encoding="utf-8"), str(module), "exec"), namespace)
    out["solution_sweep"] = ", ".join(f"{t}: {trims.get(t, '?')}" for t in sorted(set(namespace["THRESHOLDS"])))
    return out
