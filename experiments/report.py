"""One HTML or markdown page of every results folder (what `mrc-testbed report` writes).

    mrc-testbed report                              # results/ -> results/report.html
    mrc-testbed report --results /tmp/runs -o report.md

A results folder is any folder holding a summary.json (written by `mrc-testbed run`); folders are
searched recursively under --results and shown scenario by scenario (failover, flap, blackhole,
gray, incast, permutation, scale, then others), newest first, each with its comparison table and
every figure. Figures are linked by relative path, so the page and the folders move together.
"""
from __future__ import annotations

import html
import os
from pathlib import Path

from experiments import crosscheck, results

DEFAULT_ROOT = Path("results")
# The shipped scenarios in the order of the story they tell; other scenarios follow.
_ORDER = {name: i for i, name in enumerate(("failover", "flap", "blackhole", "gray", "incast", "permutation", "scale"))}


def find_runs(root: Path) -> list[tuple[Path, dict]]:
    """(folder, summary) of every results folder under `root`, symbolic links to folders followed
    (each folder read once), newest first."""
    runs = []
    for folder in _folders_holding(Path(root), results.SUMMARY_JSON):
        summary = results.read_summary(folder)
        if summary is not None and isinstance(summary.get("cases"), list):
            runs.append((folder, summary))
    runs.sort(key=lambda item: (item[1].get("created", ""), str(item[0])), reverse=True)   # newest first
    runs.sort(key=lambda item: _ORDER.get(item[1].get("scenario"), len(_ORDER)))            # stable: by scenario
    return runs


def _folders_holding(root: Path, name: str) -> list[Path]:
    """The folders under `root` (itself included) that hold a file `name`, sorted; links to folders
    are followed, and a folder reached twice (through a link, or a link back up the tree) is read
    once, by its own path where `root` holds it (real folders are walked before links)."""
    found, seen = [], set()
    for here, folders, files in os.walk(root, followlinks=True):
        real = os.path.realpath(here)
        if real in seen:
            folders[:] = []
            continue
        seen.add(real)
        folders.sort(key=lambda folder: (os.path.islink(os.path.join(here, folder)), folder))
        if name in files:
            found.append(Path(here))
    return sorted(found)


def _rel(target: Path, page: Path) -> str:
    return Path(os.path.relpath(target.resolve(), page.resolve().parent)).as_posix()


def _figures(folder: Path, summary: dict) -> list[Path]:
    names = summary.get("figures") or sorted(p.name for p in folder.glob("*.png"))
    return [folder / n for n in names if (folder / n).exists()]


def _backend(summary: dict) -> str:
    """The backend of a run, with its switch target when it has one ("mininet (target bmv2)")."""
    target = summary.get("target")
    return f"{summary.get('backend')}" + (f" (target {target})" if target else "")


def render_markdown(runs: list[tuple[Path, dict]], page: Path) -> str:
    """The report as markdown."""
    lines = ["# MRC testbed: experiment report", "", f"{len(runs)} results folder(s).", ""]
    for folder, s in runs:
        lines += [f"## {s.get('title', s.get('scenario', folder.name))}", "",
                  *results.ran_lines(s),
                  s.get("description", "").strip(), "",
                  f"`{_rel(folder, page)}` — backend {_backend(s)}, {results.run_seeds(s)}"
                  f"{', quick' if s.get('quick') else ''}, {s.get('created', '')}", ""]
        lines += [f"**{line}**" for line in results.interruption_lines(s)]
        lines += [""] if results.interruption_lines(s) else []
        lines += [results.REPEATS_NOTE, ""] if s.get("repeat", 1) > 1 else []
        lines += results.markdown_table(s["cases"]) + [""]
        if s.get("crosscheck"):              # `mrc-testbed crosscheck`: netsim and htsim side by side
            lines += ["Slowest flow over ideal, mean over the seeds (worst seed):", "",
                      *crosscheck.table_lines(s["crosscheck"]), ""]
        lines += [f"- invalid: {line}" for line in results.invalid_lines(s["cases"])]
        lines += [f"- distorted: {line}" for line in results.fidelity_lines(s["cases"])]
        lines += [""] if results.fidelity_lines(s["cases"]) or results.invalid_lines(s["cases"]) else []
        for fig in _figures(folder, s):
            lines += [f"![{fig.stem}]({_rel(fig, page)})", ""]
    return "\n".join(lines)


