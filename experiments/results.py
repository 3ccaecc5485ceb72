"""The results folder of one run, and the comparison table.

    <folder>/raw.jsonl     one JSON object per line: a "case" line per case (its record without the
                           time series), then its "sample" lines (time, cumulative bytes per flow)
                           and "ev" lines (EV state changes)
    <folder>/summary.json  scenario, backend (with htsim, its load balancer), seed, and the summary of every case (metrics.summarise);
                           with `run --repeat N`, one aggregate per case (experiments/repeats.py:
                           medians, and `repeats` with N, seeds, median/min/max) and every run's
                           summary under `runs`; raw.jsonl then has every run, with its `repetition`
    <folder>/*.png         figures (plots.py)
    <folder>/summary.md    the table and the figures, for people
    <folder>/testbed.log   the log of the run (testbed.logs)
"""
from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Optional

from experiments import conditions
from experiments.record import CaseRecord
from experiments.timefmt import format_seconds
from testbed.processes import Terminated

# Ctrl-C, and SIGTERM (cli.main unwinds it as Terminated): a run stopped by either keeps what it has;
# another SystemExit is no interruption and passes.
INTERRUPTIONS = (KeyboardInterrupt, Terminated)
NOT_MEASURED_CELL = "-"      # a table cell of a figure the backend did not measure (or that has no meaning)
NO_BASELINE_CELL = "n/a"     # recovery with no goodput before the failure to compare with
SUMMARY_JSON = "summary.json"
RAW_JSONL = "raw.jsonl"
SUMMARY_MD = "summary.md"


def default_folder(name: str, root: Path = Path("results")) -> Path:
    """results/<scenario>-<UTC date and time>."""
    return root / f"{name}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"


def write_raw(records: list[CaseRecord], folder: Path) -> Path:
    """Every record as JSON lines."""
    path = Path(folder) / RAW_JSONL
    with path.open("w", encoding="utf-8") as out:
        for index, record in enumerate(records):
            d = record.as_dict()
            samples, events = d.pop("samples"), d.pop("ev_events")
            out.write(json.dumps({"type": "case", "case": index, **d}) + "\n")
            for t, per_flow in samples:
                out.write(json.dumps({"type": "sample", "case": index, "t": t, "bytes": per_flow}) + "\n")
            for e in events:
                out.write(json.dumps({"type": "ev", "case": index, **e}) + "\n")
    return path


def write_summary(meta: dict, summaries: list[dict], figures: list[Path], folder: Path) -> Path:
    """summary.json: the run's metadata, every case's summary, the figure file names."""
    path = Path(folder) / SUMMARY_JSON
    doc = {**meta, "cases": summaries, "figures": [Path(f).name for f in figures]}
    path.write_text(json.dumps(doc, indent=2, default=_jsonable) + "\n", encoding="utf-8")
    return path


