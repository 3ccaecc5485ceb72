"""MRC's flows against their ideal time on experiments/datacenter.yaml, seed by seed.

    .venv/bin/python -m experiments.datacenter_seeds [--seeds 1 2 3 4] [--variant LABEL ...] [--quick]
                                                     [--switch-profile NAME ...] [--jobs N | --cluster FILE]
    .venv/bin/python -m experiments.datacenter_seeds --table [--jobs N | --cluster FILE]

Runs MRC on netsim (deterministic) for each seed and each variant (default: `permutation`,
`permutation, gray spine`, `incast`) and prints, per run, the slowest and the median flow's
completion (its last byte's arrival) over its ideal (every byte into its receiver at its NIC rate
plus the one-way delay of its path: a lower bound, `experiments.metrics.flows_over_ideal`), then
the mean over the seeds. The issue's targets (issue 16) are about the slowest flow.
With --jobs N (or --cluster FILE) the runs go N at once (experiments/parallel.py), with the same
figures; the last line gives the wall time and the machine's load. Ctrl-C prints the runs that
finished and exits 130.

--switch-profile NAME runs every case with the switches of that profile instead of the file's
own thresholds (`scenario`, the default; `htsim-defaults`: uet-htsim's, experiments/switch_profiles.py);
given twice, both. --table prints issue 29's comparison (item 3): both settings x the three
variants x seeds 1-8, the 8x8x8 leaf-spine's 15 -> 1 incast, and scenarios no setting was tuned
on (seeds 9-16, the quick sizes, a 2 MiB ring all-reduce and a 256 KiB all-to-all). netsim only:
uet-htsim's figures beside netsim's, both counted the same way, come from `CROSSCHECK`.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from experiments import conditions, metrics, parallel, switch_profiles
from experiments.timefmt import format_seconds
from experiments.scenario import PROFILE_KEY, parse_scenario

ROOT = Path(__file__).resolve().parent.parent
DATACENTER = ROOT / "experiments" / "datacenter.yaml"
VARIANTS = ("permutation", "permutation, gray spine", "incast")
SCENARIO = "scenario"                     # --switch-profile: the file's own thresholds
PROFILES = (SCENARIO,) + switch_profiles.PROFILES
PROG = "python -m experiments.datacenter_seeds"
DEFAULT_SEEDS = (1, 2, 3, 4)
# netsim beside uet-htsim, each flow complete when its sender saw it acknowledged (docs/htsim.md)
CROSSCHECK = "mrc-testbed crosscheck experiments/datacenter.yaml --seeds 1 2 3 4 5 6 7 8 [--settings htsim]"
TABLE_SEEDS = tuple(range(1, 9))
HELD_OUT_SEEDS = tuple(range(9, 17))
BIG_INCAST = {"topology": "leafspine:8x8x8", "workload": {"senders": 15}}      # 64 hosts, 15 -> 1
HELD_OUT_COLLECTIVES = (("all-reduce 2 MiB", {"kind": "allreduce", "bytes": 2097152, "chunk_bytes": 262144}),
                        ("all-to-all 256 KiB", {"kind": "alltoall", "bytes": 262144, "chunk_bytes": 65536}))


@dataclass(frozen=True)
class Item:
    """One run: a variant of datacenter.yaml with a seed, under a switch profile, maybe changed
    (`topology`, `workload` keys merged over the variant's; `label` names a changed one)."""

    variant: str
    seed: int
    quick: bool = False
    profile: str = SCENARIO
    topology: str | None = None
    workload: tuple = ()                 # (key, value) pairs
    label: str = ""

    @property
    def name(self) -> str:
        return self.label or self.variant


def scenario_doc(item: Item) -> dict:
    """datacenter.yaml as a dict, with `item`'s switch profile, topology and workload changes."""
    doc = yaml.safe_load(DATACENTER.read_text(encoding="utf-8"))
    if item.profile != SCENARIO:
        doc["link"] = {**doc["link"], PROFILE_KEY: item.profile}
    if item.topology:
        doc["topology"] = item.topology
    if item.workload:
        for variant in doc["variants"]:
            if variant["label"] == item.variant:
                variant["workload"] = {**(variant.get("workload") or {}), **dict(item.workload)}
    return doc


def run(variant: str | Item, seed: int = 1, quick: bool = False, mode: str = "mrc") -> list[float] | None:
    """The sorted flow ratios of `mode` on `variant` of datacenter.yaml with `seed` (or on the
    run `variant` describes, an Item)."""
    from experiments.backends.netsim_backend import NetsimBackend
    from experiments.transport_sizing import line_rate_and_one_way_delay
    item = variant if isinstance(variant, Item) else Item(variant, seed, quick)
    scenario = parse_scenario(scenario_doc(item), str(DATACENTER), quick=item.quick, seed=item.seed)
    case = next((c for c in scenario.cases() if c.transport.mode == mode and c.variant.label == item.variant), None)
    if case is None:
        raise SystemExit(f"datacenter.yaml has no variant {item.variant!r} for mode {mode!r}")
    record = NetsimBackend().run_case(case)
    return metrics.flows_over_ideal(record, *line_rate_and_one_way_delay(case))


def timed_run(item: Item | tuple) -> tuple[list[float] | None, float]:
    """`run(item)` and its wall time in seconds (what a worker runs)."""
    began = time.monotonic()
    return run(item if isinstance(item, Item) else Item(*item)), time.monotonic() - began


def table_items() -> list[tuple[str, Item]]:
    """Issue 29 item 3's table: (row group, run) for every run it needs."""
    out = []
    for profile in PROFILES:
        for variant in VARIANTS:
            out += [("tuned on", Item(variant, s, profile=profile)) for s in TABLE_SEEDS]
        out += [("tuned on", Item("incast", s, profile=profile, topology=BIG_INCAST["topology"],
                                  workload=tuple(BIG_INCAST["workload"].items()), label="incast 15->1, 8x8x8"))
                for s in TABLE_SEEDS]
    for profile in PROFILES:
        for variant in VARIANTS:
            out += [("held out", Item(variant, s, profile=profile, label=f"{variant}, seeds 9-16"))
                    for s in HELD_OUT_SEEDS]
            out += [("held out", Item(variant, s, quick=True, profile=profile, label=f"{variant}, 256 KiB flows"))
                    for s in TABLE_SEEDS]
        for label, workload in HELD_OUT_COLLECTIVES:
            out += [("held out", Item("permutation", s, profile=profile, workload=tuple(workload.items()),
                                      label=label)) for s in TABLE_SEEDS[:4]]
    return out


def table_lines(items: list[tuple[str, Item]], outcomes: list) -> list[str]:
    """One line per (row group, profile, run name): mean and worst slowest/ideal over its seeds
    and the per-seed figures, under a header, in columns as wide as their widest cell; the runs
    without an outcome (an interrupted table) are left out."""
    rows: dict[tuple[str, str, str], list[float | None]] = {}
    for (group, item), (ratios, _) in zip(items, outcomes):
        rows.setdefault((group, item.profile, item.name), []).append(ratios[-1] if ratios else None)
    cells = [("scenarios", "switches", "case", "seeds", "mean", "worst", "per seed (slowest flow / ideal)")]
    for (group, profile, name), runs in rows.items():
        values = [v for v in runs if v is not None]
        never = len(runs) - len(values)
        cells.append((group, profile, name, str(len(runs)),
                      f"{statistics.mean(values):.3f}" if values else "-", f"{max(values):.3f}" if values else "-",
                      " ".join("never" if v is None else f"{v:.3f}" for v in runs)
                      + (f"  ({never} never finished)" if never else "")))
    widths = [max(len(row[k]) for row in cells) for k in range(6)]
    right = (False, False, False, True, True, True)
    return ["  ".join([c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row[:6], widths, right)] + [row[6]])
            for row in cells]


