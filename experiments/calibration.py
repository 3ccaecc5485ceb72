"""The calibration record: the link rate this machine's switches and agents sustain faithfully, per
machine and switch target, as a function of how many emulated processes share each core, and the
file that keeps it.

`mrc-testbed calibrate` (experiments/rate_search.py) measures the fastest faithful rate at a few
topology sizes and fits a `RateModel` to them; a scenario whose link rate is `auto` runs, on the
Mininet backend, at the model's rate for its own topology (`Calibration.for_processes`). The file
is JSON::

    {"version": 2, "records": [{"machine": {"hostname": ..., "cpu_model": ..., "cores": 2},
        "target": "model", "margin": 0.8, "date": "2026-12-05 10:10:00 UTC",
        "model": {"processes_per_core": 7.0, "faithful_rate_bps": 7070000, "exponent": 1.2},
        "sizes": [{"topology": "leafspine:4x2x2", "processes": 14, "faithful_rate_bps": 7070000,
                   "measurements": [{...}, ...], "conditions": {"load_1min_start": 0.4, ...}}, ...],
        "note": null}, ...]}

A version-1 file (one rate per record, measured on one topology that it does not name) is still
read: its rate holds for the default calibration topology (leafspine:4x2x2, 14 processes) and
scales as 1 / processes for the others, and every `auto` rate taken from it carries a note saying
so and how to re-measure.

`mrc-testbed calibrate --cluster FILE` runs the calibration on each server of a cluster file and keeps
each server's record here too, with its address (`"server": "10.0.0.2"`, and the server's own
machine); a network spread over those servers runs `auto` links at the lowest rate any server
sustains for the processes placed on it (`ServerRates`).

Where it lives: $MRC_CALIBRATION_FILE, else /var/lib/mrc-testbed/calibration.json for root, else
~/.cache/mrc-testbed/calibration.json.
"""
from __future__ import annotations

import json
import math
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional, Union

from experiments import conditions

ENV_FILE = "MRC_CALIBRATION_FILE"
ROOT_FILE = Path("/var/lib/mrc-testbed/calibration.json")
USER_FILE = Path("~/.cache/mrc-testbed/calibration.json")
FORMAT_VERSION = 2
MARGIN = 0.8                     # a record keeps this share of the faithful rate the model gives
EXPONENT_MIN = 1.0               # a fitted rate falls at least as 1 / (processes per core): see RateModel
V1_TOPOLOGY = "leafspine:4x2x2"  # what a version-1 record measured (the calibration's default then)
V1_PROCESSES = 14                # ... its 8 agents and 6 switches


class CalibrationError(ValueError):
    """A calibration file that cannot be read or used; the message names the file."""


@dataclass(frozen=True)
class Machine:
    """What identifies the machine a calibration holds for."""

    hostname: str
    cpu_model: str
    cores: int

    @classmethod
    def this(cls) -> "Machine":
        """The machine this process runs on."""
        return cls(socket.gethostname(), _cpu_model(), os.cpu_count() or 1)

    def describe(self) -> str:
        return f"{self.hostname} ({self.cpu_model}, {self.cores} cores)"


