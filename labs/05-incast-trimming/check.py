"""Checks of lab 5: the student's measurements and predictions against incast runs on netsim."""
import copy

import yaml

from experiments.backends.netsim_backend import NetsimBackend
from experiments.metrics import flow_throughputs
from experiments.scenario import parse_scenario
from labs.catalog import LABS_DIR
from labs.checking import Check, CheckFailed

INCAST = LABS_DIR.parent / "experiments" / "incast.yaml"
TRIMMING, DROP_TAIL, ROCE = "MRC + trimming", "MRC drop-tail", "RoCE (drop-tail)"
CUT_SHORT_S = 0.002            # a run stopped this early: the incast has not finished (the unfinished case)
EXTRA_THRESHOLD = 4            # measure() is also checked on the trimming run at this threshold
_runs: dict = {}


def _scenario(threshold=None, horizon_s=None):
    doc = yaml.safe_load(INCAST.read_text(encoding="utf-8"))
    if threshold is not None:
        link = doc["link"]
        link["trim_threshold"] = threshold
        link["ecn_threshold"] = min(link.get("ecn_threshold", 4), threshold)
    if horizon_s is not None:
        doc["horizon_s"] = doc["quick"]["horizon_s"] = horizon_s
    return parse_scenario(doc, str(INCAST), quick=True)


def _runs_at(threshold=None, transports=(TRIMMING, DROP_TAIL, ROCE), horizon_s=None):
    """{transport: record} of the quick incast at `threshold` (None: the scenario's own), until
    `horizon_s` (None: the scenario's)."""
    out = {}
    for case in _scenario(threshold, horizon_s).cases():
        if case.transport.name in transports:
            key = (threshold, horizon_s, case.transport.name)
            if key not in _runs:
                _runs[key] = NetsimBackend().run_case(case)
            out[case.transport.name] = _runs[key]
    return out


def measured_runs() -> list[tuple[str, object]]:
    """(label, record) of every run measure() is checked on: the three transports, trimming at
    another threshold, and trimming cut short before the incast finished."""
    runs = list(_runs_at().items())
    runs.append((f"{TRIMMING} at trim threshold {EXTRA_THRESHOLD}",
                 _runs_at(EXTRA_THRESHOLD, (TRIMMING,))[TRIMMING]))
    runs.append((f"{TRIMMING} stopped at {CUT_SHORT_S * 1e3:g} ms, before the incast finished",
                 _runs_at(None, (TRIMMING,), CUT_SHORT_S)[TRIMMING]))
    return runs


def _reference(record) -> dict:
    by_role = {}
    for flow, bps in zip(record.flows, flow_throughputs(record)):
        by_role.setdefault(flow.role, []).append((flow, bps))
    finishes = [f.finish for f, _ in by_role["incast"]]
    return {"incast_s": None if None in finishes else max(finishes),
            "victim_bps": by_role["victim"][0][1],
            "trimmed": int(record.switch_stats.get("trimmed", 0)),
            "dropped": int(record.switch_stats.get("queue_full_drops", 0))}


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= 1e-6 * max(abs(b), 1e-9)


UNITS = {"incast_s": "s", "victim_bps": "bit/s", "trimmed": "packets", "dropped": "packets"}


def _wrong(name: str, key: str, mine, want) -> str:
    """What is wrong with the student's `key` of run `name`, without the run's value."""
    if want is None:
        return f"{name}: an incast flow never finished in this run, and your incast_s is {mine!r} (expected None)"
    if mine is None:
        return f"{name}: every incast flow finished in this run, and your {key} is None"
    if not isinstance(mine, (int, float)):
        return f"{name}: your {key} is {mine!r}, not a number"
    side = "higher" if mine > want else "lower"
    return f"{name}: your {key} is {mine!r} {UNITS[key]}, {side} than the run's"


def check_measure(ws):
    measure = ws.module("incast.py").measure
    figures = []
    for name, record in measured_runs():
        want = _reference(record)
        got = ws.call(measure, copy.deepcopy(record))        # runs are shared: the student gets a copy
        if not isinstance(got, dict):
            raise CheckFailed(f"{name}: measure returned {str(got)[:80]}, not a dictionary")
        for key, value in want.items():
            if key not in got:
                raise CheckFailed(f"{name}: measure's dictionary has no {key!r}")
            if not _close(got[key], value):
                raise CheckFailed(_wrong(name, key, got[key], value), expected=f"{name}: {key} = {value!r}")
        incast = "not finished" if want["incast_s"] is None else f"{want['incast_s'] * 1e3:.1f} ms"
        figures.append(f"{name}: incast {incast}, victim {want['victim_bps'] / 1e6:.0f} Mb/s, "
                       f"{want['trimmed']} trimmed, {want['dropped']} dropped")
    return "; ".join(figures)


