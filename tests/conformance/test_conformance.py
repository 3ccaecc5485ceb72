"""The switch conformance suite: every case on the in-process model, on BMv2 when installed.

The same YAML cases run on every target (conformance/cases/). The model process on veths
(`model-proc`) runs a few representative cases as an integration test; `mrc-testbed conformance
--target all` runs them all.
"""
from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipeline_contract.client import CounterValue
from conformance import process_targets

from cli import conformance as cli
from conformance.case import CaseError, load_cases, parse_case
from conformance.packets import build
from conformance.process_targets import Bmv2Target, ModelProcessTarget, ProcessTarget, TargetError
from conformance.runner import check, run_case, run_cases
from conformance.targets import ModelGrpcTarget, ModelTarget
from refswitch import pipeline as pipeline_module

CASES = load_cases()
BY_NAME = {c.name: c for c in CASES}


def test_suite_covers_the_required_behaviours():
    names = set(BY_NAME)
    required = {"usid_t0_first_hop", "usid_t1_hop", "usid_t2_hop_five_switch_path", "usid_last_hop_delivery",
                "ecmp_flow_stable", "ecmp_spread_across_flows", "ecmp_hash_is_documented_crc16",
                "trim_not_below_threshold", "trim_exactly_at_threshold", "trim_lasthop_class",
                "control_packets_never_trimmed", "no_double_trim", "ecn_marked_at_threshold",
                "ecn_last_hop_exempt", "fault_drop_all", "fault_drop_random_statistical",
                "malformed_short_frame", "malformed_wrong_ip_version", "malformed_ipv6_payload_length",
                "malformed_udp_length"}
    assert required <= names


@pytest.fixture(scope="module")
def model():
    return ModelTarget()


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_on_model(model, case):
    result = run_case(case, model)
    assert result.status == "pass", result.message


@pytest.fixture(scope="module")
def model_grpc():
    target = ModelGrpcTarget()
    target.start()
    try:
        yield target
    finally:
        target.stop()


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_on_model_over_p4runtime(model_grpc, case):
    result = run_case(case, model_grpc)
    assert result.status == "pass", result.message


@pytest.fixture(scope="module")
def bmv2():
    target = Bmv2Target()
    reason = target.unavailable()
    if reason:
        pytest.skip(f"BMv2 target: {reason}")
    target.start()
    try:
        yield target
    finally:
        target.stop()


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_on_bmv2(bmv2, case):
    result = run_case(case, bmv2)
    assert result.status == "pass", result.message


@pytest.mark.integration
def test_bmv2_counts_every_frame_of_a_run_longer_than_its_capture_ring(bmv2):
    """BMv2's capture ring holds ~32 frames per port; the target's pacing gets 300 through."""
    bmv2.reset(1)                          # no routes: every frame is counted and dropped
    frames = [build({"kind": "data", "src": "fc00:1:1000::", "dst": "fc00:1:1001::", "ev": i}) for i in range(300)]
    for frame in frames:
        bmv2.send(1, frame)
    assert bmv2.finish(0) == []
    counters = bmv2.read_counters(["MrcIngress.rx", "MrcIngress.no_route_drops"])
    assert counters["MrcIngress.rx"][1][0] == 300
    assert counters["MrcIngress.no_route_drops"][1][0] == 300


def _listeners(pid: int, netns: str | None) -> list[str]:
    """Listening TCP, UDP and unix sockets of process `pid`, as seen in `netns` (None: this namespace)."""
    cmd = (["ip", "netns", "exec", netns] if netns else []) + ["ss", "-lntuxpH"]
    lines = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()
    return [line for line in lines if f"pid={pid}," in line]


@pytest.mark.integration
def test_bmv2_serves_p4runtime_on_a_unix_socket_and_thrift_only_inside_its_namespace(bmv2):
    bmv2.reset(1)
    pid, ns = bmv2.proc.pid, bmv2.lab.switch_ns
    assert Path(f"/proc/{pid}/comm").read_text().startswith("simple_switch")
    assert subprocess.run(["ip", "netns", "identify", str(pid)], capture_output=True, text=True).stdout.split() == [ns]
    assert _listeners(pid, None) == []                     # nothing in the namespace tests run in
    inside = _listeners(pid, ns)
    tcp = [line for line in inside if line.startswith(("tcp", "udp"))]
    assert len(tcp) == 1 and re.search(rf":{Bmv2Target.THRIFT_PORT}\s", tcp[0]), inside
    assert any(line.startswith("u_str") and f"{bmv2.tmp}/p4rt.sock" in line for line in inside), inside
    links = subprocess.run(["ip", "-n", ns, "-o", "link"], capture_output=True, text=True, check=True).stdout
    names = {re.match(r"\d+: ([^:@]+)", line).group(1) for line in links.splitlines()}
    assert names == {"lo"} | {bmv2.lab.switch_if(n) for n in range(1, process_targets.NPORTS + 1)}