@dataclass(frozen=True)
class RateModel:
    """The fastest faithful link rate against the emulated processes (agents and switches) per core:
    `faithful_rate_bps` x (`processes_per_core` / n) ^ `exponent` for n processes per core, and
    `faithful_rate_bps` itself for n at or below `processes_per_core` (never extrapolated upwards).

    `fit` takes it from measurements at a few sizes. Why this shape: every agent and switch handles
    traffic at about the link rate, so at one rate a topology with twice the processes per core asks
    the CPUs for about twice the work; and the more processes share a core, the longer each waits for
    it after a packet woke it. The faithful rate thus falls at least as 1 / (processes per core)
    (EXPONENT_MIN), faster when the waits count too. A measured slope below that is taken as noise
    or a limit of the smaller size alone (one switch's own speed), not as a licence to run larger
    topologies faster."""

    processes_per_core: float
    faithful_rate_bps: float
    exponent: float

    def faithful_rate(self, processes_per_core: float) -> float:
        """The fastest faithful rate at `processes_per_core`."""
        n = max(processes_per_core, self.processes_per_core)
        return self.faithful_rate_bps * (self.processes_per_core / n) ** self.exponent

    @classmethod
    def fit(cls, points: list[tuple[float, float]], exponent_min: float = EXPONENT_MIN) -> "RateModel":
        """The model of (processes per core, fastest faithful rate) `points`: the least-squares slope
        of log rate against log processes per core (at least `exponent_min`; `exponent_min` itself
        from one point), through the smallest size, lowered until no measured point lies below it
        (the model never promises a rate faster than one measured)."""
        if not points:
            raise ValueError("a rate model needs at least one measured size")
        if any(n <= 0 or rate <= 0 for n, rate in points):
            raise ValueError(f"measured sizes and rates must be positive: {points}")
        xs = [math.log(n) for n, _ in points]
        ys = [math.log(rate) for _, rate in points]
        mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
        spread = sum((x - mean_x) ** 2 for x in xs)
        slope = -sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread if spread > 0 else 0.0
        exponent = round(max(exponent_min, slope), 3)
        smallest = min(n for n, _ in points)
        rate = min(r * (n / smallest) ** exponent for n, r in points)
        return cls(smallest, rate, exponent)

    def describe(self) -> str:
        """The model as a formula, e.g. `5.7 Mbit/s x (7 / n)^1.2 for n processes per core (above 7)`."""
        rate = f"{self.faithful_rate_bps / 1e6:.3g} Mbit/s"
        if self.exponent == 0:
            return f"{rate} at every size"
        return (f"{rate} x ({self.processes_per_core:g} / n)^{self.exponent:g} for n processes per core "
                f"({rate} at {self.processes_per_core:g} or fewer)")


@dataclass
class SizeMeasurement:
    """The fastest faithful rate measured on one topology, and every rate tried there."""

    topology: str
    processes: int                        # agents and switches of the topology
    faithful_rate_bps: int
    measurements: list = field(default_factory=list)   # one dict per rate tried
    conditions: dict = field(default_factory=dict)     # what it was measured in (experiments.conditions)


@dataclass(frozen=True)
class LinkRate:
    """A link rate that holds for every topology, and a note when it is not a calibrated one."""

    rate_bps: int
    note: Optional[str] = None

    def for_processes(self, processes: int) -> "LinkRate":
        """The rate for a topology of `processes` agents and switches: this one."""
        return self


@dataclass
class Calibration:
    """The rates links run at on one machine and target, by topology size, and the measurements
    they came from."""

    machine: Machine
    target: str
    model: RateModel                      # the fastest faithful rate by processes per core
    margin: float = MARGIN                # `auto` links run at this share of the model's rate
    date: str = ""
    sizes: list = field(default_factory=list)          # SizeMeasurement per topology measured
    note: Optional[str] = None            # what every rate taken from it must say (an old record)
    server: Optional[str] = None          # a cluster server's address (`calibrate --cluster`), None: this machine

    @classmethod
    def fixed(cls, machine: Machine, target: str, rate_bps: int, date: str = "") -> "Calibration":
        """A record whose links run at `rate_bps` whatever the topology (nothing measured)."""
        return cls(machine, target, RateModel(1.0, float(rate_bps), 0.0), 1.0, date)

    def rate_bps(self, processes: int) -> int:
        """The rate `auto` links run at in a topology of `processes` agents and switches."""
        return max(1, int(self.margin * self.model.faithful_rate(processes / self.machine.cores)))

    def for_processes(self, processes: int) -> LinkRate:
        """The link rate (with this record's note, if any) for a topology of `processes` processes."""
        return LinkRate(self.rate_bps(processes), self.note)

    def as_dict(self) -> dict:
        doc = {"machine": asdict(self.machine), "target": self.target, "margin": self.margin,
               "date": self.date, "model": asdict(self.model),
               "sizes": [asdict(s) for s in self.sizes], "note": self.note}
        return {**doc, "server": self.server} if self.server else doc

    @property
    def key(self) -> tuple:
        """What a record replaces in the file: the one of the same machine, target and server."""
        return self.machine, self.target, self.server


