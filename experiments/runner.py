"""Running a scenario: every case on a backend, with a progress bar; results, summaries and plots saved.

The default backend is `mininet` (the model target) when this process is root, `mnexec` is
installed and the testbed modules import; otherwise `netsim`, with one line saying so. On mininet,
`choose_link_rate` finds the calibration of the target (a link rate per topology size), calibrating
first when this machine has none and a case asks for `rate_bps: auto`. A progress bar runs on stderr. `mrc-testbed run` (cli/run.py) prints the comparison table at the end.
"""
from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Optional, TextIO

from experiments import calibration, conditions, metrics, parallel, plots, rate_caps, repeats, results
from experiments.backends import default_backend, make_backend
from experiments.backends.htsim.inputs import DEFAULT_BALANCER
from experiments.progress import LiveLine
from experiments.scenario import Scenario
from experiments.units import format_bytes
from testbed.capture import PcapCapture
from testbed.processes import HeldInterruptions

log = logging.getLogger("mrc.experiments")
PCAP_FOLDER = "pcap"                 # a run's captures: <results folder>/pcap/<case>/<switch>-port<N>.pcap


class ProgressBar:
    """A one-line progress bar on a stream (experiments.progress.LiveLine); a line per case started
    when the stream is not a terminal."""

    WIDTH = 30

    def __init__(self, total: int, stream: TextIO = sys.stderr) -> None:
        self.total = max(1, total)
        self.stream = stream
        self.line = LiveLine(stream)
        self.tty = self.line.tty
        self.index = 0
        self.label = ""
        self._last = -1.0

    def case(self, index: int, label: str) -> None:
        """Case `index` (0-based) called `label` starts."""
        self.index, self.label, self._last = index, label, -1.0
        if not self.tty:
            self.stream.write(f"[{index + 1}/{self.total}] {label} ...\n")
            self.stream.flush()
        self.update(0.0)

    def update(self, fraction: float) -> None:
        """The current case is `fraction` (0..1) done."""
        if not self.tty or fraction - self._last < 0.01:
            return
        self._last = fraction
        overall = (self.index + min(1.0, fraction)) / self.total
        filled = int(overall * self.WIDTH)
        self.line.show(f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {overall:4.0%}  "
                       f"case {self.index + 1}/{self.total}: {self.label[:50]}")

    def done(self) -> None:
        self.line.close()


class NoProgress:
    """No display: the cases run on a pool, whose own display (parallel.CaseProgress) is the one line."""

    def case(self, index: int, label: str) -> None:
        pass

    def update(self, fraction: float) -> None:
        pass

    def done(self) -> None:
        pass


def choose_backend(requested: Optional[str]) -> str:
    """The backend to use: the one asked for, else the default (saying why when it falls back)."""
    if requested:
        return requested
    name, why = default_backend()
    if why:
        print(f"mrc-testbed run: using the netsim backend ({why})", file=sys.stderr)
    return name


