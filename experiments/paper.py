"""The paper's statements beside the lab's figures: what `mrc-testbed report --paper` writes.

Each `Claim` quotes a published statement about MRC (the MRC/SRv6 paper, as issue 14 lists them),
names the scenario that measures it at lab scale, reads the figures from that scenario's newest
results folder (its summary.json), and says where and why the lab-scale result differs. A claim
whose scenario has not been run says so.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from experiments.report import _backend, _rel, find_runs
from experiments.timefmt import format_seconds

Figures = Callable[[dict], list[str]]


@dataclass(frozen=True)
class Claim:
    """One published statement, the scenario measuring it, how to read it, why the lab differs."""

    title: str
    statement: str
    scenario: Optional[str]         # None: no scenario measures it yet
    figures: Optional[Figures]
    differs: str


def _mbps(bps: Optional[float]) -> str:
    """A rate in the unit that suits it: '5.66 Mbit/s', '292 Gbit/s', '1.06 Tbit/s'."""
    if bps is None:
        return "—"
    scale, unit = next(((s, u) for s, u in ((1e12, "Tbit/s"), (1e9, "Gbit/s")) if bps >= s), (1e6, "Mbit/s"))
    return f"{bps / scale:.3g} {unit}"


def _by_variant(summary: dict) -> dict[str, dict[str, dict]]:
    """{variant: {transport: case summary}}, in the order of the run."""
    out: dict[str, dict[str, dict]] = {}
    for case in summary.get("cases", []):
        out.setdefault(case.get("variant", ""), {})[case.get("transport", "")] = case
    return out


def _finished(case: dict) -> str:
    return "" if case.get("completed") else " (did not finish)"


def loss_sweep_figures(summary: dict) -> list[str]:
    """Goodput of MRC against RoCE for every variant (summed over the hosts), their ratio, and the
    EVs MRC kept under loss."""
    lines = ["goodput: payload bytes received per second, summed over every host of the run"]
    for variant, cases in _by_variant(summary).items():
        mrc = next((c for c in cases.values() if c.get("mode") == "mrc"), None)
        roce = next((c for c in cases.values() if c.get("mode") == "roce"), None)
        if mrc is None or roce is None:
            continue
        m, r = mrc.get("mean_goodput_bps") or 0.0, roce.get("mean_goodput_bps") or 0.0
        ratio = f"{m / r:.2f}x" if r else "RoCE moved nothing"
        lines.append(f"{variant}: MRC {_mbps(m)}{_finished(mrc)}, RoCE {_mbps(r)}{_finished(roce)}; "
                     f"MRC/RoCE {ratio}")
    return lines + loss_sweep_kept(summary) + loss_sweep_evs(summary)


def loss_sweep_kept(summary: dict) -> list[str]:
    """Per variant with loss, the share of its loss-free goodput (the variant of the same workload
    at 0 % loss) MRC kept."""
    variants = _by_variant(summary)
    lines = []
    for variant, cases in variants.items():
        twin = re.sub(r"[0-9.]+% loss", "0% loss", variant)
        if twin == variant or twin not in variants:
            continue
        mrc = next((c for c in cases.values() if c.get("mode") == "mrc"), None)
        free = next((c for c in variants[twin].values() if c.get("mode") == "mrc"), None)
        if mrc is None or free is None or not free.get("mean_goodput_bps"):
            continue
        share = (mrc.get("mean_goodput_bps") or 0.0) / free["mean_goodput_bps"]
        lines.append(f"{variant}: MRC kept {share:.0%} of its goodput at 0 % loss{_finished(mrc)}")
    return lines


def _kept(case: dict) -> str:
    """'N % of its E EVs never retired' for an MRC case that listed its EVs, else ''."""
    ev = case.get("ev_retirements") or {}
    if not ev.get("evs") or ev.get("kept_share") is None:
        return ""
    return f"{ev['kept_share']:.0%} of its {ev['evs']} EVs never retired"


def loss_sweep_evs(summary: dict) -> list[str]:
    """How many of MRC's EVs random loss left in use, per variant with loss."""
    lines = []
    for variant, cases in _by_variant(summary).items():
        mrc = next((c for c in cases.values() if c.get("mode") == "mrc"), None)
        if mrc is not None and _kept(mrc) and "0% loss" not in variant:
            lines.append(f"{variant}: MRC: {_kept(mrc)} (random loss hits every path alike: no path's own)")
    return lines


