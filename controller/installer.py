"""Install a SwitchProgram on one switch at boot, then read it back and verify it.

Routing is static: this runs once per switch when the network comes up (the emulated converging
control plane in controller/convergence.py is the only thing that writes afterwards).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from p4.config.v1 import p4info_pb2

from controller.entries import SwitchProgram
from pipeline_contract.entries import TableEntry
from pipeline_contract.client import P4RuntimeClient
from pipeline_contract.p4info import DEFAULT_P4INFO_PATH, REPO_ROOT, load_p4info

DEFAULT_BMV2_JSON = REPO_ROOT / "p4" / "build" / "mrc.json"


@dataclass
class CompiledProgram:
    """The P4 program given to every switch: its P4Info and the target's device config."""

    p4info: p4info_pb2.P4Info
    device_config: bytes = b""

    @classmethod
    def load(cls, p4info_path: str | Path = DEFAULT_P4INFO_PATH,
             device_config_path: str | Path | None = DEFAULT_BMV2_JSON) -> "CompiledProgram":
        """Read the P4Info and, when the file exists, the device config (BMv2 JSON)."""
        config = b""
        if device_config_path is not None and Path(device_config_path).exists():
            config = Path(device_config_path).read_bytes()
        return cls(load_p4info(p4info_path), config)


@dataclass
class VerifyReport:
    """Differences between what was installed and what the switch reports back."""

    switch: str
    installed: int = 0
    missing: list[TableEntry] = field(default_factory=list)      # sent, not read back
    unexpected: list[TableEntry] = field(default_factory=list)   # read back, never sent
    changed: list[tuple[TableEntry, TableEntry]] = field(default_factory=list)  # (sent, read)

    @property
    def ok(self) -> bool:
        """True when the switch holds exactly the entries that were installed."""
        return not (self.missing or self.unexpected or self.changed)

    def describe(self, limit: int = 10) -> str:
        """One line per difference (at most `limit` of each kind), or a one-line success."""
        if self.ok:
            return f"{self.switch}: {self.installed} entries installed and verified"
        lines = [f"{self.switch}: {len(self.missing)} missing, {len(self.unexpected)} unexpected, "
                 f"{len(self.changed)} changed of {self.installed} entries"]
        lines += [f"  missing    {_show(e)}" for e in self.missing[:limit]]
        lines += [f"  unexpected {_show(e)}" for e in self.unexpected[:limit]]
        lines += [f"  changed    {_show(s)}\n        now {_show(r)}" for s, r in self.changed[:limit]]
        return "\n".join(lines)


class InstallError(RuntimeError):
    """A switch does not hold the program it was given; the message lists the differences."""

    def __init__(self, report: VerifyReport):
        super().__init__(report.describe())
        self.report = report


def _show(entry: TableEntry) -> str:
    match = ", ".join(f"{k}={_hex(v)}" for k, v in sorted(entry.match.items()))
    params = ", ".join(f"{k}={v}" for k, v in sorted(entry.params.items()))
    return f"{entry.table}[{match}] -> {entry.action}({params})"


def _hex(value) -> str:
    if isinstance(value, tuple):
        return f"{value[0]:#x}/{value[1]}"
    return f"{value:#x}" if value > 9 else str(value)


def compare(switch: str, sent: list[TableEntry], read_back: list[TableEntry]) -> VerifyReport:
    """Entry-by-entry comparison of the installed and the read-back entries."""
    report = VerifyReport(switch=switch, installed=len(sent))
    got = {e.key(): e for e in read_back}
    for entry in sent:
        other = got.pop(entry.key(), None)
        if other is None:
            report.missing.append(entry)
        elif (other.action, other.params) != (entry.action, entry.params):
            report.changed.append((entry, other))
    report.unexpected.extend(got.values())
    return report


def verify(client: P4RuntimeClient, program: SwitchProgram) -> VerifyReport:
    """Read back every table of the P4Info and compare it with the program (so an entry the
    program does not have, in any table, is reported as unexpected)."""
    tables = sorted(set(client.index.tables) if client.index else {e.table for e in program.entries})
    read_back = [e for table in tables for e in client.read_table(table)]
    return compare(program.switch, program.entries, read_back)


def install(client: P4RuntimeClient, program: SwitchProgram, pipeline: CompiledProgram) -> VerifyReport:
    """Set the pipeline, write every entry, read them back; raise InstallError on any difference."""
    client.set_pipeline(pipeline.p4info, pipeline.device_config)
    client.insert(program.entries)
    report = verify(client, program)
    if not report.ok:
        raise InstallError(report)
    return report
