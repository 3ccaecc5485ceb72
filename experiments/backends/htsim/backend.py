"""The htsim backend: a case exported to uet-htsim's `htsim_uec`, run, and read back as a CaseRecord.

`find_htsim()` looks for the binary: `$HTSIM_UEC` first, then `htsim_uec` on PATH
(`scripts/build-htsim.sh` builds one). The record has the same form as the netsim backend's (flows
with their completion times, totals as transport counters), so the summaries, tables and plots
read it alike; what htsim does not report stays empty (goodput samples, EV events, per-link
counters) or None, "not measured" (an unfinished flow's bytes, bit-exactness, messages missing).
A run with a flow unfinished went on to its horizon (htsim_uec stops earlier only when nothing is
left to do): the record ends there, and `validity.ending` calls it cut at the horizon.
Inputs with measurement switches (`HtsimInputs.env`, e.g. netsim's packet sizes) run with those
variables set; a build that does not say it read each one (a release build ignores them) fails the run.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

from experiments.backends.htsim.inputs import DEFAULT_BALANCER, HtsimInputs, PacketSizes, export_case
from experiments.backends.htsim.output import HtsimOutputError, HtsimResult, parse_output
from experiments.conditions import children_cpu_s
from experiments.record import CaseRecord, FaultEvent, FaultPlan, FlowRecord
from experiments.scenario import Case

ENV_VAR = "HTSIM_UEC"
SWITCH_SAID = "Measurement switch {name}={value}"   # what a build with the switches prints of each one read
BINARY = "htsim_uec"
BUILD_HINT = "scripts/build-htsim.sh builds it from uet-htsim's public repository"


class HtsimNotFound(RuntimeError):
    """No htsim_uec binary: names both places looked at."""


class HtsimFailed(RuntimeError):
    """htsim_uec exited with an error or could not be read."""


def find_htsim() -> str:
    """The htsim_uec to run: `$HTSIM_UEC` when set (it must be an executable file), else
    `htsim_uec` on PATH; HtsimNotFound naming both otherwise."""
    chosen = os.environ.get(ENV_VAR)
    if chosen:
        if not (os.path.isfile(chosen) and os.access(chosen, os.X_OK)):
            raise HtsimNotFound(f"{ENV_VAR}={chosen}: not an executable file ({BUILD_HINT})")
        return chosen
    found = shutil.which(BINARY)
    if found is None:
        raise HtsimNotFound(f"no {BINARY}: {ENV_VAR} is not set and {BINARY} is not on PATH ({BUILD_HINT})")
    return found


def htsim_unavailable() -> Optional[str]:
    """Why htsim_uec cannot run here, or None when it can."""
    try:
        find_htsim()
    except HtsimNotFound as error:
        return str(error)
    return None


class HtsimRun:
    """One run of htsim_uec on exported inputs: the command, its output (`stdout`, and `result` once
    read), its wall and CPU time."""

    def __init__(self, inputs: HtsimInputs, binary: str, folder: Path) -> None:
        self.inputs = inputs
        self.binary = binary
        self.folder = Path(folder).resolve()       # htsim_uec runs in it: its paths must not be relative
        self.wall_s: Optional[float] = None
        self.cpu_s: Optional[float] = None        # htsim_uec's user + system CPU seconds
        self.stdout = ""
        self.result: Optional[HtsimResult] = None  # the output read, after a run that succeeded

    def run(self, timeout_s: float = 3600.0) -> HtsimResult:
        """Write the inputs, run htsim_uec in the folder, return its output read."""
        self.inputs.write(self.folder)
        argv = self.inputs.argv(self.binary, self.folder)
        switches = [f"{name}={value}" for name, value in self.inputs.env.items()]
        (self.folder / "command.txt").write_text(" ".join(switches + argv) + "\n")
        env = {**os.environ, **self.inputs.env} if self.inputs.env else None
        began, cpu_before = time.monotonic(), children_cpu_s()
        try:
            done = subprocess.run(argv, cwd=self.folder, capture_output=True, text=True, timeout=timeout_s,
                                  check=False, env=env)
        except subprocess.TimeoutExpired as error:
            raise HtsimFailed(f"{self.binary} ran longer than {timeout_s:g} s: {' '.join(argv)}") from error
        except OSError as error:
            raise HtsimFailed(f"{self.binary} could not start: {error}") from error
        self.wall_s, self.cpu_s = time.monotonic() - began, children_cpu_s() - cpu_before
        self.stdout = done.stdout
        (self.folder / "htsim.out").write_text(done.stdout)
        if done.returncode != 0:
            said = " / ".join(line.strip() for line in (done.stderr.strip() or done.stdout.strip()).splitlines()[-8:]
                              if line.strip()) or "nothing"
            raise HtsimFailed(f"{self.binary} exited with status {done.returncode} on {' '.join(argv)}; "
                              f"it said: {said}")
        unread = [f"{name}={value}" for name, value in self.inputs.env.items()
                  if SWITCH_SAID.format(name=name, value=value) not in done.stdout]
        if unread:
            raise HtsimFailed(f"{self.binary} did not say it read {', '.join(unread)}: a build without the "
                              "measurement switches? (scripts/build-htsim.sh --measurement-switches builds one)")
        try:
            self.result = parse_output(done.stdout)
        except HtsimOutputError as error:
            raise HtsimFailed(f"{self.binary}: {error}") from error
        return self.result


class HtsimBackend:
    """Runs cases on uet-htsim's htsim_uec with one load balancer and one choice of switch settings."""

    name = "htsim"

    def __init__(self, balancer: str = DEFAULT_BALANCER, settings: str = "scenario",
                 binary: Optional[str] = None, keep: Optional[Path] = None,
                 sizes: Optional[PacketSizes] = None) -> None:
        self.balancer = balancer
        self.settings = settings
        self.sizes = sizes               # its packets' sizes (None: htsim_uec's own)
        self.binary = binary or find_htsim()
        self.keep = keep                 # a folder keeping each case's inputs and output (None: a temporary one)
        self.last_run: Optional[HtsimRun] = None

    def run_case(self, case: Case, progress: Callable[[float], None] = lambda f: None) -> CaseRecord:
        """Export `case`, run htsim_uec on it, return its record."""
        inputs = export_case(case, self.balancer, self.settings, self.sizes)
        if self.keep is not None:
            again = getattr(case, "repetition", 0)          # `run --repeat`: each run its own folder
            folder = Path(self.keep) / (_slug(case.label) + (f"-run{again + 1}" if again else ""))
            result = self._run(inputs, folder)
        else:
            with tempfile.TemporaryDirectory(prefix="mrc-htsim-") as tmp:
                result = self._run(inputs, Path(tmp))
        progress(1.0)
        return self.record(case, inputs, result)

    def _run(self, inputs: HtsimInputs, folder: Path) -> HtsimResult:
        run = HtsimRun(inputs, self.binary, folder)
        self.last_run = run
        return run.run()

    def record(self, case: Case, inputs: HtsimInputs, result: HtsimResult) -> CaseRecord:
        """The CaseRecord of `case` from htsim_uec's `result`."""
        scenario, variant = case.scenario, case.variant
        from experiments.workloads import variant_topology
        topo = variant_topology(variant)
        record = CaseRecord(scenario.name, variant.label, case.transport.name, case.transport.mode, self.name,
                            scenario.seed, topo.name, len(topo.hosts), variant.workload.kind,
                            horizon=scenario.horizon_s, sample_interval=scenario.sample_interval_s)
        unknown = sorted(set(result.finish_us) - set(range(1, len(inputs.flows) + 1)))
        if unknown:
            raise HtsimFailed(f"htsim_uec reported flow ids {unknown} that the exported matrix does not have")
        for i, flow in enumerate(inputs.flows):
            # htsim_uec prints one time per flow, its sender's: when the cumulative ACK covered the
            # flow. It is the record's `acked`, and its `finish` too, for want of the receiver's. Of
            # a flow it never finished it says nothing: its bytes are not measured (None).
            finish = result.finish_us.get(i + 1)
            record.flows.append(FlowRecord(flow.src, flow.dst, flow.nbytes, flow.role,
                                           received_bytes=flow.nbytes if finish is not None else None,
                                           finish=None if finish is None else finish * 1e-6,
                                           acked=None if finish is None else finish * 1e-6))
        finishes = [f.finish for f in record.flows]
        record.completed = bool(finishes) and None not in finishes
        record.end = max(finishes) if record.completed else scenario.horizon_s
        record.completion_time = record.end if record.completed else None
        record.bit_exact = None                  # htsim carries no payload, and no messages: not measured
        record.app_missing = None
        record.transport_stats = {f"htsim_{k}": v for k, v in result.totals.items()}
        record.transport_stats["retx_htsim"] = result.totals.get("rtx", 0)   # its Rtx: every cause together
        for fault in variant.faults:             # slowed from the start (inputs.py refuses anything else)
            record.planned_faults.append(FaultPlan(fault.label, seconds=0.0))
            record.faults.append(FaultEvent(0.0, f"links at {fault.share:.0%} rate (htsim -failed)", fault.switch,
                                            True, fraction=0.0, fault=len(record.planned_faults) - 1, began=0.0))
        record.fidelity = {"verdict": "simulated", "reasons": [], "measured": {}}
        record.notes.extend(f"htsim: {note}" for note in inputs.notes)
        if not record.completed:
            unfinished = sum(f is None for f in finishes)
            record.notes.append(f"htsim: stopped at its horizon (-end {scenario.horizon_s * 1e6:g} µs) with "
                                f"{unfinished} of {len(finishes)} flow(s) unfinished; htsim_uec does not say how "
                                "much of an unfinished flow arrived")
        record.notes.append(f"htsim: load balancer {self.balancer}; htsim_uec reports completions only, so "
                            "goodput, recovery and gap figures of this case are not measured")
        return record


def _slug(text: str) -> str:
    """A folder name for a case label: "permutation, gray spine / MRC" -> "permutation-gray-spine-MRC"."""
    return re.sub(r"[^A-Za-z0-9_.]+", "-", text).strip("-") or "case"
