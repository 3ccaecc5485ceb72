"""netsim and uet-htsim side by side on the same flows (what `mrc-testbed crosscheck` runs).

For every case of a scenario that htsim_uec can express (MRC on incast or permutation flows over a
single-plane leaf-spine or fat-tree; the others, and a balancer a case cannot run with, are listed
as skipped, with why), per seed: htsim_uec with each load balancer asked for, then MRC on netsim,
on the exported topology and flows. Each case (a variant with one transport: "MRC + trimming"
and "MRC drop-tail" are two) is a row of its own. An htsim_uec run that fails is reported as
failed, with its message, and the others still run. `settings` picks the switch thresholds both simulators get: "scenario" (the scenario's
queue, trim point and ECN ramp, mapped to htsim's -q and -ecn) or "htsim" (htsim_uec's defaults:
it is run first, and the queue and ramp it chose, in packets, are given to netsim too).

Each flow's completion is divided by its ideal (its receiver's bytes at the line rate plus the
fabric's base RTT, `metrics.flows_over_ideal`), the same for both simulators. A flow's completion
is when its sender saw every byte acknowledged, on both: htsim_uec prints only that time (its
sender's last cumulative ACK), so netsim's cases run until their senders have seen it too (about a
one-way trip after the last byte arrived). A second figure counts the ideal's bytes as they go on
the wire, each simulator with its own headers (netsim's data packets carry 106 bytes around 4,096
of payload, htsim_uec's 64): the time over what the headers alone make unavoidable. With `sizes`
(`netsim_packet_sizes()`, a build with the measurement switches) htsim_uec's data, trimmed, ACK and
NACK packets are as large as netsim's, and its wire bytes with them. The results folder
has the usual raw.jsonl, summary.json (with a `crosscheck` table: slowest flow over ideal per
case and simulator, mean and worst over the seeds that completed, how each seed's run ended
(completed, cut at horizon, stuck, failed), and each simulator's wall time per case; `failed`: the
failed runs' messages; from `mrc-testbed crosscheck`, `conditions`: what the wall times were
measured on, `conditions_line`), summary.md, the figure `crosscheck-cdf.png` (per-flow completion over
its receiver's ideal, CDF, per case) and,
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

from experiments import conditions, metrics, results, validity
from experiments.backends.htsim.inputs import (BALANCERS, DEFAULT_BALANCER, PacketSizes, Unmappable, data_header_bytes,
                                               export_case)
from experiments.record import CaseRecord
from experiments.scenario import Case, Scenario, load_scenario
from experiments.units import format_bytes

CDF_FIGURE = "crosscheck-cdf.png"
NETSIM = "netsim"
COMPLETED, FAILED = "completed", "failed"    # a run's outcome, or how it ended unfinished (validity.ending)


class CrosscheckInterrupted(KeyboardInterrupt):
    """A Ctrl-C or SIGTERM (`cause`, raised again once the results are saved) stopped
    `Crosscheck.run`: what had finished by then, as `run` returns it."""

    def __init__(self, cause: BaseException, records: list, rows: list, skipped: list) -> None:
        super().__init__()
        self.cause, self.records, self.rows, self.skipped = cause, records, rows, skipped


def htsim_label(balancer: str) -> str:
    """The column of htsim_uec with `balancer`."""
    return f"htsim {balancer}"


def split_mappable(cases: list[Case], balancers: tuple = (DEFAULT_BALANCER,)
                   ) -> tuple[list[tuple[Case, tuple]], list[tuple[str, str]]]:
    """(each case htsim_uec can run with some of `balancers`, with those; (what, why not) for the
    rest: a case none of them can run, or a case with a balancer it cannot run with)."""
    ok, refused = [], []
    for case in cases:
        why = {}
        for balancer in balancers:
            try:
                export_case(case, balancer)
            except Unmappable as error:
                why[balancer] = str(error)
        runs = tuple(b for b in balancers if b not in why)
        if runs:
            ok.append((case, runs))
            refused += [(f"{case.label}, {htsim_label(b)}", text) for b, text in why.items()]
        elif len(set(why.values())) == 1:
            refused.append((case.label, next(iter(why.values()))))
        else:
            refused += [(f"{case.label}, {htsim_label(b)}", text) for b, text in why.items()]
    return ok, refused


def refuse_unmappable(cases: list[Case], balancer: Optional[str] = None) -> None:
    """Raise Unmappable listing every case htsim_uec cannot express with `balancer` (default: its
    own), nothing when all can. A case repeated (`--repeat`) counts once."""
    distinct = [case for case in cases if case.repetition == 0]
    _, refused = split_mappable(distinct, (balancer or DEFAULT_BALANCER,))
    if refused:
        lines = "\n".join(f"  {label}: {why}" for label, why in refused)
        raise Unmappable(f"the htsim backend cannot run {len(refused)} of {len(distinct)} case(s):\n{lines}\n"
                         "choose the others with --variant/--transport, or compare with `mrc-testbed crosscheck`, "
                         "which runs what maps and lists the rest")


def with_switch_settings(case: Case, link: dict) -> Case:
    """`case` with its link keys replaced by `link` (queue_depth, trim_threshold, ECN ramp)."""
    variant = dataclasses.replace(case.variant, link={**case.variant.link, **link})
    return dataclasses.replace(case, variant=variant)


@dataclasses.dataclass
class CrosscheckRow:
    """One case (a variant with one transport): per simulator column and seed, the slowest flow
    over ideal (None: unfinished or failed), how the run ended, and its wall seconds."""

    variant: str
    transport: str
    flow_bytes: int = 0                                        # the workload's bytes per flow
    seeds: dict = dataclasses.field(default_factory=dict)      # column -> [seed]
    slowest: dict = dataclasses.field(default_factory=dict)    # column -> [per seed]
    outcomes: dict = dataclasses.field(default_factory=dict)   # column -> [COMPLETED, "cut at horizon", ... per seed]
    errors: dict = dataclasses.field(default_factory=dict)     # column -> [(seed, message)] of failed runs
    wall_s: dict = dataclasses.field(default_factory=dict)     # column -> [per seed; None: failed]
    ratios: dict = dataclasses.field(default_factory=dict)     # column -> every flow's ratio, all seeds
    settings: dict = dataclasses.field(default_factory=dict)   # the switch keys netsim ran with
    wire: dict = dataclasses.field(default_factory=dict)       # column -> [per seed] over the ideal at wire bytes
    wire_factor: dict = dataclasses.field(default_factory=dict)   # column -> wire bytes per payload byte

    @property
    def label(self) -> str:
        return f"{self.variant} / {self.transport}"

    def add(self, column: str, seed: int, record: CaseRecord, ratios: Optional[list[float]], wall: float,
            wire: Optional[list[float]] = None, wire_factor: Optional[float] = None) -> None:
        """A run of `column` with `seed` that ended (completed or not) with `record`."""
        outcome = validity.ending(record) if not record.completed else (
            COMPLETED if ratios is not None else "a sender's ACK time unknown")
        self._add(column, seed, outcome, wall, None if ratios is None else ratios[-1], None if wire is None else wire[-1])
        self.ratios.setdefault(column, []).extend(ratios or [])
        if wire_factor is not None:
            self.wire_factor[column] = wire_factor

    def add_failure(self, column: str, seed: int, message: str) -> None:
        """A run of `column` with `seed` that failed, saying `message`."""
        self._add(column, seed, FAILED, None, None, None)
        self.errors.setdefault(column, []).append((seed, message))

    def _add(self, column: str, seed: int, outcome: str, wall: Optional[float], slowest: Optional[float],
             wire: Optional[float]) -> None:
        for table, value in ((self.seeds, seed), (self.outcomes, outcome), (self.wall_s, wall),
                             (self.slowest, slowest), (self.wire, wire)):
            table.setdefault(column, []).append(value)

    def failures(self) -> list[tuple[str, int, str]]:
        """(column, seed, message) of every run that failed."""
        return [(column, seed, message) for column, runs in self.errors.items() for seed, message in runs]

    def as_dict(self) -> dict:
        """JSON-ready: per column the seeds' slowest/ideal, its mean and worst over the seeds that
        completed, how each seed's run ended, and the wall times."""
        out = {"case": self.label, "variant": self.variant, "transport": self.transport,
               "flow_bytes": self.flow_bytes, "netsim_switch_settings": self.settings, "columns": {}}
        for column in sorted(self.slowest, key=column_order):
            values = self.slowest[column]
            done = [v for v in values if v is not None]
            walls = [w for w in self.wall_s[column] if w is not None]
            out["columns"][column] = {
                "seeds": self.seeds[column], "slowest_over_ideal": values, "outcomes": self.outcomes[column],
                "mean": statistics.mean(done) if done else None, "worst": max(done) if done else None,
                "unfinished_seeds": len(values) - len(done), "wall_s_mean": statistics.mean(walls) if walls else None,
                "failures": [{"seed": seed, "error": message} for seed, message in self.errors.get(column, [])]}
            wire = [v for v in self.wire.get(column, []) if v is not None]
            if wire:
                out["columns"][column].update({
                    "wire_factor": self.wire_factor.get(column), "wire_slowest_over_ideal": self.wire[column],
                    "wire_mean": statistics.mean(wire), "wire_worst": max(wire)})
        return out


