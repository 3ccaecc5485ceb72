"""netsim and uet-htsim side by side on the same flows (what `mrc-testbed crosscheck` runs).

For every case of a scenario that htsim_uec can express (MRC on incast or permutation flows over a
single-plane leaf-spine or fat-tree; the others are listed as skipped, with why), per seed:
MRC on netsim, then htsim_uec with each load balancer asked for, on the exported topology and
flows. `settings` picks the switch thresholds both simulators get: "scenario" (the scenario's
queue, trim point and ECN ramp, mapped to htsim's -q and -ecn) or "htsim" (htsim_uec's defaults:
it is run first, and the queue and ramp it chose, in packets, are given to netsim too).

Each flow's completion is divided by its ideal (its receiver's bytes at the line rate plus the
fabric's base RTT, `metrics.flows_over_ideal`), the same for both simulators. A flow's completion
is when its sender saw every byte acknowledged, on both: htsim_uec prints only that time (its
sender's last cumulative ACK), so netsim's cases run until their senders have seen it too (about a
one-way trip after the last byte arrived). A second figure counts the ideal's bytes as they go on
the wire, each simulator with its own headers (netsim's data packets carry 106 bytes around 4,096
of payload, htsim_uec's 64): the time over what the headers alone make unavoidable. The results folder
has the usual raw.jsonl, summary.json (with a `crosscheck` table: slowest flow over ideal per
variant and simulator, mean and worst over the seeds, and each simulator's wall time per case),
summary.md, the figure `crosscheck-cdf.png` (per-flow completion over ideal, CDF, per variant) and,
from `mrc-testbed crosscheck`, every htsim_uec run's input files, command line and output under htsim/.
"""
from __future__ import annotations

import dataclasses
import statistics
import sys
import textwrap
import time
from pathlib import Path
from typing import Callable, Optional, TextIO

from experiments import metrics, results
from experiments.backends.htsim.inputs import BALANCERS, Unmappable, export_case
from experiments.record import CaseRecord
from experiments.scenario import Case, Scenario, load_scenario

CDF_FIGURE = "crosscheck-cdf.png"
NETSIM = "netsim MRC"


def htsim_label(balancer: str) -> str:
    """The column (and transport name) of htsim_uec with `balancer`."""
    return f"htsim {balancer}"


def split_mappable(cases: list[Case]) -> tuple[list[Case], list[tuple[Case, str]]]:
    """(the cases htsim_uec can run, (case, why not) for the others)."""
    ok, refused = [], []
    for case in cases:
        try:
            export_case(case)
        except Unmappable as error:
            refused.append((case, str(error)))
        else:
            ok.append(case)
    return ok, refused


def refuse_unmappable(cases: list[Case]) -> None:
    """Raise Unmappable listing every case htsim_uec cannot express (nothing when all can)."""
    _, refused = split_mappable(cases)
    if refused:
        lines = "\n".join(f"  {case.label}: {why}" for case, why in refused)
        raise Unmappable(f"the htsim backend cannot run {len(refused)} of {len(cases)} case(s):\n{lines}\n"
                         "choose the others with --variant/--transport, or compare with `mrc-testbed crosscheck`, "
                         "which runs what maps and lists the rest")


def with_switch_settings(case: Case, link: dict) -> Case:
    """`case` with its link keys replaced by `link` (queue_depth, trim_threshold, ECN ramp)."""
    variant = dataclasses.replace(case.variant, link={**case.variant.link, **link})
    return dataclasses.replace(case, variant=variant)


