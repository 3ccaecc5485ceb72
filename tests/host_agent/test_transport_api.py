"""The transport's API: typed events drained by the caller, the registry of kinds, plug-in policies."""
from __future__ import annotations

import ast
import dataclasses

import pytest

import speedups
from wire import constants
from wire.packets import Sack
from host_agent.transport import (ConnectionId, Endpoint, EvState, MessageReceived, MessageSent, PathInfo,
                                  Policies, Retransmitted, TransportConfig, register_transport)
from host_agent.transport import events
from host_agent.transport import kinds
from host_agent.transport.policies import MrcPathMonitor, MrcSackProcessor
from host_agent.transport.sender import MrcSender

FAST = dict(qp_timeout=6, initial_rtt=10e-6, ack_delay=5e-6, probe_interval=50e-6)
CONN = ConnectionId("h0", "h1", 0x11, 0x22)


def paths(planes=2, per_plane=4):
    return [PathInfo(p, p, bytes([0xFC, 0, 0, p]) + bytes(12), bytes([0xFC, 0, 0, p, 1, i]) + bytes(10))
            for p in range(planes) for i in range(per_plane)]


def sack(cum, bitmap, answering):
    return Sack(src=bytes(16), dst=bytes(16), ev=5, qp=1, cum_psn=cum, sack_base=cum, bitmap=bitmap,
                ev_echo=answering.ev, ts_echo=answering.tsval)


def sender(policies=None, **overrides):
    ep = Endpoint("tx", TransportConfig(**{**FAST, **overrides}), policies=policies)
    return ep, ep.connect("rx", 1, 2, paths())


# --- events ------------------------------------------------------------------------------------------
RECORDS = [
    (events.EvStateChanged(1.5, CONN, 7, 0, 3, "fc00", "GOOD", "ASSUMED_BAD", "timeout"),
     {"ev": 7, "plane": 0, "path": 3, "dst": "fc00", "old": "GOOD", "new": "ASSUMED_BAD", "cause": "timeout",
      "port": 0, "drop_count": 0}),
    (events.EvStateChanged(1.5, CONN, 7, 0, 3, "fc00", "GOOD", "DENIED", "operator", 1, 5),
     {"ev": 7, "plane": 0, "path": 3, "dst": "fc00", "old": "GOOD", "new": "DENIED", "cause": "operator",
      "port": 1, "drop_count": 5}),
    (events.EvReplaced(1.5, CONN, 9, 7, 0, 2), {"ev": 9, "replaces": 7, "plane": 0, "path": 2}),
    (events.ProbeResult(1.5, CONN, 3, 9, 1, 12345), {"req_id": 3, "ev": 9, "port": 1, "rtt_ns": 12345}),
    (events.EvBackup(1.5, CONN, 9, 7, 0, 2), {"ev": 9, "replaces": 7, "plane": 0, "path": 2}),
    (events.Retransmitted(1.5, CONN, 4, "trim", 9, 7, 1e-4, 2e-3),
     {"psn": 4, "cause": "trim", "ev": 9, "old_ev": 7, "srtt": 1e-4, "rto": 2e-3}),
    (events.Retransmitted(1.5, CONN, 4, "nack", 9, 9), {"psn": 4, "cause": "nack", "ev": 9, "old_ev": 9}),
    (events.MessageSent(1.5, CONN, 3, 4096), {"msg_id": 3, "bytes": 4096}),
    (events.MessageReceived(1.5, CONN, 3, b"abcd"), {"msg_id": 3, "bytes": 4}),
    (events.WentBack(1.5, CONN, 4, "timeout"), {"psn": 4, "cause": "timeout"}),
    (events.TrimNack(1.5, CONN, 4, constants.NACK_TRIMMED, 9, 1e-4),
     {"psn": 4, "reason": constants.NACK_TRIMMED, "ev": 9, "srtt": 1e-4}),
    (events.ConnectionFailed(1.5, CONN, 4, 9, 0.008),
     {"psn": 4, "retries": 9, "timeout": 0.008,
      "error": "connection h0->h1:0x11 failed: PSN 4 unacknowledged after 9 retries (retry limit reached; "
               "last timeout 8 ms)"}),
]