def choose_link_rate(cases: list, backend_name: str, target: str, calibrate: bool = True,
                     stream: TextIO = sys.stderr) -> Optional[calibration.RateSource]:
    """What the links of a mininet run take their rate from (None on netsim, which keeps the
    scenario's rates): the calibration of `target`, which gives each case the rate for its topology's
    size; without one, a calibration first when `calibrate` and a case asks for `auto`, else (or when
    the calibration finds no faithful rate) the fixed fallback, with a note. The rate of each
    topology in `cases` is printed."""
    if backend_name != "mininet":
        return None
    source = rate_caps.machine_rate(target)
    if isinstance(source, calibration.Calibration):
        _print_rates(source, cases, stream)
        return source
    if not calibrate or not any(rate_caps.asks_auto(case) for case in cases):
        print(f"mrc-testbed run: {source.note}", file=stream)
        return source
    from experiments import rate_search
    print(f"mrc-testbed run: no calibration of target {target} for this machine in "
          f"{calibration.calibration_file()}: calibrating first on {', '.join(rate_search.TOPOLOGIES)} "
          f"(several minutes; --no-calibrate runs at the fixed {source.rate_bps / 1e6:g} Mbit/s instead)",
          file=stream)
    try:
        record = rate_search.calibrate(target, lambda topology: rate_search.measure_allreduce(target, topology),
                                       progress=lambda line: print(f"  calibrate {target}: {line}", file=stream))
    except calibration.CalibrationError as error:
        note = (f"link rates at the fixed fallback of {source.rate_bps / 1e6:g} Mbit/s: the calibration found no "
                f"faithful rate on this machine now ({error}); nothing was recorded")
        print(f"mrc-testbed run: {note}", file=stream)
        return calibration.LinkRate(source.rate_bps, note)
    path = calibration.save(record)
    print(f"mrc-testbed run: calibrated {target}: fastest faithful rate {record.model.describe()}; links run at "
          f"{record.margin:g} of it; recorded in {path}", file=stream)
    _print_rates(record, cases, stream)
    return record


def _print_rates(record: calibration.Calibration, cases: list, stream: TextIO) -> None:
    """One line: the rate `auto` links get for each topology and process count of `cases` (and the
    record's note)."""
    from experiments.workloads import variant_topology
    sizes = {}
    for case in cases:
        topo = variant_topology(case.variant)
        sizes.setdefault((topo.name, rate_caps.emulated_processes(case, topo)), None)
    rates = ", ".join(f"{name} ({n} processes): {record.rate_bps(n) / 1e6:.3g} Mbit/s" for name, n in sizes)
    print(f"mrc-testbed run: calibrated link rates of target {record.target}: {rates}", file=stream)
    if record.note:
        print(f"mrc-testbed run: {record.note}", file=stream)


def select_cases(scenario: Scenario, variants: list[str], transports: list[str]) -> list:
    """The scenario's cases, restricted to the named variants and transports (when given)."""
    known_v = [v.label for v in scenario.variants]
    known_t = [t.name for t in scenario.transports]
    for name, known, what in [(v, known_v, "variant") for v in variants] + [(t, known_t, "transport") for t in transports]:
        if name not in known:
            raise ValueError(f"--{what} {name!r}: the scenario has {', '.join(map(repr, known))}")
    return [c for c in scenario.cases()
            if (not variants or c.variant.label in variants) and (not transports or c.transport.name in transports)]


WORKLOAD_NAMES = {"allreduce": "all-reduce", "alltoall": "all-to-all"}


def what_ran(cases: list) -> str:
    """One line saying what `cases` ran, from their variants: each workload and size ("all-reduce
    8 MiB, all-to-all 1 MiB"), the random and gray loss rates ("random loss 0 and 1 %": 0 when a
    case had none) and the other faults' kinds; a figure's title says it under its heading."""
    variants = list({id(case.variant): case.variant for case in cases}.values())
    workloads = dict.fromkeys(f"{WORKLOAD_NAMES.get(v.workload.kind, v.workload.kind)} {format_bytes(v.workload.bytes)}"
                              for v in variants)
    parts = [", ".join(workloads)]
    for kind in ("random_loss", "gray_loss"):
        rates = [[f.loss for f in v.faults if f.kind == kind] for v in variants]
        if any(rates):
            present = sorted({rate for found in rates for rate in (found or [0.0])})
            parts.append(f"{kind.replace('_', ' ')} " + " and ".join(f"{rate * 100:g}" for rate in present) + " %")
    others = dict.fromkeys(f.kind.replace("_", " ") for v in variants for f in v.faults
                           if f.kind not in ("random_loss", "gray_loss"))
    if others:
        parts.append(", ".join(others))
    return "; ".join(parts)


