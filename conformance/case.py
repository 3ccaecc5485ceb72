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

The models below (`CaseKeys` and its parts) describe a case file once; an error names the file, the
case and the key (`trim.yaml: case 'x': expect.delivered: ...`). What each expectation means is in
conformance/runner.py; packet specs in packets.py.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import Field, PlainValidator

from wire import constants
from wire.schema import Schema, SchemaError, UnreadableDocument, check, invalid, read_document
from pipeline_contract.entries import TableEntry
from conformance.packets import FILLER_MSG_ID, build

CASES_DIR = Path(__file__).resolve().parent / "cases"


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


def _match_value(value: Any) -> Any:
    try:
        return parse_match_value(value)
    except (ValueError, TypeError) as exc:
        raise invalid(f"{value!r} is not a match value (an integer, [value, mask or length], an IPv6 "
                      f"address or prefix): {exc}") from None


# --- the file, described once --------------------------------------------------------------------
MatchValue = Annotated[Any, PlainValidator(_match_value)]


class EntryKeys(Schema):
    """A table entry as a case file writes it."""

    table: str
    match: dict[str, MatchValue] = Field(default_factory=dict)
    action: str
    params: dict[str, int] = Field(default_factory=dict)

    def entry(self) -> TableEntry:
        return TableEntry(table=self.table, match=dict(self.match), action=self.action, params=dict(self.params))


class SendKeys(Schema):
    """`count` packets built from one spec (packets.py), entering on `port`."""

    port: int = Field(ge=0)
    packet: dict[str, Any]
    count: int = Field(1, ge=1)
    vary_ev: bool = False
    ev_step: int = 1

    def group(self) -> SendGroup:
        return SendGroup(port=self.port, spec=self.packet, count=self.count, vary_ev=self.vary_ev,
                         ev_step=self.ev_step)


class PreloadKeys(Schema):
    """Low-priority packets already queued at `port` (its queue paused) before the case sends."""

    port: int = Field(ge=0)
    count: int = Field(ge=1)
    in_port: int = Field(1, ge=0)
    packet: dict[str, Any]


class QueueKeys(Schema):
    """One egress queue's settings for the case."""

    port: int = Field(ge=0)
    depth: Optional[int] = Field(None, ge=1)
    rate_bps: Optional[int] = Field(None, ge=0)
    rate_pps: Optional[int] = Field(None, ge=0)


class SpreadKeys(Schema):
    ports: list[int] = Field(min_length=1)
    min_each: int = Field(ge=0)


class EcmpHashKeys(Schema):
    group_ports: list[int] = Field(min_length=1)


def _delivered(value: Any) -> list[int]:
    if not (isinstance(value, list) and len(value) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) for n in value)):
        raise invalid(f"must be [lo, hi] (packets out), not {value!r}")
    return value


def _hex_frame(value: Any) -> str:
    if not isinstance(value, str):
        raise invalid(f"expected the frame as a hex string, got {type(value).__name__}")
    try:
        bytes.fromhex(value)
    except ValueError:
        raise invalid(f"{value[:40]!r} is not a hex string of whole bytes") from None
    return value


class ExpectedPacketKeys(Schema):
    """One packet the switch must send (conformance/runner.py `_check_one` checks each key)."""

    port: int = Field(ge=0, description="the port it leaves on")
    priority: Optional[Literal["low", "high"]] = Field(None, description="the egress queue it leaves from")
    length: Optional[int] = Field(None, ge=0, description="its length in bytes")
    fields: Optional[dict[str, Any]] = Field(None, description="header fields it must carry (e.g. MRCH.flags)")
    as_input: Optional[dict[str, Any]] = Field(None, description="the input packet with these fields changed")
    input: Optional[int] = Field(None, ge=0, description="as_input: which input packet (default: its own index)")
    bytes: Optional[Annotated[str, PlainValidator(_hex_frame)]] = Field(None, description="the exact frame, in hex")
    consistent: Optional[bool] = Field(None, description="Scapy finds its lengths and checksums consistent")


class ExpectKeys(Schema):
    """What the switch must do with the case's packets (conformance/runner.py checks each key)."""

    packets: Optional[list[ExpectedPacketKeys]] = Field(None, description="each packet out, in order per port")
    none: Optional[bool] = Field(None, description="no packet comes out")
    same_port: Optional[list[int]] = Field(None, description="every packet leaves on one of these ports")
    spread: Optional[SpreadKeys] = None
    delivered: Optional[Annotated[list[int], PlainValidator(_delivered)]] = None
    ecmp_hash: Optional[EcmpHashKeys] = None
    counters: Optional[dict[str, dict[int, Union[int, list[int]]]]] = Field(
        None, description="counter name -> {index: packets, or [packets, bytes]}")


class CaseKeys(Schema):
    """One case as a case file writes it."""

    name: str = Field(min_length=1)
    about: str = ""
    entries: list[EntryKeys] = Field(default_factory=list)
    preload: Optional[PreloadKeys] = None
    send: list[SendKeys] = Field(min_length=1, description="what enters the switch")
    expect: ExpectKeys = ExpectKeys()
    seed: int = 1
    queues: list[QueueKeys] = Field(default_factory=list)


class CommonKeys(Schema):
    """What every case of a file shares."""

    entries: list[EntryKeys] = Field(default_factory=list)


class CaseFileKeys(Schema):
    """A case file: shared entries and the cases (each checked on its own, as `CaseKeys`)."""

    common: Optional[CommonKeys] = None
    cases: list[Any] = Field(min_length=1)


def parse_case(data: Any, common: Any, source: str) -> ConformanceCase:
    """One case from its dict form, with the file's common entries first."""
    name = data.get("name") if isinstance(data, dict) else None
    where = f"{source}: case {name!r}" if isinstance(name, str) and name else f"{source}: a case"
    try:
        shared = check(CommonKeys, common or {})
    except SchemaError as error:
        raise CaseError(f"{source}: common.{error}") from None
    try:
        case = check(CaseKeys, data)
    except SchemaError as error:
        raise CaseError(f"{where}: {error}") from None
    return ConformanceCase(name=case.name, about=case.about, source=source,
                           entries=[e.entry() for e in shared.entries + case.entries],
                           send=[g.group() for g in case.send], expect=case.expect.model_dump(exclude_none=True),
                           preload=case.preload.model_dump() if case.preload else None,
                           queues=[q.model_dump(exclude_none=True) for q in case.queues], seed=case.seed)


def load_file(path: Path) -> list[ConformanceCase]:
    """The cases of one YAML file."""
    try:
        doc = read_document(path)
    except UnreadableDocument as error:
        raise CaseError(str(error)) from None
    if not isinstance(doc, dict):
        raise CaseError(f"{path}: expected a mapping with a 'cases' list")
    try:
        keys = check(CaseFileKeys, doc)
    except SchemaError as error:
        raise CaseError(f"{path}: {error}") from None
    return [parse_case(c, doc.get("common"), path.name) for c in keys.cases]


def load_cases(directory: Path = CASES_DIR, select: Optional[str] = None) -> list[ConformanceCase]:
    """Every case of every *.yaml file in `directory`; with `select`, those whose name contains it."""
    if not directory.is_dir():
        raise CaseError(f"{directory}: not a folder of case files")
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise CaseError(f"{directory}: no case files (*.yaml) in it")
    cases = [c for path in files for c in load_file(path)]
    names = [c.name for c in cases]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise CaseError(f"{directory}: duplicate case names {sorted(dupes)}")
    if select:
        cases = [c for c in cases if select in c.name]
    return cases