@pytest.mark.parametrize("event,fields", RECORDS, ids=lambda x: type(x).__name__)
def test_every_event_gives_the_log_record_of_its_kind(event, fields):
    """The JSON-lines log and the experiment records keep their format: t, kind, conn name, fields."""
    assert event.as_record() == {"t": 1.5, "kind": event.kind, "conn": "h0->h1:0x11", **fields}
    assert list(event.as_record())[:3] == ["t", "kind", "conn"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.t = 2.0
    assert not hasattr(event, "__dict__")                 # slotted: cheap to make


def test_each_kind_has_one_class():
    kinds_of = [cls.kind for cls in events.EVENT_CLASSES]
    assert sorted(kinds_of) == sorted({events.EV_STATE, events.EV_BACKUP, events.RETRANSMIT, events.SEND_COMPLETE,
                                       events.RECV_COMPLETE, events.GO_BACK, events.TRIM_NACK, events.EV_REPLACE,
                                       events.PROBE_RESULT, events.CONN_FAILED})


def test_a_received_message_is_an_event_drained_after_receive():
    """Nothing is called back inside receive: the message waits, with its data, until drained."""
    a, b = Endpoint("a", TransportConfig(**FAST)), Endpoint("b", TransportConfig(**FAST))
    pa = [PathInfo(0, 0, bytes(16), b"\x01" * 16)]
    ca, cb = a.connect("b", 1, 2, pa), b.connect("a", 2, 1, pa)
    mid = a.send_message(ca, b"hello")
    for nic, pkt in a.poll(0.0):
        b.receive(1e-6, nic, pkt)
    (got,) = b.drain_events()
    assert isinstance(got, MessageReceived) and (got.t, got.msg_id, got.data) == (1e-6, mid, b"hello")
    assert got.conn == cb.ident and b.connection(got.conn) is cb
    assert b.drain_events() == [] and b.next_event() is None
    for nic, pkt in b.poll(1e-6):
        a.receive(2e-6, nic, pkt)
    sent = a.next_event()
    assert isinstance(sent, MessageSent) and (sent.msg_id, sent.size) == (mid, 5) and a.next_event() is None
    with pytest.raises(KeyError, match="not a connection"):
        a.connection(ConnectionId("a", "b", 1, 99))


# --- the registry of transport kinds --------------------------------------------------------------------
def test_the_registry_builds_each_kind_and_names_them_in_errors(monkeypatch):
    assert set(kinds.TRANSPORTS) >= {"mrc", "roce"}
    with pytest.raises(ValueError, match=r"'tcp' is not one of \('mrc', 'roce'"):
        Endpoint("h0", TransportConfig(mode="tcp")).connect("h1", 1, 2, paths())
    built = []

    def counted(wiring):
        built.append(wiring.ident.name)
        return kinds.build_mrc(wiring)

    monkeypatch.setitem(kinds.TRANSPORTS, "mrc-counted", None)        # removed again after the test
    register_transport("mrc-counted", counted)
    ep = Endpoint("h0", TransportConfig(mode="mrc-counted"))
    conn = ep.connect("h1", 1, 2, paths())
    assert built == ["h0->h1:0x1"] and isinstance(conn.sender, MrcSender)
    with pytest.raises(ValueError, match="built-in"):
        register_transport("roce", counted)


def test_a_registered_transport_runs_from_a_job_file_and_from_a_scenario(monkeypatch):
    """The registry is the one list of modes: what `register_transport` adds, job and scenario files
    accept, and a scenario runs it on netsim."""
    from experiments.backends.netsim_backend import NetsimBackend
    from experiments.scenario import ScenarioError, parse_scenario
    from host_agent.job import JobError, parse_job
    from tests.host_agent.test_agent_job import valid_job

    built = []

    def counted(wiring):
        built.append(wiring.ident.name)
        return kinds.build_mrc(wiring)

    job = valid_job()
    job["transport"]["mode"] = "mrc-counted"
    doc = {"name": "registered", "topology": "leafspine:2x2x1", "link": {"rate_bps": 100_000_000},
           "horizon_s": 1.0, "workload": {"kind": "allreduce", "bytes": 32768, "chunk_bytes": 8192},
           "transports": [{"name": "counted", "mode": "mrc-counted"}]}
    with pytest.raises(JobError, match="transport.mode: 'mrc-counted' is not one of"):
        parse_job(job, "j.json")
    with pytest.raises(ScenarioError, match="'mrc-counted' is not one of"):
        parse_scenario(doc)
    monkeypatch.setitem(kinds.TRANSPORTS, "mrc-counted", None)        # removed again after the test
    register_transport("mrc-counted", counted)
    assert parse_job(job, "j.json").transport_config().mode == "mrc-counted"
    (case,) = parse_scenario(doc).cases()
    record = NetsimBackend().run_case(case)
    assert record.completed and record.bit_exact and record.mode == "mrc-counted"
    assert len(built) >= 2                  # every connection of the all-reduce came from the builder


# --- policies ------------------------------------------------------------------------------------------------
class ThreeLaterSacked(MrcSackProcessor):
    """Selective repeat: a packet is lost once three packets sent after it have been SACKed."""

    def lost(self, cum, base, bitmap, window, now):
        arrived = [base + i for i in range(64) if bitmap >> i & 1]
        out = []
        for seq in range(cum, window.next_seq):
            seg = window.segment(seq)
            if seg is not None and seg.in_flight and sum(a > seq for a in arrived) >= 3:
                out.append(seq)
        return out


@pytest.mark.parametrize("plugged", [False, True])
def test_a_sack_processor_decides_what_to_retransmit(plugged):
    ep, conn = sender(Policies(sack=ThreeLaterSacked) if plugged else None)
    ep.send_message(conn, bytes(5000))
    sent = [pkt for t in range(5) for _, pkt in ep.poll(t * 1e-6)]
    assert [p.psn for p in sent] == [0, 1, 2, 3, 4]
    ep.receive(20e-6, 0, sack(0, 0b11110, sent[4]))           # 1..4 arrived, 0 did not
    again = [p for _, p in ep.poll(21e-6)]                     # well before any timeout
    if plugged:
        assert [(p.psn, bool(p.flags & constants.MRCH_FLAG_RETX)) for p in again] == [(0, True)]
        assert ep.stats()["retx_sack"] == 1
        assert [e.cause for e in ep.drain_events() if isinstance(e, Retransmitted)] == ["sack"]
    else:
        assert again == [] and "retx_sack" not in ep.stats()


class NeverRetire(MrcPathMonitor):
    """A path monitor that blames no path for a timeout."""

    def on_timeout(self, evset, timeout, now):
        self.seen = timeout
        return []


def test_a_path_monitor_decides_whether_a_timeout_retires_the_ev():
    """The scenario in which MRC's monitor retires the EV (a later packet arrived first). Loss
    detection from SACKs is off: the per-packet timer is what finds the loss here."""
    monitors = []

    def factory(config):
        monitors.append(NeverRetire(config))
        return monitors[-1]

    ep, conn = sender(Policies(path_monitor=factory), sack_loss_detection=False)
    ep.send_message(conn, bytes(1000))
    (_, warmup), = ep.poll(0.0)
    ep.receive(10e-6, 0, sack(1, 0, warmup))
    ep.send_message(conn, bytes(1000))
    (_, first), = ep.poll(20e-6)
    ep.send_message(conn, bytes(1000))
    (_, second), = ep.poll(30e-6)
    ep.receive(40e-6, 0, sack(1, 0b10, second))
    ep.poll(90e-6)                                  # the timer of `first` (20 + 65.5 us) fires
    (monitor,) = monitors
    assert monitor.seen.ev.value == first.ev and monitor.seen.sent_at == 20e-6
    assert monitor.seen.delivered_sent_at == pytest.approx(30e-6)
    assert conn.evset.get(first.ev).state is EvState.GOOD
    assert ep.stats()["timeouts_unattributed"] == 1 and "evs_retired" not in ep.stats()


class FirstEv:
    """Every packet on the first active EV."""

    def __init__(self, config):
        pass

    def next_ev(self, evset, now, resend_of):
        return evset.active_evs()[0]

    def peek_ev(self, evset):
        return evset.active_evs()[0]


class FixedWindow:
    """Two packets in flight, no pacing."""

    def __init__(self, config, rtt, packet_bytes):
        self.cwnd, self.next_send, self.backlogged = 2 * packet_bytes, 0.0, False

    def on_ack(self, now, acked_bytes, ecn, rtt):
        pass

    def on_trim_or_loss(self, now):
        pass

    def pacing_rate(self, nics):
        return 1e12

    def sent(self, now, nbytes, nics, rate=None):
        pass

    def on_window_penalty(self, now, penalty):
        pass


def test_ev_selection_and_congestion_control_are_plugged_in_the_same_way():
    ep, conn = sender(Policies(ev_selector=FirstEv, congestion=FixedWindow))
    ep.send_message(conn, bytes(10_000))
    first = [p for t in range(4) for _, p in ep.poll(t * 1e-6)]
    assert len(first) == 2 and {p.ev for p in first} == {conn.evset.active_evs()[0].value}
    ep.receive(5e-6, 0, sack(2, 0, first[1]))
    assert len(ep.poll(6e-6)) == 2
    default_ep, default_conn = sender()
    default_ep.send_message(default_conn, bytes(10_000))
    evs = [p.ev for t in range(4) for _, p in default_ep.poll(t * 1e-6)]
    assert len(evs) > 2 and len(set(evs)) == len(evs)            # MRC's rotation: a new EV each packet


def test_the_sender_keeps_at_most_30_instance_attributes():
    """CPython 3.11 shares instance-dict keys up to 30; past that every attribute access of the
    per-packet path is slower (host_agent/transport/sender.py says so where the fields are set).
    Counted in the source: the compiled build (`speedups`) keeps attributes in C slots, no dict."""
    tree = ast.parse(speedups.source_path(MrcSender.__module__).read_text())
    [cls] = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "MrcSender"]
    targets = [t for node in ast.walk(cls) if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign))
               for t in getattr(node, "targets", [getattr(node, "target", None)])]
    targets += [e for t in targets if isinstance(t, ast.Tuple) for e in t.elts]
    names = {t.attr for t in targets if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
             and t.value.id == "self"}
    ep = Endpoint("h0", TransportConfig())
    conn = ep.connect("h1", 1, 2, paths())
    assert isinstance(conn.sender, MrcSender) and "inflight_bytes" in names
    assert len(names) <= 30, sorted(names)
    if not speedups.build_in_use().compiled:
        assert names == set(vars(conn.sender))              # the count is the instance dict's


@pytest.mark.parametrize("count", [2, 6])       # walked (a few connections) and looked up in the dict (many)
def test_receive_hands_each_packet_to_the_connection_of_its_qp(count):
    ep = Endpoint("tx", TransportConfig(**FAST))
    conns = [ep.connect(f"rx{k}", 0x10000 + 3 * k, 2, paths()) for k in range(count)]
    for k, conn in enumerate(conns):
        for _ in range(k + 1):
            ep.receive(0.0, 0, Sack(src=bytes(16), dst=bytes(16), ev=5, qp=conn.local_qp, cum_psn=0, sack_base=0,
                                    bitmap=0, ev_echo=5, ts_echo=0))
    ep.receive(0.0, 0, Sack(src=bytes(16), dst=bytes(16), ev=5, qp=0x10001, cum_psn=0, sack_base=0, bitmap=0,
                            ev_echo=5, ts_echo=0))
    assert [c.stats["sacks_received"] for c in conns] == list(range(1, count + 1))
    assert ep.stats()["unknown_qp"] == 1
