"""Ring all-reduce algorithm bandwidth against the ideal bound, on 4 and 8 hosts.

    .venv/bin/python -m benchmarks.bench_allreduce [--bytes 1048576] [--no-mininet]

Each host all-reduces an array of `--bytes` (float32 sum, checked bit for bit) over MRC on a
leaf-spine (2 spines, 2 hosts per leaf; 2 leaves for 4 hosts, 4 for 8). A ring all-reduce moves
2(N-1)/N of the array over every host link, so it cannot finish before
    T_ideal = 2(N-1)/N * size * 8 / link rate.
Algorithm bandwidth = size / completion time; the ratio T_ideal / T is the share of the bound
reached (below 1 by header overhead — about 8 % for 1 KB payloads — and by everything else).
On netsim (simulated time, always) and on the Mininet model target (real time; root and mnexec), there
at the link rate calibrated for the model target on this machine (`mrc-testbed calibrate`; the fixed
MODEL_RATE_BPS, with a note, when there is none), with the fidelity verdict of each run.
"""
from __future__ import annotations

import argparse
import sys
from typing import Optional

from benchmarks.cases import (MODEL_RATE_BPS, NETSIM_RATE_BPS, host_link_rate, mininet_left_out, run_cases,
                              scenario_processes)
from benchmarks.figures import WALL, Measurement
from experiments import calibration

NAME = "allreduce"
DESCRIPTION = "ring all-reduce bandwidth vs 2(N-1)/N * size / link rate, 4 and 8 hosts"
SIZES = {4: "leafspine:2x2x2", 8: "leafspine:4x2x2"}


def ideal_seconds(hosts: int, size: int, rate_bps: float) -> float:
    """The bound on a ring all-reduce of `size` bytes over `hosts` hosts with links of `rate_bps`."""
    return 2 * (hosts - 1) / hosts * size * 8 / rate_bps


def scenario(hosts: int, size: int, rate_bps: float, horizon: float) -> dict:
    """One all-reduce on MRC, no fault."""
    return {"name": f"bench-allreduce-{hosts}", "seed": 1, "horizon_s": horizon,
            "sample_interval_s": min(0.005, horizon / 100), "topology": SIZES[hosts],
            "link": {"rate_bps": rate_bps},
            "workload": {"kind": "allreduce", "bytes": size, "chunk_bytes": 65536},
            "transports": [{"name": "MRC", "mode": "mrc"}]}


def measure_one(backend: str, hosts: int, size: int, rate_bps: float) -> dict:
    """Completion time, algorithm bandwidth and ratio to the bound of one all-reduce."""
    horizon = max(4.0, 20 * ideal_seconds(hosts, size, rate_bps))
    [(case, record)] = run_cases(scenario(hosts, size, rate_bps, horizon), backend)
    rate = host_link_rate(case)
    ideal = ideal_seconds(hosts, size, rate)
    took: Optional[float] = record.completion_time if record.completed else None
    return {"hosts": hosts, "bytes": size, "link_rate_bps": rate, "completed": record.completed,
            "fidelity": record.fidelity.get("verdict"), "bit_exact": record.bit_exact, "completion_s": took,
            "ideal_s": ideal,
            "algbw_bps": size * 8 / took if took else None,
            "ratio": ideal / took if took else None, "notes": list(record.notes)}


def measure(options: argparse.Namespace) -> Measurement:
    result = Measurement()
    size = getattr(options, "bytes", None) or 1 << 20
    backends = [("netsim", NETSIM_RATE_BPS)]
    left_out = mininet_left_out(options)
    if left_out:
        result.skipped.append(left_out)
    else:
        largest = max(scenario_processes(scenario(hosts, size, MODEL_RATE_BPS, 4.0)) for hosts in SIZES)
        calibrated = calibration.link_rate("model", MODEL_RATE_BPS, processes=largest)   # one rate for every size
        result.details["mininet_rate"] = {"rate_bps": calibrated.rate_bps, "note": calibrated.note}
        result.add("mininet link rate", calibrated.rate_bps / 1e6, "Mbit/s", clock=WALL)
        if calibrated.note:
            print(f"   mininet: {calibrated.note}", flush=True)
        backends.append(("mininet", calibrated.rate_bps))
    for backend, rate in backends:
        for hosts in SIZES:
            run = measure_one(backend, hosts, size, rate)
            result.details[f"{backend}-{hosts}"] = run
            where = f"{backend} {hosts} hosts"
            note = "" if run["completed"] else "did not complete"
            ratio = "-" if run["ratio"] is None else f"{run['ratio']:.3f}"
            print(f"   {where}: {ratio} of the bound at {rate / 1e6:g} Mbit/s"
                  f"{', ' + str(run['fidelity']) if backend == 'mininet' else ''}", flush=True)
            clock = WALL if backend == "mininet" else ""     # netsim's times are simulated
            result.add(f"{where}: algbw", run["algbw_bps"] and run["algbw_bps"] / 1e6, "Mbit/s", note=note, clock=clock)
            result.add(f"{where}: ratio to bound", run["ratio"], "", note=note, clock=clock)
            if run["completed"] and not run["bit_exact"]:
                result.add(f"{where}: NOT BIT-EXACT", None, "", note="result differs")
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bytes", type=int, default=1 << 20, help="array size per host (default 1 MiB)")
    parser.add_argument("--no-mininet", action="store_true", help="netsim only")


def main(argv=None) -> int:
    from benchmarks.run import run_standalone
    return run_standalone(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