def write_markdown(meta: dict, summaries: list[dict], figures: list[Path], folder: Path) -> Path:
    """summary.md: what ran, the comparison table, the figures."""
    lines = [f"# {meta['title']}", "", *ran_lines(meta), meta.get("description", "").strip(), "",
             f"Scenario `{meta['scenario_file']}`, backend **{meta['backend']}**"
             + (f" (target {meta['target']})" if meta.get("target") else "")
             + (f" (load balancer {meta['balancer']})" if meta.get("balancer") else "")
             + f", {run_seeds(meta)}{', quick' if meta.get('quick') else ''}, {meta['created']}.", ""]
    if meta.get("conditions"):
        lines += [f"Ran {meta['conditions']['wall_s']:g} s on {conditions.text(meta['conditions'])}.", ""]
    lines += [f"**{line}**" for line in interruption_lines(meta)] + ([""] if interruption_lines(meta) else [])
    if meta.get("repeat", 1) > 1:
        lines += [REPEATS_NOTE, ""]
    lines += markdown_table(summaries)
    invalid = invalid_lines(summaries)
    if invalid:
        lines += ["", "Invalid: a fault missed the workload, so the case says nothing about it "
                  "(experiments/validity.py):", ""]
        lines += [f"- {line}" for line in invalid]
    distorted = fidelity_lines(summaries)
    if distorted:
        lines += ["", "Distorted by this machine (experiments/README.md, \"Fidelity\"):", ""]
        lines += [f"- {line}" for line in distorted]
    notes = note_lines(summaries)
    if notes:
        lines += ["", "Notes (what the backend said of each case):", ""]
        lines += [f"- {line}" for line in notes]
    lines += ["", "Definitions: docs in `experiments/metrics.py` (time to recover = failure until goodput, "
              "averaged over 20 ms or two messages, is back to 90 % of before; \"no dip (N samples)\": goodput "
              "never fell below 90 % after the failure, at the resolution of its N samples, or only for the "
              "collective's own tail (from a flow finishing to the end, still delivering); \"window longer "
              "than the run\": that averaging window is longer than the failure to the end of the work, so "
              "no recovery is measured; \"stayed <90%\": the work "
              "completed without goodput back at 90 %: at the capacity the failure left, or after a stall (see "
              "the longest gap); \"cut at horizon\": stopped by the horizon "
              "while still delivering (htsim: ran to its end; deliveries not measured); \"never\": stuck, nothing delivered for a while before the end; "
              "\"n/a\": no goodput before the failure to compare with (a fault from the start); "
              "longest gap = the longest time after the failure with nothing delivered; N RTT = the time over "
              "the smallest data-packet RTT the hosts measured; \"-\": nothing failed, or not measured by the "
              "backend; \"N (total)\": the backend's own retransmission count, without causes).", ""]
    for fig in figures:
        lines += [f"![{Path(fig).stem}]({Path(fig).name})", ""]
    path = Path(folder) / SUMMARY_MD
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def ran_lines(meta: dict) -> list[str]:
    """What the run ran, under its scenario's title ("ran: workload size; faults", the cases of
    `--variant`/`--transport`, with `--quick`'s sizes), and a blank line; none for a run that
    does not say (summary.json before it did)."""
    return [f"ran: {meta['ran']}", ""] if meta.get("ran") else []


def interruption_lines(meta: dict) -> list[str]:
    """What an interrupted run lacks, one sentence per thing (none for a whole run): the cases it
    did not run, the figures it did not draw."""
    lines = []
    if meta.get("interrupted"):
        planned, ran = meta.get("cases_planned"), meta.get("cases_run")
        cases = (f"{ran} of its {planned} cases ran" if planned is not None and ran is not None
                 else "not every case ran")
        lines.append(f"Interrupted (Ctrl-C or SIGTERM): {cases}; the figures here are of those alone.")
    if meta.get("figures_missing"):
        lines.append("Figures not drawn (interrupted while drawing them): " + ", ".join(meta["figures_missing"]) + ".")
    return lines


REPEATS_NOTE = ("Each case ran several times: a row gives the median of its runs, [min..max] beside it, "
                "and `runs` how many; the figures show each case's run of median recovery (of median "
                "completion when nothing failed); `raw.jsonl` holds every run, `summary.json` their "
                "summaries under `runs`.")


def run_seeds(meta: dict) -> str:
    """'seed 1', or how many runs each case had and with which seeds (`run --repeat`)."""
    return meta.get("seeds_note") or f"seed {meta.get('seed')}"


