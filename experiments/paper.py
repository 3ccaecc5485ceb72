"""The paper's statements beside the lab's figures: what `mrc-testbed report --paper` writes.

Each `Claim` quotes a published statement about MRC (the MRC/SRv6 paper, as issue 14 lists them),
names the scenario that measures it at lab scale, reads the figures from that scenario's newest
results folder of all its cases (its summary.json; `choose_runs`), and says where and why the
lab-scale result differs. A claim whose scenario has not been run says so. Of a repeated run
(`run --repeat`) a ratio between cases is taken within each run (one seed), never across runs.
"""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from experiments import results
from experiments.report import NoResults, _backend, _rel, find_runs
from experiments.scenario import ScenarioError, load_scenario
from experiments.timefmt import format_seconds
from experiments.units import format_rate

REPOSITORY = Path(__file__).resolve().parents[1]

Figures = Callable[[dict], list[str]]


@dataclass(frozen=True)
class Claim:
    """One published statement, the scenario measuring it, how to read it, why the lab differs."""

    title: str
    statement: str
    scenario: Optional[str]         # None: no scenario measures it yet
    figures: Optional[Figures]
    differs: str
    per_run: bool = False           # its figures are each run's of a repeated run (`run --repeat`), not the aggregate's


def _rate(bps: Optional[float]) -> str:
    """A rate in the unit that suits it (experiments.units.format_rate), "—" when unknown."""
    return "—" if bps is None else format_rate(bps)


def _by_variant(summary: dict) -> dict[str, dict[str, dict]]:
    """{variant: {transport: case summary}}, in the order of the run."""
    out: dict[str, dict[str, dict]] = {}
    for case in summary.get("cases", []):
        out.setdefault(case.get("variant", ""), {})[case.get("transport", "")] = case
    return out


def _finished(case: dict) -> str:
    return "" if case.get("completed") else " (did not finish)"


def runs_of(summary: dict) -> list[dict]:
    """The run as one summary per repetition, each holding that repetition's cases alone (with
    their seed): a repeated run (`run --repeat`, whose summary.json keeps every run under `runs`)
    gives one per repetition, any other run itself. A figure computed on each of them compares
    cases of one seed, never one case's seed-1 run with another's seed-2 run."""
    runs = summary.get("runs")
    if (summary.get("repeat") or 1) <= 1 or not runs:
        return [summary]
    rounds: dict[int, list[dict]] = {}
    for case in runs:
        rounds.setdefault(case.get("repetition", 0), []).append(case)
    return [{"cases": cases, "seed": cases[0].get("seed")} for _, cases in sorted(rounds.items())]


def _over_runs(values: list[float], show: Callable[[float], str]) -> str:
    """One run's value; of several, their median with the range and how many runs."""
    if len(values) == 1:
        return show(values[0])
    if show(min(values)) == show(max(values)):
        return f"{show(values[0])} (in each of {len(values)} runs)"
    return (f"{show(statistics.median(values))} (median of {len(values)} runs, "
            f"{show(min(values))}-{show(max(values))})")


def _mode(cases: dict[str, dict], mode: str) -> Optional[dict]:
    return next((c for c in cases.values() if c.get("mode") == mode), None)


def _unfinished_runs(cases: list[dict]) -> str:
    """'' when every run of a case finished, ' (did not finish)' for one run, else in how many."""
    late = sum(1 for c in cases if not c.get("completed"))
    if not late:
        return ""
    return " (did not finish)" if len(cases) == 1 else f" (did not finish in {late} of {len(cases)} runs)"


