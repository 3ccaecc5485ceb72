"""Why a case failed on BMv2: the case run again with trace logging, told per packet, then the
expected and actual packets compared field by field.

`explain_case(case, target)` reruns one case on a Bmv2Target with its trace log on and returns the
report; `format_explanation` builds the report from a run and the parsed log (no switch needed).
"""
from __future__ import annotations

import json
from collections import defaultdict
from typing import Optional

from conformance.bmv2_log import PacketTrace, action_priorities, format_trace, read_log
from conformance.case import ConformanceCase
from conformance.frame_diff import describe, field_diff
from conformance.packets import field_value, is_filler, same_value
from conformance.runner import PRIORITY_NAMES, CaseRun, Output, execute_case, expected_frame


def explain_case(case: ConformanceCase, target) -> str:
    """Run `case` on `target` (a started Bmv2Target) with BMv2's trace log and explain the outcome."""
    target.trace = True
    try:
        run = execute_case(case, target)
        traces = read_log(target.trace_path())
    finally:
        target.trace = False
    priorities = action_priorities(json.loads(target.bmv2_json.read_text()))
    return format_explanation(case, run, traces, priorities)


def label(trace: PacketTrace, inputs: list[tuple[int, bytes]]) -> str:
    """Which frame of the case a traced packet was: "input i", "filler", or "not sent by the case"."""
    frame = trace.received
    if frame and is_filler(frame):
        return "filler"
    for i, (port, sent) in enumerate(inputs):
        if port == trace.in_port and frame and sent.startswith(frame):
            return f"input {i}"
    return "not sent by the case"


def format_explanation(case: ConformanceCase, run: CaseRun, traces: list[PacketTrace],
                       priorities: Optional[dict[str, int]] = None) -> str:
    """The report: the result, each input's trace (fillers counted, not shown), the comparison."""
    r = run.result
    lines = [f"== {case.name} on {r.target}: {r.status.upper()}" + (f": {r.message}" if r.message else ""),
             f"   {case.about}".rstrip()]
    fillers = 0
    for trace in traces:
        name = label(trace, run.inputs)
        if name == "filler":
            fillers += 1
            continue
        lines.append(format_trace(trace, name, priorities))
    if fillers:
        lines.append(f"({fillers} filler packets built the standing queue; their traces are left out)")
    lines.append("-- expected and actual packets")
    lines += compare_packets(case, run.inputs, run.outputs)
    return "\n".join(lines)


def compare_packets(case: ConformanceCase, inputs: list[tuple[int, bytes]], outputs: list[Output]) -> list[str]:
    """Per port, expected packets beside the packets that came out, differences field by field."""
    expected = case.expect.get("packets")
    got: dict[int, list[Output]] = defaultdict(list)
    for o in outputs:
        got[o.port].append(o)
    if expected is None:
        return [f"port {port}: {describe(o.frame)}" for port in sorted(got) for o in got[port]] or ["no packet out"]
    want: dict[int, list[tuple[int, dict]]] = defaultdict(list)
    for i, e in enumerate(expected):
        want[int(e["port"])].append((i, e))
    lines = []
    for port in sorted(set(want) | set(got)):
        w, g = want.get(port, []), got.get(port, [])
        if len(w) != len(g):
            lines.append(f"port {port}: expected {len(w)} packets, got {len(g)}")
            lines += [f"  got: {describe(o.frame)}" for o in g]
            continue
        for (i, e), o in zip(w, g):
            lines.append(f"packet {i} on port {port}: {describe(o.frame)}")
            lines += ["  " + d for d in _differences(e, i, inputs, o)]
    return lines


def _differences(e: dict, i: int, inputs: list[tuple[int, bytes]], o: Output) -> list[str]:
    out = []
    if "priority" in e:
        actual = {v: k for k, v in PRIORITY_NAMES.items()}.get(o.priority, "unknown")
        mark = "" if actual == e["priority"] else "   <-- differs"
        out.append(f"priority: expected {e['priority']}, actual {actual}{mark}")
    if "length" in e:
        mark = "" if len(o.frame) == int(e["length"]) else "   <-- differs"
        out.append(f"length: expected {e['length']}, actual {len(o.frame)}{mark}")
    for name, want in (e.get("fields") or {}).items():
        actual = field_value(o.frame, name)
        mark = "" if same_value(actual, want) else "   <-- differs"
        out.append(f"{name}: expected {want!r}, actual {actual!r}{mark}")
    frame = expected_frame(e, i, inputs)
    if frame is not None:
        diff = field_diff(frame, o.frame)
        what = "the expected bytes" if "bytes" in e else f"input {e.get('input', i)} with {e['as_input']}"
        out += [f"{what}: " + ("same bytes" if not diff else "differs")]
        out += ["  " + d + " (expected -> actual)" for d in diff]
    return out


def run_cases_explained(cases: list[ConformanceCase], target, which: str = "failed") -> tuple[list, list[str]]:
    """run_cases on a Bmv2Target, then explain_case for the cases `which` selects ("failed": those
    that failed; "all": every case; "none"). Returns (results, reports)."""
    from conformance.runner import CaseResult, run_case
    reason = target.unavailable()
    if reason:
        return [CaseResult(c.name, target.name, "skip", reason) for c in cases], []
    target.start()
    try:
        results = [run_case(c, target) for c in cases]
        reports = [explain_case(c, target) for c, r in zip(cases, results)
                   if which == "all" or (which == "failed" and r.status == "fail")]
    finally:
        target.stop()
    return results, reports
