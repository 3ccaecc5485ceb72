"""Checks of lab 4: the student's PathMonitor (monitor.py, class DeadPathMonitor) on netsim.

The failure run: h1 -> h2 (3 MB) over a two-plane leaf-spine with two spines per plane; the cable
between leaf s1 and spine s3 (plane 0) dies at 100 us and comes back at 600 us. Both ends are
graded: h1 (data, timeouts) and h2 (acknowledgements; its keepalives find the dead path). The congestion
run: four 1 MB flows between two leaves of one plane, whose uplinks queue up and mark ECN (and
trim), with no fault at all. The pause run: h1 -> h2 (1 MB) while h2's process stands still
for 1 ms, nothing lost. The hooks no run exercises for sure (a spurious timeout, a forgotten
backup, a probe record with a miss in it, keepalive misses) are also called directly on an EV set.
Every host's endpoint uses the student's class, behind the checker (it gets a copy of the
configuration, and must not be, derive from or call MRC's own path monitor). Runs are deterministic.
"""
from __future__ import annotations

import dataclasses

from host_agent.transport import Endpoint, Policies
from host_agent.transport.policies import MrcPathMonitor
from labs import transfers
from labs.checking import Check, CheckFailed, StudentRuns
from labs.originality import ReferenceWatch, methods_of, require_own
from simulation import Simulation

FILE, CLASS = "monitor.py", "DeadPathMonitor"
MB = 1_000_000
KILL, REPAIR = 100e-6, 600e-6
DEAD_SWITCH = "s3"
PAUSE = (300e-6, 1.3e-3)         # the receiver's process stands still (about 15 QP timeouts), in the pause run
RTOS = 3                         # the killed path's EVs must all be retired within this many RTOs
RUNS = StudentRuns(FILE)         # each run of the student's class, once per state of the file


def student_class(ws):
    cls = getattr(ws.module(FILE), CLASS, None)
    if cls is None:
        raise CheckFailed(f"{FILE} defines no class {CLASS}")
    require_own(cls, [MrcPathMonitor], f"{FILE}'s {CLASS}")
    return cls


def student_run(ws, run):
    """`run(policies)` with every endpoint's path monitor the student's (each made from a copy of the
    configuration, behind a watch on MRC's own path monitor)."""
    cls = student_class(ws)
    with ReferenceWatch(methods_of(MrcPathMonitor)) as watch:
        def monitor(config):
            return watch.student(watch.call(cls, dataclasses.replace(config)))
        result = run(Policies(path_monitor=monitor))
    watch.verify(f"{FILE}'s {CLASS}")
    return result


class FailureRun:
    """The failure run and what the checks ask of it."""

    def __init__(self, ws) -> None:
        net = transfers.fabric(3, planes=2)
        cable = net.cable("s1", DEAD_SWITCH)
        cable.ab.trace_data = True                     # when each data packet was offered to s1 -> s3
        self.rto_at_kill = None
        net.at(KILL, cable.set_up, False)
        net.at(KILL, self._note_rto, net)
        net.at(REPAIR, cable.set_up, True)
        outcome = student_run(ws, lambda policies: transfers.run_flows(
            net, [transfers.Flow("h1", "h2", 3 * MB)], transfers.config(), policies, until=0.05))
        self.net, self.outcome, self.flow = net, outcome, outcome.flows[0]
        self.sent_on_dead = list(cable.ab.data_offered_at)
        evset = self.flow.sender.evset
        self.dead_path_keys = {k for k, p in enumerate(evset.paths)
                               if DEAD_SWITCH in net.path_of_address(p.plane, p.dst)}
        self.doomed = {ev.value: ev for ev in evset.home_evs() if ev.path_key in self.dead_path_keys}
        self.retired = {}
        for e in outcome.ev_events("h1", new="ASSUMED_BAD"):
            self.retired.setdefault(e["ev"], e)
        back = self.flow.receiver.evset                 # h2's end: acknowledgements and keepalives
        self.back_dead_keys = {k for k, p in enumerate(back.paths)
                               if DEAD_SWITCH in net.path_of_address(p.plane, p.dst)}
        self.back_doomed = {ev.value for ev in back.home_evs() if ev.path_key in self.back_dead_keys}
        if not self.flow.exactly_once:
            raise CheckFailed(f"the 3 MB transfer did not complete exactly once "
                              f"({self.flow.delivered} of {self.flow.messages} messages)")

    def _note_rto(self, net) -> None:
        self.rto_at_kill = net.hosts["h1"].endpoint.connections[transfers.QP_BASE].rtt.rto

    @property
    def deadline(self) -> float:
        return KILL + RTOS * self.rto_at_kill


