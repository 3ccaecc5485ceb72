"""The benchmarks of `mrc-testbed bench` (cli/bench.py): running them, one table of figures, results kept to compare.

    mrc-testbed bench                       # every benchmark (those needing root say so when skipped)
    mrc-testbed bench --only allreduce --only failover --no-mininet
    mrc-testbed bench --list

Each benchmark's figures are saved to `benchmarks/results/<name>.json` with the machine and the
time; the previous file of the same name is read first, and the table shows the change against
it, flagging a figure that got worse by more than 10 % as a REGRESSION. Figures depend on the
machine and its load (printed with them): compare runs of the same machine. When this run or the
previous one ran at a load above the CPU count, a figure by the wall clock (a wall time, a rate,
anything timed on Mininet) is marked "(busy)" and not flagged, and a figure of CPU time is flagged
only past 30 % (benchmarks.figures.compare). Each run also times a fixed reference job and saves
its time with the figures: a time or a rate worse than its limit while the reference says the
machine itself got slower is flagged only when still worse with that slow-down taken out, and is
marked "(machine N% slower)". The table's last lines say so.
"""
from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from benchmarks.figures import (BUSY_CPU, BUSY_CPU_SHARE, BUSY_WALL, MACHINE_MARK, REFERENCE_KEY,
                                REGRESSION_SHARE, RESULTS, WALL, Figure, Measurement, compare, conditions_load,
                                load_previous, machine_slowdown, previous_conditions, reference_cpu_s, save)
from experiments.conditions import Measuring

log = logging.getLogger("mrc.benchmarks")
REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: its name, what it measures, and how to run it."""

    name: str
    description: str
    measure: Callable[[argparse.Namespace], Measurement]


# --- the benchmarks written as scripts by their authors: run them, read the JSON they save ------

def _script_results(prefix: str, since: float) -> Optional[dict]:
    """The newest `<prefix>-*.json` a script saved in benchmarks/results after `since`."""
    files = [p for p in RESULTS.glob(f"{prefix}-*.json") if p.stat().st_mtime >= since]
    if not files:
        return None
    return json.loads(max(files, key=lambda p: p.stat().st_mtime).read_text())


def _run_script(script: str, prefix: str, result: Measurement, extra: tuple[str, ...] = ()) -> Optional[dict]:
    """Run benchmarks/<script> `extra` (it prints its own figures), return the JSON it saved."""
    if os.geteuid() != 0:
        result.skipped.append(f"{script}: needs root (network namespaces, raw sockets)")
        return None
    since = time.time() - 1
    proc = subprocess.Popen([sys.executable, str(REPO / "benchmarks" / script), *extra], cwd=str(REPO),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail: list[str] = []
    for line in proc.stdout:                  # its own figures, as they come
        print(line, end="", flush=True)
        tail = (tail + [line.rstrip()])[-5:]
    if proc.wait() != 0:
        raise RuntimeError(f"{script} exited with {proc.returncode}: {' | '.join(tail)[-300:]}")
    saved = _script_results(prefix, since)
    if saved is None:
        raise RuntimeError(f"{script} saved no {prefix}-*.json under {RESULTS}")
    return saved


def measure_agent(options: argparse.Namespace) -> Measurement:
    """bench_agent.py: agent send rate next to a raw-socket sender on the same veth."""
    result = Measurement()
    saved = _run_script("bench_agent.py", "agent", result)
    if saved:
        raw = saved["raw"]["pps"]
        result.add("raw-socket sender", raw, "pkt/s", clock=WALL)
        for name, entry in saved["agent"].items():
            best = entry["best"]
            result.add(f"agent {name}", best["pps"], "pkt/s", clock=WALL)
            result.add(f"agent {name}: ratio to raw", best["pps"] / raw if raw else None, "", clock=WALL)
            if entry.get("sender_cpu_us_per_packet"):
                result.add(f"agent {name}: sender CPU", entry["sender_cpu_us_per_packet"], "us/pkt", "lower")
        result.details = saved
    return result


def measure_refswitch(options: argparse.Namespace) -> Measurement:
    """bench_refswitch.py: reference switch forwarding rate next to a raw-socket loop, and trimming."""
    result = Measurement()
    saved = _run_script("bench_refswitch.py", "refswitch", result)
    if saved:
        result.add("plain raw-socket loop", saved["plain"]["pps"], "pkt/s", clock=WALL)
        result.add("reference switch", saved["model"]["pps"], "pkt/s", clock=WALL)
        result.add("reference switch: ratio to plain", saved.get("ratio_model_to_plain"), "", clock=WALL)
        result.add("reference switch, all trimmed", saved["model_trim"]["pps"], "pkt/s", clock=WALL)
        result.add("reference switch per CPU-second", saved["model"].get("pps_per_cpu_second"), "pkt")
        result.details = saved
    return result


def measure_bmv2(options: argparse.Namespace) -> Measurement:
    """bench_refswitch.py --bmv2: each BMv2 build's forwarding rate beside the model and a raw loop."""
    result = Measurement()
    if os.geteuid() == 0 and not _bmv2_found():
        result.skipped.append("bmv2: no simple_switch_grpc on PATH or in MRC_BMV2_BUILDS")
        return result
    saved = _run_script("bench_refswitch.py", "bmv2", result, ("--bmv2",))
    if saved:
        plain = saved["plain"]["pps"]
        result.add("plain raw-socket loop", plain, "pkt/s", clock=WALL)
        result.add("reference switch", saved["model"]["pps"], "pkt/s", clock=WALL)
        for folder, entry in saved["bmv2"].items():
            result.add(f"BMv2 {folder}", entry["pps"], "pkt/s", clock=WALL)
            result.add(f"BMv2 {folder}: ratio to plain", entry["pps"] / plain if plain else None, "", clock=WALL)
        result.details = saved
    return result


