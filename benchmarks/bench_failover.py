"""Recovery time after a link kill, in ms and in RTTs: MRC against the RoCE-style baseline; and a
fat-tree k=4 failover on Mininet against netsim, in RTTs.

    .venv/bin/python -m benchmarks.bench_failover [--no-mininet] [--no-fat-tree] [--fat-tree-rate BPS] [--repeat N]

Runs the quick failover experiment (experiments/failover.yaml, leaf-spine variant: ring
all-reduce over 4 hosts, the baseline's busiest leaf-spine link killed at 30 % of the collective)
for MRC, RoCE (no rerouting) and RoCE with the emulated converging control plane (reroute after
1 s), on netsim and on the Mininet model target at the rate calibrated for this machine
(`mrc-testbed calibrate`; the fixed MODEL_RATE_BPS, with a note, without a record). Recovery =
failure -> goodput back to 90 % of its level before (experiments.metrics), and to 50 %. Times in
RTTs are over the base RTT the run measured (the smallest RTT of a full data packet any host saw);
each Mininet case prints its fidelity verdict. Every case runs `--repeat` times (default 3; netsim
with seeds 1, 2, 3, ...: experiments/repeats.py) and each figure is the median of its runs, its
range (min..max) in the figure's note and every run's value in the details: one run of a recovery
on a loaded machine is one draw (experiments/README.md, "Repetitions").

Then a ring all-reduce of 256 KB on fattree:4 (16 hosts, 20 switches) over MRC with a link killed
at 30 %, at `--fat-tree-rate` (default 1 Mbit/s) on netsim and on Mininet: completion in seconds
and in measured base RTTs, and Mininet's over netsim's.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.cases import MODEL_RATE_BPS, host_link_rate, mininet_left_out, run_cases, scenario_processes
from benchmarks.figures import WALL, Measurement
from experiments import calibration, metrics, repeats
from experiments.timefmt import format_seconds
from wire import constants

NAME = "failover"
DESCRIPTION = "recovery time after a link kill (ms and RTTs), MRC vs baseline"
SCENARIO = Path(__file__).resolve().parent.parent / "experiments" / "failover.yaml"
PATH_LINKS = 4                       # host - leaf - spine - leaf - host
RECOVERY_SHARES = (0.9, 0.5)         # goodput back to this share of its level before the failure
PAYLOAD = 1024
REPEAT = 3                           # runs per case; a figure is their median


def unloaded_rtt(rate_bps: float, link_delay_s: float) -> float:
    """RTT of one full data frame and its SACK over PATH_LINKS links, nothing queued."""
    data_frame = constants.DATA_HEADERS_LEN + PAYLOAD + constants.ICRC_LEN
    sack_frame = constants.BTH_OFFSET + constants.BTH_LEN + constants.SACK_LEN
    per_link = (data_frame + sack_frame) * 8 / rate_bps + 2 * link_delay_s
    return PATH_LINKS * per_link


FAT_TREE_RATE_BPS = 1_000_000


def fat_tree_scenario(rate_bps: int) -> dict:
    """MRC's ring all-reduce on fattree:4 with a link killed at 30 %, every link at `rate_bps`."""
    return {"name": "bench-failover-fattree4", "seed": 1, "horizon_s": max(10.0, 4e7 / rate_bps),
            "sample_interval_s": 0.005, "topology": "fattree:4", "link": {"rate_bps": rate_bps},
            "workload": {"kind": "allreduce", "bytes": 262144, "chunk_bytes": 65536},
            "faults": [{"kind": "link_kill", "link": "auto", "at": "30%"}],
            "transports": [{"name": "MRC", "mode": "mrc"}]}