@dataclasses.dataclass
class CrosscheckRow:
    """One variant: each simulator's slowest flow over ideal per seed, and wall seconds per case."""

    variant: str
    slowest: dict = dataclasses.field(default_factory=dict)    # column -> [per seed]
    wall_s: dict = dataclasses.field(default_factory=dict)     # column -> [per seed]
    ratios: dict = dataclasses.field(default_factory=dict)     # column -> every flow's ratio, all seeds
    settings: dict = dataclasses.field(default_factory=dict)   # the switch keys netsim ran with
    wire: dict = dataclasses.field(default_factory=dict)       # column -> [per seed] over the ideal at wire bytes
    wire_factor: dict = dataclasses.field(default_factory=dict)   # column -> wire bytes per payload byte

    def add(self, column: str, ratios: Optional[list[float]], wall: float,
            wire: Optional[list[float]] = None, wire_factor: Optional[float] = None) -> None:
        self.slowest.setdefault(column, []).append(None if ratios is None else ratios[-1])
        self.wall_s.setdefault(column, []).append(wall)
        self.ratios.setdefault(column, []).extend(ratios or [])
        self.wire.setdefault(column, []).append(None if wire is None else wire[-1])
        if wire_factor is not None:
            self.wire_factor[column] = wire_factor

    def as_dict(self) -> dict:
        """JSON-ready: per column the seeds' slowest/ideal, its mean and worst, and the wall times."""
        out = {"variant": self.variant, "netsim_switch_settings": self.settings, "columns": {}}
        for column, values in self.slowest.items():
            done = [v for v in values if v is not None]
            out["columns"][column] = {
                "slowest_over_ideal": values, "mean": statistics.mean(done) if done else None,
                "worst": max(done) if done else None, "unfinished_seeds": len(values) - len(done),
                "wall_s_mean": statistics.mean(self.wall_s[column])}
            wire = [v for v in self.wire.get(column, []) if v is not None]
            if wire:
                out["columns"][column].update({
                    "wire_factor": self.wire_factor.get(column), "wire_slowest_over_ideal": self.wire[column],
                    "wire_mean": statistics.mean(wire), "wire_worst": max(wire)})
        return out


class Crosscheck:
    """Runs netsim and htsim_uec on the same cases and gathers the comparison."""

    def __init__(self, balancers: tuple = BALANCERS, settings: str = "scenario",
                 htsim_binary: Optional[str] = None, stream: TextIO = sys.stderr) -> None:
        from experiments.backends.htsim import find_htsim
        unknown = [b for b in balancers if b not in BALANCERS]
        if unknown or not balancers:
            raise ValueError(f"load balancers {unknown or '(none)'}: expected some of {', '.join(BALANCERS)}")
        self.balancers = tuple(balancers)
        self.settings = settings
        self.binary = htsim_binary or find_htsim()
        self.stream = stream

    def run(self, scenario_path: Path, seeds: list[int], quick: bool = False, variants: tuple = (),
            progress: Callable[[str], None] = lambda line: None,
            keep: Optional[Path] = None) -> tuple[list[CaseRecord], list[CrosscheckRow], list]:
        """(every record, one row per variant, the skipped cases with why) over `seeds`; with `keep`,
        each htsim_uec run's files (inputs, command, output) in keep/seed<S>-<balancer>/<case>/."""
        from experiments.backends.htsim import HtsimBackend
        from experiments.backends.netsim_backend import NetsimBackend
        records: list[CaseRecord] = []
        rows: dict[str, CrosscheckRow] = {}
        skipped: list = []
        for seed in seeds:
            scenario = load_scenario(scenario_path, quick=quick, seed=seed)
            cases = [c for c in scenario.cases() if not variants or c.variant.label in variants]
            ok, refused = split_mappable(cases)
            if seed == seeds[0]:
                skipped = [(case.label, why) for case, why in refused]
            for case in ok:
                row = rows.setdefault(case.variant.label, CrosscheckRow(case.variant.label))
                htsim_runs = []
                for balancer in self.balancers:
                    backend = HtsimBackend(balancer, self.settings, binary=self.binary,
                                           keep=None if keep is None else Path(keep) / f"seed{seed}-{balancer}")
                    record = backend.run_case(case)
                    record.transport = htsim_label(balancer)
                    htsim_runs.append((balancer, record, backend.last_run.wall_s,
                                       htsim_wire_factor(backend.last_run.result, case)))
                    if balancer == self.balancers[0]:
                        first = backend.last_run.result   # the switch settings htsim_uec chose
                netsim_case = case
                if self.settings == "htsim":
                    netsim_case = with_switch_settings(case, first.switch_settings())
                row.settings = {k: netsim_case.variant.link.get(k) for k in
                                ("queue_depth", "trim_threshold", "ecn_threshold", "ecn_max_threshold")}
                began = time.monotonic()
                netsim_record = NetsimBackend(until_acked=True).run_case(netsim_case)
                netsim_wall = time.monotonic() - began
                netsim_record.transport = NETSIM
                factor = netsim_wire_factor(netsim_case)
                row.add(NETSIM, _ratios(netsim_record, netsim_case), netsim_wall,
                        _ratios(netsim_record, netsim_case, factor), factor)
                records.append(netsim_record)
                for balancer, record, wall, factor in htsim_runs:
                    row.add(htsim_label(balancer), _ratios(record, case), wall, _ratios(record, case, factor), factor)
                    records.append(record)
                progress(f"{case.variant.label} seed {seed}: " + ", ".join(
                    f"{column} {_fmt(values[-1])}" for column, values in row.slowest.items()))
        return records, list(rows.values()), skipped


