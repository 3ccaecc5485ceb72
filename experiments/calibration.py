"""The calibration record: the link rate this machine's switches and agents sustain faithfully, per
machine and switch target, and the file that keeps it.

`mrc-testbed calibrate` (experiments/rate_search.py) measures it; a scenario whose link rate is
`auto` runs at it on the Mininet backend (`link_rate`). The file is JSON::

    {"version": 1, "records": [{"machine": {"hostname": ..., "cpu_model": ..., "cores": 2},
                                "target": "model", "rate_bps": 32000000, "faithful_rate_bps": 40000000,
                                "margin": 0.8, "date": "2026-12-03 14:10:00 UTC",
                                "measurements": [{...}, ...],
                                "conditions": {"load_1min_start": 0.4, "load_1min_end": 2.1}}, ...]}

Where it lives: $MRC_CALIBRATION_FILE, else /var/lib/mrc-testbed/calibration.json for root, else
~/.cache/mrc-testbed/calibration.json.
"""
from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

ENV_FILE = "MRC_CALIBRATION_FILE"
ROOT_FILE = Path("/var/lib/mrc-testbed/calibration.json")
USER_FILE = Path("~/.cache/mrc-testbed/calibration.json")
FORMAT_VERSION = 1
MARGIN = 0.8                     # a record keeps this share of the fastest faithful rate measured


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


@dataclass
class Calibration:
    """The rate links run at on one machine and target, and the measurements it came from."""

    machine: Machine
    target: str
    rate_bps: int                         # what `auto` links run at: faithful_rate_bps x margin
    faithful_rate_bps: int                # the fastest rate measured faithful
    margin: float = MARGIN
    date: str = ""
    measurements: list = field(default_factory=list)   # one dict per rate tried
    conditions: dict = field(default_factory=dict)     # the machine's load while it was measured

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LinkRate:
    """The rate `auto` links run at on a target, and a note when it is not a calibrated one."""

    rate_bps: int
    note: Optional[str] = None


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
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict) or not isinstance(doc.get("records"), list):
            raise ValueError("expected an object with a list 'records'")
        return [_record(r) for r in doc["records"]]
    except (ValueError, TypeError, KeyError) as error:
        raise CalibrationError(f"{path}: not a calibration file ({error}); delete it or run "
                               "'mrc-testbed calibrate' to write a new one") from None


def _record(raw: dict) -> Calibration:
    machine = Machine(str(raw["machine"]["hostname"]), str(raw["machine"]["cpu_model"]),
                      int(raw["machine"]["cores"]))
    record = Calibration(machine, str(raw["target"]), int(raw["rate_bps"]), int(raw["faithful_rate_bps"]),
                         float(raw.get("margin", MARGIN)), str(raw.get("date", "")),
                         list(raw.get("measurements", [])), dict(raw.get("conditions", {})))
    if record.rate_bps <= 0:
        raise ValueError(f"rate_bps {record.rate_bps} of target {record.target!r} is not positive")
    return record


def find(target: str, machine: Optional[Machine] = None, path: Optional[Path] = None) -> Optional[Calibration]:
    """The record of `target` on `machine` (default: this one), or None."""
    machine = machine or Machine.this()
    return next((r for r in read_records(path) if r.target == target and r.machine == machine), None)


def save(record: Calibration, path: Optional[Path] = None) -> Path:
    """Write `record` into the calibration file, replacing the one of its machine and target."""
    path = Path(path) if path is not None else calibration_file()
    kept = [r for r in read_records(path) if (r.machine, r.target) != (record.machine, record.target)]
    if not record.date:
        record.date = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    doc = {"version": FORMAT_VERSION, "records": [r.as_dict() for r in kept + [record]]}
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(path.name + ".tmp")
    scratch.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    scratch.replace(path)
    return path


def link_rate(target: str, fallback_bps: int, path: Optional[Path] = None) -> LinkRate:
    """The rate of `auto` links on `target`: the calibrated one, else `fallback_bps` with a note."""
    record = find(target, path=path)
    if record is not None:
        return LinkRate(record.rate_bps)
    return LinkRate(fallback_bps, f"link rates at the fixed fallback of {fallback_bps / 1e6:g} Mbit/s: "
                                  f"no calibration of target {target} for this machine in "
                                  f"{Path(path) if path is not None else calibration_file()} "
                                  f"('mrc-testbed calibrate --target {target}' measures it)")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"
