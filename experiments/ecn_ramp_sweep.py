"""Choosing the ECN ramp: MRC's slowest flow over its ideal time, on netsim, for each of 14 ECN
settings (ecn_threshold, ecn_max_threshold) on the data-center cases where the marking decides the result.

    .venv/bin/python -m experiments.ecn_ramp_sweep [--quick] [--out FOLDER] [--jobs N | --cluster FILE]

Runs MRC on the `permutation`, `permutation, gray spine` and `incast` variants of
experiments/datacenter.yaml (its own seed) with every link's ECN thresholds replaced by each pair
of `PAIRS` (a pair with equal ends is a step), and writes `ecn-ramp-sweep.json` (every figure,
with the run's conditions) and `ecn-ramp-sweep.png` (slowest/ideal per pair and case) into a new
results folder, results/ecn-ramp-sweep-<UTC date and time>, or FOLDER (`--out experiments/figures`
replaces the committed figure). A flow's completion is its last byte's arrival, its ideal every
byte into its receiver at its NIC rate plus the one-way delay of its path
(`experiments.metrics.flows_over_ideal`). The thresholds datacenter.yaml uses were chosen from
this figure (its comments say which and why). With --jobs N (or --cluster FILE) the runs go N at
once (experiments/parallel.py), with the same figures. Ctrl-C prints the settings whose runs all
finished, writes nothing and exits 130.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from experiments import conditions, metrics, parallel, results as result_files
from experiments.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
PROG = "python -m experiments.ecn_ramp_sweep"
NAME = "ecn-ramp-sweep"
DATACENTER = ROOT / "experiments" / "datacenter.yaml"
CASES = ("permutation", "permutation, gray spine", "incast")
# (ecn_threshold, ecn_max_threshold) in packets; trimming stays at the scenario's 48 (about 1.7 BDP)
PAIRS = ((8, 8), (16, 16), (24, 24), (32, 32), (4, 24), (8, 32), (12, 36), (16, 40), (20, 40), (8, 48), (12, 48),
         (16, 48), (20, 48), (24, 48))


def run_one(item: tuple[tuple[int, int], str, bool, int | None]) -> float | None:
    """MRC's slowest flow over ideal on the case `label` of `item` = (pair, label, quick, seed), with
    every link's ECN thresholds set to `pair` (what a worker runs)."""
    from experiments.backends.netsim_backend import NetsimBackend
    from experiments.transport_sizing import line_rate_and_one_way_delay
    pair, label, quick, seed = item
    scenario = load_scenario(DATACENTER, quick=quick, seed=seed)
    case = next(c for c in scenario.cases() if c.transport.mode == "mrc" and c.variant.label == label)
    link = {**case.variant.link, "ecn_threshold": pair[0], "ecn_max_threshold": pair[1]}
    case = dataclasses.replace(case, variant=dataclasses.replace(case.variant, link=link))
    record = NetsimBackend().run_case(case)
    return metrics.slowest_over_ideal(record, *line_rate_and_one_way_delay(case))


def plot(results: dict[tuple[int, int], dict], path: Path, title: str) -> None:
    """Grouped bars: slowest/ideal per ECN pair, one bar per case."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    pairs = list(results)
    fig, ax = plt.subplots(figsize=(11, 4))
    width = 0.8 / len(CASES)
    for k, label in enumerate(CASES):
        values = [results[p].get(label) or 0.0 for p in pairs]
        ax.bar([i + k * width for i in range(len(pairs))], values, width, label=label)
    ax.set_xticks([i + width * (len(CASES) - 1) / 2 for i in range(len(pairs))])
    ax.set_xticklabels([f"step {a}" if a == b else f"ramp {a}..{b}" for a, b in pairs], rotation=30, fontsize=8)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_ylabel("MRC's slowest flow / ideal")
    ax.set_title(title, fontsize=9)
    top = max((v for row in results.values() for v in row.values() if v is not None), default=1.0)
    ax.set_ylim(0, top * 1.2)                                # room above the bars for the legend
    ax.legend(fontsize=8, ncol=len(CASES), loc="upper center")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def setting_lines(results: dict[tuple[int, int], dict]) -> list[str]:
    """One line per ECN setting: each case's slowest flow over ideal."""
    return [f"ECN {a:>2}..{b:<2}  " + "  ".join(f"{label}: {v:.3f}x" if v is not None else f"{label}: never"
                                             for label, v in row.items())
            for (a, b), row in results.items()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--quick", action="store_true", help="datacenter.yaml's quick sizes (256 KiB flows)")
    parser.add_argument("--out", type=Path, default=None, metavar="FOLDER",
                        help=f"where {NAME}.json and .png go (default: a new results/{NAME}-<UTC date and "
                             "time>; experiments/figures replaces the committed figure)")
    parallel.add_arguments(parser, mininet=False)
    args = parser.parse_args(argv)
    try:
        parallel.check_options(args.jobs, args.cluster)
    except ValueError as error:
        parser.error(str(error))
    out = args.out or result_files.default_folder(NAME)
    measuring = conditions.Measuring()
    labels = [v.label for v in load_scenario(DATACENTER, quick=args.quick).variants if v.label in CASES]
    items = [(pair, label, args.quick, None) for pair in PAIRS for label in labels]
    try:
        sweep = parallel.sweep(args.jobs, args.cluster, run_one, items,
                               [f"ECN {p[0]}..{p[1]} {label}" for p, label, _, _ in items])
    except parallel.PoolUnavailable as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return parallel.EXIT_NO_POOL
    values = iter(sweep.results)
    whole = len(sweep.results) // len(labels)                 # the settings whose every run finished
    results = {pair: {label: next(values) for label in labels} for pair in PAIRS[:whole]}
    for line in setting_lines(results):
        print(line, flush=True)
    if sweep.interrupted:
        print(f"{PROG}: interrupted: {len(sweep.results)} of {len(items)} runs finished ({whole} of {len(PAIRS)} "
              "settings above); nothing written", file=sys.stderr)
        return parallel.EXIT_INTERRUPTED
    measured = {**measuring.done(), "quick": args.quick, "backend": "netsim (deterministic)", "ran_on": sweep.where,
                "seed": load_scenario(DATACENTER).seed, "completion": "last byte's arrival",
                "ideal": "bytes into the receiver at its NIC rate + one-way delay of the path",
                "command": " ".join([PROG] + (argv if argv is not None else sys.argv[1:]))}
    data = {"conditions": measured,
            "results": [{"ecn_threshold": a, "ecn_max_threshold": b, **r} for (a, b), r in results.items()]}
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{NAME}.json").write_text(json.dumps(data, indent=1))
    size = "256 KiB" if args.quick else "2 MiB"
    plot(results, out / f"{NAME}.png",
         f"ECN thresholds on datacenter.yaml (netsim, 4x4x4 leaf-spine, 100 Gbit/s, 1 us cables, 4 KiB packets, "
         f"{size} flows, trim at 48, seed {measured['seed']})")
    print(f"written: {out / (NAME + '.png')}, {out / (NAME + '.json')} ({measured['wall_s']} s wall on {sweep.where})")
    return 0



if __name__ == "__main__":
    raise SystemExit(parallel.sweep_main(main, PROG))
