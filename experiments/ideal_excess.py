"""By how much crosscheck's ideal exceeds a lower bound of what it divides, per case and receiver.

    .venv/bin/python -m experiments.ideal_excess [SCENARIO] [--quick] [--seeds N ...]

`crosscheck` divides a flow's completion at its sender (every byte acknowledged) by its receiver's
bytes at the hosts' line rate plus the fabric's base RTT, the round trip of a full data packet over
the longest path with store-and-forward at every hop (`transport_sizing.line_rate_and_base_rtt`).
A lower bound of that completion is the receiver's bytes at its own NIC rate plus twice the nearest
sender's one-way delay plus the serialisation of one SACK at the receiver's rate
(`acknowledged_bound`). For every case of SCENARIO (default experiments/datacenter.yaml) made of
point-to-point flows (incast, permutation) and every seed, this prints the excess in µs and the
factor (crosscheck's ideal over the bound) by which its figures are low, smallest and largest over
the case's receivers. Computed from the topology and the flows: nothing runs.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from experiments.scenario import Case, load_scenario
from experiments.transport_sizing import (cable_delay, line_rate_and_base_rtt,
                                          receiver_rate_and_one_way_delay)
from experiments.workloads import point_to_point_flows, variant_topology

DATACENTER = Path(__file__).resolve().parent / "datacenter.yaml"


def ideals(case: Case, seed: int) -> dict[str, tuple[float, float]]:
    """(crosscheck's ideal, the lower bound) in seconds of every receiver of `case`'s flows with `seed`."""
    from wire.packets import CONTROL_BASE, CONTROL_HEADER_LEN, Sack
    topo = variant_topology(case.variant)
    line, base_rtt = line_rate_and_base_rtt(case)
    rate, one_way = receiver_rate_and_one_way_delay(topo, cable_delay(case))
    into: dict[str, int] = {}
    nearest: dict[str, float] = {}
    for flow in point_to_point_flows(topo, case.variant.workload, seed):
        into[flow.dst] = into.get(flow.dst, 0) + flow.nbytes
        delay = one_way(flow.src, flow.dst)
        nearest[flow.dst] = min(nearest.get(flow.dst, delay), delay)
    sack_bits = (CONTROL_BASE + CONTROL_HEADER_LEN[Sack]) * 8
    return {dst: (into[dst] * 8 / line + base_rtt,
                  into[dst] * 8 / rate(dst) + 2 * nearest[dst] + sack_bits / rate(dst)) for dst in into}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.ideal_excess", description=__doc__.splitlines()[0])
    parser.add_argument("scenario", nargs="?", type=Path, default=DATACENTER)
    parser.add_argument("--quick", action="store_true", help="the scenario's quick form")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(1, 9)))
    args = parser.parse_args(argv)
    print("case | seeds | excess µs (min-max) | ideal / bound (min-max)")
    rows: dict[str, list[tuple[float, float]]] = {}
    for seed in args.seeds:
        for case in load_scenario(args.scenario, quick=args.quick, seed=seed).cases():
            if case.variant.workload.kind not in ("incast", "permutation"):
                continue
            for ideal, bound in ideals(case, seed).values():
                rows.setdefault(case.label, []).append((ideal - bound, ideal / bound))
    for label, pairs in rows.items():
        excess = [e * 1e6 for e, _ in pairs]
        factor = [f for _, f in pairs]
        print(f"{label} | {args.seeds[0]}-{args.seeds[-1]} | {min(excess):.3f}-{max(excess):.3f} | "
              f"{min(factor):.4f}-{max(factor):.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
