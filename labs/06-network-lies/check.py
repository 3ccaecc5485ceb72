"""Checks of lab 6: predictions against netsim runs, the blackholed switch, a gray link's EV timeline.

The runs are kept for every folder of a class: students get copies of their events. The failed
switch is looked for in four runs that blame three different switches (s3, s4, s5); the gray link's
timeline is read at 1, 5 and 20 % loss."""
import copy
import itertools
from collections import defaultdict

import yaml

from experiments.backends.netsim_backend import NetsimBackend
from experiments.scenario import load_scenario, parse_scenario
from labs.catalog import LABS_DIR
from labs.checking import Check, CheckFailed
from topologies.paths import host_paths
from topologies.spec import topology_from_spec

EXPERIMENTS = LABS_DIR.parent / "experiments"
# what the student predicts -> (scenario file, variant label)
FAULTS = {"link killed": ("failover.yaml", "leaf-spine"), "spine blackholes": ("blackhole.yaml", "spine blackholes")}
# the failed switch to find: blackhole.yaml's two variants (both the spine s3), and the other spine
# blackholing, on the same network and on one of three leaves and three spines
SUSPECT_CASES = [("blackhole.yaml", "spine blackholes", None),
                 ("blackhole.yaml", "spine process killed", None),
                 ("blackhole.yaml", "the other spine blackholes",
                  {"variants": [{"label": "the other spine blackholes",
                                 "faults": [{"kind": "switch_blackhole", "switch": "s4", "at": "30%"}]}]}),
                 ("blackhole.yaml", "a spine of three blackholes",
                  {"topology": "leafspine:3x3x1",
                   "variants": [{"label": "a spine of three blackholes",
                                 "faults": [{"kind": "switch_blackhole", "switch": "s5", "at": "30%"}]}]})]
# the gray link's timelines: gray.yaml's two variants (at 1 % no EV is retired any more: the link's
# losses are too few to be its own), and between them the same link losing 5 % (retired, all reinstated)
GRAY_5 = {"kind": "gray_loss", "link": "auto", "loss": 0.05, "at": 0.02}
GRAY_CASES = [("1% loss", None), ("5% loss", {"variants": [{"label": "5% loss", "faults": [GRAY_5]}]}),
              ("20% loss", None)]
_runs: dict = {}


def _run(scenario_file: str, variant: str, transport: str, changes: dict | None = None):
    """The record of one quick case on netsim, with `changes` to the scenario's keys (kept: several
    checks read the same runs)."""
    key = (scenario_file, variant, transport, repr(changes))
    if key not in _runs:
        path = EXPERIMENTS / scenario_file
        if changes:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
            doc.update(copy.deepcopy(changes))
            scenario = parse_scenario(doc, str(path), quick=True)
        else:
            scenario = load_scenario(path, quick=True)
        [case] = [c for c in scenario.cases() if c.variant.label == variant and c.transport.name == transport]
        _runs[key] = NetsimBackend().run_case(case)
    return _runs[key]


def check_predictions(ws):
    predicted = getattr(ws.module("lies.py"), "PREDICTED_COMPLETES", None)
    if not isinstance(predicted, dict):
        raise CheckFailed("lies.py has no PREDICTED_COMPLETES dictionary")
    outcome = []
    for fault, (scenario_file, variant) in FAULTS.items():
        scenario = load_scenario(EXPERIMENTS / scenario_file, quick=True)
        for transport in [t.name for t in scenario.transports]:
            guess = predicted.get(fault, {}).get(transport)
            if guess not in (True, False):
                raise CheckFailed(f"no prediction (True or False) for {fault!r} / {transport!r}")
            done = _run(scenario_file, variant, transport).completed
            if guess != done:
                raise CheckFailed(f"{fault} / {transport}: your prediction ({'finishes' if guess else 'never finishes'}) "
                                  f"does not hold: run experiments/{scenario_file} (--backend netsim --quick) and "
                                  f"look at what {transport} did", expected="finishes" if done else "never finishes")
            outcome.append(f"{transport} {'finishes' if done else 'stalls'}")
    return "all six predictions hold (" + ", ".join(outcome[:3]) + " after a link dies; " + ", ".join(outcome[3:]) + \
        " when a spine blackholes)"


def check_path_switches(ws):
    path_switches = ws.module("lies.py").path_switches
    checked = 0
    for spec, src, dst in (("leafspine:2x2x2", "h1", "h3"), ("leafspine:4x2x2", "h8", "h1"),
                           ("multiplane:2x2x2x2", "h1", "h4")):
        topo = topology_from_spec(spec)
        for path in host_paths(topo, src, dst):
            got = list(ws.call(path_switches, topo, path.address.packed.hex()))
            want = list(path.switches)
            if got != want:
                k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
                what = (f"switch {k + 1} of the path is not {got[k]}" if k < len(got) and k < len(want)
                        else f"you give {len(got)} switch(es), the path crosses {len(want)}")
                raise CheckFailed(f"{spec}: {path.address} ({path.address.packed.hex()}): you say {got}; {what}",
                                  expected=str(want))
            checked += 1
    return f"{checked} path addresses read back into their switches"


def _never_retired_switches(topo, ev_events, path_switches) -> set:
    bad = {(e["conn"], e["ev"]) for e in ev_events if e["kind"] == "ev_state" and e["new"] == "ASSUMED_BAD"}
    healthy = set()
    for record in ev_events:
        if record["kind"] == "ev_set":
            for ev in record["evs"]:
                if (record["conn"], ev["ev"]) not in bad:
                    healthy.update(path_switches(topo, ev["dst"]))
    return healthy