def loss_sweep_figures(summary: dict) -> list[str]:
    """Goodput of MRC against RoCE for every variant (summed over the hosts), their ratio, and the
    EVs MRC kept under loss. Of a repeated run each ratio is taken within a run (one seed) and the
    line gives their median and range."""
    lines = ["goodput: payload bytes received per second, summed over every host of the run"]
    rounds = [_by_variant(run) for run in runs_of(summary)]
    for variant in _by_variant(summary):
        pairs = [(_mode(r.get(variant, {}), "mrc"), _mode(r.get(variant, {}), "roce")) for r in rounds]
        pairs = [(m, r) for m, r in pairs if m is not None and r is not None]
        if not pairs:
            continue
        ratios = [(m.get("mean_goodput_bps") or 0.0) / r["mean_goodput_bps"] for m, r in pairs
                  if r.get("mean_goodput_bps")]
        ratio = _over_runs(ratios, lambda x: f"{x:.2f}x") if ratios else "RoCE moved nothing"
        if len(ratios) < len(pairs) and ratios:
            ratio += f" (RoCE moved nothing in {len(pairs) - len(ratios)} of {len(pairs)} runs)"
        m = [m.get("mean_goodput_bps") or 0.0 for m, _ in pairs]
        r = [r.get("mean_goodput_bps") or 0.0 for _, r in pairs]
        if len(pairs) == 1:
            lines.append(f"{variant}: MRC {_rate(m[0])}{_unfinished_runs([pairs[0][0]])}, RoCE {_rate(r[0])}"
                         f"{_unfinished_runs([pairs[0][1]])}; MRC/RoCE {ratio}")
        else:
            lines.append(f"{variant}: MRC/RoCE {ratio}, each run's MRC over the same seed's RoCE; medians MRC "
                         f"{_rate(statistics.median(m))}{_unfinished_runs([p[0] for p in pairs])}, RoCE "
                         f"{_rate(statistics.median(r))}{_unfinished_runs([p[1] for p in pairs])}")
    return lines + loss_sweep_kept(summary) + loss_sweep_evs(summary)


def loss_sweep_kept(summary: dict) -> list[str]:
    """Per variant with loss, the share of its loss-free goodput (the variant of the same workload
    at 0 % loss) MRC kept: within each run (seed) of a repeated run, their median and range."""
    rounds = [_by_variant(run) for run in runs_of(summary)]
    lines = []
    for variant in _by_variant(summary):
        twin = re.sub(r"[0-9.]+% loss", "0% loss", variant)
        if twin == variant:
            continue
        pairs = [(_mode(r.get(variant, {}), "mrc"), _mode(r.get(twin, {}), "mrc")) for r in rounds]
        pairs = [(m, free) for m, free in pairs if m is not None and free is not None and free.get("mean_goodput_bps")]
        if not pairs:
            continue
        shares = [(m.get("mean_goodput_bps") or 0.0) / free["mean_goodput_bps"] for m, free in pairs]
        lines.append(f"{variant}: MRC kept {_over_runs(shares, lambda x: f'{x:.0%}')} of its goodput at 0 % loss"
                     f"{_unfinished_runs([m for m, _ in pairs])}")
    return lines


def _kept(case: dict) -> str:
    """'N % of its E EVs never retired' for an MRC case that listed its EVs, else ''."""
    ev = case.get("ev_retirements") or {}
    if not ev.get("evs") or ev.get("kept_share") is None:
        return ""
    return f"{ev['kept_share']:.0%} of its {ev['evs']} EVs never retired"


def loss_sweep_evs(summary: dict) -> list[str]:
    """How many of MRC's EVs random loss left in use, per variant with loss (of a repeated run:
    the median and range of its runs)."""
    rounds = [_by_variant(run) for run in runs_of(summary)]
    lines = []
    for variant in _by_variant(summary):
        if "0% loss" in variant:
            continue
        listed = [c for c in (_mode(r.get(variant, {}), "mrc") for r in rounds) if c is not None and _kept(c)]
        if not listed:
            continue
        if len(listed) == 1:
            kept = _kept(listed[0])
        else:
            shares = [c["ev_retirements"]["kept_share"] for c in listed]
            evs = sorted({c["ev_retirements"]["evs"] for c in listed})
            kept = (f"{_over_runs(shares, lambda x: f'{x:.0%}')} of its "
                    f"{'/'.join(map(str, evs))} EVs never retired")
        lines.append(f"{variant}: MRC: {kept} (random loss hits every path alike: no path's own)")
    return lines


# issue 29 item 4: a path losing 20 % has its EVs retired within this many base RTTs of the loss starting
RETIRE_WITHIN_RTTS = 10


