"""Figures of one scenario's results, as PNG files a student can read.

Every figure has a title, axes labelled with units, a legend, and marks the failure instant.
`make_figures(records, summaries, folder)` picks the figures that fit the data:

- goodput.png      goodput over time per transport, one row per variant (whole run + a zoom
                   around the failure), failure and reroute instants marked;
- completion.png   completion time and time to recover per transport and variant;
- ev_states.png    per-EV state timeline (GOOD / SKIP / ASSUMED_BAD, and DENIED / UNKNOWN when an
                   operator denied EVs) of MRC under a gray link or a switch_ev_deny;
- scale.png        completion and recovery time against the number of hosts;
- flows.png        per-flow throughput and link utilisation (incast, permutation).
"""
from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Callable, Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from experiments import metrics, validity  # noqa: E402
from experiments.metrics import RETX_CAUSES  # noqa: E402
from experiments.record import CaseRecord  # noqa: E402
from experiments.timefmt import format_seconds  # noqa: E402
from experiments.units import rate_unit  # noqa: E402

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]
# Later transports are drawn thinner on top of earlier ones, so lines that coincide stay visible.
WIDTHS = [3.2, 2.2, 1.3, 1.0, 0.8, 0.7]
STYLES = ["-", "--", "-", "-.", ":", "-"]
STATE_COLOURS = {"GOOD": "#2ca02c", "SKIP": "#f2c12e", "ASSUMED_BAD": "#d62728",
                 "DENIED": "#4a4a4a", "UNKNOWN": "#9467bd"}     # DENIED: by an operator; UNKNOWN: to probe
CAUSE_HATCHES = {"trim": "", "timeout": "xx", "nack": "..", "sack": "\\\\", "tail_probe": "oo"}   # per cause
ZOOM_BEFORE_S = 0.05
ZOOM_AFTER_S = 0.25
SMOOTH_S = 0.02


