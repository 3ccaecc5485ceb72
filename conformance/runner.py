"""Run conformance cases on targets and check what comes out against each case's expectations.

Expectation keys (`expect:` of a case):
- `packets`: the exact list of packets out, each `{port, priority: high|low, length, fields: {Layer.field: v},
  as_input: {Layer.field: v}, input: i, bytes: hex, consistent: true}`; compared port by port in order.
  `bytes` is the whole frame in hex (the differential search writes its cases so). `as_input`
  means: byte for byte the i-th sent frame (default: the entry's position) with those fields set.
  `consistent` runs Scapy over the frame and checks its length fields and MRC headers.
- `none: true`: nothing comes out.
- `same_port: [ports]`: every sent packet comes out, all on one port of the list.
- `spread: {ports: [...], min_each: n}`: outputs only on these ports, at least n on each.
- `delivered: [lo, hi]`: how many packets come out.
- `ecmp_hash: {group_ports: [...]}`: each packet leaves on group_ports[crc16 index] of the documented hash.
- `counters: {name: {port: packets | [packets, bytes]}}`: counter cells after the run.
Packets sent by `preload` (the standing queue) are left out of every check but counters. Where a
target cannot label egress priorities, a packet of the held port that overtakes the standing fillers
counts as high priority, one that leaves after all of them as low.
"""
from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Optional

from scapy.layers.inet6 import IPv6
from scapy.layers.inet import UDP

from wire import constants
from conformance.case import ConformanceCase
from conformance.packets import (dissect, field_value, is_filler, same_value,
                                           scapy_consistency)
from pipeline_contract.ecmp import ecmp_index

PRIORITY_NAMES = {"low": constants.PRIORITY_LOW, "high": constants.PRIORITY_HIGH}


@dataclass(frozen=True)
class Output:
    """One frame a target sent out: port, bytes, and the egress priority when the target shows it."""

    port: int
    frame: bytes
    priority: Optional[int] = None
    inferred: bool = False      # the priority was inferred from overtaking (infer_priorities), not reported


@dataclass
class CaseResult:
    """The outcome of one case on one target."""

    case: str
    target: str
    status: str                 # "pass", "fail", "skip", "error"
    message: str = ""
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        """True when the case passed."""
        return self.status == "pass"


@dataclass
class CaseRun:
    """A case run on a target: its result, and what went in and came out (fillers left out)."""

    result: CaseResult
    inputs: list[tuple[int, bytes]]
    outputs: list[Output]
    counters: dict[str, dict[int, tuple[int, int]]]


def run_case(case: ConformanceCase, target) -> CaseResult:
    """Program a fresh switch, send the case's packets, and check the outputs and counters."""
    return execute_case(case, target).result


def execute_case(case: ConformanceCase, target) -> CaseRun:
    """run_case, keeping the frames sent and received and the counters read."""
    start = time.monotonic()
    inputs: list[tuple[int, bytes]] = []
    try:
        hold_port = int(case.preload["port"]) if case.preload else None
        target.reset(case.seed, case.queues, hold_port)
        target.install(case.entries)
        fillers = case.filler_frames()
        inputs = case.inputs()           # built before the preload: a held queue drains meanwhile
        if fillers:
            target.preload(int(case.preload["port"]), int(case.preload.get("in_port", 1)), fillers)
        for port, frame in inputs:
            target.send(port, frame)
        expected = case.expected_outputs()
        outputs = target.finish(None if expected is None else expected + len(fillers))
        counter_names = sorted((case.expect.get("counters") or {}).keys())
        counters = target.read_counters(counter_names) if counter_names else {}
        for name, cells in target.counter_offsets().items():     # packets and bytes only the target added
            for port, (packets, octets) in cells.items():
                if name in counters and port in counters[name]:
                    p, b = counters[name][port]
                    counters[name][port] = (p - packets, b - octets)
    except Exception as exc:  # a target failure is reported per case, the run goes on
        return CaseRun(CaseResult(case.name, target.name, "error", f"{type(exc).__name__}: {exc}",
                                  time.monotonic() - start), inputs, [], {})
    if fillers:
        outputs = infer_priorities(outputs, int(case.preload["port"]))
    outputs = [o for o in outputs if not is_filler(o.frame)]
    failures = check(case, inputs, outputs, counters)
    status = "fail" if failures else "pass"
    return CaseRun(CaseResult(case.name, target.name, status, "; ".join(failures), time.monotonic() - start),
                   inputs, outputs, counters)