def failure_run(ws) -> FailureRun:
    return RUNS.get(ws, ("failure",), lambda: FailureRun(ws))


def retired_in_time(ws) -> str:
    run = failure_run(ws)
    missed = [v for v in run.doomed if v not in run.retired]
    if missed:
        raise CheckFailed(f"{len(missed)} of the {len(run.doomed)} EVs on the dead path were never retired")
    last = max(run.retired[v]["t"] for v in run.doomed)
    if last > run.deadline:
        raise CheckFailed(f"the last EV of the dead path was retired {(last - KILL) * 1e6:.0f} us after the "
                          f"kill; {RTOS} RTOs were {RTOS * run.rto_at_kill * 1e6:.0f} us")
    wrong = [e for v, e in run.retired.items() if e["path"] not in run.dead_path_keys]
    if wrong:
        raise CheckFailed(f"{len(wrong)} EV(s) of live paths were retired too (first: cause {wrong[0]['cause']!r} "
                          f"at {wrong[0]['t'] * 1e6:.0f} us)")
    return (f"all {len(run.doomed)} EVs of the dead path retired {(last - KILL) * 1e6:.0f} us after the kill "
            f"(RTO {run.rto_at_kill * 1e6:.0f} us), none of a live path")


def backups_same_plane(ws) -> str:
    run = failure_run(ws)
    backups = {e["replaces"]: e for e in run.outcome.events if e["host"] == "h1" and e["kind"] == "ev_backup"}
    missing = [v for v in run.doomed if v not in backups]
    if missing:
        raise CheckFailed(f"{len(missing)} of the {len(run.doomed)} retired EVs left their slot without a backup EV")
    off = [b for v, b in backups.items() if v in run.doomed
           and (b["plane"] != run.doomed[v].plane or b["path"] in run.dead_path_keys)]
    if off:
        raise CheckFailed(f"{len(off)} backup EV(s) are on another plane or on the dead path")
    return f"each of the {len(run.doomed)} retired EVs got a backup on a live path of its own plane"


def silent_after(ws) -> str:
    run = failure_run(ws)
    late = [t for t in run.sent_on_dead if run.deadline < t < REPAIR]
    if late:
        raise CheckFailed(f"{len(late)} data packet(s) were sent on the dead path between {RTOS} RTOs after the "
                          f"kill and the repair (first at {late[0] * 1e6:.0f} us)")
    return (f"no data packet on the dead path from {run.deadline * 1e6:.0f} us until the repair at "
            f"{REPAIR * 1e6:.0f} us")


def reinstated(ws) -> str:
    run = failure_run(ws)
    back = {}
    for e in run.outcome.ev_events("h1", new="GOOD"):
        if e["ev"] in run.doomed and e["t"] >= REPAIR:
            back.setdefault(e["ev"], e["t"])
    if set(back) != set(run.doomed):
        raise CheckFailed(f"{len(run.doomed) - len(back)} of the {len(run.doomed)} retired EVs were not "
                          f"reinstated after the repair at {REPAIR * 1e6:.0f} us")
    first = max(back.values())
    again = [t for t in run.sent_on_dead if t > first]
    if not again:
        raise CheckFailed("the EVs were reinstated but no data went on the repaired path afterwards")
    return (f"all reinstated {(first - REPAIR) * 1e6:.0f} us after the repair; {len(again)} data packets "
            f"used the path again")


def congestion_run(ws):
    """The congestion run's outcome (made once per file state)."""
    def make():
        net = transfers.fabric(5, planes=1, hosts_per_leaf=2)
        flows = [transfers.Flow(a, b, MB) for a, b in (("h1", "h3"), ("h2", "h4"), ("h1", "h4"), ("h2", "h3"))]
        return student_run(ws, lambda policies: transfers.run_flows(net, flows, transfers.config(), policies,
                                                                    until=0.05))
    return RUNS.get(ws, ("congestion",), make)


def pause_run(ws):
    """(outcome, packets held) of the pause run (made once per file state)."""
    def make():
        net = transfers.fabric(8, planes=2)
        held = transfers.pause(net, "h2", PAUSE[0], PAUSE[1])
        outcome = student_run(ws, lambda policies: transfers.run_flows(
            net, [transfers.Flow("h1", "h2", MB)], transfers.config(), policies, until=0.05))
        return outcome, len(held)
    return RUNS.get(ws, ("pause",), make)