def make_figures(records: list[CaseRecord], summaries: list[dict], folder: Path, title: str,
                 drawn: Optional[list] = None) -> list[Path]:
    """Write every figure that fits these results into `folder`; return their paths. `title`'s
    first line heads every figure, its further lines (what ran: experiments.runner.what_ran) go
    under each heading. With `drawn`, each path is appended to it as soon as its figure is written
    (what is there when drawing is interrupted)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    drawn = [] if drawn is None else drawn
    for name, draw in _plan(records, summaries, title):
        drawn.append(draw(folder / name))
    return list(drawn)


def figure_names(records: list[CaseRecord], summaries: list[dict]) -> list[str]:
    """The file names of the figures `make_figures` draws for these results, in its order."""
    return [name for name, _ in _plan(records, summaries, "")]


def _plan(records: list[CaseRecord], summaries: list[dict], title: str) -> list[tuple[str, Callable[[Path], Path]]]:
    """(file name, its drawing) of every figure that fits these results."""
    colour = _colours(records)
    plan = ([("goodput.png", lambda path: goodput_figure(records, colour, path, title))]
            if any(r.samples for r in records) else [])         # no samples (htsim): no goodput figure
    plan.append(("completion.png", lambda path: completion_figure(summaries, colour, path, title)))
    if any(r.mode == "mrc" and r.ev_events for r in records) and (
            _has_fault(records, "loss on") or _has_fault(records, "EVs denied")):
        plan.append(("ev_states.png", lambda path: ev_state_figure(records, path, title)))
    if len({s["hosts"] for s in summaries}) > 1:
        plan.append(("scale.png", lambda path: scale_figure(summaries, colour, path, title)))
    if any(r.workload in ("incast", "permutation") for r in records):
        plan.append(("flows.png", lambda path: flows_figure(records, colour, path, title)))
    return plan


def _colours(records: list[CaseRecord]) -> dict[str, str]:
    names = list(OrderedDict.fromkeys(r.transport for r in records))
    return {name: COLOURS[i % len(COLOURS)] for i, name in enumerate(names)}


def _has_fault(records: list[CaseRecord], words: str) -> bool:
    return any(words in f.what for r in records for f in r.faults)


def _variants(records: list[CaseRecord]) -> "OrderedDict[str, list[CaseRecord]]":
    groups: OrderedDict[str, list[CaseRecord]] = OrderedDict()
    for r in records:
        groups.setdefault(r.variant, []).append(r)
    return groups


def _smooth(times: list[float], values: list[float], width: float) -> list[float]:
    out, start, acc = [], 0, 0.0
    for i, t in enumerate(times):
        acc += values[i]
        while times[start] < t - width + 1e-12:
            acc -= values[start]
            start += 1
        out.append(acc / (i - start + 1))
    return out


def _mark_faults(ax, record: CaseRecord, labelled: set) -> None:
    """Failure instants (red dashed), repairs (grey dotted), reroutes (purple dash-dot)."""
    downs = [f for f in record.faults if f.breaks]
    ups = [f for f in record.faults if not f.breaks]
    for i, f in enumerate(downs):
        label = f"failure: {f.what} ({f.target})" if "failure" not in labelled else None
        labelled.add("failure")
        ax.axvline(validity.began(f) * 1e3, color="red", linestyle="--", linewidth=1.2, label=label, zorder=1)
    for f in ups:
        label = f"repair: {f.what}" if "repair" not in labelled else None
        labelled.add("repair")
        ax.axvline(f.t * 1e3, color="grey", linestyle=":", linewidth=1, label=label, zorder=1)
    down_since: dict = {}
    for f in sorted(record.faults, key=lambda f: f.t):
        if f.breaks:
            down_since.setdefault(f.target, f.t)
        elif f.target in down_since:
            start = down_since.pop(f.target)
            label = "fault in effect" if "span" not in labelled else None
            labelled.add("span")
            ax.axvspan(start * 1e3, f.t * 1e3, color="red", alpha=0.08, label=label, zorder=0)
    for t in record.reroutes:
        label = "control plane rerouted" if "reroute" not in labelled else None
        labelled.add("reroute")
        ax.axvline(t * 1e3, color="purple", linestyle="-.", linewidth=1.2, label=label, zorder=1)


def _heading(title: str, figure: str, joint: str = ": ") -> str:
    """A figure's heading: the run's title and what the figure shows, then the title's further
    lines (what ran: `make_figures`)."""
    first, *rest = title.split("\n")
    return "\n".join([f"{first}{joint}{figure}", *rest])


def save_figure(fig, path: Path, suptitle: str, fontsize: int = 13) -> Path:
    """Title `fig`, write it to `path` as PNG and free it; return `path`."""
    fig.suptitle(suptitle, fontsize=fontsize)
    heading_inches = (suptitle.count("\n") + 1) * fontsize * 1.2 / 72      # its lines, clear of the panels
    fig.tight_layout(rect=(0, 0, 1, max(0.5, 1 - heading_inches / fig.get_figheight())))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def goodput_figure(records: list[CaseRecord], colour: dict, path: Path, title: str) -> Path:
    """Goodput over time per transport, a row per variant; a zoom on the failure when there is one."""
    groups = _variants(records)
    has_failure = any(r.failure_time is not None for r in records)
    cols = 2 if has_failure else 1
    fig, axes = plt.subplots(len(groups), cols, figsize=(7 * cols if cols == 2 else 10, 4.3 * len(groups)),
                             squeeze=False)
    for row, (variant, recs) in enumerate(groups.items()):
        _goodput_whole(axes[row][0], variant, recs, colour)
        if cols == 2:
            _goodput_zoom(axes[row][1], variant, recs, colour)
    return save_figure(fig, path, _heading(title, "goodput over time"))


def _goodput_whole(whole, variant: str, recs: list[CaseRecord], colour: dict) -> None:
    """One variant's goodput over the whole run, smoothed, with its faults and reroutes marked."""
    labelled: set = set()
    longest = max((r.end for r in recs), default=1.0)
    width = max(recs[0].sample_interval if recs else 0.0, min(SMOOTH_S, longest / 40))
    divisor, unit = _rate_unit(recs)
    for k, r in enumerate(recs):
        times, rates = metrics.goodput_series(r)
        if not times:
            continue
        smooth = _smooth(times, rates, width)
        outcome = validity.outcome_label(r)
        end = f" ({outcome})" if outcome else ""
        whole.plot([t * 1e3 for t in times], [g / divisor for g in smooth], color=colour[r.transport],
                   linewidth=WIDTHS[k % len(WIDTHS)], linestyle=STYLES[k % len(STYLES)],
                   label=f"{r.transport}{end}")
    if recs:
        _mark_runs(whole, recs, colour, labelled)
        _shade_distortion(whole, recs, colour, labelled)
    _goodput_axes(whole, f"{variant}: whole run ({format_seconds(width)} moving average)",
                  "time since the workload started (ms)", unit, legend_columns=3)


