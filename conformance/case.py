"""Conformance cases as data: loading and checking the YAML files of conformance/cases/.

A case file holds `common:` (entries shared by its cases) and `cases:`, a list of cases:

    - name: trim_at_threshold
      about: T-1 queued -> not trimmed, T queued -> trimmed
      entries: [{table: MrcIngress.routing, match: {dst_addr: "fc00:1:1001::/48"},
                 action: MrcIngress.forward, params: {port: 2}}]
      preload: {port: 2, count: 3, in_port: 1, packet: {...}}   # low-priority packets already queued
      send: [{port: 1, packet: {...}, count: 2, vary_ev: false}]
      expect:
        packets: [{port: 2, priority: low, fields: {MRCH.flags: 0}}, ...]
        counters: {MrcIngress.trimmed: {2: 1}}

The expectation keys are listed in conformance/runner.py; packet specs in packets.py.
"""
from __future__ import annotations

import copy
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml

from wire import constants
from pipeline_contract.entries import TableEntry
from conformance.packets import FILLER_MSG_ID, build

CASES_DIR = Path(__file__).resolve().parent / "cases"

EXPECT_KEYS = {"packets", "none", "same_port", "spread", "delivered", "ecmp_hash", "counters"}
CASE_KEYS = {"name", "about", "entries", "preload", "send", "expect", "seed", "queues"}


class CaseError(ValueError):
    """A case file is wrong; the message names the file and the case."""


@dataclass
class SendGroup:
    """`count` packets built from one spec, entering on `port`."""

    port: int
    spec: dict[str, Any]
    count: int = 1
    vary_ev: bool = False        # packet i gets EV spec.ev + i * ev_step (a different flow each)
    ev_step: int = 1

    def frames(self) -> list[bytes]:
        """The frames of this group, in sending order."""
        out = []
        for i in range(self.count):
            spec = self.spec
            if self.vary_ev:
                spec = dict(spec, ev=(int(spec.get("ev", 0)) + i * self.ev_step) & 0xFFFFFFFF)
            out.append(build(spec, seq=i))
        return out


@dataclass
class ConformanceCase:
    """One conformance case."""

    name: str
    about: str
    source: str
    entries: list[TableEntry]
    send: list[SendGroup]
    expect: dict[str, Any]
    preload: Optional[dict[str, Any]] = None
    queues: list[dict[str, int]] = field(default_factory=list)
    seed: int = 1
    _built: dict = field(default_factory=dict, repr=False, compare=False)   # frames, built on first use

    def inputs(self) -> list[tuple[int, bytes]]:
        """Every (in port, frame) the case sends after the preload, in order (built once)."""
        if "inputs" not in self._built:
            self._built["inputs"] = [(g.port, f) for g in self.send for f in g.frames()]
        return list(self._built["inputs"])

    def filler_frames(self) -> list[bytes]:
        """The frames that build the standing queue of `preload` (built once)."""
        if not self.preload:
            return []
        if "fillers" not in self._built:
            spec = dict(self.preload["packet"], dscp=constants.DSCP_NO_TRIM, ecn=constants.ECN_NOT_ECT,
                        msg_id=FILLER_MSG_ID)
            self._built["fillers"] = [build(spec, seq=i) for i in range(int(self.preload["count"]))]
        return list(self._built["fillers"])

    def expected_outputs(self) -> Optional[int]:
        """How many non-filler packets should come out, when the case says exactly."""
        if "packets" in self.expect:
            return len(self.expect["packets"])
        if self.expect.get("none"):
            return 0
        return None


def parse_match_value(value: Any) -> Any:
    """An entry's match value: int, "addr/len" (LPM), or an IPv6 address (its 128-bit value)."""
    if isinstance(value, str):
        if "/" in value:
            net = ipaddress.IPv6Network(value, strict=True)
            return (int(net.network_address), net.prefixlen)
        return int(ipaddress.IPv6Address(value))
    if isinstance(value, list) and len(value) == 2:
        return (int(value[0]), int(value[1]))
    return int(value)


def parse_entry(data: dict[str, Any], where: str) -> TableEntry:
    """A TableEntry from its case-file form."""
    try:
        return TableEntry(table=data["table"],
                          match={k: parse_match_value(v) for k, v in data.get("match", {}).items()},
                          action=data["action"],
                          params={k: int(v) for k, v in (data.get("params") or {}).items()})
    except (KeyError, ValueError, TypeError) as exc:
        raise CaseError(f"{where}: bad entry {data!r}: {exc}") from None


def parse_case(data: dict[str, Any], common: dict[str, Any], source: str) -> ConformanceCase:
    """One case from its dict form, with the file's common entries first."""
    name = data.get("name")
    where = f"{source}: case {name!r}"
    if not name:
        raise CaseError(f"{source}: a case has no name")
    unknown = set(data) - CASE_KEYS
    if unknown:
        raise CaseError(f"{where}: unknown keys {sorted(unknown)}")
    expect = data.get("expect") or {}
    unknown = set(expect) - EXPECT_KEYS
    if unknown:
        raise CaseError(f"{where}: unknown expect keys {sorted(unknown)}")
    delivered = expect.get("delivered", [0, 0])
    if not (isinstance(delivered, list) and len(delivered) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) for n in delivered)):
        raise CaseError(f"{where}: expect.delivered must be [lo, hi] (packets out), not {delivered!r}")
    entries = [parse_entry(e, where) for e in (common.get("entries") or []) + (data.get("entries") or [])]
    send = [SendGroup(port=int(g["port"]), spec=g["packet"], count=int(g.get("count", 1)),
                      vary_ev=bool(g.get("vary_ev", False)), ev_step=int(g.get("ev_step", 1)))
            for g in data.get("send") or []]
    if not send:
        raise CaseError(f"{where}: nothing to send")
    return ConformanceCase(name=name, about=data.get("about", ""), source=source, entries=entries, send=send,
                expect=copy.deepcopy(expect), preload=data.get("preload"), queues=data.get("queues") or [],
                seed=int(data.get("seed", 1)))


def load_file(path: Path) -> list[ConformanceCase]:
    """The cases of one YAML file."""
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise CaseError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(doc, dict) or "cases" not in doc:
        raise CaseError(f"{path}: expected a mapping with a 'cases' list")
    common = doc.get("common") or {}
    return [parse_case(c, common, path.name) for c in doc["cases"]]


def load_cases(directory: Path = CASES_DIR, select: Optional[str] = None) -> list[ConformanceCase]:
    """Every case of every *.yaml file in `directory`; with `select`, those whose name contains it."""
    cases = [c for path in sorted(directory.glob("*.yaml")) for c in load_file(path)]
    names = [c.name for c in cases]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise CaseError(f"{directory}: duplicate case names {sorted(dupes)}")
    if select:
        cases = [c for c in cases if select in c.name]
    return cases