def congestion_retires_nothing(ws) -> str:
    outcome = congestion_run(ws)
    echoes = sum(f.sender.stats["ecn_echoes"] for f in outcome.flows)
    trims = sum(f.sender.stats["trims"] for f in outcome.flows)
    retired = [e for e in outcome.events if e["kind"] == "ev_state" and e["new"] == "ASSUMED_BAD"]
    if not all(f.exactly_once for f in outcome.flows):
        raise CheckFailed("the four flows did not all complete exactly once")
    total = sum(f.goodput_bps for f in outcome.flows) / 1e9
    if retired:
        causes = sorted({e["cause"] for e in retired})
        raise CheckFailed(f"no link failed, yet {len(retired)} EVs were retired (causes: {', '.join(causes)}); "
                          f"{echoes} ECN echoes, {trims} trims; the flows got {total:.1f} Gbit/s together")
    return f"{echoes} ECN echoes and {trims} trims, no EV retired; {total:.1f} Gbit/s together"


def pause_retires_nothing(ws) -> str:
    outcome, held = pause_run(ws)
    flow = outcome.flows[0]
    if not flow.exactly_once:
        raise CheckFailed("the 1 MB transfer did not complete exactly once")
    timeouts = flow.sender.stats["timeouts"]
    retired = [e for e in outcome.events if e["kind"] == "ev_state" and e["new"] == "ASSUMED_BAD"]
    if retired:
        raise CheckFailed(f"the receiver stopped for {(PAUSE[1] - PAUSE[0]) * 1e6:.0f} us ({timeouts} timeouts, "
                          f"nothing lost), and {len(retired)} EVs were retired")
    return f"{timeouts} timeouts while the receiver stood still ({held} packets held), no EV retired"


def receiver_end(ws) -> str:
    run = failure_run(ws)
    bad = {}
    for e in run.outcome.ev_events("h2", new="ASSUMED_BAD"):
        bad.setdefault(e["ev"], e)
    wrong = [e for e in bad.values() if e["path"] not in run.back_dead_keys]
    if wrong:
        raise CheckFailed(f"h2 (the receiving end) retired {len(wrong)} EV(s) of live paths (first: cause "
                          f"{wrong[0]['cause']!r} at {wrong[0]['t'] * 1e6:.0f} us)")
    missed = [v for v in run.back_doomed if v not in bad or bad[v]["t"] >= REPAIR]
    if missed:
        raise CheckFailed(f"h2 (the receiving end, which sends only acknowledgements and keepalive probes) "
                          f"never retired {len(missed)} of the {len(run.back_doomed)} EVs of its dead path before the "
                          f"repair: its keepalives went unanswered there (on_keepalive_miss)")
    back = {}
    for e in run.outcome.ev_events("h2", new="GOOD"):
        if e["ev"] in run.back_doomed and e["t"] >= REPAIR:
            back.setdefault(e["ev"], e["t"])
    if set(back) != run.back_doomed:
        raise CheckFailed(f"h2 (the receiving end): {len(run.back_doomed) - len(back)} of the {len(run.back_doomed)} "
                          f"EVs it retired were not reinstated by probes after the repair")
    last = max(bad[v]["t"] for v in run.back_doomed)
    return (f"h2 retired the {len(run.back_doomed)} EVs of its dead path {(last - KILL) * 1e6:.0f} us after the kill "
            f"(causes: {', '.join(sorted({bad[v]['cause'] for v in run.back_doomed}))}) and took them back "
            f"{(max(back.values()) - REPAIR) * 1e6:.0f} us after the repair")


def _states(evset) -> dict:
    return {v: ev.state for v, ev in evset.by_value.items()} | {id(ev): ev.state for ev in evset.home_evs()}