def render_html(runs: list[tuple[Path, dict]], page: Path) -> str:
    """The report as one HTML page."""
    e = html.escape
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>MRC testbed report</title>",
             "<style>body{font-family:sans-serif;max-width:1500px;margin:auto;padding:1em}"
             "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #bbb;padding:3px 7px}"
             "th{background:#eee}img{max-width:100%;border:1px solid #ddd;margin:8px 0}"
             ".meta{color:#555}.faithful{background:#d8f0d8}.distorted{background:#f6d0d0}"
             ".invalid{background:#d62728;color:#fff;font-weight:bold}"
             ".simulated,.unknown{background:#eee}.interrupted{background:#ffe08a;font-weight:bold}</style></head><body>",
             "<h1>MRC testbed: experiment report</h1>", f"<p>{len(runs)} results folder(s).</p>"]
    if runs:
        parts.append("<ul>" + "".join(f"<li><a href='#run{i}'>{e(s.get('title', folder.name))}</a> "
                                      f"<span class='meta'>({e(str(s.get('created', '')))})</span>"
                                      + (" <span class='interrupted'>interrupted</span>" if s.get("interrupted")
                                         else "") + "</li>"
                                      for i, (folder, s) in enumerate(runs)) + "</ul>")
    for i, (folder, s) in enumerate(runs):
        header, rows = results.table_rows(s["cases"])
        parts += [f"<h2 id='run{i}'>{e(s.get('title', s.get('scenario', folder.name)))}</h2>",
                  *(f"<p><b>{e(line)}</b></p>" for line in results.ran_lines(s) if line),
                  f"<p>{e(s.get('description', ''))}</p>",
                  f"<p class='meta'>{e(_rel(folder, page))} — backend {e(_backend(s))}, "
                  f"{e(results.run_seeds(s))}{', quick' if s.get('quick') else ''}, "
                  f"{e(str(s.get('created', '')))}</p>",
                  *(f"<p class='interrupted'>{e(line)}</p>" for line in results.interruption_lines(s)),
                  f"<p>{e(results.REPEATS_NOTE)}</p>" if s.get("repeat", 1) > 1 else "",
                  "<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr>"
                  + "".join("<tr>" + "".join(_cell(h, c) for h, c in zip(header, row)) + "</tr>" for row in rows)
                  + "</table>"]
        if s.get("crosscheck"):              # `mrc-testbed crosscheck`: netsim and htsim side by side
            head, cells = crosscheck.table_cells(s["crosscheck"])
            parts += ["<p>netsim and htsim side by side: slowest flow over ideal, mean over the seeds (worst seed)</p>",
                      "<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>"
                      + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in cells)
                      + "</table>"]
        invalid = results.invalid_lines(s["cases"])
        if invalid:
            parts.append("<p>Invalid (a fault missed the workload: the case says nothing about it):</p><ul>"
                         + "".join(f"<li>{e(line)}</li>" for line in invalid) + "</ul>")
        distorted = results.fidelity_lines(s["cases"])
        if distorted:
            parts.append("<p>Distorted by this machine:</p><ul>" + "".join(f"<li>{e(line)}</li>" for line in distorted)
                         + "</ul>")
        for fig in _figures(folder, s):
            parts.append(f"<div><img src='{e(_rel(fig, page))}' alt='{e(fig.stem)}'></div>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _cell(column: str, value: str) -> str:
    """A table cell; the fidelity column is a coloured badge."""
    if column == "fidelity":
        return f"<td class='{html.escape(value)}'>{html.escape(value)}</td>"
    return f"<td>{html.escape(value)}</td>"


class NoResults(LookupError):
    """No results folder under the folder a report was asked of (no page is written)."""


def write_report(root: Path, output: Path) -> tuple[Path, int]:
    """Write the report of every results folder under `root` to `output`; return (path, folders).
    NoResults when there is none (nothing is written)."""
    markdown = output.suffix.lower() in (".md", ".markdown")
    if not markdown and output.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"-o {output}: the report must end in .html or .md")
    runs = find_runs(root)
    if not runs:
        raise NoResults(f"no results folder (with summary.json) under {root}: nothing to report "
                        "(mrc-testbed run experiments/<scenario>.yaml writes one)")
    output.parent.mkdir(parents=True, exist_ok=True)
    text = render_markdown(runs, output) if markdown else render_html(runs, output)
    output.write_text(text, encoding="utf-8")
    return output, len(runs)