def _measured_outcomes(runs) -> dict:
    finish = {name: _reference(r)["incast_s"] for name, r in runs.items()}
    return {
        # an incast that never finished is the slowest
        "slowest incast": max((float("inf") if t is None else t, n) for n, t in finish.items())[1],
        "drop-tail loses packets at a full queue": _reference(runs[DROP_TAIL])["dropped"] > 0,
        "trimming loses packets at a full queue": _reference(runs[TRIMMING])["dropped"] > 0,
        "drop-tail makes MRC retire EVs": runs[DROP_TAIL].transport_stats.get("evs_retired", 0) > 0,
        "trimming makes MRC retire EVs": runs[TRIMMING].transport_stats.get("evs_retired", 0) > 0,
    }


def _predictions(ws) -> dict:
    predicted = getattr(ws.module("incast.py"), "PREDICTIONS", None)
    if not isinstance(predicted, dict):
        raise CheckFailed("incast.py has no PREDICTIONS dictionary")
    return predicted


def check_predictions(ws):
    predicted = _predictions(ws)
    measured = _measured_outcomes(_runs_at())
    for key, value in measured.items():
        if predicted.get(key) is None:
            raise CheckFailed(f"no prediction for {key!r}")
        if predicted[key] != value:
            raise CheckFailed(f"{key!r}: your prediction {predicted[key]!r} does not hold in the runs: measure "
                              "it (the runs' figures: mrc-testbed run experiments/incast.yaml --backend netsim "
                              "--quick), then correct it", expected=repr(value))
    return "; ".join(f"{k}: {v}" for k, v in measured.items())


def check_thresholds(ws):
    module = ws.module("incast.py")
    thresholds = getattr(module, "THRESHOLDS", None)
    depth = _scenario().variants[0].link.get("queue_depth", 16)
    if (not isinstance(thresholds, (list, tuple)) or len(set(thresholds)) < 3
            or not all(isinstance(t, int) and 1 <= t <= depth for t in thresholds)):
        raise CheckFailed(f"THRESHOLDS is {thresholds!r}: give at least three different whole numbers "
                          f"of packets from 1 to {depth} (the queue depth)")
    trims = {}
    for threshold in sorted(set(thresholds)):
        record = _runs_at(threshold, (TRIMMING,))[TRIMMING]
        trims[threshold] = _reference(record)["trimmed"]
        if _reference(record)["dropped"]:
            raise CheckFailed(f"at threshold {threshold} the switches dropped packets at a full queue")
    counts = list(trims.values())
    fewer = all(b < a for a, b in zip(counts, counts[1:]))
    guess = _predictions(ws).get("fewer trims at a higher threshold")
    if guess is None:
        raise CheckFailed("no prediction for 'fewer trims at a higher threshold'")
    if guess != fewer:
        raise CheckFailed(f"'fewer trims at a higher threshold': your prediction {guess!r} does not hold for your "
                          f"thresholds {sorted(set(thresholds))}: count the trimmed packets at each",
                          expected=f"{fewer!r} (trimmed packets by threshold: {trims})")
    return "MRC + trimming, trimmed packets by threshold: " + ", ".join(f"{t}: {n}" for t, n in trims.items())


CHECKS = [
    Check("the incast's numbers from a run", "each flow has a role and its own finish time; the incast is "
          "done when its slowest sender is (and not at all while one has not finished), and a rate is bytes "
          "over the time they took: a flow's own, up to the end of the run if it never finished", check_measure),
    Check("predictions: trimming against drop-tail", "a trimmed packet still reaches the receiver (as a "
          "header), which NACKs it at once; a dropped one is only missed when later packets arrive past the "
          "gap (a SACK) or the sender's timer expires, and a go-back-N sender resends all that followed it; "
          "to MRC a burst of losses on one path can look like a broken path", check_predictions),
    Check("the trim threshold", "the threshold is how many packets may queue before the switch starts "
          "cutting: think of how often the queue of a 7 -> 1 incast stands above it", check_thresholds),
]