class Crosscheck:
    """Runs netsim and htsim_uec on the same cases and gathers the comparison."""

    def __init__(self, balancers: tuple = BALANCERS, settings: str = "scenario",
                 htsim_binary: Optional[str] = None, stream: TextIO = sys.stderr,
                 sizes: Optional[PacketSizes] = None) -> None:
        from experiments.backends.htsim import find_htsim
        unknown = [b for b in balancers if b not in BALANCERS]
        if unknown or not balancers:
            raise ValueError(f"load balancers {unknown or '(none)'}: expected some of {', '.join(BALANCERS)}")
        self.balancers = tuple(balancers)
        self.settings = settings
        self.sizes = sizes               # htsim_uec's packet sizes (None: its own; netsim_packet_sizes())
        self.binary = htsim_binary or find_htsim()
        self.stream = stream

    def runnable(self, scenario: Scenario, variants: tuple = ()) -> tuple[list[tuple[Case, tuple]], list]:
        """`split_mappable` of the scenario's cases (those of `variants` when given) for these balancers."""
        return split_mappable([c for c in scenario.cases() if not variants or c.variant.label in variants],
                              self.balancers)

    def run(self, scenario_path: Path, seeds: list[int], quick: bool = False, variants: tuple = (),
            progress: Callable[[str], None] = lambda line: None,
            keep: Optional[Path] = None) -> tuple[list[CaseRecord], list[CrosscheckRow], list]:
        """(every record, one row per case, the skipped cases and balancers with why) over `seeds`;
        with `keep`, each htsim_uec run's files (inputs, command, output) in
        keep/seed<S>-<balancer>/<case>/. An htsim_uec run that fails is in its row's failures (the
        others still run). A Ctrl-C or SIGTERM raises CrosscheckInterrupted with what had finished
        (a case's runs of a seed count once all of them have)."""
        records: list[CaseRecord] = []
        rows: dict[str, CrosscheckRow] = {}
        skipped: list = []
        try:
            self._run_seeds(scenario_path, seeds, quick, variants, progress, keep, records, rows, skipped)
        except results.INTERRUPTIONS as cause:
            raise CrosscheckInterrupted(cause, records, [row for row in rows.values() if row.slowest],
                                        skipped) from None
        return records, list(rows.values()), skipped

    def _run_seeds(self, scenario_path: Path, seeds: list[int], quick: bool, variants: tuple,
                   progress: Callable[[str], None], keep: Optional[Path], records: list[CaseRecord],
                   rows: dict, skipped: list) -> None:
        """`run`'s work, each run's record and row added as it finishes (what an interruption keeps)."""
        from experiments.backends.htsim import HtsimBackend, HtsimFailed
        from experiments.backends.netsim_backend import NetsimBackend
        for seed in seeds:
            scenario = load_scenario(scenario_path, quick=quick, seed=seed)
            ok, refused = self.runnable(scenario, variants)
            if seed == seeds[0]:
                skipped[:] = refused
            for case, balancers in ok:
                row = rows.setdefault(case.label, CrosscheckRow(case.variant.label, case.transport.name,
                                                                case.variant.workload.bytes))
                htsim_runs, chosen = [], None
                for balancer in balancers:
                    column = htsim_label(balancer)
                    backend = HtsimBackend(balancer, self.settings, binary=self.binary,
                                           keep=None if keep is None else Path(keep) / f"seed{seed}-{balancer}",
                                           sizes=self.sizes)
                    try:
                        record = backend.run_case(case)
                    except HtsimFailed as error:
                        row.add_failure(column, seed, str(error))
                        continue
                    record.transport = f"{column}: {case.transport.name}"
                    htsim_runs.append((column, record, backend.last_run.wall_s,
                                       htsim_wire_factor(backend.last_run.result, case, self.sizes)))
                    chosen = chosen or backend.last_run.result      # the switch settings htsim_uec chose
                netsim_case = case
                if self.settings == "htsim":
                    if chosen is None:
                        row.add_failure(NETSIM, seed, "not run: every htsim_uec run of this case failed, so "
                                                      "there are no htsim switch settings to give netsim")
                        netsim_case = None
                    else:
                        netsim_case = with_switch_settings(case, chosen.switch_settings())
                if netsim_case is not None:
                    row.settings = {k: netsim_case.variant.link.get(k) for k in
                                    ("queue_depth", "trim_threshold", "ecn_threshold", "ecn_max_threshold")}
                    began = time.monotonic()
                    netsim_record = NetsimBackend(until_acked=True).run_case(netsim_case)
                    netsim_wall = time.monotonic() - began
                    netsim_record.transport = f"{NETSIM}: {case.transport.name}"
                    factor = netsim_wire_factor(netsim_case)
                    row.add(NETSIM, seed, netsim_record, _ratios(netsim_record, netsim_case), netsim_wall,
                            _ratios(netsim_record, netsim_case, factor), factor)
                    records.append(netsim_record)
                for column, record, wall, factor in htsim_runs:
                    row.add(column, seed, record, _ratios(record, case), wall, _ratios(record, case, factor), factor)
                    records.append(record)
                progress(f"{case.label} seed {seed}: " + ", ".join(
                    f"{column} {_outcome_word(row, column)}" for column in sorted(row.slowest, key=column_order)))