def _ratios(record: CaseRecord, case: Case, wire_factor: float = 1.0) -> Optional[list[float]]:
    """Every flow's completion at its sender over its ideal (payload bytes, or wire bytes with `wire_factor`)."""
    from experiments.transport_sizing import line_rate_and_base_rtt
    return metrics.flows_over_ideal(record, *line_rate_and_base_rtt(case), acked=True, wire_factor=wire_factor)


def netsim_wire_factor(case: Case) -> float:
    """Wire bytes per payload byte of a full netsim data packet of `case` (its headers and ICRC)."""
    from experiments.transport_sizing import transport_config
    from experiments.workloads import variant_topology
    from wire.packets import DATA_OVERHEAD
    mtu = transport_config(case, variant_topology(case.variant)).mtu_payload
    return (mtu + DATA_OVERHEAD) / mtu


def htsim_wire_factor(result, case: Case) -> float:
    """Wire bytes per payload byte of htsim_uec's full data packet: the packet size it printed
    (`result`, its output read) over the payload it was given (`-mtu` is the payload plus htsim's
    header)."""
    from experiments.backends.htsim.inputs import HTSIM_HEADER_BYTES
    from experiments.transport_sizing import transport_config
    from experiments.workloads import variant_topology
    mtu = transport_config(case, variant_topology(case.variant)).mtu_payload
    packet = result.packet_bytes or mtu + HTSIM_HEADER_BYTES
    return packet / mtu


def _fmt(value: Optional[float]) -> str:
    return "unfinished" if value is None else f"{value:.3f}"