def path_loss_figures(summary: dict) -> list[str]:
    """EVs kept, how soon after the fault each connection retired the bad path, and completion."""
    lines = []
    for variant, cases in _by_variant(summary).items():
        for name, c in cases.items():
            t = c.get("completion_time_s")
            done = f"finished in {t * 1e6:.0f} us" if c.get("completed") and t is not None else "did not finish"
            first = (c.get("ev_retirements") or {}).get("first_retired_after_failure_s")
            rtt = c.get("base_rtt_s")
            when = ""
            if first and rtt:
                when = (f"; each connection's first EV retired {first['min'] / rtt:.1f}-{first['max'] / rtt:.1f} "
                        f"base RTTs after the fault")
            lines.append(f"{variant}, {name}: {done}, {_kept(c) or 'EVs not listed'}{when}")
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
            lines.append(f"{variant}, {name}: victim {_mbps(roles.get('victim'))}, incast senders "
                         f"{_mbps(roles.get('incast'))} each on average")
    return lines


def permutation_figures(summary: dict) -> list[str]:
    """Slowest, mean and fastest flow, and the fabric links' max/mean utilisation, per transport."""
    lines = []
    for variant, cases in _by_variant(summary).items():
        for name, c in cases.items():
            f = c.get("flow_throughput_bps") or {}
            links = (c.get("link_utilisation") or {}).get("max_over_mean")
            imbalance = f", link max/mean {links:.2f}" if links else ""
            lines.append(f"{variant}, {name}: flows {_mbps(f.get('min'))} (slowest) / {_mbps(f.get('mean'))} "
                         f"(mean) / {_mbps(f.get('max'))} (fastest){imbalance}")
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
    """'recovered in T' ('never'); or why a case has no recovery figure."""
    if "goodput" in case.get("not_measured", ()):
        return "recovery not measured"
    if case.get("goodput_before_failure") is False:
        return "recovery n/a (no goodput before the failure)"
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
          "RoCE little; there one connection fills the link. docs/transport.md, 'Random loss'."),
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
          "the paths; ev_states.png of the run shows the timelines. docs/transport.md, 'Whose loss'."),
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


def render_paper(root: Path, page: Path) -> tuple[str, int, list[Path]]:
    """The page (markdown), how many claims had results, and the interrupted results folders passed
    over (a partial run is not a scenario's figures: the newest whole one is taken instead)."""
    newest: dict[str, tuple[Path, dict]] = {}
    skipped: list[Path] = []
    for folder, summary in find_runs(root):
        if summary.get("interrupted"):
            skipped.append(folder)
            continue
        newest.setdefault(summary.get("scenario", ""), (folder, summary))
    lines = ["# MRC testbed: the paper's statements beside the lab's figures", "",
             "Each section quotes a published statement (the MRC/SRv6 paper, as issue 14 lists it), the "
             "figures the newest results folder of its scenario measured, and where and why the lab-scale "
             "result differs.", ""]
    if skipped:
        lines += ["Interrupted runs passed over (not every case ran): "
                  + ", ".join(f"`{_rel(folder, page)}`" for folder in skipped) + ".", ""]
    measured = 0
    for claim in CLAIMS:
        lines += [f"## {claim.title}", "", f"**Paper:** {claim.statement}", ""]
        run = newest.get(claim.scenario) if claim.scenario else None
        if run is None:
            what = (f"not run: no results folder of `{claim.scenario}` under {root} "
                    f"(`mrc-testbed run experiments/{claim.scenario}.yaml`)") if claim.scenario else "not measured"
            lines += [f"**Lab:** {what}.", ""]
        else:
            folder, summary = run
            measured += 1
            lines += [f"**Lab** (`{_rel(folder, page)}`: backend {_backend(summary)}, seed {summary.get('seed')}"
                      f"{', quick' if summary.get('quick') else ''}, {summary.get('created', '')}):", ""]
            lines += [f"- {line}" for line in claim.figures(summary)] or ["- (no cases)"]
            lines.append("")
        lines += [f"**Why it differs at lab scale:** {claim.differs}", ""]
    return "\n".join(lines), measured, skipped


def write_paper(root: Path, output: Path) -> tuple[Path, int, list[Path]]:
    """Write the paper page of the results under `root` to `output` (markdown); return (path, claims
    measured, interrupted folders passed over)."""
    if output.suffix.lower() not in (".md", ".markdown"):
        raise ValueError(f"-o {output}: the --paper page is markdown: give a .md file")
    text, measured, skipped = render_paper(root, output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    return output, measured, skipped
