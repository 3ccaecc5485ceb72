"""Checks of lab 6: predictions against netsim runs, the blackholed switch, a gray link's EV timeline.

The runs are kept for every folder of a class: students get copies of their events."""
import copy
from collections import defaultdict

from experiments.backends.netsim_backend import NetsimBackend
from experiments.scenario import load_scenario
from labs.catalog import LABS_DIR
from labs.checking import Check, CheckFailed
from topologies.paths import host_paths
from topologies.spec import topology_from_spec

EXPERIMENTS = LABS_DIR.parent / "experiments"
# what the student predicts -> (scenario file, variant label)
FAULTS = {"link killed": ("failover.yaml", "leaf-spine"), "spine blackholes": ("blackhole.yaml", "spine blackholes")}
_runs: dict = {}


def _run(scenario_file: str, variant: str, transport: str):
    """The record of one quick case on netsim (kept: several checks read the same runs)."""
    key = (scenario_file, variant, transport)
    if key not in _runs:
        scenario = load_scenario(EXPERIMENTS / scenario_file, quick=True)
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
                raise CheckFailed(f"{fault} / {transport}: you predicted it {'finishes' if guess else 'never finishes'}"
                                  f", on netsim it {'finished' if done else 'did not finish'}")
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
            got = list(path_switches(topo, path.address.packed.hex()))
            if got != list(path.switches):
                raise CheckFailed(f"{spec}: {path.address} ({path.address.packed.hex()}) goes through "
                                  f"{list(path.switches)}, you say {got}")
            checked += 1
    return f"{checked} path addresses read back into their switches"


def check_suspects(ws):
    suspects = ws.module("lies.py").suspects
    found = []
    for variant in ("spine blackholes", "spine process killed"):
        record = _run("blackhole.yaml", variant, "MRC")
        topo = topology_from_spec(record.topology)
        [fault] = record.faults
        got = set(suspects(topo, copy.deepcopy(record.ev_events)))
        if got != {fault.target}:
            raise CheckFailed(f"blackhole.yaml '{variant}': {fault.what} ({fault.target}); "
                              f"from the EV events you suspect {sorted(got)}")
        found.append(f"{variant}: {fault.target}")
    return "the failed spine found from the retired EVs alone (" + "; ".join(found) + ")"


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
    if set(got) != set(want):
        raise CheckFailed(f"gray.yaml '{variant}'{what}: {len(want)} EVs were retired at least once, you give "
                          f"{len(got)} (your keys, e.g. {list(got)[:1]}; expected (conn, ev) pairs)")
    wrong = [k for k in want if abs(got[k] - want[k]) > 1e-9]
    if wrong:
        k = wrong[0]
        raise CheckFailed(f"gray.yaml '{variant}'{what}: EV {k} was out of service {want[k] * 1e3:.3f} ms in all, "
                          f"you say {got[k] * 1e3:.3f} ms ({len(wrong)} EVs differ)")
    return want


def check_timeline(ws):
    out_of_service = ws.module("lies.py").out_of_service
    figures = []
    for variant in ("1% loss", "20% loss"):
        record = _run("gray.yaml", variant, "MRC")
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