def _first_retired_rtts(case: dict) -> tuple[list[float], bool]:
    """Each connection's first EV retired after the fault, in the case's base RTTs (metrics.
    ev_retirements' `by_connection`; [] when none retired or the base RTT is unknown), and whether
    that is every connection's: a summary.json older than `by_connection` has the fastest and the
    slowest only."""
    first = (case.get("ev_retirements") or {}).get("first_retired_after_failure_s")
    rtt = case.get("base_rtt_s")
    if first is None or not rtt:
        return [], True
    if "by_connection" not in first:
        return [first["min"] / rtt, first["max"] / rtt], False
    return [t / rtt for t in first["by_connection"].values()], True


def first_retirements(runs: list[dict]) -> str:
    """How soon after the fault each connection that retired EVs retired its first, over the runs
    (seeds) of one case: how many connections, the range and median in base RTTs, and how many came
    later than issue 29's RETIRE_WITHIN_RTTS (with their figures and seeds); '' when no run retired
    any. (A connection that crossed the fault but retired nothing is not among them: EVs kept says
    how many went.)"""
    each: list[tuple[float, object]] = []
    whole, retiring = True, 0
    for run in runs:
        rtts, every = _first_retired_rtts(run)
        whole = whole and every
        retiring += bool(rtts)
        each += [(x, run.get("seed")) for x in rtts]
    if not each:
        return ""
    values = [x for x, _ in each]
    seeds = sorted({run.get("seed") for run in runs if run.get("seed") is not None})
    over = "" if len(runs) == 1 else f" over {len(runs)} seeds" + (f" ({seeds[0]}-{seeds[-1]})" if seeds else "")
    span = f"{min(values):.1f}-{max(values):.1f} base RTTs after the fault"
    none = "" if retiring == len(runs) else f" (none in {len(runs) - retiring} of the {len(runs)} runs)"
    if not whole:       # written before the per-connection figures: each run's fastest and slowest only
        return (f"; connections retired EVs{over}{none}, the fastest and slowest of each run its first {span} "
                f"(this summary.json keeps only those two: no median, no count past issue 29's {RETIRE_WITHIN_RTTS})")
    late = sorted((x, seed) for x, seed in each if x > RETIRE_WITHIN_RTTS)
    past = (f"{len(late)} of them past issue 29's {RETIRE_WITHIN_RTTS}: "
            + ", ".join(f"{x:.1f}" + ("" if len(runs) == 1 or seed is None else f" (seed {seed})") for x, seed in late)
            if late else f"none past issue 29's {RETIRE_WITHIN_RTTS}")
    return (f"; {len(values)} connection{'' if len(values) == 1 else 's'} retired EVs{over}{none}, each its first "
            f"{span}, median {statistics.median(values):.1f}; {past}")


def path_loss_figures(summary: dict) -> list[str]:
    """Per case: completion, EVs kept, and how soon after the fault each connection retired the bad
    path (`first_retirements`). Of a repeated run (`run --repeat`) every figure is over all its runs
    (seeds): the median and range of completion and EVs kept, every connection of every run."""
    rounds = [_by_variant(run) for run in runs_of(summary)]
    lines = []
    for variant, cases in _by_variant(summary).items():
        for name in cases:
            runs = [r[variant][name] for r in rounds if name in r.get(variant, {})]
            times = [c["completion_time_s"] for c in runs if c.get("completed") and c.get("completion_time_s") is not None]
            done = (f"finished in {_over_runs(times, lambda t: f'{t * 1e6:.0f} us')}" if times else "did not finish")
            if times and len(times) < len(runs):
                done += f" (did not finish in {len(runs) - len(times)} of {len(runs)} runs)"
            listed = [c for c in runs if _kept(c)]
            if len(listed) > 1:
                evs = sorted({c["ev_retirements"]["evs"] for c in listed})
                kept = (f"{_over_runs([c['ev_retirements']['kept_share'] for c in listed], lambda x: f'{x:.0%}')} "
                        f"of its {'/'.join(map(str, evs))} EVs never retired")
            else:
                kept = _kept(listed[0]) if listed else "EVs not listed"
            lines.append(f"{variant}, {name}: {done}, {kept}{first_retirements(runs)}")
    return lines