def _outcome_word(row: CrosscheckRow, column: str) -> str:
    """The last seed's slowest over ideal of `column`, or how its run ended unfinished."""
    value, outcome = row.slowest[column][-1], row.outcomes[column][-1]
    return f"{value:.3f}" if value is not None else outcome


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


def htsim_wire_factor(result, case: Case, sizes: Optional[PacketSizes] = None) -> float:
    """Wire bytes per payload byte of htsim_uec's full data packet: the packet size it printed
    (`result`, its output read) over the payload it was given (`-mtu` is the payload plus htsim's
    header, or the data header of `sizes`)."""
    from experiments.transport_sizing import transport_config
    from experiments.workloads import variant_topology
    mtu = transport_config(case, variant_topology(case.variant)).mtu_payload
    packet = result.packet_bytes or mtu + data_header_bytes(sizes)
    return packet / mtu


def _fmt(value: Optional[float]) -> str:
    return "unfinished" if value is None else f"{value:.3f}"


def column_order(column: str) -> tuple:
    """Sort key of a column: netsim, then htsim's balancers in BALANCERS' order."""
    balancer = column.split()[-1]
    return (column != NETSIM, BALANCERS.index(balancer) if balancer in BALANCERS else len(BALANCERS), column)


def _columns(rows: list[dict]) -> list[str]:
    """Every column of the rows, netsim first (`column_order`)."""
    return sorted({c for row in rows for c in row["columns"]}, key=column_order)