def scenario(backend: str, rate_bps: float | None = None) -> dict:
    """The quick failover scenario, leaf-spine variant only (Mininet: links at `rate_bps`)."""
    import yaml
    doc = yaml.safe_load(SCENARIO.read_text())
    quick = doc.pop("quick", None) or {}
    for key, value in quick.items():
        doc[key] = {**doc.get(key, {}), **value} if isinstance(value, dict) else value
    doc["variants"] = [v for v in doc.get("variants", [{"label": "leaf-spine"}]) if v["label"] == "leaf-spine"]
    doc["name"] = f"bench-failover-{backend}"
    if backend == "mininet":
        doc["link"] = {**(doc.get("link") or {}), "rate_bps": int(rate_bps or MODEL_RATE_BPS)}
    return doc


def measure(options: argparse.Namespace) -> Measurement:
    from simulation import CABLE_DELAY_S
    result = Measurement()
    backends = ["netsim"]
    left_out = mininet_left_out(options)
    mininet_rate = None
    if left_out:
        result.skipped.append(left_out)
    else:
        backends.append("mininet")
        calibrated = calibration.link_rate("model", MODEL_RATE_BPS, processes=scenario_processes(scenario("mininet")))
        mininet_rate = calibrated.rate_bps
        result.add("mininet link rate", mininet_rate / 1e6, "Mbit/s", clock=WALL)
        if calibrated.note:
            print(f"   mininet: {calibrated.note}", flush=True)
    repeat = int(getattr(options, "repeat", None) or REPEAT)
    for backend in backends:
        runs = run_cases(scenario(backend, mininet_rate), backend, repeat=repeat)
        rate = host_link_rate(runs[0][0])
        unloaded = unloaded_rtt(rate, CABLE_DELAY_S if backend == "netsim" else 0.0)
        result.details[backend] = {"link_rate_bps": rate, "unloaded_rtt_s": unloaded, "repeat": repeat,
                                   "seeds": repeats.seeds(runs[0][0].scenario.seed, repeat, backend), "cases": {}}
        by_transport: dict[str, list] = {}
        for case, record in runs:
            by_transport.setdefault(case.transport.name, []).append((case, record))
        for name, case_runs in by_transport.items():
            _case_figures(result, backend, name, case_runs, unloaded)
    if not getattr(options, "no_fat_tree", False):
        fat_tree(result, backends, int(getattr(options, "fat_tree_rate", None) or FAT_TREE_RATE_BPS))
    return result


def _case_figures(result: Measurement, backend: str, name: str, runs: list, unloaded: float) -> None:
    """One transport's figures over its runs: the median recovery (to each share, in ms and in RTTs)
    and, for MRC, the median completion; every run's values in the details."""
    where = f"{backend} {name}"
    clock = WALL if backend == "mininet" else ""          # netsim's times are simulated
    each = []
    for case, record in runs:
        summary = metrics.summarise(record)
        rtt = record.base_rtt or unloaded
        run = {key: summary[key] for key in ("seed", "completed", "completion_time_s", "failure_time_s",
                                             "time_to_recover_s", "reroute_times_s", "bit_exact",
                                             "evs_retired", "retransmissions", "notes", "fidelity")}
        run["base_rtt_s"] = rtt
        for share in RECOVERY_SHARES:
            recover, note = metrics.recovery(record, fraction=share)
            if note == metrics.NO_DIP:
                recover = 0.0           # goodput never fell below the mark: within one sample, not a never
            run[f"recover_to_{share:.0%}_s"] = recover
            run[f"recover_to_{share:.0%}_rtts"] = None if recover is None else recover / rtt
        if backend == "mininet":
            print(f"   {where} run {case.repetition + 1}/{len(runs)}: {summary['fidelity']}, base RTT "
                  f"{format_seconds(rtt)}, recovery to 90 % "
                  f"{_time(run['recover_to_90%_s'], 'never')}", flush=True)
        each.append(run)
    result.details[backend]["cases"][name] = {"runs": each}
    for share in RECOVERY_SHARES:
        label = f"{where}: recovery to {share:.0%}"
        for suffix, key, unit, scale in (("", f"recover_to_{share:.0%}_s", "ms", 1e3),
                                         (" in RTTs", f"recover_to_{share:.0%}_rtts", "RTTs", 1.0)):
            values = [run[key] for run in each]
            middle = repeats.median(values)
            note = _spread_note(values, "never recovered", unit == "ms")
            result.add(f"{label}{suffix}", None if middle is None else middle * scale, unit, better="lower",
                       note=note, clock=clock)
            print(f"   {label}{suffix}: {note}", flush=True)
    if runs[0][0].transport.mode == "mrc":
        values = [run["completion_time_s"] for run in each]
        note = _spread_note(values, "did not complete", True)
        result.add(f"{where}: completion", repeats.median(values), "s", better="lower", note=note, clock=clock)
        print(f"   {where}: completion: {note}", flush=True)