@dataclass(frozen=True)
class ServerRates:
    """What `auto` links run at over the servers of a cluster: each server's calibration applied to
    the processes placed on it, and the lowest of those rates (the run must be faithful on every
    server). `shares` is each server's share of the topology's nodes (summing to 1); a server
    without a record takes `fallback` and says so."""

    records: dict                         # server address -> Calibration (or a fixed LinkRate)
    shares: dict                          # server address -> share of the processes placed there

    def for_processes(self, processes: int) -> LinkRate:
        rates = {address: self.records[address].for_processes(self.processes_on(address, processes))
                 for address, share in self.shares.items() if share > 0}
        slowest = min(rates, key=lambda address: rates[address].rate_bps)
        counts = "; ".join(f"{a}: {self.processes_on(a, processes)} processes, "
                           f"{rates[a].rate_bps / 1e6:.3g} Mbit/s" for a in sorted(rates))
        notes = [f"link rates of the slowest server, {slowest} ({counts})"]
        notes += sorted({r.note for r in rates.values() if r.note})
        return LinkRate(rates[slowest].rate_bps, "; ".join(notes))

    def processes_on(self, address: str, processes: int) -> int:
        """The processes a rate of server `address` is taken for: its share of `processes` by its
        own calibration; all of them by this machine's standing in (as if the whole network ran
        here: namespace servers share this machine's CPUs, and an unmeasured server is not
        assumed faster than this one)."""
        if isinstance(self.records[address], _Noted):
            return processes
        return max(1, round(processes * self.shares[address]))


RateSource = Union[LinkRate, Calibration, ServerRates]   # what answers `for_processes`: a fixed rate, a record, servers


def calibration_file() -> Path:
    """Where calibrations are kept (see the module's docstring)."""
    override = os.environ.get(ENV_FILE)
    if override:
        return Path(override).expanduser()
    return ROOT_FILE if os.geteuid() == 0 else USER_FILE.expanduser()


def read_records(path: Optional[Path] = None) -> list[Calibration]:
    """Every record of the calibration file ([] when there is none); CalibrationError when malformed."""
    path = Path(path) if path is not None else calibration_file()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as error:
        raise CalibrationError(f"{path}: cannot read the calibration file: {error.strerror or error}") from None
    return parse_records(text, path)


def parse_records(text: str, path: Path) -> list[Calibration]:
    """Every record of a calibration file's `text` (read from `path`, which errors name)."""
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict) or not isinstance(doc.get("records"), list):
            raise ValueError("expected an object with a list 'records'")
        version = doc.get("version", 1)
        if version not in (1, FORMAT_VERSION):
            raise ValueError(f"version {version!r}; this testbed reads versions 1 and {FORMAT_VERSION}")
        reader = _record_v1 if version == 1 else _record
        return [reader(r, path) for r in doc["records"]]
    except (ValueError, TypeError, KeyError) as error:
        raise CalibrationError(f"{path}: not a calibration file ({error}); delete it or run "
                               "'mrc-testbed calibrate' to write a new one") from None


def _machine(raw: dict) -> Machine:
    return Machine(str(raw["hostname"]), str(raw["cpu_model"]), int(raw["cores"]))


def _record(raw: dict, path: Path) -> Calibration:
    model = RateModel(float(raw["model"]["processes_per_core"]), float(raw["model"]["faithful_rate_bps"]),
                      float(raw["model"]["exponent"]))
    sizes = [SizeMeasurement(str(s["topology"]), int(s["processes"]), int(s["faithful_rate_bps"]),
                             list(s.get("measurements", [])), dict(s.get("conditions", {})))
             for s in raw.get("sizes", [])]
    record = Calibration(_machine(raw["machine"]), str(raw["target"]), model, float(raw.get("margin", MARGIN)),
                         str(raw.get("date", "")), sizes, raw.get("note"), raw.get("server"))
    if model.faithful_rate_bps <= 0 or model.processes_per_core <= 0 or model.exponent < 0:
        raise ValueError(f"the model of target {record.target!r} ({model}) needs a positive rate and size "
                         "and an exponent of 0 or more")
    if not 0 < record.margin <= 1:
        raise ValueError(f"margin {record.margin:g} of target {record.target!r} is not in (0, 1]")
    return record