def test_bmv2_command_binds_grpc_and_notifications_to_sockets_in_its_folder():
    target = Bmv2Target()
    target.tmp = "/tmp/mrc-conf-x"
    target.lab = SimpleNamespace(switch_if=lambda n: f"xs{n}")
    argv = target.command("unix:/tmp/mrc-conf-x/p4rt.sock")
    options = dict(zip(argv, argv[1:]))
    assert options["--grpc-server-addr"] == "unix:/tmp/mrc-conf-x/p4rt.sock"
    assert options["--notifications-addr"] == "ipc:///tmp/mrc-conf-x/notifications.ipc"
    assert options["--thrift-port"] == str(Bmv2Target.THRIFT_PORT)
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "-i"] == [f"{n}@xs{n}" for n in range(1, 9)]


# --- pacing of the process targets (fake switch: no root needed) --------------------------------

class SlowPipeline:
    """A switch whose MrcIngress.rx counts `per_read` more of the frames sent each time it is read."""

    def __init__(self, per_read: int):
        self.per_read = per_read
        self.sent = 0
        self.rx = 0
        self.most_uncounted = 0

    def read_counter(self, name, port=None):
        assert name == "MrcIngress.rx" and port == 1
        self.rx = min(self.sent, self.rx + self.per_read)
        return {1: CounterValue(self.rx, 0)}

    def send(self, frame: bytes) -> bool:
        self.most_uncounted = max(self.most_uncounted, self.sent - self.rx)
        self.sent += 1
        return True


def _paced_target(pipeline: SlowPipeline) -> ProcessTarget:
    target = ProcessTarget()
    target.client, target.ports = pipeline, {1: pipeline}
    return target


def test_process_targets_never_have_more_than_a_window_of_frames_uncounted():
    pipeline = SlowPipeline(per_read=3)
    target = _paced_target(pipeline)
    for _ in range(200):
        target.send(1, b"frame")
    assert pipeline.sent == 200
    assert pipeline.most_uncounted < process_targets.RX_WINDOW
    target._wait_counted(1, 200)                           # what finish() does first
    assert pipeline.rx == 200


def test_frames_that_never_reach_the_pipeline_are_a_target_error(monkeypatch):
    monkeypatch.setattr(process_targets, "RX_TIMEOUT", 0.05)
    target = _paced_target(SlowPipeline(per_read=0))
    with pytest.raises(TargetError, match=rf"MrcIngress.rx\[1\] = 0 .* {process_targets.RX_WINDOW} frames were sent"):
        for _ in range(process_targets.RX_WINDOW + 1):
            target.send(1, b"frame")


MODEL_PROC_CASES = ["usid_t0_first_hop", "trim_exactly_at_threshold", "ecn_marked_at_threshold",
                    "malformed_udp_length", "fault_drop_all", "ecmp_hash_is_documented_crc16"]


@pytest.mark.integration
@pytest.mark.requires_root
def test_representative_cases_on_model_process():
    results = run_cases([BY_NAME[n] for n in MODEL_PROC_CASES], ModelProcessTarget())
    assert [(r.case, r.status, r.message) for r in results] == [(n, "pass", "") for n in MODEL_PROC_CASES]


# --- the suite detects a broken pipeline --------------------------------------------------------

def test_a_pipeline_that_never_trims_fails_the_trim_cases(monkeypatch):
    monkeypatch.setattr(pipeline_module, "_trim", lambda frame, b14, b15, host_facing: frame)
    results = {c.name: run_case(c, ModelTarget()) for c in CASES if "trim" in c.name}
    assert results["trim_exactly_at_threshold"].status == "fail"
    assert results["trim_lasthop_class"].status == "fail"
    assert results["trim_not_below_threshold"].status == "pass"


def test_an_off_by_one_threshold_fails_the_boundary_case(monkeypatch):
    original = pipeline_module.Pipeline.process

    def late_by_one(self, frame, in_port, queued_low):
        return original(self, frame, in_port, [max(0, q - 1) for q in queued_low])
    monkeypatch.setattr(pipeline_module.Pipeline, "process", late_by_one)
    result = run_case(BY_NAME["trim_exactly_at_threshold"], ModelTarget())
    assert result.status == "fail"


def test_check_reports_missing_extra_and_wrong_fields():
    case = BY_NAME["usid_t0_first_hop"]
    inputs = case.inputs()
    assert check(case, inputs, [], {}) != []
    from conformance.runner import Output
    wrong = Output(3, inputs[0][1], 0)                       # not shifted
    failures = check(case, inputs, [wrong], {"MrcIngress.rx": {1: (1, 1)}, "MrcEgress.tx": {3: (1, 1)}})
    assert any("bytes differ" in f for f in failures)