def _mark_runs(whole, recs: list[CaseRecord], colour: dict, labelled: set) -> None:
    """The faults of the longest run; each other run's failure instant when the runs met it at
    different times; every run's reroutes."""
    longest = max(recs, key=lambda r: (len(r.faults), r.end))      # the faults of the longest run
    _mark_faults(whole, longest, labelled)
    firsts = [r.failure_time for r in recs if r.failure_time is not None]
    if firsts and max(firsts) - min(firsts) > 2 * recs[0].sample_interval:
        for r in recs:        # each run met its failure at its own instant
            if r.failure_time is not None and r is not longest:
                whole.axvline(r.failure_time * 1e3, color=colour[r.transport], linestyle=(0, (2, 2)),
                              linewidth=1.2, label=f"failure in the {r.transport} run")
    for r in recs:
        if r is longest:
            continue
        for t in r.reroutes:
            whole.axvline(t * 1e3, color="purple", linestyle="-.", linewidth=1.2,
                          label=None if "reroute" in labelled else "control plane rerouted")
            labelled.add("reroute")


def _shade_distortion(ax, recs: list[CaseRecord], colour: dict, labelled: set) -> None:
    """Shade, in the run's colour, the spans in which the fidelity monitor saw one of its processes
    short of CPU (goodput there may be the machine's, not the network's)."""
    for r in recs:
        for start, end, _who in r.fidelity.get("spans") or []:
            label = None if "distorted" in labelled else "CPU-distorted span (fidelity monitor)"
            labelled.add("distorted")
            ax.axvspan(max(0.0, start) * 1e3, max(0.0, end) * 1e3, color=colour[r.transport],
                       alpha=0.12, linewidth=0, label=label, zorder=0)


def _goodput_zoom(zoom, variant: str, recs: list[CaseRecord], colour: dict) -> None:
    """One variant's raw goodput samples around the failure, each run from its own failure instant."""
    t_fail = min((r.failure_time for r in recs if r.failure_time is not None), default=None)
    if t_fail is None:
        zoom.set_visible(False)
        return
    divisor, unit = _rate_unit(recs)
    for k, r in enumerate(recs):
        times, rates = metrics.goodput_series(r)
        own = r.failure_time if r.failure_time is not None else t_fail     # each run from its own failure
        pts = [(t, g) for t, g in zip(times, rates) if own - ZOOM_BEFORE_S <= t <= own + ZOOM_AFTER_S]
        if pts:
            zoom.step([(t - own) * 1e3 for t, _ in pts], [g / divisor for _, g in pts], where="pre",
                      color=colour[r.transport], linewidth=WIDTHS[k % len(WIDTHS)],
                      linestyle=STYLES[k % len(STYLES)], label=r.transport)
    zoom.axvline(0, color="red", linestyle="--", linewidth=1.2, label="failure")
    _goodput_axes(zoom, f"{variant}: around the failure (raw {format_seconds(recs[0].sample_interval)} samples)",
                  "time since the failure, in each run (ms)", unit, legend_columns=4)