def _record_v1(raw: dict, path: Path) -> Calibration:
    """A version-1 record: one rate, measured on (we take it) the default topology of that time."""
    machine = _machine(raw["machine"])
    faithful, rate = int(raw["faithful_rate_bps"]), int(raw["rate_bps"])
    if rate <= 0 or faithful <= 0:
        raise ValueError(f"rate_bps {rate} of target {raw['target']!r} is not positive")
    target = str(raw["target"])
    size = SizeMeasurement(V1_TOPOLOGY, V1_PROCESSES, faithful, list(raw.get("measurements", [])),
                           dict(raw.get("conditions", {})))
    note = (f"the calibration of target {target} in {path} is of version 1 ({raw.get('date') or 'undated'}): "
            f"it measured one size ({V1_TOPOLOGY}, {V1_PROCESSES} processes, {faithful / 1e6:g} Mbit/s faithful), "
            f"other sizes are scaled as 1 / processes from it; 'mrc-testbed calibrate --target {target}' "
            "measures the sizes")
    model = RateModel(V1_PROCESSES / machine.cores, float(faithful), EXPONENT_MIN)
    return Calibration(machine, target, model, rate / faithful, str(raw.get("date", "")), [size], note)


def find(target: str, machine: Optional[Machine] = None, path: Optional[Path] = None) -> Optional[Calibration]:
    """The record of `target` on `machine` (default: this one), or None."""
    machine = machine or Machine.this()
    return next((r for r in read_records(path) if r.target == target and r.machine == machine and not r.server),
                None)


@dataclass(frozen=True)
class _Noted:
    """A rate source whose every rate also carries `note`."""

    source: object
    note: str

    def for_processes(self, processes: int) -> LinkRate:
        rate = self.source.for_processes(processes)
        return LinkRate(rate.rate_bps, "; ".join(n for n in (self.note, rate.note) if n))


def find_server(target: str, server: str, path: Optional[Path] = None) -> Optional[Calibration]:
    """The record `calibrate --cluster` made of `target` on cluster server `server` (its address), or None."""
    return next((r for r in read_records(path) if r.target == target and r.server == server), None)


def server_rates(target: str, shares: dict, fallback: "RateSource", path: Optional[Path] = None) -> "ServerRates":
    """`ServerRates` of `target` over the servers of `shares` (address -> share of the processes):
    each server's record, or `fallback` (this machine's) with a note naming the server when it has none."""
    records = {}
    for address in shares:
        record = find_server(target, address, path)
        records[address] = record if record is not None else _Noted(fallback, (
            f"server {address} has no calibration of target {target}: this machine's for the whole network stands in "
            f"('mrc-testbed calibrate --cluster FILE --target {target}' measures each server)"))
    return ServerRates(records, dict(shares))


def save(record: Calibration, path: Optional[Path] = None) -> Path:
    """Write `record` into the calibration file, replacing the one of its machine and target (the
    file is written in the current version; old records keep their note)."""
    path = Path(path) if path is not None else calibration_file()
    kept = [r for r in read_records(path) if r.key != record.key]
    if not record.date:
        record.date = time.strftime(conditions.DATE_FORMAT, time.gmtime())
    doc = {"version": FORMAT_VERSION, "records": [r.as_dict() for r in kept + [record]]}
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(path.name + ".tmp")
    scratch.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    scratch.replace(path)
    return path


def rate_source(target: str, fallback_bps: int, path: Optional[Path] = None) -> RateSource:
    """What `auto` links on `target` run at: the calibration of this machine, else `fallback_bps`
    for every topology, with a note."""
    record = find(target, path=path)
    if record is not None:
        return record
    return LinkRate(fallback_bps, f"link rates at the fixed fallback of {fallback_bps / 1e6:g} Mbit/s: "
                                  f"no calibration of target {target} for this machine in "
                                  f"{Path(path) if path is not None else calibration_file()} "
                                  f"('mrc-testbed calibrate --target {target}' measures it)")


def link_rate(target: str, fallback_bps: int, processes: int, path: Optional[Path] = None) -> LinkRate:
    """The rate of `auto` links on `target` in a topology of `processes` agents and switches."""
    return rate_source(target, fallback_bps, path).for_processes(processes)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"
