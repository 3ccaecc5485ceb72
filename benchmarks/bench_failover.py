"""Recovery time after a link kill, in ms and in RTTs: MRC against the RoCE-style baseline.

    .venv/bin/python -m benchmarks.bench_failover [--no-mininet]

Runs the quick failover experiment (experiments/failover.yaml, leaf-spine variant: ring
all-reduce over 4 hosts, the baseline's busiest leaf-spine link killed at 30 % of the collective)
for MRC, RoCE (no rerouting) and RoCE with the emulated converging control plane (reroute after
1 s). Recovery = failure -> goodput back to 90 % of its level before (experiments.metrics), and
to 50 % (the Mininet model target's goodput is noisy: its 90 % figure is often "never").
The RTT it is counted in is the unloaded RTT of a 4-link path between hosts on different leaves:
a full data frame out and a SACK back, each serialised at the link rate on every link, plus the
propagation delay (netsim's cable delay; ~0 for Mininet veths). On netsim (simulated time,
always) and on the Mininet model target (root and mnexec).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.cases import MODEL_RATE_BPS, host_link_rate, mininet_left_out, run_cases
from benchmarks.figures import Measurement
from experiments import metrics
from wire import constants as C

NAME = "failover"
DESCRIPTION = "recovery time after a link kill (ms and RTTs), MRC vs baseline"
SCENARIO = Path(__file__).resolve().parent.parent / "experiments" / "failover.yaml"
PATH_LINKS = 4                       # host - leaf - spine - leaf - host
RECOVERY_SHARES = (0.9, 0.5)         # goodput back to this share of its level before the failure
PAYLOAD = 1024


def unloaded_rtt(rate_bps: float, link_delay_s: float) -> float:
    """RTT of one full data frame and its SACK over PATH_LINKS links, nothing queued."""
    data_frame = C.DATA_HEADERS_LEN + PAYLOAD + C.ICRC_LEN
    sack_frame = C.BTH_OFFSET + C.BTH_LEN + C.SACK_LEN
    per_link = (data_frame + sack_frame) * 8 / rate_bps + 2 * link_delay_s
    return PATH_LINKS * per_link


def scenario(backend: str) -> dict:
    """The quick failover scenario, leaf-spine variant only (Mininet: links at the model's rate)."""
    import yaml
    doc = yaml.safe_load(SCENARIO.read_text())
    quick = doc.pop("quick", None) or {}
    for key, value in quick.items():
        doc[key] = {**doc.get(key, {}), **value} if isinstance(value, dict) else value
    doc["variants"] = [v for v in doc.get("variants", [{"label": "leaf-spine"}]) if v["label"] == "leaf-spine"]
    doc["name"] = f"bench-failover-{backend}"
    if backend == "mininet":
        doc["link"] = {**(doc.get("link") or {}), "rate_bps": MODEL_RATE_BPS}
    return doc


def measure(options: argparse.Namespace) -> Measurement:
    from experiments.backends.netsim_traffic import LINK_DELAY_S
    result = Measurement()
    backends = ["netsim"]
    left_out = mininet_left_out(options)
    if left_out:
        result.skipped.append(left_out)
    else:
        backends.append("mininet")
    for backend in backends:
        runs = run_cases(scenario(backend), backend)
        rate = host_link_rate(runs[0][0])
        rtt = unloaded_rtt(rate, LINK_DELAY_S if backend == "netsim" else 0.0)
        result.details[backend] = {"link_rate_bps": rate, "unloaded_rtt_s": rtt, "cases": {}}
        for case, record in runs:
            summary = metrics.summarise(record)
            result.details[backend]["cases"][case.transport.name] = {
                key: summary[key] for key in ("completed", "completion_time_s", "failure_time_s",
                                              "time_to_recover_s", "reroute_times_s", "bit_exact",
                                              "evs_retired", "retransmissions", "notes")}
            where = f"{backend} {case.transport.name}"
            for share in RECOVERY_SHARES:
                recover = metrics.time_to_recover(record, fraction=share)
                result.details[backend]["cases"][case.transport.name][f"recover_to_{share:.0%}_s"] = recover
                note = "never recovered" if recover is None else ""
                label = f"{where}: recovery to {share:.0%}"
                result.add(f"{label}", recover and recover * 1e3, "ms", better="lower", note=note)
                result.add(f"{label} in RTTs", recover and recover / rtt, "RTTs", better="lower", note=note)
            if case.transport.mode == "mrc":
                result.add(f"{where}: completion", summary["completion_time_s"], "s", better="lower",
                           note="" if summary["completed"] else "did not complete")
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-mininet", action="store_true", help="netsim only")


def main(argv=None) -> int:
    from benchmarks.run import run_standalone
    return run_standalone(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