def table_rows(summaries: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the comparison table (columns that say nothing are left out). A case run
    several times (`repeats`) shows its medians with [min..max] and a `runs` column; rows of
    single runs of several seeds (crosscheck) a `seed` column."""
    flows = any(s["workload"] in ("incast", "permutation") for s in summaries)
    repeated = any("repeats" in s for s in summaries)
    header = ["variant", "transport", "done", "completion", "recover", "longest gap", "EVs retired",
              "retx trim/timeout/nack/sack", "bit-exact", "fidelity"]
    if repeated:
        header.insert(2, "runs")
    if flows:
        header += ["flow Mb/s min/max", "victim Mb/s", "link max/mean", "queue drops"]
    rows = []
    for s in summaries:
        row = [s["variant"], s["transport"], "yes" if s["completed"] else "NO",
               _completion(s) + _rtts(s.get("completion_rtts")), _recovery_cell(s),
               _millis(s.get("longest_delivery_gap_s"), s["failure_time_s"]),
               NOT_MEASURED_CELL if s["evs_retired"] is None else str(s["evs_retired"]), _retransmission_cell(s),
               NOT_MEASURED_CELL if s["bit_exact"] is None else "yes" if s["bit_exact"] else "NO",
               s.get("fidelity", "unknown")]
        if repeated:
            _add_spread(row, s)
        if flows:
            ft = s["flow_throughput_bps"]
            victim = s["throughput_by_role_bps"].get("victim")
            ratio = (s["link_utilisation"] or {}).get("max_over_mean")      # None: not measured
            row += ["-" if ft["min"] is None else f"{ft['min'] / 1e6:.1f}/{ft['max'] / 1e6:.1f}",
                    "-" if victim is None else f"{victim / 1e6:.1f}",
                    "-" if ratio is None else f"{ratio:.2f}",
                    "-" if s["packets_dropped_queue_full"] is None else str(s["packets_dropped_queue_full"])]
        rows.append(row)
    if not repeated and len({s.get("seed") for s in summaries}) > 1:
        # runs of several seeds (crosscheck): say which is which; a repeated case's row is over all
        # its seeds (`runs`), the seed it keeps being only its typical run's
        header.insert(2, "seed")
        for row, s in zip(rows, summaries):
            row.insert(2, str(s.get("seed")))
    return header, rows


def format_table(summaries: list[dict]) -> str:
    """The comparison table as aligned text for the terminal."""
    header, rows = table_rows(summaries)
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    fmt = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


def markdown_table(summaries: list[dict]) -> list[str]:
    """The comparison table as markdown lines."""
    header, rows = table_rows(summaries)
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(r) + " |" for r in rows])


def fidelity_lines(summaries: list[dict]) -> list[str]:
    """One line per reason a case was distorted ('variant / transport: reason'); none when all were
    faithful (or simulated)."""
    return [f"{s['variant']} / {s['transport']}: {reason}"
            for s in summaries for reason in s.get("fidelity_reasons", [])]


def note_lines(summaries: list[dict]) -> list[str]:
    """One line per distinct note, 'variant / transport: note' of one case and 'note (N cases: ...;
    ...)' of several: what the backend said of them (the htsim balancer, a horizon that stopped it,
    figures not measured, capped link rates, ...). A case given several times (a crosscheck's
    seeds) is named once, with the seeds the note is of when it is not of all of them."""
    runs = Counter(f"{s['variant']} / {s['transport']}" for s in summaries)
    cases_of: dict[str, dict[str, list]] = {}
    for s in summaries:
        for note in dict.fromkeys(s.get("notes", [])):
            cases_of.setdefault(note, {}).setdefault(f"{s['variant']} / {s['transport']}", []).append(s.get("seed"))
    lines = []
    for note, cases in cases_of.items():
        named = [case + ("" if len(seeds) == runs[case] else
                         f" (seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))})")
                 for case, seeds in cases.items()]
        lines.append(f"{named[0]}: {note}" if len(named) == 1 else f"{note} ({len(named)} cases: {'; '.join(named)})")
    return lines


def invalid_lines(summaries: list[dict]) -> list[str]:
    """One line per reason a case is invalid ('variant / transport: reason'); none when all are valid."""
    return [f"{s['variant']} / {s['transport']}: {reason}"
            for s in summaries for reason in s.get("invalid_reasons", [])]


def read_summary(folder: Path) -> Optional[dict]:
    """The summary.json of a results folder, or None when it has none (or an unreadable one)."""
    path = Path(folder) / SUMMARY_JSON
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _add_spread(row: list[str], s: dict) -> None:
    """A repeated case's row: its runs, done in how many when not in all or none, [min..max] of
    completion and recovery, distorted in how many (a row of one run gets a 1 in `runs`)."""
    spread = s.get("repeats")
    if spread is None:
        row.insert(2, "1")
        return
    n = spread["n"]
    if 0 < spread["completed"] < n:
        row[2] = f"{spread['completed']}/{n}"
    ends = _range(spread["completion_time_s"], _seconds)
    row[3] = f"{row[3]} {ends}".rstrip()
    if s["failure_time_s"] is not None:
        recovery = spread["time_to_recover_s"]
        notes = recovery.get("notes") or [None] * len(recovery["values"])
        stayed = [done for value, note, done in zip(recovery["values"], notes, spread["completed_each"])
                  if value is None and note is None]

        def end(value, note):
            if value is None and note:
                return recovery_note_text({"recovery_note": note, "sample_interval_s": s.get("sample_interval_s")})
            return _recovery(value, s["failure_time_s"], bool(stayed) and all(stayed))
        if recovery["min"] is not None or recovery.get("min_note") or recovery.get("max_note"):
            row[4] = (f"{row[4]} [{end(recovery['min'], recovery.get('min_note'))}.."
                      f"{end(recovery['max'], recovery.get('max_note'))}]").rstrip()
    if spread.get("distorted"):
        row[-1] += f" ({spread['distorted']}/{n})"
    row.insert(2, str(n))


def _range(spread: dict, text) -> str:
    """'[min..max]' of a spread, each end as `text` writes it; nothing when no run had a value."""
    if spread["min"] is None:
        return ""
    return f"[{text(spread['min'])}..{text(spread['max'])}]"


def _seconds(value: Optional[float]) -> str:
    return "never" if value is None else format_seconds(value)


def _completion(s: dict) -> str:
    """Completion time; a case cut by its horizon while delivering says how far it got, and only
    a stuck one reads "never"."""
    if s["completion_time_s"] is not None:
        return _seconds(s["completion_time_s"])
    share = s.get("delivered_fraction")
    got = "" if share is None else f"{int(share * 100)} %"
    if s.get("ending") == "cut at horizon":
        return f"cut at horizon: {got} delivered" if got else "cut at horizon"
    return f"never (stuck at {got})" if got else "never"


def _rtts(value: Optional[float]) -> str:
    """' (N RTT)' beside a time, when its base RTT was measured."""
    if value is None:
        return ""
    return f" ({value:.0f} RTT)" if value >= 100 else f" ({value:.3g} RTT)"


def _millis(value: Optional[float], failure: Optional[float]) -> str:
    if failure is None or value is None:
        return "-"
    return format_seconds(value)


def _recovery_cell(s: dict) -> str:
    """The recover cell of a case: "-" when nothing failed or its goodput was not measured, "n/a"
    when there was no goodput before the failure to recover to, else the time (or its verdict)."""
    if s["failure_time_s"] is not None and "goodput" in s.get("not_measured", ()):
        return NOT_MEASURED_CELL
    if s["failure_time_s"] is not None and s.get("goodput_before_failure") is False:
        return NO_BASELINE_CELL
    if s["failure_time_s"] is not None and s.get("recovery_note"):
        return recovery_note_text(s)
    return (_recovery(s["time_to_recover_s"], s["failure_time_s"], s["completed"], s.get("ending"))
            + _rtts(s.get("time_to_recover_rtts")))


def recovery_note_text(s: dict) -> str:
    """Why a case has no recovery time to show: "no dip (N samples)", goodput never fell below the
    mark at the samples' resolution; "window longer than the run": not measurable on this run."""
    note = s["recovery_note"]
    if note == "no dip" and s.get("sample_interval_s"):
        return f"no dip ({format_seconds(s['sample_interval_s'])} samples)"
    return note


def _retransmission_cell(s: dict) -> str:
    """Retransmissions by cause (trim/timeout/nack/sack, tail probes with sack); a backend that
    counts them without causes gives its total, "N (total)"; "-" when it counts none."""
    r = s["retransmissions"]
    if r is None:
        total = s.get("retransmissions_total")
        return NOT_MEASURED_CELL if total is None else f"{total} (total)"
    return f"{r['trim']}/{r['timeout']}/{r['nack']}/{r.get('sack', 0) + r.get('tail_probe', 0)}"


def _recovery(value: Optional[float], failure: Optional[float], completed: bool,
              ending: Optional[str] = None) -> str:
    """Time to recover; work that completed without goodput coming back to the mark stayed below it;
    work cut by its horizon while delivering was cut, not stuck."""
    if failure is None:
        return "-"
    if value is None:
        if completed:
            return "stayed <90%"
        return "cut at horizon" if ending == "cut at horizon" else "never"
    return format_seconds(value)


def _jsonable(value):
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