def gray_figures(summary: dict) -> list[str]:
    """EVs retired and reinstated, and completion, per variant and transport."""
    lines = []
    for variant, cases in _by_variant(summary).items():
        parts = []
        for name, c in cases.items():
            t = c.get("completion_time_s")
            done = f"finished in {format_seconds(t)}" if c.get("completed") and t is not None else "did not finish"
            evs = ("" if c.get("mode") != "mrc" else ", EVs not measured" if c.get("evs_retired", 0) is None
                   else f", {c.get('evs_retired', 0)} EVs retired, {c.get('evs_reinstated', 0)} reinstated")
            parts.append(f"{name} {done}{evs}")
        lines.append(f"{variant}: " + "; ".join(parts))
    return lines


def incast_figures(summary: dict) -> list[str]:
    """The victim flow's throughput and the incast flows' mean, per transport."""
    lines = []
    for variant, cases in _by_variant(summary).items():
        for name, c in cases.items():
            roles = c.get("throughput_by_role_bps") or {}
            lines.append(f"{variant}, {name}: victim {_rate(roles.get('victim'))}, incast senders "
                         f"{_rate(roles.get('incast'))} each on average")
    return lines


def permutation_figures(summary: dict) -> list[str]:
    """Slowest, mean and fastest flow, and the fabric links' max/mean utilisation, per transport."""
    lines = []
    for variant, cases in _by_variant(summary).items():
        for name, c in cases.items():
            f = c.get("flow_throughput_bps") or {}
            links = (c.get("link_utilisation") or {}).get("max_over_mean")
            imbalance = f", link max/mean {links:.2f}" if links else ""
            lines.append(f"{variant}, {name}: flows {_rate(f.get('min'))} (slowest) / {_rate(f.get('mean'))} "
                         f"(mean) / {_rate(f.get('max'))} (fastest){imbalance}")
    return lines


def failover_figures(summary: dict) -> list[str]:
    """Time to recover and longest delivery gap after the failure, per transport."""
    lines = []
    for variant, cases in _by_variant(summary).items():
        for name, c in cases.items():
            ttr = c.get("time_to_recover_s")
            gap = c.get("longest_delivery_gap_s")
            lines.append(f"{variant}, {name}: {_recovered(c, ttr)}"
                         f"{'' if gap is None else f', longest gap {format_seconds(gap)}'}{_finished(c)}")
    return lines


def _recovered(case: dict, ttr: Optional[float]) -> str:
    """'recovered in T' ('never'); or why a case has no recovery figure ('no dip', 'window longer
    than the run': metrics.recovery_note)."""
    if "goodput" in case.get("not_measured", ()):
        return "recovery not measured"
    if case.get("goodput_before_failure") is False:
        return "recovery n/a (no goodput before the failure)"
    if case.get("recovery_note"):
        return f"recovery: {results.recovery_note_text(case)}"
    return f"recovered in {'never' if ttr is None else format_seconds(ttr)}"


def _count(value: Optional[int]) -> str:
    return "—" if value is None else str(value)


def cascade_figures(summary: dict) -> list[str]:
    """Completion, longest delivery gap and EVs retired while links died one after another."""
    lines = []
    for variant, cases in _by_variant(summary).items():
        for name, c in cases.items():
            done = c.get("completion_time_s")
            gap = c.get("longest_delivery_gap_s")
            lines.append(f"{variant}, {name}: completed in {'never' if done is None else format_seconds(done)}, "
                         f"longest delivery gap {'—' if gap is None else format_seconds(gap)}, "
                         f"{_count(c.get('evs_retired', 0))} EVs retired{_finished(c)}")
    return lines