def _rate_unit(recs: list[CaseRecord]) -> tuple[float, str]:
    """(bit/s per unit, unit) in which the goodput of `recs` reads as plain numbers: the unit of
    their peak (experiments.units.rate_unit)."""
    return rate_unit(max((g for r in recs for g in metrics.goodput_series(r)[1]), default=0.0))


def _goodput_axes(ax, title: str, xlabel: str, unit: str, legend_columns: int) -> None:
    """Title, labels (goodput in `unit`), grid and legend (below the plot) of a goodput panel."""
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"goodput ({unit})")
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=legend_columns, frameon=False)


class _Bars:
    """Bars grouped by variant, one per transport, in one row of panels."""

    def __init__(self, summaries: list[dict], colour: dict) -> None:
        self.variants = list(OrderedDict.fromkeys(s["variant"] for s in summaries))
        self.transports = list(OrderedDict.fromkeys(s["transport"] for s in summaries))
        self.by = {(s["variant"], s["transport"]): s for s in summaries}
        self.colour = colour
        self.width = 0.8 / max(1, len(self.transports))

    def x(self, i: int, j: int) -> float:
        return i + (j - (len(self.transports) - 1) / 2) * self.width

    def each(self):
        """(x position, transport, summary) of every bar."""
        for j, tname in enumerate(self.transports):
            for i, v in enumerate(self.variants):
                s = self.by.get((v, tname))
                if s is not None:
                    yield self.x(i, j), tname, s