def _bmv2_found() -> bool:
    import shutil
    dirs = [d for d in os.environ.get("MRC_BMV2_BUILDS", "").split(":") if d]
    return bool(shutil.which("simple_switch_grpc")) or any(
        (Path(d) / "simple_switch_grpc").is_file() for d in dirs)


def measure_transport_core(options: argparse.Namespace) -> Measurement:
    """bench_transport_core.py: CPU cost of the sans-IO sender and receiver."""
    from benchmarks import bench_transport_core as core
    result = Measurement()
    r = core.run(30000, 8)
    n = r["data_packets"]
    result.add("sender core", n / r["tx_s"] if r["tx_s"] else None, "pkt/s (CPU)")
    result.add("receiver core", n / r["rx_s"] if r["rx_s"] else None, "pkt/s (CPU)")
    result.details = r
    return result


def _module_benchmark(name: str) -> Benchmark:
    module = importlib.import_module(f"benchmarks.bench_{name}")
    return Benchmark(module.NAME, module.DESCRIPTION, module.measure)


def benchmarks() -> list[Benchmark]:
    """Every benchmark, cheapest first."""
    return [Benchmark("transport_core", "CPU cost of the sans-IO transport core", measure_transport_core),
            _module_benchmark("netsim"), _module_benchmark("allreduce"), _module_benchmark("failover"),
            Benchmark("agent", "host agent send rate vs a raw-socket sender (root)", measure_agent),
            Benchmark("refswitch", "reference switch forwarding vs a raw-socket loop, trimming (root)",
                      measure_refswitch),
            Benchmark("bmv2", "BMv2 builds' forwarding vs the model and a raw-socket loop (root, BMv2)",
                      measure_bmv2),
            _module_benchmark("bringup")]


NAMES = ("transport_core", "netsim", "allreduce", "failover", "agent", "refswitch", "bmv2", "bringup")


# --- running and reporting ---------------------------------------------------------------------

@dataclass
class BenchmarkRun:
    """A benchmark that ran (or failed), with the previous saved result to compare with."""

    benchmark: Benchmark
    measurement: Measurement
    previous: Optional[dict]
    seconds: float
    error: str = ""
    reference_s: Optional[float] = None     # the reference job's CPU time at this run (figures.reference_cpu_s)


def run_one(bench: Benchmark, options: argparse.Namespace, folder: Path = RESULTS) -> BenchmarkRun:
    """Run one benchmark, save its result (unless it failed), keep the previous one for comparison."""
    previous = load_previous(bench.name, folder)
    print(f"== {bench.name}: {bench.description}", flush=True)
    before = reference_cpu_s()            # the machine's speed, to set beside the previous run's
    measuring = Measuring()
    try:
        measurement = bench.measure(options)
    except Exception as exc:            # noqa: BLE001 - one failing benchmark must not stop the rest
        log.exception("benchmark %s failed", bench.name)
        return BenchmarkRun(bench, Measurement(), previous, measuring.done()["wall_s"],
                            error=f"{type(exc).__name__}: {exc}")
    conditions = measuring.done()
    seconds = conditions["wall_s"]
    # timed before and after, the least: the machine counts as slower only when it was at both ends
    reference = min(before, reference_cpu_s())
    if measurement.figures:
        path = save(bench.name, measurement, conditions, folder, reference_s=reference)
        print(f"   saved {path}", flush=True)
    return BenchmarkRun(bench, measurement, previous, seconds, reference_s=reference)