CLAIMS = (
    Claim("Loss: all-reduce and all-to-all against message size",
          "One RoCE connection reaches about half of line rate; at 1 % loss RoCE is unusable while MRC "
          "keeps about a third.",
          "loss-sweep", loss_sweep_figures,
          "Go-back-N throws away about a bandwidth-delay product per loss, so the paper's figure needs "
          "data-center scale: the quick sweep (netsim) runs 400 Gbit/s, 2 us per hop, 4 KB packets (a BDP "
          "of about 200 packets): its MRC/RoCE ratios and the share of its loss-free goodput MRC kept are "
          "the figures above, to set beside the paper's third; "
          "random loss hits every path alike, so MRC retires none of them (docs/transport.md, 'Whose loss'). The full "
          "sweep runs at `auto` (Mininet's calibrated rate, a few Mbit/s; 20 Mbit/s on netsim), where the BDP is a "
          "few packets and a go-back costs "
          "RoCE little; there one connection fills the link. docs/transport.md, 'Random loss'.", per_run=True),
    Claim("A gray path: per-EV timeline at 20 % loss",
          "With 20 % loss on one path, its EVs go inactive (ASSUMED_BAD) and the others carry the "
          "traffic; probes bring them back.",
          "gray", gray_figures,
          "Two spines instead of many planes: one lossy leaf-spine link is half of the paths, not a "
          "small share, and EVs are retired after timeouts of milliseconds (Mininet RTTs), not "
          "microseconds."),
    Claim("Whose loss: random loss against a lossy or dead link (per-EV timeline)",
          "A real loss (no trim) means a failed path: its EVs are retired at once for backups; the per-EV "
          "timeline with 20 % loss on one path shows its EVs inactive and the others carrying the traffic.",
          "path-loss", path_loss_figures,
          "The lab retires a path only for loss that is its own (host_agent/transport/pathloss.py): random "
          "loss on every host link, which every path crosses, retires nothing, where taking each loss as a "
          "failed path retired every EV within 0.06 ms; a 20 % link needs a few of its losses close together "
          "(a few base RTTs), a dead one two or three in a row. Four spines, so a bad link is a quarter of "
          "the paths; ev_states.png of the run shows the timelines. docs/transport.md, 'Whose loss'.",
          per_run=True),
    Claim("7 -> 1 incast with a victim flow",
          "The victim flow is unaffected under MRC (trimming handles the incast).",
          "incast", incast_figures,
          "Switch queues are a few packets deep at 1 Gbit/s (netsim) or 20 Mbit/s (Mininet); the "
          "victim shares the receiver's leaf, as in the paper, but the fabric has 2 spines."),
    Claim("Permutation traffic",
          "Every flow near line rate under MRC; RoCE flows at 1/2 or 1/3 of line rate (ECMP collisions).",
          "permutation", permutation_figures,
          "With 4 spines and 8 flows, collisions of 2 or 3 flows on an uplink are the same kind of "
          "event as in the paper's fabric; the link rate is what the Python switch forwards."),
    Claim("Path failure during a job",
          "Path failures are bypassed in a few tens of microseconds; conventional fabrics take seconds "
          "to tens of seconds to reconverge.",
          "failover", failover_figures,
          "Recovery takes a few RTOs of the lab's paths (milliseconds on Mininet, whose RTT is about a "
          "millisecond at 20 Mbit/s), not microseconds; the converging control plane is emulated by a "
          "fixed reroute delay."),
    Claim("Links failing one after another",
          "20 T0-T1 links failed one at a time during a job with minimal impact.",
          "cascade", cascade_figures,
          "Three of a 2-leaf, 4-spine fabric's eight leaf-spine links die in turn (the paper's fabric had "
          "thousands); each takes a share of the capacity across the leaves, so 'minimal impact' here "
          "means no stall rather than no slowdown."),
)


def scenario_cases(summary: dict) -> Optional[set[tuple[str, str]]]:
    """The (variant, transport) of every case of the run's scenario file (with its quick overrides
    when the run was quick); None when the file is gone or no longer reads."""
    given = summary.get("scenario_file")
    if not given:
        return None
    for path in (Path(given), REPOSITORY / given):
        if path.is_file():
            try:
                scenario = load_scenario(path, quick=bool(summary.get("quick")))
            except (ScenarioError, ValueError, OSError):
                return None
            return {(case.variant.label, case.transport.name) for case in scenario.cases()}
    return None


def subset_note(summary: dict) -> str:
    """'' for a run of all its scenario's cases (or whose scenario file cannot be read); else which
    share of them it ran (a run made with --variant/--transport)."""
    planned = scenario_cases(summary)
    ran = {(c.get("variant", ""), c.get("transport", "")) for c in summary.get("cases", [])}
    if planned is None or planned <= ran:
        return ""
    return (f"a subset of the scenario's cases, {len(ran & planned)} of {len(planned)}, "
            "made with --variant/--transport")