def test_priority_is_inferred_from_overtaking_the_standing_queue():
    from conformance.runner import Output, infer_priorities
    case = BY_NAME["trim_exactly_at_threshold"]
    fillers, (a, b) = case.filler_frames(), [f for _, f in case.inputs()]
    outs = infer_priorities([Output(2, b), Output(2, fillers[0]), Output(2, fillers[1]), Output(2, a),
                             Output(3, a)], held_port=2)
    assert [o.priority for o in outs] == [1, None, None, 0, None]


# --- case files --------------------------------------------------------------------------------

def test_case_files_are_checked():
    good = {"name": "x", "send": [{"port": 1, "packet": {"src": "fc00::", "dst": "fc00::1"}}]}
    parse_case(good, {}, "t.yaml")
    with pytest.raises(CaseError, match="t.yaml: case 'x': sendd: unknown field; expected one of about, entries,"):
        parse_case(dict(good, sendd=[]), {}, "t.yaml")
    with pytest.raises(CaseError, match="case 'x': expect.packet: unknown field; expected one of counters, delivered,"):
        parse_case(dict(good, expect={"packet": []}), {}, "t.yaml")
    with pytest.raises(CaseError, match="case 'y': send: missing"):
        parse_case({"name": "y"}, {}, "t.yaml")
    with pytest.raises(CaseError, match="case 'y': send: expected a non-empty list"):
        parse_case({"name": "y", "send": []}, {}, "t.yaml")
    with pytest.raises(CaseError, match=r"case 'x': expect.delivered: must be \[lo, hi\]"):
        parse_case(dict(good, expect={"delivered": [1]}), {}, "t.yaml")
    with pytest.raises(CaseError, match="case 'x': entries\\[0\\].match.dst_addr: 'fc00::1/16' is not a match value"):
        parse_case(dict(good, entries=[{"table": "MrcIngress.routing", "match": {"dst_addr": "fc00::1/16"},
                                        "action": "MrcIngress.forward"}]), {}, "t.yaml")
    with pytest.raises(CaseError, match="case 'x': entries\\[0\\].action: missing"):
        parse_case(dict(good, entries=[{"table": "MrcIngress.routing"}]), {}, "t.yaml")
    # an expected packet is described too: a wrong value or a misspelt key is named, not met at run time
    with pytest.raises(CaseError, match=r"case 'x': expect.packets\[0\].priority: 'lowest' is not one of 'low', 'high'"):
        parse_case(dict(good, expect={"packets": [{"port": 2, "priority": "lowest"}]}), {}, "t.yaml")
    with pytest.raises(CaseError, match=r"case 'x': expect.packets\[1\].priorty: unknown field; expected one of as_input,"):
        parse_case(dict(good, expect={"packets": [{"port": 2}, {"port": 2, "priorty": "low"}]}), {}, "t.yaml")
    with pytest.raises(CaseError, match=r"expect.packets\[0\].bytes: 'zz' is not a hex string of whole bytes"):
        parse_case(dict(good, expect={"packets": [{"port": 2, "bytes": "zz"}]}), {}, "t.yaml")
    with pytest.raises(CaseError, match=r"expect.packets\[0\].port: missing"):
        parse_case(dict(good, expect={"packets": [{"priority": "low"}]}), {}, "t.yaml")


def test_a_cases_folder_that_is_missing_or_empty_is_named(tmp_path):
    with pytest.raises(CaseError, match="nope: not a folder of case files"):
        load_cases(tmp_path / "nope")
    with pytest.raises(CaseError, match=r"no case files \(\*.yaml\) in it"):
        load_cases(tmp_path)


def test_cli_prints_a_table_and_fails_on_failure(capsys, monkeypatch):
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    assert cli.run(parser.parse_args(["-k", "usid_t1"])) == 0
    out = capsys.readouterr().out
    assert "usid_t1_hop" in out and "PASS" in out and "model: 1 pass" in out
    monkeypatch.setattr(pipeline_module, "_trim", lambda frame, b14, b15, host_facing: frame)
    assert cli.run(parser.parse_args(["-k", "trim_lasthop"])) == 1
    assert "FAIL" in capsys.readouterr().out


def test_cli_skips_bmv2_with_the_reason_when_absent_and_says_nothing_ran(capsys, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")                 # no simple_switch_grpc, wherever BMv2 is
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    assert cli.run(parser.parse_args(["--target", "bmv2", "-k", "usid_t1"])) == 2
    captured = capsys.readouterr()
    assert "SKIP" in captured.out
    assert "nothing was run on --target bmv2: needs" in captured.err       # and why (root, ip or BMv2)