def _row_label(row: dict) -> str:
    return row.get("case", row["variant"])          # results written before rows were per case: the variant


def _cell(c: dict, mean_key: str = "mean", worst_key: str = "worst") -> str:
    """Mean over the seeds that completed (worst), then which seeds did not and how they ended."""
    parts = [] if c[mean_key] is None else [f"{c[mean_key]:.3f} ({c[worst_key]:.3f})"]
    if "outcomes" not in c:                        # results written before outcomes were kept
        return "; ".join(parts + ([f"{c['unfinished_seeds']} unfinished"] if c["unfinished_seeds"] else [])) or "-"
    unfinished: dict = {}
    for seed, outcome in zip(c["seeds"], c["outcomes"]):
        if outcome != COMPLETED:
            unfinished.setdefault(outcome, []).append(str(seed))
    parts += [f"{outcome} (seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)})"
              for outcome, seeds in unfinished.items()]
    return "; ".join(parts)


def _best(row: dict, key: str) -> str:
    """The htsim column with the lowest `key` among those whose every seed completed."""
    means = [(row["columns"][c][key], c) for c in row["columns"] if c != NETSIM
             and row["columns"][c].get(key) is not None and not row["columns"][c]["unfinished_seeds"]]
    return f"{min(means)[0]:.3f} ({min(means)[1].split()[-1]})" if means else "-"