def previous_figure(name: str, previous: Optional[dict]) -> str:
    """The figure called `name` in a previous saved result, as text ("" when absent)."""
    for saved in (previous or {}).get("figures", []):
        if saved.get("name") == name and saved.get("value") is not None:
            return Figure(**saved).text()
    return ""


def table(runs: list[BenchmarkRun]) -> str:
    """One table of every figure, with the previous value and the change."""
    rows = [("benchmark", "figure", "value", "previous", "change")]
    load_now = os.getloadavg()[0]
    notes = []
    for out in runs:
        name = out.benchmark.name
        if out.error:
            rows.append((name, "FAILED", out.error[:60], "", ""))
        if out.previous is not None:
            notes.append(f"{name}: {machine_note(previous_conditions(out.previous), load_now, out.reference_s)}")
        for figure in out.measurement.figures:
            change, worse = compare(figure, out.previous, load_now, reference_now=out.reference_s)
            old = previous_figure(figure.name, out.previous)
            rows.append((name, figure.name, figure.text(), old, change + ("  REGRESSION" if worse else "")))
        for why in out.measurement.skipped:
            rows.append((name, "skipped", why[:70], "", ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines += notes
    lines += marks_legend([row[4] for row in rows], os.cpu_count())
    return "\n".join(lines)


def machine_note(then: dict, load_now: float, reference_now: Optional[float]) -> str:
    """When the previous run was, its load and reference time, beside this run's, and how much the
    machine's speed moved between them."""
    def seconds(value):
        return f"{value:.3f} s" if value else "not timed"
    load_then = conditions_load(then)
    text = (f"previous run {then.get('date') or then.get('time', '?')}, load {f'{load_then:.1f}' if load_then is not None else '?'}, "
            f"reference {seconds(then.get(REFERENCE_KEY))}; this one load {load_now:.1f}, "
            f"reference {seconds(reference_now)}")
    slowdown = machine_slowdown(reference_now, then.get(REFERENCE_KEY))
    if slowdown is not None:
        moved = f"{abs(slowdown):.0%}"
        text += (" (machine as fast)" if moved == "0%" else
                 f" (machine {moved} {'slower' if slowdown > 0 else 'faster'})")
    return text


def marks_legend(changes: list[str], cpus: Optional[int]) -> list[str]:
    """What each mark among the table's `changes` means: which rule compared that figure (busy, the
    machine's slow-down)."""
    busy = f"this run or the previous at a load above the machine's {cpus} CPUs"
    legend = []
    if any(BUSY_WALL in change for change in changes):
        legend.append(f"{BUSY_WALL}: a figure by the wall clock, {busy}: not flagged; compare its CPU time")
    if any(BUSY_CPU in change for change in changes):
        legend.append(f"{BUSY_CPU}: a CPU-time figure, {busy}: CPU time rises under contention too, so it "
                      f"is flagged as a REGRESSION only when worse by more than {BUSY_CPU_SHARE:.0%} "
                      f"(not {REGRESSION_SHARE:.0%})")
    if any(MACHINE_MARK in change for change in changes):
        legend.append(f"{MACHINE_MARK}N% slower): a time or rate worse than its limit while a reference job "
                      "(benchmarks.figures.reference_cpu_s: the least of its turns before and after the benchmark) "
                      "took N% more CPU time than at the previous run: flagged only when still worse than the limit with that slow-down taken out")
    return legend


def run_standalone(module, argv=None) -> int:
    """`python -m benchmarks.bench_<name>`: run one benchmark module, print its table, save it."""
    parser = argparse.ArgumentParser(description=(module.__doc__ or "").splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder of saved results")
    module.add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    out = run_one(Benchmark(module.NAME, module.DESCRIPTION, module.measure), args, args.results)
    print(table([out]))
    return 1 if out.error else 0
