"""Lab 3's figures for the instructor guide (labs/answer_key.py): the solution, the wrong answers the
guide discusses and go-back-N, each at 1 % and 20 % loss (1 MB) and 2 MB at 1 %."""
from labs.answer_key import override, variant
from labs.checking import Workspace, run_checks

NOTHING = """
def lost(self, cum, base, bitmap, window, now):
    return []
"""
EVERYTHING_AFTER = """
def lost(self, cum, base, bitmap, window, now):
    return list(range(cum, window.next_seq)) if bitmap else []
"""
EVERY_HOLE = """
def lost(self, cum, base, bitmap, window, now):
    top = base + bitmap.bit_length()
    return [s for s in range(cum, top) if s < base or not bitmap >> (s - base) & 1]
"""
OVERTAKEN = "            overtaken = sum(1 for t in arrived_sent_at[:REORDER_THRESHOLD] if t > seg.sent_at)"
ABOVE = "            overtaken = sum(1 for s in range(seq + 1, top) if s >= base and bitmap >> (s - base) & 1)"
THRESHOLD = "REORDER_THRESHOLD = 3 "
# name -> (what the guide calls it, how it is made from the solution)
VARIANTS = {
    "solution": ("solution", {}),
    "default": ("MRC's default (a SACK declares nothing)", {"append": override("SelectiveRepeat", NOTHING)}),
    "after": ("resend everything after the first hole", {"append": override("SelectiveRepeat", EVERYTHING_AFTER)}),
    "holes": ("resend every hole at once", {"append": override("SelectiveRepeat", EVERY_HOLE)}),
    "above": ("count arrivals above the hole, not sent after it", {"replacements": [(OVERTAKEN, ABOVE)]}),
    "t1": ("threshold 1", {"replacements": [(THRESHOLD, "REORDER_THRESHOLD = 1 ")]}),
    "t8": ("threshold 8", {"replacements": [(THRESHOLD, "REORDER_THRESHOLD = 8 ")]}),
}
FIELDS = ("lost1", "resent1", "dups1", "lost20", "resent20", "declared20", "timeouts20", "dups20", "gbps20",
          "gbps2mb", "ratio", "verdict")
NAMES = ("table", "rto_us", "roce.gbps2mb", "timer_factor",
         *(f"{v}.{f}" for v in VARIANTS for f in FIELDS))


def _cell(run) -> str:
    tx, rx = run.flow.sender.stats, run.flow.receiver.stats
    return (f"{run.dropped} lost, {tx['retransmitted']} resent ({run.declared} declared by SACK, "
            f"{tx['retx_timeout']} after a timeout), {rx['duplicates']} duplicates, "
            f"{run.flow.goodput_bps / 1e9:.2f} Gbit/s")


def _roce_cell(run) -> str:
    tx = run.flow.sender.stats
    return (f"{run.dropped} lost, {tx['retransmitted']} resent ({tx.get('retx_nack', 0)} after a NACK, "
            f"{tx['retx_timeout']} after a timeout), {run.flow.goodput_bps / 1e9:.2f} Gbit/s")


def figures(lab, scratch):
    check = lab.check_module()
    checks = check.CHECKS
    out = {}
    rows = ["| | 1 % loss (1 MB) | 20 % loss (1 MB) | 2 MB at 1 % | checks failed |", "|---|---|---|---|---|"]
    roce = check.run(Workspace(lab.solution), 0.01, size=2 * check.MB, seed=1, mode="roce")
    for name, (label, how) in VARIANTS.items():
        ws = Workspace(lab.solution if not how else variant(lab, scratch, check.FILE, **how))
        one, twenty = check.run(ws, 0.01), check.run(ws, 0.2)
        big = check.run(ws, 0.01, size=2 * check.MB, seed=1)
        failed = [r.check for r in run_checks(checks, ws) if not r.passed]
        ratio = big.flow.goodput_bps / roce.flow.goodput_bps
        tx1, tx20 = one.flow.sender.stats, twenty.flow.sender.stats
        out.update({f"{name}.lost1": str(one.dropped), f"{name}.resent1": str(tx1["retransmitted"]),
                    f"{name}.dups1": str(one.flow.receiver.stats["duplicates"]),
                    f"{name}.lost20": str(twenty.dropped), f"{name}.resent20": str(tx20["retransmitted"]),
                    f"{name}.declared20": str(twenty.declared), f"{name}.timeouts20": str(tx20["retx_timeout"]),
                    f"{name}.dups20": str(twenty.flow.receiver.stats["duplicates"]),
                    f"{name}.gbps20": f"{twenty.flow.goodput_bps / 1e9:.2f}",
                    f"{name}.gbps2mb": f"{big.flow.goodput_bps / 1e9:.2f}", f"{name}.ratio": f"{ratio:.2f}",
                    f"{name}.verdict": "none" if not failed else "; ".join(failed)})
        if name not in ("t1", "t8"):
            rows.append(f"| {label} | {_cell(one)} | {_cell(twenty)} | {big.flow.goodput_bps / 1e9:.2f} Gbit/s = "
                        f"{ratio:.2f} x go-back-N | {out[f'{name}.verdict']} |")
    one, twenty = (check.run(Workspace(lab.solution), loss, mode="roce") for loss in (0.01, 0.2))
    rows.append(f"| go-back-N (`roce`) | {_roce_cell(one)} | {_roce_cell(twenty)} | "
                f"{roce.flow.goodput_bps / 1e9:.2f} Gbit/s | |")
    out["table"] = "\n\n" + "\n".join(rows) + "\n\n"
    out["roce.gbps2mb"] = f"{roce.flow.goodput_bps / 1e9:.2f}"
    out["timer_factor"] = f"{float(out['solution.gbps20']) / float(out['default.gbps20']):.1f}"
    cfg = check.transfers.config()
    out["rto_us"] = f"{1.024 * 2 ** cfg.qp_timeout:.1f}"
    return out