def choose_runs(root: Path) -> tuple[dict[str, tuple[Path, dict, str]], list[tuple[Path, str]]]:
    """Per scenario, the results folder whose figures the page gives: the newest run of all the
    scenario's cases, else the newest run of some of them ((folder, summary, '' or its subset
    note)); and the folders passed over with why (interrupted runs, subsets where a whole run exists
    or a newer subset was taken). NoResults when `root` has no results folder at all."""
    runs = find_runs(root)
    if not runs:
        raise NoResults(f"no results folder (with summary.json) under {root}: nothing to report "
                        "(mrc-testbed run experiments/<scenario>.yaml writes one)")
    whole: dict[str, tuple[Path, dict, str]] = {}
    subsets: dict[str, list[tuple[Path, dict, str]]] = {}
    passed: list[tuple[Path, str]] = []
    for folder, summary in runs:                   # newest first within each scenario
        if summary.get("interrupted"):
            passed.append((folder, "an interrupted run: not every case ran"))
            continue
        scenario = summary.get("scenario", "")
        note = subset_note(summary)
        if note:
            subsets.setdefault(scenario, []).append((folder, summary, note))
        else:
            whole.setdefault(scenario, (folder, summary, ""))
    chosen = dict(whole)
    for scenario, partial in subsets.items():
        if scenario not in chosen:
            chosen[scenario] = partial[0]
        passed += [(folder, note) for folder, _, note in partial if chosen[scenario][0] != folder]
    return chosen, passed


def _runs_said(summary: dict) -> str:
    """'seed 1', or of a repeated run 'N runs, seeds a-b' ('N runs, all seed s' on Mininet)."""
    seeds = summary.get("seeds") or []
    if (summary.get("repeat") or 1) <= 1 or not seeds:
        return f"seed {summary.get('seed')}"
    if len(set(seeds)) == 1:
        return f"{len(seeds)} runs, all seed {seeds[0]}"
    return f"{len(seeds)} runs, seeds {min(seeds)}-{max(seeds)}"


def render_paper(root: Path, page: Path) -> tuple[str, int, list[tuple[Path, str]]]:
    """The page (markdown), how many claims had results, and the results folders passed over with
    why (`choose_runs`: an interrupted run or a subset of the cases is not a scenario's figures when
    a whole run exists). NoResults when `root` holds no results folder."""
    chosen, passed = choose_runs(root)
    lines = ["# MRC testbed: the paper's statements beside the lab's figures", "",
             "Each section quotes a published statement (the MRC/SRv6 paper, as issue 14 lists it), the "
             "figures the newest whole results folder of its scenario measured, and where and why the "
             "lab-scale result differs.", ""]
    if passed:
        lines += ["Results folders passed over: "
                  + "; ".join(f"`{_rel(folder, page)}` ({why})" for folder, why in passed) + ".", ""]
    measured = 0
    for claim in CLAIMS:
        lines += [f"## {claim.title}", "", f"**Paper:** {claim.statement}", ""]
        run = chosen.get(claim.scenario) if claim.scenario else None
        if run is None:
            what = (f"not run: no results folder of `{claim.scenario}` under {root} "
                    f"(`mrc-testbed run experiments/{claim.scenario}.yaml`)") if claim.scenario else "not measured"
            lines += [f"**Lab:** {what}.", ""]
        else:
            folder, summary, subset = run
            measured += 1
            lines += [f"**Lab** (`{_rel(folder, page)}`: backend {_backend(summary)}, {_runs_said(summary)}"
                      f"{', quick' if summary.get('quick') else ''}, {summary.get('created', '')}"
                      f"{f'; only {subset}' if subset else ''}):", ""]
            if (summary.get("repeat") or 1) > 1 and not claim.per_run:
                lines += ["- each case's times are the medians of its runs, its other figures those of its "
                          "median run (summary.md of the folder gives the ranges)"]
            lines += [f"- {line}" for line in claim.figures(summary)] or ["- (no cases)"]
            lines.append("")
        lines += [f"**Why it differs at lab scale:** {claim.differs}", ""]
    return "\n".join(lines), measured, passed


def write_paper(root: Path, output: Path) -> tuple[Path, int, list[tuple[Path, str]]]:
    """Write the paper page of the results under `root` to `output` (markdown); return (path, claims
    measured, folders passed over with why). NoResults when `root` holds no results folder (nothing
    is written)."""
    if output.suffix.lower() not in (".md", ".markdown"):
        raise ValueError(f"-o {output}: the --paper page is markdown: give a .md file")
    text, measured, passed = render_paper(root, output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    return output, measured, passed