def completion_figure(summaries: list[dict], colour: dict, path: Path, title: str) -> Path:
    """Bars per transport, grouped by variant: completion time, time to recover (when something
    failed) and retransmissions by cause."""
    bars = _Bars(summaries, colour)
    horizon = max((s["end_s"] for s in summaries), default=1.0)
    failed = any(s["failure_time_s"] is not None for s in summaries)
    done = [s["completion_time_s"] for s in summaries if s["completion_time_s"] is not None]
    in_ms = max(done + ([horizon] if len(done) < len(summaries) else []), default=1.0) < 1.0
    ranges = "\n(median of the runs; black: min..max)" if any("repeats" in s for s in summaries) else ""
    panels = [("completion_time_s", f"completion time ({'ms' if in_ms else 's'})", 1e3 if in_ms else 1.0,
               "completion time (hatched: did not finish within the horizon)" + ranges)]
    if failed:
        panels.append(("time_to_recover_s", "time to recover (ms)", 1e3,
                       "time until goodput is back to 90 % after the failure" + ranges))
    fig, axes = plt.subplots(1, len(panels) + 1, figsize=(6 * (len(panels) + 1), 4.4), squeeze=False)
    with_bars = [axes[0][-1]]
    for ax, panel in zip(axes[0], panels):
        why_none = _no_recovery(summaries) if panel[0] == "time_to_recover_s" else None
        if why_none:
            _message_panel(ax, panel[3], why_none)
        else:
            _time_panel(ax, bars, *panel)
            with_bars.append(ax)
    cause_handles = _retransmission_panel(axes[0][-1], bars)
    for ax in with_bars:
        ax.set_xticks(range(len(bars.variants)))
        ax.set_xticklabels(bars.variants, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        handles = [Patch(color=colour[t], label=t) for t in bars.transports]
        ax.legend(handles=handles + (cause_handles if ax is axes[0][-1] else []), fontsize=7)
    return save_figure(fig, path, _heading(title, "completion, recovery and retransmissions"))


def _recovery_missing(s: dict) -> str:
    """Why a failed case has no recovery figure at all ("not measured", "n/a": no goodput before the
    failure, "no dip" or "window > run": metrics.recovery_note), or "" when it has one (a time or a
    verdict)."""
    if "goodput" in s.get("not_measured", ()):
        return "not measured"
    if s.get("goodput_before_failure") is False:
        return "n/a"
    return RECOVERY_NOTE_LABELS.get(s.get("recovery_note"), "")


RECOVERY_NOTE_LABELS = {"no dip": "no dip", "window longer than the run": "window > run"}


def _no_recovery(summaries: list[dict]) -> str:
    """What the recovery panel says instead of bars when no failed case has a recovery figure ("" when one has)."""
    failed = [s for s in summaries if s["failure_time_s"] is not None]
    why = {_recovery_missing(s) for s in failed}
    if not failed or "" in why:
        return ""
    lines = []
    if "n/a" in why:
        lines.append("n/a: no goodput before the failure to compare with\n(the faults start with the workload)")
    if "not measured" in why:
        lines.append("not measured: the backend reports no goodput over time")
    if "no dip" in why:
        lines.append("no dip: goodput never fell below 90 % after the failure\n(at the resolution of the samples)")
    if "window > run" in why:
        lines.append("window > run: the recovery's averaging window is longer\nthan the failure to the end of the work")
    return "\n\n".join(lines)


def _message_panel(ax, heading: str, message: str) -> None:
    """A panel with no bars: its heading and a message in its middle."""
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=11, transform=ax.transAxes, wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(heading, fontsize=10)


def _time_panel(ax, bars: _Bars, key: str, label: str, scale: float, heading: str) -> None:
    """A time per case as a bar; a case without one as a hatched bar (up to its end when it has no
    completion time) marked 'cut at horizon: N %', 'never', '<90%', 'n/a' (a failure without goodput
    before it) or '-' (no recovery time: nothing failed); an invalid case's bar says so."""
    top = 0.0
    for x, tname, s in bars.each():
        value = s[key]
        if value is None:
            never = key == "completion_time_s" or s["failure_time_s"] is not None
            h = s["end_s"] * scale if key == "completion_time_s" else 0.0
            text = "-" if not never else (                  # "-": nothing failed, as in the table
                (key == "time_to_recover_s" and _recovery_missing(s))
                or ("<90%" if s["completed"] else _unfinished(s)))
            ax.bar(x, h, bars.width, color="white", edgecolor=bars.colour[tname], hatch="//")
        else:
            h = value * scale
            ax.bar(x, h, bars.width, color=bars.colour[tname])
            h = max(h, _range_bar(ax, x, s, key, scale))       # the label above the range of a repeated case
            text = format_seconds(value)
        if s.get("invalid_reasons"):
            text += " INVALID"
        ax.text(x, h, text, ha="center", va="bottom", fontsize=7, rotation=90 if value is None or
                s.get("invalid_reasons") else 0)
        top = max(top, h)
    ax.set_ylabel(label)
    ax.set_ylim(0, top * 1.25 if top > 0 else 1.0)
    ax.set_title(heading, fontsize=10)


def _range_bar(ax, x: float, summary: dict, key: str, scale: float) -> float:
    """A case run several times (`run --repeat`): its min..max as a black error bar over the bar of
    its median; returns the bar's top (0 when there is none, or a run never got a value)."""
    spread = (summary.get("repeats") or {}).get(key)
    if not spread or spread["min"] is None or spread["max"] is None:
        return 0.0
    low, high, mid = spread["min"] * scale, spread["max"] * scale, summary[key] * scale
    ax.errorbar([x], [mid], yerr=[[mid - low], [high - mid]], fmt="none", ecolor="black", capsize=3, linewidth=1)
    return high


def _unfinished(s: dict) -> str:
    """What a bar of a case without a time says: cut at its horizon (with the share delivered), or never."""
    share = s.get("delivered_fraction")
    if s.get("ending") == "cut at horizon":
        return "cut at horizon" + ("" if share is None else f": {int(share * 100)} %")
    return "never"


def _retransmission_panel(ax, bars: _Bars) -> list:
    """Retransmitted packets per case, stacked by cause; returns the legend handles of the causes
    drawn (each in its own hatch)."""
    top = 0.0
    drawn: set = set()
    for x, tname, s in bars.each():
        bottom = 0
        if s["retransmissions"] is None:          # counted without causes (or not at all)
            bottom = s.get("retransmissions_total") or 0
            ax.bar(x, bottom, bars.width, color=bars.colour[tname], edgecolor="black", linewidth=0.5)
            ax.text(x, bottom, "-" if s.get("retransmissions_total") is None else f"{bottom} (no causes)",
                    ha="center", va="bottom", fontsize=7)
            top = max(top, bottom)
            continue
        for cause, count in s["retransmissions"].items():
            if count:
                ax.bar(x, count, bars.width, bottom=bottom, color=bars.colour[tname],
                       hatch=CAUSE_HATCHES.get(cause, ""), edgecolor="black", linewidth=0.5)
                drawn.add(cause)
            bottom += count
        ax.text(x, bottom, str(bottom), ha="center", va="bottom", fontsize=7)
        top = max(top, bottom)
    ax.set_ylabel("retransmitted data packets (count)")
    ax.set_ylim(0, top * 1.2 if top > 0 else 1.0)
    ax.set_title("retransmissions by cause", fontsize=10)
    return [Patch(facecolor="white", edgecolor="black", hatch=CAUSE_HATCHES.get(c, ""), label=f"cause: {c}")
            for c in sorted(drawn, key=lambda c: RETX_CAUSES.index(c) if c in RETX_CAUSES else len(RETX_CAUSES))]


def _path_label(dst_hex: str) -> str:
    """'via s1-s3-s2' for a uSID path address given in hex."""
    from ipaddress import IPv6Address
    from wire import constants
    from topologies.addressing import AddressingError, parse_usid_address
    try:
        plane, usids = parse_usid_address(IPv6Address(bytes.fromhex(dst_hex)))
    except (AddressingError, ValueError):
        return dst_hex[:12]
    names = [f"s{u - constants.SWITCH_USID_BASE + 1}" for u in usids if u < constants.HOST_USID_BASE]
    return f"plane {plane} via {'-'.join(names)}"


def drawn_connection(record: CaseRecord) -> tuple[str, str]:
    """The MRC connection whose EVs the timeline draws, and why it (words for the panel): the one
    with most EVs retired; when none retired any (random loss every path shares), of those with the
    most paths the one with most state changes, else the first. A connection with one path is
    never retired for its loss (docs/transport.md, 'Whose loss'), so its panel would show nothing."""
    order: dict[str, None] = {}
    paths: dict[str, set] = {}
    bad: dict[str, int] = {}
    changes: dict[str, int] = {}
    for e in record.ev_events:
        conn = e["conn"]
        order.setdefault(conn, None)
        if e["kind"] == "ev_set":
            paths.setdefault(conn, set()).update((item["path"], item.get("dst", "")) for item in e["evs"])
        elif e["kind"] == "ev_state":
            paths.setdefault(conn, set()).add((e["path"], e.get("dst", "")))
            changes[conn] = changes.get(conn, 0) + 1
            if e["new"] == "ASSUMED_BAD":
                bad[conn] = bad.get(conn, 0) + 1
    if bad:
        conn = max(bad, key=bad.get)                       # the first of the most retired
        return conn, f"the connection with most EVs retired ({bad[conn]})"
    ranked = list(order)
    conn = max(ranked, key=lambda c: (len(paths.get(c, ())), changes.get(c, 0), -ranked.index(c)))
    n = len(paths.get(conn, ()))
    if changes.get(conn):
        return conn, (f"no EV retired: of the connections with the most paths ({n}), the one with most state "
                      f"changes ({changes[conn]})")
    if changes:
        return conn, (f"no EV retired, and none of a connection with {n} paths changed state: the first "
                      "connection with the most paths")
    return conn, f"no EV changed state: the first connection with the most paths ({n})"


def ev_state_figure(records: list[CaseRecord], path: Path, title: str) -> Path:
    """Per-EV state over time for one MRC connection per variant (`drawn_connection`: the one with
    most retirements, else one with the most paths). Each panel's title says why that connection
    and how many of the run's EVs were ever retired."""
    recs = [r for r in records if r.mode == "mrc" and r.ev_events]
    fig, axes = plt.subplots(len(recs), 1, figsize=(13, 4.0 * len(recs)), squeeze=False)
    for ax, r in zip(axes[:, 0], recs):
        conn, chosen = drawn_connection(r)
        kept = metrics.ev_retirements(r)
        events = [e for e in r.ev_events if e["conn"] == conn and e["kind"] == "ev_state"]
        path_of = {e["ev"]: (e["path"], e.get("dst", "")) for e in events}
        for e in r.ev_events:               # EVs that never changed state, when the backend listed them
            if e["kind"] == "ev_set" and e["conn"] == conn:
                for item in e["evs"]:
                    path_of.setdefault(item["ev"], (item["path"], item["dst"]))
        evs = sorted(path_of, key=lambda ev: (path_of[ev][0], ev))
        row = {ev: i for i, ev in enumerate(evs)}
        end = r.end
        state = {ev: ("GOOD", 0.0) for ev in evs}
        spans = []
        for e in events:
            old, since = state[e["ev"]]
            spans.append((old, row[e["ev"]], since, e["t"]))
            state[e["ev"]] = (e["new"], e["t"])
        spans += [(st, row[ev], since, end) for ev, (st, since) in state.items()]
        ax.broken_barh([(0, end * 1e3)], (-0.5, max(1, len(evs))), facecolors=STATE_COLOURS["GOOD"], alpha=0.25,
                       zorder=0)
        for st, y, t0, t1 in spans:
            if t1 > t0 and st != "GOOD":
                ax.broken_barh([(t0 * 1e3, max((t1 - t0) * 1e3, end * 1e3 * 0.002))], (y - 0.45, 0.9),
                               facecolors=STATE_COLOURS.get(st, "black"), zorder=2)
        ticks, labels, first = [], [], 0
        for i, ev in enumerate(evs + [None]):
            if ev is None or (i and path_of[ev][0] != path_of[evs[i - 1]][0]):
                ax.axhline(i - 0.5, color="black", linewidth=0.8, zorder=3)
                ticks.append((first + i - 1) / 2)
                labels.append(f"{_path_label(path_of[evs[i - 1]][1])}\n{i - first} EVs")
                first = i
        ax.set_yticks(ticks)
        ax.set_yticklabels(labels, fontsize=7)
        for f in r.faults:
            ax.axvline(f.t * 1e3, color="black" if f.breaks else "grey", linestyle="--", linewidth=2, zorder=4,
                       label=f"{'failure' if f.breaks else 'repair'}: {f.what} ({f.target})")
        ax.set_xlim(0, end * 1e3)
        ax.set_ylim(-0.5, max(1, len(evs)) - 0.5)
        ax.set_xlabel("time since the workload started (ms)")
        ax.set_ylabel("EVs of the connection, by path")
        retired = (f"; {round((1 - kept['kept_share']) * kept['evs'])} of the run's {kept['evs']} EVs ever retired"
                   if kept["evs"] and kept["kept_share"] is not None else "")
        ax.set_title(f"{r.variant} / {r.transport}: EV states of connection {conn}{retired}\n({chosen})",
                     fontsize=10)
        seen = {"GOOD", "SKIP", "ASSUMED_BAD"} | {st for st, *_ in spans}
        handles = [Patch(color=c, alpha=0.25 if s == "GOOD" else 1, label=s)
                   for s, c in STATE_COLOURS.items() if s in seen]
        handles += ax.get_legend_handles_labels()[0]
        ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save_figure(fig, path, _heading(title, "per-EV state timeline (bad EVs retired, probed back to GOOD)", "\n"))


def scale_figure(summaries: list[dict], colour: dict, path: Path, title: str) -> Path:
    """Completion time and time to recover against the number of hosts, a line per transport."""
    transports = list(OrderedDict.fromkeys(s["transport"] for s in summaries))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for ax, key, label, scale in ((axes[0], "completion_time_s", "completion time (s)", 1.0),
                                  (axes[1], "time_to_recover_s", "time to recover (ms)", 1e3)):
        for t in transports:
            pts = sorted((s["hosts"], s[key]) for s in summaries if s["transport"] == t)
            xs = [h for h, v in pts if v is not None]
            ys = [v * scale for h, v in pts if v is not None]
            ax.plot(xs, ys, marker="o", color=colour[t], label=t)
            for h, v in pts:
                if v is None:
                    ax.plot([h], [0], marker="x", color=colour[t], markersize=9, linestyle="none")
        ax.set_xlabel("hosts in the ring (count)")
        ax.set_ylabel(label)
        ax.set_xticks(sorted({s["hosts"] for s in summaries}))
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, title="x on the axis: never", title_fontsize=7)
    axes[0].set_title("completion time per size")
    axes[1].set_title("recovery time per size")
    return save_figure(fig, path, _heading(title, "how cost grows with the number of hosts"))


