"""Lab 4's figures for the instructor guide (labs/answer_key.py): the solution's three runs, and the
wrong answers the guide discusses."""
from labs.answer_key import override, variant
from labs.checking import Workspace, run_checks

RETIRE_ON_ECN = """
def on_ecn(self, evset, ev, now):
    evset.mark_bad(ev, now, "ecn")
"""
RETIRE_ON_TRIM = """
def on_trim(self, evset, ev, last_hop, now):
    evset.mark_bad(ev, now, "trim")
"""
EVERY_TIMEOUT = """
def on_timeout(self, evset, timeout, now):
    return evset.mark_bad(timeout.ev, now, "timeout")
"""
BY_HAND = """
def on_timeout(self, evset, timeout, now):
    from host_agent.transport.evset import EvState
    if timeout.delivered_sent_at > timeout.sent_at + 0.25 * timeout.srtt and timeout.sent_at >= timeout.first_rtt_at:
        evset.set_state(timeout.ev, EvState.ASSUMED_BAD, now, "timeout")
        return [timeout.ev]
    return []
"""
FIRST_REPLY = """
def on_probe(self, evset, ev, answered, now):
    evset.note_probe(ev, answered)
    if answered:
        evset.reinstate(ev, "probe", now)
"""
NO_KEEPALIVE = """
def on_keepalive_miss(self, evset, ev, misses, now):
    return False
"""
NO_SPURIOUS = """
def on_spurious(self, evset, ev, now):
    pass
"""
VARIANTS = {"ecn": RETIRE_ON_ECN, "trim": RETIRE_ON_TRIM, "timeout": EVERY_TIMEOUT, "hand": BY_HAND,
            "first": FIRST_REPLY, "keepalive": NO_KEEPALIVE, "spurious": NO_SPURIOUS}
NAMES = ("dead_evs", "retired_us", "rto_us", "backups", "deadline_us", "last_on_dead_us", "reinstated_us",
         "again", "finish_us", "h2_retired_us", "h2_back_us", "echoes", "trims", "gbps", "timeouts", "held",
         "ecn.retirements", "ecn.gbps", "trim.retirements", "trim.gbps", "timeout.retired", "timeout.timeouts",
         "hand.retired_us", "hand.deadline_us", "hand.late", "first.reinstated_us",
         *(f"{v}.verdict" for v in VARIANTS))


def _retirements(outcome) -> int:
    return sum(1 for e in outcome.events if e["kind"] == "ev_state" and e["new"] == "ASSUMED_BAD")


def _gbps(outcome) -> str:
    return f"{sum(f.goodput_bps for f in outcome.flows) / 1e9:.1f}"


def figures(lab, scratch):
    check = lab.check_module()
    ws = Workspace(lab.solution)
    run = check.failure_run(ws)
    kill, repair = check.KILL, check.REPAIR
    last = max(run.retired[v]["t"] for v in run.doomed)
    back = [e["t"] for e in run.outcome.ev_events("h1", new="GOOD") if e["ev"] in run.doomed and e["t"] >= repair]
    h2_bad = [e["t"] for e in run.outcome.ev_events("h2", new="ASSUMED_BAD") if e["ev"] in run.back_doomed]
    h2_back = [e["t"] for e in run.outcome.ev_events("h2", new="GOOD") if e["ev"] in run.back_doomed and e["t"] >= repair]
    before_repair = [t for t in run.sent_on_dead if t < repair]
    congestion = check.congestion_run(ws)
    pause, held = check.pause_run(ws)
    out = {"dead_evs": str(len(run.doomed)), "retired_us": f"{(last - kill) * 1e6:.0f}",
           "rto_us": f"{run.rto_at_kill * 1e6:.1f}",
           "backups": str(sum(1 for e in run.outcome.events if e["host"] == "h1" and e["kind"] == "ev_backup")),
           "deadline_us": f"{run.deadline * 1e6:.0f}", "last_on_dead_us": f"{max(before_repair) * 1e6:.0f}",
           "reinstated_us": f"{(max(back) - repair) * 1e6:.0f}",
           "again": str(sum(1 for t in run.sent_on_dead if t > max(back))),
           "finish_us": f"{run.flow.finish * 1e6:.0f}",
           "h2_retired_us": f"{(max(h2_bad) - kill) * 1e6:.0f}", "h2_back_us": f"{(max(h2_back) - repair) * 1e6:.0f}",
           "echoes": str(sum(f.sender.stats["ecn_echoes"] for f in congestion.flows)),
           "trims": str(sum(f.sender.stats["trims"] for f in congestion.flows)), "gbps": _gbps(congestion),
           "timeouts": str(pause.flows[0].sender.stats["timeouts"]), "held": str(held)}
    for name, body in VARIANTS.items():
        wrong = Workspace(variant(lab, scratch, check.FILE, append=override(check.CLASS, body)))
        failed = [r.check for r in run_checks(check.CHECKS, wrong) if not r.passed]
        out[f"{name}.verdict"] = "; ".join(failed) or "none"
        if name in ("ecn", "trim"):
            outcome = check.congestion_run(wrong)
            out[f"{name}.retirements"], out[f"{name}.gbps"] = str(_retirements(outcome)), _gbps(outcome)
        elif name == "timeout":
            outcome, _ = check.pause_run(wrong)
            out["timeout.retired"] = str(_retirements(outcome))
            out["timeout.timeouts"] = str(outcome.flows[0].sender.stats["timeouts"])
        elif name == "hand":
            bad = check.failure_run(wrong)
            out["hand.retired_us"] = f"{(max(bad.retired[v]['t'] for v in bad.doomed if v in bad.retired) - kill) * 1e6:.0f}"
            out["hand.deadline_us"] = f"{(bad.deadline - kill) * 1e6:.0f}"
            out["hand.late"] = str(sum(1 for t in bad.sent_on_dead if bad.deadline < t < repair))
        elif name == "first":
            early = check.failure_run(wrong)
            times = [e["t"] for e in early.outcome.ev_events("h1", new="GOOD") if e["ev"] in early.doomed
                     and e["t"] >= repair]
            out["first.reinstated_us"] = f"{(max(times) - repair) * 1e6:.0f}"
    return out
