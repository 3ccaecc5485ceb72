"""MRC's flows against their ideal time on experiments/datacenter.yaml, seed by seed.

    .venv/bin/python -m experiments.datacenter_seeds [--seeds 1 2 3 4] [--variant LABEL ...] [--quick]
                                                     [--switch-profile NAME ...] [--jobs N | --cluster FILE]
    .venv/bin/python -m experiments.datacenter_seeds --table [--jobs N | --cluster FILE]

Runs MRC on netsim (deterministic) for each seed and each variant (default: `permutation`,
`permutation, gray spine`, `incast`) and prints, per run, the slowest and the median flow's
completion time over its ideal (bytes into its receiver at the line rate plus the fabric's base
RTT), then the mean over the seeds. The issue's targets (issue 16) are about the slowest flow.
With --jobs N (or --cluster FILE) the runs go N at once (experiments/parallel.py), with the same
figures; the last line gives the wall time and the machine's load.

--switch-profile NAME runs every case with the switches of that profile instead of the file's
own thresholds (`scenario`, the default; `htsim-defaults`: uet-htsim's, experiments/switch_profiles.py);
given twice, both. --table prints issue 29's comparison (item 3): both settings x the three
variants x seeds 1-8 beside uet-htsim's best balancer on htsim's settings, the 8x8x8 leaf-spine's
15 -> 1 incast, and scenarios no setting was tuned on (seeds 9-16, the quick sizes, a 2 MiB
ring all-reduce and a 256 KiB all-to-all).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from experiments import metrics, parallel, switch_profiles
from experiments.scenario import PROFILE_KEY, parse_scenario

ROOT = Path(__file__).resolve().parent.parent
DATACENTER = ROOT / "experiments" / "datacenter.yaml"
VARIANTS = ("permutation", "permutation, gray spine", "incast")
SCENARIO = "scenario"                     # --switch-profile: the file's own thresholds
PROFILES = (SCENARIO,) + switch_profiles.PROFILES
# uet-htsim's best balancer on its default switch settings, datacenter.yaml's flows, seeds 1-8 (issue 29)
HTSIM_BEST = {"permutation": 1.120, "permutation, gray spine": 1.431, "incast": 1.026}
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
            out += [("held out", Item(variant, s, quick=True, profile=profile, label=f"{variant}, 256 KB flows"))
                    for s in TABLE_SEEDS]
        for label, workload in HELD_OUT_COLLECTIVES:
            out += [("held out", Item("permutation", s, profile=profile, workload=tuple(workload.items()),
                                      label=label)) for s in TABLE_SEEDS[:4]]
    return out


def print_table(items: list[tuple[str, Item]], outcomes: list) -> None:
    """One line per (profile, run name): mean and worst slowest/ideal over its seeds, uet-htsim's
    best balancer where known, and the per-seed figures."""
    rows: dict[tuple[str, str, str], list[tuple[int, float | None]]] = {}
    for (group, item), (ratios, _) in zip(items, outcomes):
        rows.setdefault((group, item.profile, item.name), []).append((item.seed, ratios[-1] if ratios else None))
    print(f"\n{'':9}{'switches':<15}{'case':<34}{'mean':>7}{'worst':>7}{'htsim':>7}  per seed (slowest flow / ideal)")
    for (group, profile, name), runs in rows.items():
        values = [v for _, v in runs if v is not None]
        never = len(runs) - len(values)
        reference = HTSIM_BEST.get(name) if profile == switch_profiles.HTSIM_DEFAULTS else None
        print(f"{group:<9}{profile:<15}{name:<34}"
              f"{(statistics.mean(values) if values else float('nan')):>7.3f}{(max(values) if values else float('nan')):>7.3f}"
              f"{(f'{reference:.3f}' if reference else '-'):>7}  "
              + " ".join("never" if v is None else f"{v:.3f}" for _, v in runs)
              + (f"  ({never} never finished)" if never else ""), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.datacenter_seeds", description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--variant", action="append", help="a variant label (repeatable; default: three)")
    parser.add_argument("--quick", action="store_true", help="datacenter.yaml's quick sizes (256 KB flows)")
    parser.add_argument("--switch-profile", action="append", choices=PROFILES,
                        help=f"switch settings (repeatable; default {SCENARIO}: the file's own)")
    parser.add_argument("--table", action="store_true",
                        help="issue 29's comparison: both settings, 8x8x8 incast, held-out scenarios")
    parallel.add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        parallel.check_options(args.jobs, args.cluster)
    except ValueError as error:
        parser.error(str(error))
    load_start, began = os.getloadavg()[0], time.monotonic()
    if args.table:
        grouped = table_items()
        with parallel.open_pool(args.jobs, args.cluster) as pool:
            where = parallel.describe(pool)
            outcomes = parallel.run_all(pool, timed_run, [i for _, i in grouped],
                                        [f"{i.profile}: {i.name} seed {i.seed}" for _, i in grouped])
        print_table(grouped, outcomes)
        print(f"wall time: {time.monotonic() - began:.1f} s for {len(grouped)} runs on {where} "
              f"({os.cpu_count()} cores, 1-min load {load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end)")
        return 0
    variants = args.variant or VARIANTS
    profiles = args.switch_profile or [SCENARIO]
    items = [Item(variant, seed, args.quick, profile) for profile in profiles for variant in variants
             for seed in args.seeds]
    with parallel.open_pool(args.jobs, args.cluster) as pool:
        where = parallel.describe(pool)
        outcomes = iter(parallel.run_all(pool, timed_run, items, [f"{i.profile}: {i.variant} seed {i.seed}"
                                                                  for i in items]))
    for profile in profiles:
        for variant in variants:
            name = variant if len(profiles) == 1 else f"{profile}: {variant}"
            slowest, median = [], []
            for seed in args.seeds:
                ratios, wall = next(outcomes)          # in the order of `items`
                if ratios is None:
                    print(f"{name:<24} seed {seed}: a flow never finished", flush=True)
                    continue
                slowest.append(ratios[-1])
                median.append(statistics.median(ratios))
                print(f"{name:<24} seed {seed}: slowest {ratios[-1]:.3f}x  median {median[-1]:.3f}x  "
                      f"({wall:.0f} s wall)", flush=True)
            if slowest:
                print(f"{name:<24} mean   : slowest {statistics.mean(slowest):.3f}x  "
                      f"median {statistics.mean(median):.3f}x  (max slowest {max(slowest):.3f}x)", flush=True)
    print(f"wall time: {time.monotonic() - began:.1f} s for {len(items)} runs on {where} "
          f"({os.cpu_count()} cores, 1-min load {load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