def infer_priorities(outputs: list[Output], held_port: int) -> list[Output]:
    """Give a priority to outputs of the held port that a target did not label: strict priority sends a
    high-priority packet ahead of the standing low-priority fillers, a low-priority one after all of them."""
    held = [i for i, o in enumerate(outputs) if o.port == held_port and is_filler(o.frame)]
    if not held:
        return outputs
    last_filler = held[-1]
    out = []
    for i, o in enumerate(outputs):
        if o.priority is None and o.port == held_port and not is_filler(o.frame):
            o = Output(o.port, o.frame, constants.PRIORITY_HIGH if i < last_filler else constants.PRIORITY_LOW,
                       inferred=True)
        out.append(o)
    return out


def check(case: ConformanceCase, inputs: list[tuple[int, bytes]], outputs: list[Output],
          counters: dict[str, dict[int, tuple[int, int]]]) -> list[str]:
    """Every way the outputs and counters differ from the case's expectations."""
    exp = case.expect
    failures: list[str] = []
    if "packets" in exp:
        failures += _check_packets(exp["packets"], inputs, outputs)
    if exp.get("none") and outputs:
        failures.append(f"expected no packet out, got {_ports(outputs)}")
    if "same_port" in exp:
        ports = {o.port for o in outputs}
        if len(outputs) != len(inputs):
            failures.append(f"same_port: {len(outputs)} of {len(inputs)} packets came out")
        if len(ports) > 1 or not ports <= set(exp["same_port"]):
            failures.append(f"same_port: packets left on ports {sorted(ports)} (allowed one of {exp['same_port']})")
    if "spread" in exp:
        per_port = _count_by_port(outputs)
        allowed = set(exp["spread"]["ports"])
        if set(per_port) - allowed:
            failures.append(f"spread: packets on unexpected ports {sorted(set(per_port) - allowed)}")
        short = {p: per_port.get(p, 0) for p in allowed if per_port.get(p, 0) < exp["spread"]["min_each"]}
        if short:
            failures.append(f"spread: ports below {exp['spread']['min_each']} packets: {short} (all: {dict(per_port)})")
    if "delivered" in exp:
        lo, hi = exp["delivered"]
        if not lo <= len(outputs) <= hi:
            failures.append(f"delivered {len(outputs)} packets, expected {lo}..{hi}")
    if "ecmp_hash" in exp:
        failures += _check_ecmp_hash(exp["ecmp_hash"]["group_ports"], inputs, outputs)
    for name, cells in (exp.get("counters") or {}).items():
        got = counters.get(name, {})
        for port, want in cells.items():
            packets, octets = got.get(int(port), (0, 0))
            if isinstance(want, list):
                if (packets, octets) != (want[0], want[1]):
                    failures.append(f"counter {name}[{port}] = ({packets}, {octets}), expected {tuple(want)}")
            elif packets != want:
                failures.append(f"counter {name}[{port}] = {packets} packets, expected {want}")
    return failures


def _ports(outputs: list[Output]) -> dict[int, int]:
    return dict(_count_by_port(outputs))


def _count_by_port(outputs: list[Output]) -> dict[int, int]:
    counts: dict[int, int] = defaultdict(int)
    for o in outputs:
        counts[o.port] += 1
    return counts