def check_suspects(ws):
    suspects = ws.module("lies.py").suspects
    found = []
    for scenario_file, variant, changes in SUSPECT_CASES:
        record = _run(scenario_file, variant, "MRC", changes)
        topo = topology_from_spec(record.topology)
        [fault] = record.faults
        got = ws.call(suspects, topo, copy.deepcopy(record.ev_events))
        try:
            got = set(got)
        except TypeError:
            raise CheckFailed(f"{variant}: suspects returned {str(got)[:80]}, not a set of switch names") from None
        if got != {fault.target}:
            healthy = _never_retired_switches(topo, record.ev_events, _path_switches)
            cleared = sorted(got & healthy)
            if not got:
                why = "you suspect no switch, yet MRC retired EVs"
            elif cleared:
                why = (f"you suspect {cleared}, on a path whose EVs were never retired: a path that works "
                       "clears the switches it crosses")
            elif fault.target not in got:
                why = f"you suspect {sorted(got)}, and the failed switch is not among them"
            else:
                why = f"you suspect {sorted(got)}: more than one switch, yet the retired paths tell them apart"
            raise CheckFailed(f"{scenario_file} '{variant}' ({record.topology}): "
                              f"{why}", expected=f"{{{fault.target!r}}}")
        found.append(f"{variant}: {fault.target}")
    return "the failed switch found from the retired EVs alone (" + "; ".join(found) + ")"


def _path_switches(topo, dst_hex):
    """The checker's reading of a path address: the switches whose uSIDs follow the locator
    (the addressing plan's own parser, not the student's)."""
    from topologies.addressing import parse_usid_address
    by_usid = {switch.usid: switch.name for switch in topo.switches}
    _, usids = parse_usid_address(bytes.fromhex(dst_hex))
    return [by_usid[usid] for usid in itertools.takewhile(lambda usid: usid in by_usid, usids)]


def _time_bad(ev_events, end):
    """Reference: per EV, the ASSUMED_BAD intervals clipped to `end`, summed."""
    changes = defaultdict(list)
    for e in ev_events:
        if e["kind"] == "ev_state":
            changes[(e["conn"], e["ev"])].append((e["t"], e["new"] == "ASSUMED_BAD"))
    out = {}
    for key, seq in changes.items():
        seq.sort()
        if not any(bad for _, bad in seq):
            continue
        total, bad_since = 0.0, None
        for t, bad in seq:
            if bad and bad_since is None:
                bad_since = t
            elif not bad and bad_since is not None:
                total, bad_since = total + t - bad_since, None
        out[key] = total + (end - bad_since if bad_since is not None else 0.0)
    return out


def _compare(out_of_service, variant: str, events: list, end: float, what: str) -> dict:
    """The reference time out of service per EV of `events` up to `end`; CheckFailed when the
    student's function says otherwise."""
    want = _time_bad(events, end)
    got = out_of_service(copy.deepcopy(events), end)
    if not isinstance(got, dict):
        raise CheckFailed(f"gray.yaml '{variant}'{what}: out_of_service returned {str(got)[:80]}, not a dictionary")
    if set(got) != set(want):
        side = ("more EVs than were ever retired" if set(got) > set(want) else
                "fewer EVs than were retired at least once" if set(got) < set(want) else "other keys")
        raise CheckFailed(f"gray.yaml '{variant}'{what}: you give {len(got)} EVs, {side} (your keys, e.g. "
                          f"{list(got)[:1]}; keys are (conn, ev) pairs)", expected=f"keys such as {next(iter(want), None)}")
    wrong = [k for k in want if not isinstance(got[k], (int, float)) or abs(got[k] - want[k]) > 1e-9]
    if wrong:
        k = wrong[0]
        mine = got[k]
        side = ("" if not isinstance(mine, (int, float)) else
                ", more than it was" if mine > want[k] else ", less than it was")
        raise CheckFailed(f"gray.yaml '{variant}'{what}: for EV {k} you say {mine!r} s{side} "
                          f"({len(wrong)} EVs differ)", expected=f"{want[k]!r} s")
    return want


def _calling(ws, fn):
    return lambda *args: ws.call(fn, *args)


def check_timeline(ws):
    out_of_service = ws.module("lies.py").out_of_service
    figures = []
    out_of_service = _calling(ws, out_of_service)
    for variant, changes in GRAY_CASES:
        record = _run("gray.yaml", variant, "MRC", changes)
        want = _compare(out_of_service, variant, record.ev_events, record.end, "")
        # the same run seen just after its last retirement, when some EVs are still out of service
        retired = [e["t"] for e in record.ev_events if e["kind"] == "ev_state" and e["new"] == "ASSUMED_BAD"]
        if retired:
            cut = max(retired)
            early = [e for e in record.ev_events if e["t"] <= cut]
            _compare(out_of_service, variant, early, cut + (record.end - cut) / 2,
                     f" up to {(cut + (record.end - cut) / 2) * 1e3:.1f} ms")
        share = sum(want.values()) / (len(want) * record.end) if want else 0.0
        figures.append(f"{variant}: {len(want)} EVs retired, out of service {share:.0%} of the run on average")
    return "; ".join(figures)


CHECKS = [
    Check("which transports finish", "a routing protocol reroutes around what it is told about: a link "
          "that goes down; a transport that watches its own packets needs no one to tell it", check_predictions),
    Check("path addresses to switches", "the 32-bit locator comes first; each 16-bit uSID after it names "
          "one switch until the destination host's", check_path_switches),
    Check("find the failed switch from the EVs", "a retired EV says 'something on this path is broken'; the paths "
          "that still work clear the switches they cross", check_suspects),
    Check("a gray link's per-EV timeline", "an EV can be retired and reinstated several times; one still "
          "retired when the run ends is out of service until the end", check_timeline),
]
