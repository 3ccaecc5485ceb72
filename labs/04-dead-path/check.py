"""Checks of lab 4: the student's PathMonitor (monitor.py, class DeadPathMonitor) on netsim.

The failure run: h1 -> h2 (3 MB) over a two-plane leaf-spine with two spines per plane; the cable
between leaf s1 and spine s3 (plane 0) dies at 100 us and comes back at 600 us. The congestion
run: four 1 MB flows between two leaves of one plane, whose uplinks queue up and mark ECN (and
trim), with no fault at all. The pause run: h1 -> h2 (1 MB) while h2's process stands still
for 1 ms, nothing lost. Runs are deterministic.
"""
from __future__ import annotations

from host_agent.transport import Policies
from labs import transfers
from labs.checking import Check, CheckFailed

FILE, CLASS = "monitor.py", "DeadPathMonitor"
MB = 1_000_000
KILL, REPAIR = 100e-6, 600e-6
DEAD_SWITCH = "s3"
PAUSE = (300e-6, 1.3e-3)         # the receiver's process stands still (about 15 QP timeouts), in the pause run
RTOS = 3                         # the killed path's EVs must all be retired within this many RTOs
_runs: dict = {}                 # (folder, file state, scenario) -> result


def student_class(ws):
    cls = getattr(ws.module(FILE), CLASS, None)
    if cls is None:
        raise CheckFailed(f"{FILE} defines no class {CLASS}")
    return cls


def _key(ws, scenario: str) -> tuple:
    path = ws.path(FILE)
    return (str(ws.folder.resolve()), path.stat().st_mtime_ns, path.stat().st_size, scenario)


def _remember(key: tuple, make):
    """The result of `make()` for `key` (folder, file state, scenario), made once; a class's runs are
    kept only for the folder being checked."""
    if key not in _runs:
        for old in [k for k in _runs if k[0] != key[0]]:
            del _runs[old]
        _runs[key] = make()
    return _runs[key]


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
        outcome = transfers.run_flows(net, [transfers.Flow("h1", "h2", 3 * MB)], transfers.config(),
                                      Policies(path_monitor=student_class(ws)), until=0.05)
        self.net, self.outcome, self.flow = net, outcome, outcome.flows[0]
        self.sent_on_dead = list(cable.ab.data_offered_at)
        evset = self.flow.sender.evset
        self.dead_path_keys = {k for k, p in enumerate(evset.paths)
                               if DEAD_SWITCH in net.path_of_address(p.plane, p.dst)}
        self.doomed = {ev.value: ev for ev in evset.home_evs() if ev.path_key in self.dead_path_keys}
        self.retired = {}
        for e in outcome.ev_events("h1", new="ASSUMED_BAD"):
            self.retired.setdefault(e["ev"], e)
        if not self.flow.exactly_once:
            raise CheckFailed(f"the 3 MB transfer did not complete exactly once "
                              f"({self.flow.delivered} of {self.flow.messages} messages)")

    def _note_rto(self, net) -> None:
        self.rto_at_kill = net.hosts["h1"].endpoint.connections[transfers.QP_BASE].rtt.rto

    @property
    def deadline(self) -> float:
        return KILL + RTOS * self.rto_at_kill


def failure_run(ws) -> FailureRun:
    return _remember(_key(ws, "failure"), lambda: FailureRun(ws))


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


def congestion_retires_nothing(ws) -> str:
    def make():
        net = transfers.fabric(5, planes=1, hosts_per_leaf=2)
        flows = [transfers.Flow(a, b, MB) for a, b in (("h1", "h3"), ("h2", "h4"), ("h1", "h4"), ("h2", "h3"))]
        return transfers.run_flows(net, flows, transfers.config(), Policies(path_monitor=student_class(ws)),
                                   until=0.05)
    outcome = _remember(_key(ws, "congestion"), make)
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
    def make():
        net = transfers.fabric(8, planes=2)
        held = transfers.pause(net, "h2", PAUSE[0], PAUSE[1])
        outcome = transfers.run_flows(net, [transfers.Flow("h1", "h2", MB)], transfers.config(),
                                      Policies(path_monitor=student_class(ws)), until=0.05)
        return outcome, len(held)
    outcome, held = _remember(_key(ws, "pause"), make)
    flow = outcome.flows[0]
    if not flow.exactly_once:
        raise CheckFailed("the 1 MB transfer did not complete exactly once")
    timeouts = flow.sender.stats["timeouts"]
    retired = [e for e in outcome.events if e["kind"] == "ev_state" and e["new"] == "ASSUMED_BAD"]
    if retired:
        raise CheckFailed(f"the receiver stopped for {(PAUSE[1] - PAUSE[0]) * 1e6:.0f} us ({timeouts} timeouts, "
                          f"nothing lost), and {len(retired)} EVs were retired")
    return f"{timeouts} timeouts while the receiver stood still ({held} packets held), no EV retired"


CHECKS = [
    Check("the dead path's EVs retired within 3 RTOs",
          "a timeout without a trim NACK is MRC's sign of a failed path, and every EV mapping to that "
          "path shares its fate; but a timeout is evidence against its path only if something sent "
          "after it got through",
          retired_in_time),
    Check("backup EVs from the same plane",
          "a retired EV leaves a hole in the rotation; the EV set's own mechanism for retiring fills it "
          "so that every plane keeps its share of the traffic",
          backups_same_plane),
    Check("nothing sent on the dead path afterwards",
          "a retired EV must leave the rotation, and its slot must be taken by an EV of a path "
          "not known to be bad",
          silent_after),
    Check("reinstated by probes after the repair",
          "retired EVs are probed in the background; which probe outcomes should bring one back, and "
          "how many in a row?",
          reinstated),
    Check("congestion retires no path",
          "ECN marks and trims say a path is busy, not broken: they steer traffic for a while, and "
          "retiring a working path only takes capacity away",
          congestion_retires_nothing),
    Check("a paused receiver retires no path",
          "when the peer stops answering altogether, every packet times out, on every path alike; "
          "a timeout only says something about its path when later packets got through",
          pause_retires_nothing),
]