def flows_figure(records: list[CaseRecord], colour: dict, path: Path, title: str) -> Path:
    """Per-flow throughput (victim marked) and per-link utilisation, per variant and transport; no
    link panel when no record measured its links (htsim)."""
    groups = _variants(records)
    with_links = any(r.links for r in records)
    fig, axes = plt.subplots(len(groups), 2 if with_links else 1, figsize=(13, 3.8 * len(groups)), squeeze=False)
    for row, (variant, recs) in enumerate(groups.items()):
        ax_f = axes[row][0]
        width = 0.8 / max(1, len(recs))
        for j, r in enumerate(recs):
            tps = metrics.flow_throughputs(r)
            xs = [i + (j - (len(recs) - 1) / 2) * width for i in range(len(tps))]
            ax_f.bar(xs, [0.0 if t is None else t / 1e6 for t in tps], width,   # None: not measured (htsim)
                     color=colour[r.transport], label=r.transport,
                     edgecolor=["black" if f.role == "victim" else colour[r.transport] for f in r.flows],
                     linewidth=[2 if f.role == "victim" else 0.5 for f in r.flows])
        if recs:
            ax_f.set_xticks(range(len(recs[0].flows)))
            ax_f.set_xticklabels([f"{f.src}→{f.dst}" + (" (victim)" if f.role == "victim" else "")
                                  for f in recs[0].flows], rotation=45, ha="right", fontsize=7)
        ax_f.set_ylabel("throughput (Mbit/s)")
        ax_f.set_title(f"{variant}: per-flow throughput (black edge: victim flow)"
                       + ("" if with_links else "; link utilisation not measured by the backend"))
        ax_f.grid(axis="y", alpha=0.3)
        ax_f.legend(fontsize=8)
        if with_links:
            _links_panel(axes[row][1], variant, recs, colour, width)
    return save_figure(fig, path, _heading(title, "flows and links" if with_links else "flows"))


def _links_panel(ax, variant: str, recs: list[CaseRecord], colour: dict, width: float) -> None:
    """One variant's switch-to-switch link utilisation, a bar per link and transport."""
    for j, r in enumerate(recs):
        util = metrics.link_utilisation(r)
        lx = [i + (j - (len(recs) - 1) / 2) * width for i in range(len(util))]
        ratio = metrics.imbalance(util)
        ax.bar(lx, [u * 100 for u in util], width, color=colour[r.transport],
               label=f"{r.transport} (max/mean {ratio:.2f})" if ratio else r.transport)
    links = max(recs, key=lambda r: len(r.links)).links if recs else []
    ax.set_xticks(range(len(links)))
    ax.set_xticklabels([link.name for link in links], rotation=60, ha="right", fontsize=6)
    ax.set_ylabel("utilisation (% of link rate)")
    ax.set_title(f"{variant}: switch-to-switch link utilisation")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