def print_table(items: list[tuple[str, Item]], outcomes: list) -> None:
    """The table (`table_lines`), and where uet-htsim's figures are."""
    print()
    for line in table_lines(items, outcomes):
        print(line, flush=True)
    print("slowest flow: its last byte's arrival over its ideal (every byte into its receiver at its NIC rate "
          "plus the one-way delay of its path). netsim only: uet-htsim beside netsim, each flow complete when "
          f"its sender saw it acknowledged on both: {CROSSCHECK}")


def seed_lines(items: list[Item], outcomes: list, profiles: list[str], variants: list[str]) -> list[str]:
    """Per run, MRC's slowest and median flow over ideal and its wall time, then per variant the
    mean over its seeds; runs without an outcome (an interrupted sweep) are left out."""
    done = {(i.profile, i.variant, i.seed): outcome for i, outcome in zip(items, outcomes)}
    seeds = list(dict.fromkeys(i.seed for i in items))
    width = max(len(v if len(profiles) == 1 else f"{p}: {v}") for p in profiles for v in variants)
    lines = []
    for profile in profiles:
        for variant in variants:
            name = variant if len(profiles) == 1 else f"{profile}: {variant}"
            slowest, median = [], []
            for seed in seeds:
                if (profile, variant, seed) not in done:
                    continue
                ratios, wall = done[profile, variant, seed]
                if ratios is None:
                    lines.append(f"{name:<{width}}  seed {seed}: a flow never finished ({format_seconds(wall)} wall)")
                    continue
                slowest.append(ratios[-1])
                median.append(statistics.median(ratios))
                lines.append(f"{name:<{width}}  seed {seed}: slowest {ratios[-1]:.3f}x  median {median[-1]:.3f}x  "
                             f"({format_seconds(wall)} wall)")
            if slowest:
                lines.append(f"{name:<{width}}  mean of {len(slowest)}: slowest {statistics.mean(slowest):.3f}x  "
                             f"median {statistics.mean(median):.3f}x  (max slowest {max(slowest):.3f}x)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(DEFAULT_SEEDS), metavar="SEED",
                        help=f"the seeds to run (default {' '.join(map(str, DEFAULT_SEEDS))}; --table has its own)")
    parser.add_argument("--variant", action="append",
                        help=f"a variant label of datacenter.yaml (repeatable; default: {', '.join(map(repr, VARIANTS))})")
    parser.add_argument("--quick", action="store_true", help="datacenter.yaml's quick sizes (256 KiB flows)")
    parser.add_argument("--switch-profile", action="append", choices=PROFILES,
                        help=f"switch settings (repeatable; default {SCENARIO}: the file's own)")
    parser.add_argument("--table", action="store_true",
                        help="issue 29's comparison: both settings x seeds 1-8, 8x8x8 incast, held-out scenarios")
    parallel.add_arguments(parser, mininet=False)
    args = parser.parse_args(argv)
    try:
        parallel.check_options(args.jobs, args.cluster)
    except ValueError as error:
        parser.error(str(error))
    measuring = conditions.Measuring()
    if args.table:
        grouped = table_items()
        items = [i for _, i in grouped]
        labels = [f"{i.profile}: {i.name} seed {i.seed}" for i in items]
    else:
        variants = args.variant or list(VARIANTS)
        profiles = args.switch_profile or [SCENARIO]
        items = [Item(variant, seed, args.quick, profile) for profile in profiles for variant in variants
                 for seed in args.seeds]
        labels = [f"{i.profile}: {i.variant} seed {i.seed}" for i in items]
    try:
        sweep = parallel.sweep(args.jobs, args.cluster, timed_run, items, labels)
    except parallel.PoolUnavailable as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return parallel.EXIT_NO_POOL
    if args.table:
        print_table(grouped, sweep.results)
    else:
        for line in seed_lines(items, sweep.results, profiles, variants):
            print(line, flush=True)
    measured = measuring.done()
    print(f"wall time: {measured['wall_s']:.1f} s for {len(sweep.results)} of {len(items)} runs on {sweep.where} "
          f"({conditions.text(measured)})")
    if sweep.interrupted:
        print(f"{PROG}: interrupted: {len(sweep.results)} of {len(items)} runs finished (above)", file=sys.stderr)
        return parallel.EXIT_INTERRUPTED
    return 0



if __name__ == "__main__":
    raise SystemExit(parallel.sweep_main(main, PROG))
