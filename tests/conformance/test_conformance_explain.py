"""Why a case failed: BMv2 trace logs parsed per packet (captured logs in tests/data/bmv2/), frames
compared field by field, and a deliberately broken case explained on BMv2 when it is installed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.bmv2_log import LogError, action_priorities, format_trace, parse_log, read_log
from conformance.case import load_cases, load_file
from conformance.explain import format_explanation, label, run_cases_explained
from conformance.frame_diff import field_diff
from conformance.packets import build
from conformance.process_targets import Bmv2Target
from conformance.runner import CaseResult, CaseRun, Output
from wire import constants

DATA = Path(__file__).resolve().parents[1] / "data"
TRIM_LOG = (DATA / "bmv2" / "trim_exactly_at_threshold.log").read_text()
TWO_RUNS_LOG = (DATA / "bmv2" / "malformed_short_frame.log").read_text()   # trim case, then a restarted switch
PROGRAM = json.loads((Path(__file__).resolve().parents[2] / "p4" / "build" / "mrc.json").read_text())
PRIORITIES = action_priorities(PROGRAM)


def test_priorities_come_from_the_program():
    assert PRIORITIES == {"MrcIngress.trim": constants.PRIORITY_HIGH,
                          "MrcIngress.enqueue_high": constants.PRIORITY_HIGH,
                          "MrcIngress.enqueue_low": constants.PRIORITY_LOW}


def test_a_queued_packet_is_parsed_routed_and_sent_whole():
    traces = parse_log(TRIM_LOG)
    assert [t.packet_id for t in traces] == ["0.0", "1.0", "2.0", "3.0", "4.0", "5.0"]
    first = traces[0]
    assert first.in_port == 1 and len(first.received) == 1106
    assert first.parser_states == ["start", "parse_ipv6", "parse_udp", "parse_bth", "parse_reth"]
    assert first.headers == ["ethernet", "ipv6", "udp", "bth", "reth", "mrch"]
    routing = [t for t in first.applied if t.table == "MrcIngress.routing"][0]
    assert routing.hit and routing.action == "MrcIngress.forward"
    assert routing.key == ["dst_addr : fc000001100100000000000000000000"]
    assert routing.entry == ["* dst_addr : LPM fc000001100100000000000000000000/48",
                             "Action entry: MrcIngress.forward - 2,"]
    assert [t.hit for t in first.applied if t.table == "MrcIngress.port_fault"] == [False]
    assert first.egress_spec == 2 and first.truncate is None and first.priority(PRIORITIES) == constants.PRIORITY_LOW
    assert first.transmitted == [(2, 1106)] and first.sent == [first.received]
    assert all(not t.synthetic for t in first.applied)


def test_the_packet_over_the_threshold_is_trimmed_high_priority_and_truncated():
    trimmed = parse_log(TRIM_LOG)[-1]
    assert "MrcIngress.trim" in trimmed.program_actions
    assert "MrcIngress.enqueue_low" not in trimmed.program_actions
    assert trimmed.truncate == "DATA_HEADERS_LEN"
    assert trimmed.priority(PRIORITIES) == constants.PRIORITY_HIGH
    assert trimmed.transmitted == [(2, constants.DATA_HEADERS_LEN)]
    assert len(trimmed.sent[0]) == constants.DATA_HEADERS_LEN
    text = format_trace(trimmed, "input 1", PRIORITIES)
    assert "priority 1 (high), truncated to DATA_HEADERS_LEN" in text
    assert "table MrcIngress.routing: hit on dst_addr" in text and "sent out of port 2, 102 bytes" in text


def test_a_restarted_switch_starts_a_new_run_of_packet_ids_and_a_short_frame_shows_its_parser_error():
    traces = parse_log(TWO_RUNS_LOG)
    assert [t.packet_id for t in traces] == ["0.0", "1.0", "2.0", "3.0", "4.0", "5.0", "0.0"]
    short = traces[-1]
    assert short.parser_states == ["start", "parse_ipv6"] and short.parser_error == "PacketTooShort"
    assert short.program_actions == ["MrcIngress.drop_malformed"]
    assert short.egress_spec == 511 and short.dropped == "end of ingress" and short.transmitted == []
    assert len(short.received) == 40


def test_garbage_and_missing_logs():
    assert parse_log("no records here\n\n[not a record]\n") == []
    with pytest.raises(LogError, match="no BMv2 log at"):
        read_log("/nonexistent/bmv2-trace.txt")


def test_field_diff_names_each_field_that_differs():
    a = build({"kind": "data", "src": "fc00:1:1000::", "dst": "fc00:1:1001::", "ev": 3, "ecn": 2})
    b = build({"kind": "data", "src": "fc00:1:1000::", "dst": "fc00:1:1001::", "ev": 3, "ecn": 3})
    assert field_diff(a, a) == []
    assert field_diff(a, b) == ["IPv6.tc: 42 -> 43"]
    cut = field_diff(a, b[:constants.DATA_HEADERS_LEN])
    assert cut[0] == f"length: {len(a)} -> {constants.DATA_HEADERS_LEN}" and "IPv6.tc: 42 -> 43" in cut


def test_explanation_of_a_wrong_priority_and_bytes_from_a_captured_log():
    case = [c for c in load_file(DATA / "conformance" / "broken_bmv2.yaml") if c.name == "broken_trim_fields"][0]
    traces = parse_log(TRIM_LOG)
    sent = traces[-1].received
    inputs = [(1, sent)]
    out = Output(2, traces[-1].sent[0], constants.PRIORITY_HIGH)
    run = CaseRun(CaseResult(case.name, "bmv2", "fail", "priority differs"), inputs, [out], {})
    assert label(traces[0], inputs) == "filler" and label(traces[-1], inputs) == "input 0"
    text = format_explanation(case, run, traces, PRIORITIES)
    assert "packet 5.0 (input 0)" in text and "(4 filler packets" in text
    assert "packet 4.0 (not sent by the case)" in text      # the captured case sent two
    assert "priority: expected low, actual high   <-- differs" in text
    assert "MRCH.flags: 0 -> TRIMMED (expected -> actual)" in text and "input 0 with {'IPv6.tc': 43}: differs" in text
    assert "IPv6.plen: 1052 -> 48 (expected -> actual)" in text


@pytest.mark.requires_root
@pytest.mark.requires_bmv2
@pytest.mark.integration
def test_a_broken_case_is_explained_on_bmv2():
    cases = load_file(DATA / "conformance" / "broken_bmv2.yaml")
    results, reports = run_cases_explained(cases, Bmv2Target())
    assert [r.status for r in results] == ["fail", "fail"]
    wrong_port, trim = reports
    assert "table MrcIngress.routing: hit" in wrong_port and "Action entry: MrcIngress.forward - 2," in wrong_port
    assert "port 3: expected 1 packets, got 0" in wrong_port and "sent out of port 2, 1106 bytes" in wrong_port
    assert ("actions: MrcIngress.forward, MrcIngress.set_port_config, MrcIngress.count_depth_seen, "
            "MrcIngress.trim") in trim
    assert "priority 1 (high), truncated to DATA_HEADERS_LEN" in trim
    assert "MRCH.flags: 0 -> TRIMMED (expected -> actual)" in trim