def run_scenario(scenario: Scenario, backend_name: str, target: str, folder: Path, quick: bool,
                 progress_stream: TextIO = sys.stderr, variants: list[str] = (),
                 transports: list[str] = (), pcap: PcapCapture | None = None,
                 link_rate: calibration.RateSource | None = None, repeat: int = 1,
                 pool: parallel.CasePool | None = None,
                 cluster: Path | None = None, balancer: str | None = None) -> tuple[list[dict], list[Path]]:
    """Run every (selected) case `repeat` times, write the results folder; return (summaries, figure
    paths): one summary per case, over its repetitions when `repeat` > 1 (experiments/repeats.py).

    With `pcap` (mininet backend only) every switch port of every case is captured into
    `folder`/pcap/<case>/; `link_rate` (mininet only, default: the target's calibration, see
    `choose_link_rate`) sets the links' rates; with `pool` (netsim only, experiments/parallel.py)
    the cases run there, several at once; with `cluster` (mininet only, a cluster file) each case's
    network is spread over its servers (testbed/cluster.py); `balancer` is htsim_uec's load
    balancer (htsim only; cases it cannot express are refused before any runs; each case's
    htsim_uec inputs, command and output are kept in `folder`/htsim/<case>/)."""
    cases = repeats.expand(select_cases(scenario, list(variants), list(transports)), repeat, backend_name)
    if backend_name == "htsim":
        from experiments.crosscheck import refuse_unmappable
        refuse_unmappable(cases, balancer)
    if pcap is not None:
        pcap = pcap.into(Path(folder) / PCAP_FOLDER)
        print(f"mrc-testbed run: capturing every switch port to {pcap.folder}/<case>/<switch>-port<N>.pcap "
              "(decode: tshark -X lua_script:wireshark/mrc.lua -r FILE)", file=progress_stream)
    backend = make_backend(backend_name, target, pcap=pcap, link_rate=link_rate, cluster=cluster,
                           **({"balancer": balancer} if balancer else {}),
                           **({"keep": Path(folder) / "htsim"} if backend_name == "htsim" else {}))
    if pool is not None:                     # the cases run ahead on the pool; the loop takes their records in order
        backend = parallel.PooledBackend(pool, cases, backend_name, progress_stream)
    if repeat > 1:
        print(f"mrc-testbed run: {repeats.seeds_note(scenario.seed, repeat, backend_name)}", file=progress_stream)
    bar = NoProgress() if pool is not None else ProgressBar(len(cases), progress_stream)
    records = []
    ran: list = []                           # the cases of `records`, in their order
    measuring = conditions.Measuring()
    stop: Optional[BaseException] = None     # what interrupted the run (raised again once the results are saved)
    try:
        for i, case in enumerate(cases):
            bar.case(i, case.label + (f" (run {case.repetition + 1}/{repeat})" if repeat > 1 else ""))
            t0 = time.monotonic()
            try:
                record = backend.run_case(case, bar.update)
            except results.INTERRUPTIONS as interruption:
                stop = interruption              # keep what finished, then stop
                if isinstance(backend, parallel.PooledBackend):      # those done ahead of the one awaited too
                    for done, record in backend.finished_ahead():
                        record.repetition = done.repetition
                        records.append(record)
                        ran.append(done)
                break
            took = backend.took(i) if isinstance(backend, parallel.PooledBackend) else time.monotonic() - t0
            log.info("%s: %s in %.1f s of wall time", case.label,
                     "completed" if record.completed else "did not complete", took)
            record.repetition = case.repetition
            records.append(record)
            ran.append(case)
    finally:
        bar.done()
    with HeldInterruptions() as held:   # the cases are over: their results are written whole
        meta, summaries, shown = _save_results(scenario, cases, records, folder, backend_name, target, balancer,
                                               quick, repeat, measuring, stop)
    if held.interruption is None:
        figures, missing, stopped_drawing = _draw_figures(
            shown, summaries, folder, f"{scenario.title}\nran: {what_ran(ran)}")
    else:                              # stopped while the results were written: no figure drawn
        figures, stopped_drawing = [], held.interruption
        missing = plots.figure_names(shown, summaries) if shown else []
    if missing:
        meta["figures_missing"] = missing
    _write_summaries(meta, summaries, figures, folder)
    stop = stop or stopped_drawing
    if stop is not None:
        print(f"mrc-testbed run: {_interruption(meta, folder)}", file=sys.stderr)
        raise stop
    return summaries, figures