def table_cells(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """(header, cells) of the comparison, one row per case: slowest flow over ideal, mean over the
    seeds that completed (worst), and the seeds that did not with how they ended, per simulator;
    the best htsim balancer, then each one's wall time per case ("not run": refused, see skipped)."""
    columns = _columns(rows)
    header = ["case", *columns, "htsim best", "wall s per case (" + ", ".join(columns) + ")"]
    cells = []
    for row in rows:
        line = [_row_label(row)]
        line += [_cell(row["columns"][c]) if c in row["columns"] else "not run" for c in columns]
        line.append(_best(row, "mean"))
        walls = [row["columns"].get(c, {}).get("wall_s_mean") for c in columns]
        line.append(" / ".join("-" if w is None else f"{w:.3f}" for w in walls))
        cells.append(line)
    return header, cells


def table_lines(rows: list[dict]) -> list[str]:
    """The comparison (`table_cells`) as a markdown table, and each failed run's message."""
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
    failed = failure_lines(rows)
    if failed:
        lines += ["", "Failed runs:", ""] + [f"- {line}" for line in failed]
    return lines


def failure_lines(rows: list[dict], brief: bool = False) -> list[str]:
    """'case, column, seed N: message' of every run that failed, on one line each (`brief`: only
    the message's last line, htsim_uec's last words)."""
    return [f"{_row_label(row)}, {column}, seed {f['seed']}: "
            + (f["error"].strip().splitlines()[-1] if brief else " / ".join(f["error"].strip().splitlines()))
            for row in rows for column, c in row["columns"].items() for f in c.get("failures", [])]


def wire_table_cells(rows: list[dict]) -> Optional[tuple[list[str], list[list[str]]]]:
    """(header, cells) of the second comparison: slowest flow over the ideal counted in wire bytes
    (each simulator's own data packet headers), mean over the seeds that completed (worst), and the
    best htsim balancer; None when no run has it (results written before it was added)."""
    columns = _columns(rows)
    factors = {}
    for row in rows:
        for c, values in row["columns"].items():
            if "wire_factor" in values:
                factors.setdefault(c, values["wire_factor"])
    if not factors:
        return None
    header = ["case", *[f"{c} (x{factors[c]:.4f})" if c in factors else c for c in columns], "htsim best"]
    cells = []
    for row in rows:
        line = [_row_label(row)]
        for c in columns:
            values = row["columns"].get(c)
            if values is None:
                line.append("not run")
            else:
                line.append(_cell({"wire_mean": None, "wire_worst": None, **values}, "wire_mean", "wire_worst"))
        line.append(_best(row, "wire_mean"))
        cells.append(line)
    return header, cells


# which ideal each flow is over (metrics.flows_over_ideal): its receiver's, shared by every flow into it,
# so a flow that shares its receiver can finish below 1 without being faster than possible
CDF_X_LABEL = ("flow completion (acked) / its receiver's ideal\n(all bytes into that receiver at line rate + base RTT;\n"
               "a flow sharing its receiver can end below 1)")
LINE_STYLES = (("-", None), ("--", "o"), (":", "s"), ("-.", "^"), ((0, (5, 1, 1, 1)), "D"))


def cdf_figure(rows: list[CrosscheckRow], path: Path, title: str) -> Path:
    """Per case, the CDF of every flow's completion over its receiver's ideal (the axis says which:
    CDF_X_LABEL), one line per simulator, each with its own colour, line style and markers, over its
    runs that finished every flow (the legend says when lines coincide, when some seeds are left
    out, and which columns have no such run; a panel with none at all says so)."""
    from matplotlib.lines import Line2D

    from experiments.plots import plt, save_figure       # pyplot on the Agg back end
    columns = sorted({c for row in rows for c in row.slowest}, key=column_order)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, axes = plt.subplots(1, max(1, len(rows)), figsize=(4.2 * max(1, len(rows)), 4.0), squeeze=False)
    for ax, row in zip(axes[0], rows):
        drawn: dict = {}                                  # column -> its sorted ratios
        missing = []
        for column in (c for c in columns if c in row.slowest):
            values = sorted(row.ratios.get(column) or [])
            if not values:
                missing.append(Line2D([], [], linestyle="none", label=f"{column}: no run finished"))
                continue
            same = next((other for other, seen in drawn.items() if seen == values), None)
            drawn[column] = values
            runs, done = len(row.slowest[column]), sum(v is not None for v in row.slowest[column])
            label = column + (f" ({done} of {runs} seeds)" if done < runs else "") + (f" (= {same})" if same else "")
            i = columns.index(column)
            style, marker = LINE_STYLES[i % len(LINE_STYLES)]
            ax.step(values, [(k + 1) / len(values) for k in range(len(values))], where="post", label=label,
                    color=colours[i % len(colours)], linestyle=style, marker=marker,
                    markevery=max(1, len(values) // 8), markersize=4, markerfacecolor="none",
                    linewidth=2.2 if column == NETSIM else 1.2)
        if drawn:
            handles, _ = ax.get_legend_handles_labels()
            ax.legend(handles=handles + missing, fontsize=8, loc="lower right")
        else:
            ax.text(0.5, 0.5, "no run finished all its flows\n(cut, stuck or failed: see the table)",
                    ha="center", va="center", transform=ax.transAxes, fontsize=9)
        ax.set_title(row.label, fontsize=10)
        ax.set_xlabel(CDF_X_LABEL, fontsize=8)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("share of flows")
    width = 4.2 * max(1, len(rows))                     # inches: about 13 characters each at 10 pt
    return save_figure(fig, path, textwrap.fill(title, int(13 * width)), fontsize=10)


COMMIT_SUFFIX = ".commit"      # scripts/build-htsim.sh writes the uet-htsim commit beside the binary


def htsim_commit(binary: str) -> Optional[str]:
    """The uet-htsim commit `binary` was built from, when a file `<binary>.commit` beside it (or
    beside the file it links to) says; None when nothing says."""
    for path in dict.fromkeys((Path(binary), Path(binary).resolve())):
        try:
            said = path.with_name(path.name + COMMIT_SUFFIX).read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if said:
            return said.split()[0]
    return None


def run_conditions(measured: dict, binary: str) -> dict:
    """The conditions of a crosscheck's wall times (`experiments.conditions`: date, cores, load,
    netsim's build) with htsim_uec's path and commit (None: not known)."""
    return {**measured, "htsim_uec": binary, "htsim_uec_commit": htsim_commit(binary)}


def conditions_line(meta: dict) -> str:
    """What the wall times were measured on (a crosscheck's `conditions`), for the console; '' for
    results written before they were kept."""
    c = meta.get("conditions")
    if not c:
        return ""
    return f"Wall times measured {c['date']} on {conditions.text(c)}, {htsim_line(meta)}"


def htsim_line(meta: dict) -> str:
    """Which htsim_uec a crosscheck ran ("netsim's only; htsim_uec: <path>, uet-htsim <commit>."),
    for summary.md, which states the run's conditions under its title; '' for results written
    before they were kept."""
    c = meta.get("conditions")
    if not c:
        return ""
    commit = c.get("htsim_uec_commit")
    return (f"netsim's only; htsim_uec: {c['htsim_uec']}, "
            + (f"uet-htsim {commit}." if commit else f"uet-htsim commit unknown (no {Path(c['htsim_uec']).name}"
               f"{COMMIT_SUFFIX} beside it: scripts/build-htsim.sh writes one)."))


def _seeds(seeds: list[int]) -> str:
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"


def run_title(scenario: Scenario, rows: list[CrosscheckRow], seeds: list[int], quick: bool) -> str:
    """What this crosscheck ran: the scenario, the variants compared, their flow sizes, the seeds."""
    variants = list(dict.fromkeys(row.variant for row in rows)) or ["nothing"]
    sizes = list(dict.fromkeys(format_bytes(row.flow_bytes) for row in rows))
    return (f"{scenario.name}{' (quick)' if quick else ''}: netsim and htsim side by side on "
            f"{'; '.join(variants)}" + (f" ({' / '.join(sizes)} flows)" if sizes else "") + f", {_seeds(seeds)}")


def write_results(scenario: Scenario, records: list[CaseRecord], rows: list[CrosscheckRow], skipped: list,
                  folder: Path, meta_extra: dict) -> tuple[dict, list[Path]]:
    """raw.jsonl, summary.json (with the crosscheck table), summary.md and the CDF figure in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    summaries = [metrics.summarise(r) for r in records]
    table = [row.as_dict() for row in rows]
    seeds = list(meta_extra.get("seeds") or [scenario.seed])
    title = run_title(scenario, rows, seeds, bool(meta_extra.get("quick")))
    about = (f"The cases of {scenario.name} that htsim_uec can express, run on netsim and on htsim_uec side by side"
             + (f" ({len(skipped)} left out: listed below)" if skipped else "") + ". What the scenario file says of "
             "all its cases: " + " ".join(scenario.description.split()))
    meta = {"scenario": scenario.name, "title": title, "description": about,
            "scenario_file": scenario.path, "backend": "netsim + htsim", "target": None, "seed": scenario.seed,
            "seeds": seeds, "seeds_note": _seeds(seeds),
            "created": (meta_extra.get("conditions") or {}).get("date") or time.strftime(conditions.DATE_FORMAT,
                                                                                       time.gmtime()),
            **meta_extra, "crosscheck": table, "skipped": [{"case": label, "why": why} for label, why in skipped],
            "failed": [{"case": row.label, "column": column, "seed": seed, "error": message}
                       for row in rows for column, seed, message in row.failures()]}
    results.write_raw(records, folder)                # the results first: an interruption while
    _write_summaries(meta, summaries, [], folder, skipped)      # drawing loses the figure, never them
    figures = []
    if rows:
        try:
            figures = [cdf_figure(rows, folder / CDF_FIGURE, title)]
        except results.INTERRUPTIONS:
            meta["figures_missing"] = [CDF_FIGURE]
            _write_summaries(meta, summaries, [], folder, skipped)
            raise
    _write_summaries(meta, summaries, figures, folder, skipped)
    return meta, figures


def _write_summaries(meta: dict, summaries: list[dict], figures: list[Path], folder: Path, skipped: list) -> None:
    """summary.json, and summary.md with the side-by-side table under the usual one."""
    results.write_summary(meta, summaries, figures, folder)
    results.write_markdown(meta, summaries, figures, folder)
    md = folder / results.SUMMARY_MD
    lines = ["", "## netsim and htsim side by side", "",
             f"Slowest flow over ideal per case, mean over the seeds that completed of {meta['seeds']} (worst "
             f"seed), and the seeds that did not with how they ended; switch settings: {meta.get('settings')}"
             + (f"; htsim_uec's packets as netsim's: {meta['htsim_packet_sizes']}" if meta.get("htsim_packet_sizes")
                else "") + ".", "",
             *table_lines(meta["crosscheck"]), ""]
    htsim = htsim_line(meta)
    if htsim:
        lines += [f"Wall times: {htsim}", ""]
    lines += [f"- skipped {label}: {why}" for label, why in skipped]
    md.write_text(md.read_text(encoding="utf-8") + "\n".join(lines) + "\n", encoding="utf-8")