def hooks_called_directly(ws) -> str:
    """The hooks on a fresh connection's EV set, called as the transport calls them."""
    net = transfers.fabric(3, planes=2)
    cfg = transfers.config()
    paths = Simulation(net, cfg).paths           # a connection's paths on the fabric, as the flows get them
    conn = Endpoint("h1", cfg, rng_seed=1).connect("h2", 1, 2, paths("h1", "h2"), paths("h2", "h1"))
    evset = conn.evset
    homes = {}
    for ev in evset.home_evs():
        homes.setdefault(ev.path_key, ev)
    if len(homes) < 4:
        raise RuntimeError(f"the checker's EV set has {len(homes)} paths, 4 expected")
    cls = student_class(ws)
    seen = []
    with ReferenceWatch(methods_of(MrcPathMonitor)) as watch:
        monitor = watch.student(watch.call(cls, dataclasses.replace(cfg)))
        t = 1e-3
        # a spurious timeout: the EV it retired comes back
        ev = homes[0]
        evset.mark_bad(ev, t, "timeout")
        monitor.on_spurious(evset, ev, t + 1e-5)
        if not ev.usable:
            raise CheckFailed("on_spurious: a timeout retired an EV, then proved spurious (the packet had arrived), "
                              "and the EV stayed retired")
        seen.append("on_spurious takes a wrongly retired EV back")
        # a spurious timeout of a backup EV the set has forgotten since: nothing to undo
        evset.mark_bad(homes[1], t, "timeout")
        backups = [e for e in evset.active_evs() if not e.home and e.plane == homes[1].plane]
        if not backups:
            raise RuntimeError("the checker's EV set installed no backup")
        backup = backups[0]
        evset.mark_bad(backup, t + 2e-5, "timeout")
        if evset.get(backup.value) is not None:
            raise RuntimeError("the checker's EV set kept a retired backup")
        before = _states(evset)
        monitor.on_spurious(evset, backup, t + 3e-5)
        if _states(evset) != before:
            raise CheckFailed("on_spurious: for a backup EV the set had already forgotten (a retired backup is "
                              "dropped, not probed), your code changed the state of other EVs")
        seen.append("leaves a forgotten backup alone")
        # keepalive misses: retire at keepalive_misses, not before
        ev = homes[2]
        few = monitor.on_keepalive_miss(evset, ev, cfg.keepalive_misses - 1, t)
        if few or not ev.usable:
            raise CheckFailed(f"on_keepalive_miss: {cfg.keepalive_misses - 1} unanswered keepalive(s) already "
                              "retired the path (or returned True); config.keepalive_misses is how many it takes")
        enough = monitor.on_keepalive_miss(evset, ev, cfg.keepalive_misses, t)
        mates = [e for e in evset.home_evs() if e.path_key == ev.path_key]
        if enough is not True or any(e.usable for e in mates):
            raise CheckFailed(f"on_keepalive_miss: after {cfg.keepalive_misses} unanswered keepalives on a path "
                              f"(while later ones were answered) {'the path was not retired' if ev.usable else ''}"
                              f"{'not all its EVs were retired' if not ev.usable and any(e.usable for e in mates) else ''}"
                              f"{'' if enough is True else f'; it must return True when it retired (it returned {enough!r})'}")
        seen.append("on_keepalive_miss retires at config.keepalive_misses")
        # probes: probe_successes clean replies in a row, a miss starts the count again
        ev = homes[3]
        evset.mark_bad(ev, t, "timeout")
        answers = [True] * (cfg.probe_successes - 1) + [False] + [True] * (cfg.probe_successes - 1)
        for n, answered in enumerate(answers, 1):
            monitor.on_probe(evset, ev, answered, t + n * 1e-5)
            if ev.usable:
                raise CheckFailed(f"on_probe: the EV came back after the probe replies {answers[:n]} (True: "
                                  f"answered); it takes config.probe_successes in a row, and a miss starts again")
        monitor.on_probe(evset, ev, True, t + 1e-3)
        if not ev.usable:
            raise CheckFailed(f"on_probe: after the probe replies {answers + [True]} (the last "
                              f"{cfg.probe_successes} answered in a row) the EV is still retired")
        seen.append("on_probe reinstates after config.probe_successes clean replies in a row")
    watch.verify(f"{FILE}'s {CLASS}")
    return "; ".join(seen)


CHECKS = [
    Check("the dead path's EVs retired within 3 RTOs",
          "a timeout without a trim NACK is MRC's sign of a failed path, and every EV mapping to that "
          "path shares its fate; but a timeout is evidence against its path only if something sent "
          "after it got through",
          retired_in_time, points=2),
    Check("backup EVs from the same plane",
          "a retired EV leaves a hole in the rotation; the EV set's own mechanism for retiring fills it "
          "so that every plane keeps its share of the traffic",
          backups_same_plane, points=1),
    Check("nothing sent on the dead path afterwards",
          "a retired EV must leave the rotation, and its slot must be taken by an EV of a path "
          "not known to be bad",
          silent_after, points=2),
    Check("reinstated by probes after the repair",
          "retired EVs are probed in the background; which probe outcomes should bring one back, and "
          "how many in a row?",
          reinstated, points=1),
    Check("the receiving end retires and reinstates too",
          "a connection that only acknowledges sends no data to time out: its keepalive probes on each path "
          "are what tells it a path died, and its probes what tells it the path is back",
          receiver_end, points=1),
    Check("congestion retires no path",
          "ECN marks and trims say a path is busy, not broken: they steer traffic for a while, and "
          "retiring a working path only takes capacity away",
          congestion_retires_nothing, points=2),
    Check("a paused receiver retires no path",
          "when the peer stops answering altogether, every packet times out, on every path alike; "
          "a timeout only says something about its path when later packets got through",
          pause_retires_nothing, points=2),
    Check("every hook, called directly",
          "each hook is one signal: a spurious timeout undoes what its timeout did (unless the EV is gone), "
          "keepalive misses and probe replies are counted against the configuration's numbers",
          hooks_called_directly, points=1),
]