def table_cells(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """(header, cells) of the comparison: slowest flow over ideal, mean over seeds (worst), per
    simulator, the best htsim balancer, then each one's wall time per case."""
    columns = list(rows[0]["columns"]) if rows else []
    best = [c for c in columns if c != NETSIM]
    header = ["variant", *columns, "htsim best", "wall s per case (" + ", ".join(columns) + ")"]
    cells = []
    for row in rows:
        line = [row["variant"]]
        for column in columns:
            c = row["columns"][column]
            extra = f" ({c['unfinished_seeds']} unfinished)" if c["unfinished_seeds"] else ""
            line.append(f"{_fmt(c['mean'])} ({_fmt(c['worst'])}){extra}")
        means = [(row["columns"][c]["mean"], c) for c in best if row["columns"][c]["mean"] is not None]
        line.append(f"{min(means)[0]:.3f} ({min(means)[1].split()[-1]})" if means else "-")
        line.append(" / ".join(f"{row['columns'][c]['wall_s_mean']:.3f}" for c in columns))
        cells.append(line)
    return header, cells


def table_lines(rows: list[dict]) -> list[str]:
    """The comparison (`table_cells`) as a markdown table."""
    if not rows:
        return ["(no case htsim_uec can run)"]
    header, cells = table_cells(rows)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(c) + " |" for c in cells]
    wire = wire_table_cells(rows)
    if wire is not None:
        header, cells = wire
        lines += ["", "Over the ideal at wire bytes (each simulator's own headers: its figure above over what they cost):",
                  "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(c) + " |" for c in cells]
    return lines


def wire_table_cells(rows: list[dict]) -> Optional[tuple[list[str], list[list[str]]]]:
    """(header, cells) of the second comparison: slowest flow over the ideal counted in wire bytes
    (each simulator's own data packet headers), mean over seeds (worst), and the best htsim
    balancer; None when the rows do not have it (results written before it was added)."""
    columns = list(rows[0]["columns"]) if rows else []
    if not columns or any("wire_mean" not in row["columns"][c] for row in rows for c in columns):
        return None
    best = [c for c in columns if c != NETSIM]
    header = ["variant", *[f"{c} (x{rows[0]['columns'][c]['wire_factor']:.4f})" for c in columns], "htsim best"]
    cells = []
    for row in rows:
        line = [row["variant"]]
        line += [f"{_fmt(row['columns'][c]['wire_mean'])} ({_fmt(row['columns'][c]['wire_worst'])})" for c in columns]
        means = [(row["columns"][c]["wire_mean"], c) for c in best]
        line.append(f"{min(means)[0]:.3f} ({min(means)[1].split()[-1]})" if means else "-")
        cells.append(line)
    return header, cells


def cdf_figure(rows: list[CrosscheckRow], path: Path, title: str) -> Path:
    """Per variant, the CDF of every flow's completion over its ideal, one line per simulator."""
    from experiments.plots import plt, save_figure       # pyplot on the Agg back end
    fig, axes = plt.subplots(1, max(1, len(rows)), figsize=(4.2 * max(1, len(rows)), 3.6), squeeze=False)
    for ax, row in zip(axes[0], rows):
        for column, ratios in row.ratios.items():
            if not ratios:
                continue
            values = sorted(ratios)
            ax.step(values, [(i + 1) / len(values) for i in range(len(values))], where="post", label=column,
                    linewidth=2.2 if column == NETSIM else 1.2)
        ax.set_title(row.variant, fontsize=10)
        ax.set_xlabel("flow completion / ideal")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("share of flows")
    axes[0][0].legend(fontsize=8, loc="upper left")
    width = 4.2 * max(1, len(rows))                     # inches: about 13 characters each at 10 pt
    return save_figure(fig, path, textwrap.fill(title, int(13 * width)), fontsize=10)


def write_results(scenario: Scenario, records: list[CaseRecord], rows: list[CrosscheckRow], skipped: list,
                  folder: Path, meta_extra: dict) -> tuple[dict, list[Path]]:
    """raw.jsonl, summary.json (with the crosscheck table), summary.md and the CDF figure in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    summaries = [metrics.summarise(r) for r in records]
    table = [row.as_dict() for row in rows]
    title = f"{scenario.title}: netsim and htsim side by side"
    figures = [cdf_figure(rows, folder / CDF_FIGURE, title)] if rows else []
    meta = {"scenario": scenario.name, "title": title, "description": scenario.description,
            "scenario_file": scenario.path, "backend": "netsim + htsim", "target": None, "seed": scenario.seed,
            "created": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), **meta_extra,
            "crosscheck": table, "skipped": [{"case": label, "why": why} for label, why in skipped]}
    results.write_raw(records, folder)
    results.write_summary(meta, summaries, figures, folder)
    results.write_markdown(meta, summaries, figures, folder)
    md = folder / results.SUMMARY_MD
    lines = ["", "## netsim and htsim side by side", "",
             f"Slowest flow over ideal, mean over seeds {meta_extra.get('seeds')} (worst seed); switch settings: "
             f"{meta_extra.get('settings')}.", "", *table_lines(table), ""]
    lines += [f"- skipped {label}: {why}" for label, why in skipped]
    md.write_text(md.read_text(encoding="utf-8") + "\n".join(lines) + "\n", encoding="utf-8")
    return meta, figures