def _save_results(scenario, cases: list, records: list, folder: Path, backend_name: str, target: str,
                  balancer: Optional[str], quick: bool, repeat: int, measuring: conditions.Measuring,
                  stop: Optional[BaseException]) -> tuple[dict, list[dict], list]:
    """Write raw.jsonl, summary.json and summary.md of the cases run (no figures yet); return the
    run's meta, the case summaries and the records the figures show."""
    folder.mkdir(parents=True, exist_ok=True)
    runs = [metrics.summarise(r) for r in records]
    summaries = repeats.aggregate_all(runs)
    shown = repeats.representative_records(records, runs)
    measured = measuring.done()
    meta = {"scenario": scenario.name, "title": scenario.title, "description": scenario.description,
            "scenario_file": scenario.path, "backend": backend_name,
            "target": target if backend_name == "mininet" else None,
            "balancer": (balancer or DEFAULT_BALANCER) if backend_name == "htsim" else None,
            "seed": scenario.seed, "quick": quick,
            "created": measured["date"], "conditions": measured, "interrupted": stop is not None,
            "cases_planned": len(cases), "cases_run": len(records), "ran": what_ran(cases[:len(records)])}
    if repeat > 1:
        meta.update(repeat=repeat, seeds=repeats.seeds(scenario.seed, repeat, backend_name),
                    seeds_note=repeats.seeds_note(scenario.seed, repeat, backend_name), runs=runs)
    results.write_raw(records, folder)               # the results first: an interruption while
    _write_summaries(meta, summaries, [], folder)    # drawing loses figures, never them
    return meta, summaries, shown


def _write_summaries(meta: dict, summaries: list[dict], figures: list[Path], folder: Path) -> None:
    """summary.json and summary.md of the results folder."""
    results.write_summary(meta, summaries, figures, folder)
    results.write_markdown(meta, summaries, figures, folder)


def _draw_figures(records: list, summaries: list[dict], folder: Path,
                  title: str) -> tuple[list[Path], list[str], Optional[BaseException]]:
    """(the figures drawn, the names of those a Ctrl-C or SIGTERM left undrawn, that interruption)."""
    if not records:
        return [], [], None
    drawn: list[Path] = []
    try:
        plots.make_figures(records, summaries, folder, title, drawn=drawn)
    except results.INTERRUPTIONS as interruption:
        done = {Path(path).name for path in drawn}
        return drawn, [name for name in plots.figure_names(records, summaries) if name not in done], interruption
    return drawn, [], None


def _interruption(meta: dict, folder: Path) -> str:
    """What an interrupted run kept, and what it lacks."""
    kept = ", ".join([results.RAW_JSONL, results.SUMMARY_JSON, results.SUMMARY_MD])
    if meta["interrupted"] and not meta["cases_run"]:
        said = (f"interrupted before any of the {meta['cases_planned']} case(s) finished: nothing to keep "
                f"({folder} holds empty results marked interrupted)")
    elif meta["interrupted"]:
        said = (f"interrupted after {meta['cases_run']} of {meta['cases_planned']} case(s); {kept} of the "
                f"{meta['cases_run']} finished case(s) are in {folder}")
    else:
        said = f"interrupted while drawing figures; {kept} of all {meta['cases_run']} case(s) are in {folder}"
    if meta.get("figures_missing"):
        said += f"; figures not drawn: {', '.join(meta['figures_missing'])}"
    return said