def _check_packets(expected: list[dict], inputs: list[tuple[int, bytes]], outputs: list[Output]) -> list[str]:
    failures = []
    want_by_port: dict[int, list[tuple[int, dict]]] = defaultdict(list)
    for i, e in enumerate(expected):
        want_by_port[int(e["port"])].append((i, e))
    got_by_port: dict[int, list[Output]] = defaultdict(list)
    for o in outputs:
        got_by_port[o.port].append(o)
    for port in sorted(set(want_by_port) | set(got_by_port)):
        want, got = want_by_port.get(port, []), got_by_port.get(port, [])
        if len(want) != len(got):
            failures.append(f"port {port}: {len(got)} packets out, expected {len(want)}")
            continue
        for (i, e), o in zip(want, got):
            failures += [f"packet {i} on port {port}: {m}" for m in _check_one(e, i, inputs, o)]
    return failures


def _check_one(e: dict, i: int, inputs: list[tuple[int, bytes]], o: Output) -> list[str]:
    problems = []
    if "priority" in e and o.priority is not None and o.priority != PRIORITY_NAMES[e["priority"]]:
        problems.append(f"priority {o.priority}, expected {e['priority']}")
    if "length" in e and len(o.frame) != int(e["length"]):
        problems.append(f"length {len(o.frame)}, expected {e['length']}")
    for name, want in (e.get("fields") or {}).items():
        got = field_value(o.frame, name)
        if not same_value(got, want):
            problems.append(f"{name} = {got!r}, expected {want!r}")
    if "as_input" in e:
        index = int(e.get("input", i))
        want_frame = _with_fields(inputs[index][1], e["as_input"] or {})
        if o.frame != want_frame:
            problems.append(f"bytes differ from input {index} with {e['as_input']}: "
                            f"first difference at byte {_first_difference(o.frame, want_frame)}")
    if "bytes" in e and o.frame != bytes.fromhex(e["bytes"]):
        from conformance.frame_diff import field_diff
        problems.append("bytes differ: " + ", ".join(field_diff(bytes.fromhex(e["bytes"]), o.frame)[:4]))
    if e.get("consistent"):
        problems += scapy_consistency(o.frame)
    return problems


def expected_frame(e: dict, i: int, inputs: list[tuple[int, bytes]]) -> Optional[bytes]:
    """The exact frame a `bytes` or `as_input` expectation (the i-th of the case) wants, else None."""
    if "bytes" in e:
        return bytes.fromhex(e["bytes"])
    if "as_input" not in e:
        return None
    return _with_fields(inputs[int(e.get("input", i))][1], e["as_input"] or {})


def _with_fields(frame: bytes, fields: dict) -> bytes:
    pkt = dissect(frame)
    for name, value in fields.items():
        layer_name, _, field = name.partition(".")
        pkt.getlayer(layer_name).setfieldval(field, value)
    return bytes(pkt)


def _first_difference(a: bytes, b: bytes) -> int:
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return k
    return min(len(a), len(b))


def _check_ecmp_hash(group_ports: list[int], inputs: list[tuple[int, bytes]], outputs: list[Output]) -> list[str]:
    want: dict[int, int] = {}
    for _, frame in inputs:
        pkt = dissect(frame)
        ip, udp = pkt[IPv6], pkt[UDP]
        index = ecmp_index(frame[22:38], frame[38:54], ip.nh, udp.sport, udp.dport, len(group_ports))
        want[udp.sport] = group_ports[index]
    failures = []
    seen = set()
    for o in outputs:
        sport = int.from_bytes(o.frame[constants.UDP_OFFSET:constants.UDP_OFFSET + 2], "big")
        seen.add(sport)
        if want.get(sport) != o.port:
            failures.append(f"flow sport {sport} left on port {o.port}, the documented hash says {want.get(sport)}")
    missing = set(want) - seen
    if missing:
        failures.append(f"{len(missing)} flows never came out")
    return failures[:5]


def run_cases(cases: list[ConformanceCase], target) -> list[CaseResult]:
    """Run every case on one target (started and stopped here); skip them all when it is unavailable."""
    reason = target.unavailable()
    if reason:
        return [CaseResult(c.name, target.name, "skip", reason) for c in cases]
    target.start()
    try:
        return [run_case(c, target) for c in cases]
    finally:
        target.stop()