def _spread_note(values: list, never: str, times: bool) -> str:
    """'median M of N runs (min..max)'; `never` in how many runs when the median run has no value."""
    spread = repeats.spread(values)
    text = (lambda v: _time(v, "never")) if times else (lambda v: "never" if v is None else f"{v:.3g}")
    if spread["median"] is None:
        return f"{never} in {sum(v is None for v in values)} of {len(values)} runs"
    return f"median {text(spread['median'])} of {len(values)} runs ({text(spread['min'])}..{text(spread['max'])})"


def _time(value, never: str) -> str:
    return never if value is None else format_seconds(value)




def fat_tree(result: Measurement, backends: list[str], rate_bps: int) -> None:
    """The fat-tree k=4 failover on each backend: completion in s and in measured base RTTs."""
    in_rtts = {}
    for backend in backends:
        [(case, record)] = run_cases(fat_tree_scenario(rate_bps), backend)
        took = record.completion_time if record.completed else None
        rtts = took / record.base_rtt if took and record.base_rtt else None
        in_rtts[backend] = rtts
        verdict = record.fidelity.get("verdict", "simulated")
        result.details[f"fattree4-{backend}"] = {"rate_bps": rate_bps, "completion_s": took,
                                                 "base_rtt_s": record.base_rtt, "completion_rtts": rtts,
                                                 "fidelity": verdict, "reasons": record.fidelity.get("reasons")}
        shown = "did not complete" if took is None else f"{took:.3f} s = {rtts:.0f} base RTTs"
        print(f"   fat-tree k=4 failover on {backend} at {rate_bps / 1e6:g} Mbit/s: {shown} ({verdict})",
              flush=True)
        note = "" if took is not None else "did not complete"
        clock = WALL if backend == "mininet" else ""
        result.add(f"fat-tree k=4 {backend}: completion", took, "s", better="lower", note=note, clock=clock)
        result.add(f"fat-tree k=4 {backend}: completion in RTTs", rtts, "RTTs", better="lower", note=note,
                   clock=clock)
    if in_rtts.get("mininet") and in_rtts.get("netsim"):
        ratio = in_rtts["mininet"] / in_rtts["netsim"]
        print(f"   fat-tree k=4: Mininet over netsim, in RTTs: {ratio:.2f}", flush=True)
        result.add("fat-tree k=4: Mininet over netsim in RTTs", ratio, "", better="lower", clock=WALL)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-mininet", action="store_true", help="netsim only")
    parser.add_argument("--no-fat-tree", action="store_true", help="leave out the fat-tree k=4 failover")
    parser.add_argument("--fat-tree-rate", type=int, default=FAT_TREE_RATE_BPS, metavar="BPS",
                        help="link rate of the fat-tree k=4 failover (default 1 Mbit/s)")
    parser.add_argument("--repeat", type=int, default=REPEAT, metavar="N",
                        help=f"runs per case of the leaf-spine failover; figures are medians (default {REPEAT})")


def main(argv=None) -> int:
    from benchmarks.run import run_standalone
    return run_standalone(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
