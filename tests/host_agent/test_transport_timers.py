"""MRC's QP timer model: the timeout 1.024 us x 2^t, linear then doubling retries, and the retry
limit that fails the connection (sans-IO here; through an agent's result in test_agent_veth)."""
from __future__ import annotations

import heapq
import random

import pytest

from host_agent.transport import ConnectionFailed, Endpoint, PathInfo, TransportConfig
from host_agent.transport.message import Segment, new_message
from host_agent.transport.fifo import DROP_AT
from host_agent.transport.timers import Deadlines, RetryBudget, qp_timeout_seconds
from testbed.agents import AgentProcess
from wire.packets import DataPacket

FAST = dict(qp_timeout=6, initial_rtt=10e-6, ack_delay=5e-6, probe_interval=50e-6)


def test_qp_timeout_is_1_024_us_times_two_to_the_t():
    assert qp_timeout_seconds(0) == pytest.approx(1.024e-6)
    assert qp_timeout_seconds(8) == pytest.approx(262.144e-6)          # the API examples' t = 8
    assert qp_timeout_seconds(24) == pytest.approx(17.179869184)
    for bad in (-1, 25, 2.5, True):
        with pytest.raises(ValueError, match="qp_timeout"):
            qp_timeout_seconds(bad)


def test_default_qp_timeout_keeps_the_old_two_millisecond_floor():
    cfg = TransportConfig()
    assert cfg.base_timeout == pytest.approx(2.097152e-3)                # t = 11; was rto_min = 2 ms
    assert (cfg.retry_linear_cnt, cfg.retry_exp_cnt) == (2, 25)          # 25: retries without end


def test_retry_sequence_is_linear_then_doubling_then_spent():
    budget = RetryBudget(linear_cnt=7, exp_cnt=3)
    assert budget.sequence(1.0) == [1.0] * 8 + [2.0, 4.0, 8.0]           # first transmission + 7 + 3 retries
    assert budget.retries == 10
    assert not budget.exhausted(10) and budget.exhausted(11)


def test_retries_without_end_double_up_to_the_ceiling():
    budget = RetryBudget(linear_cnt=2, exp_cnt=25, ceiling=10.0)
    assert budget.without_end and budget.retries is None
    assert budget.sequence(1.0, limit=8) == [1.0, 1.0, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert not budget.exhausted(10_000)


@pytest.mark.parametrize("field,value,message", [
    ("qp_timeout", 25, "TransportConfig.qp_timeout: 25 is outside 0..24"),
    ("retry_linear_cnt", 8, "TransportConfig.retry_linear_cnt: 8 is outside 0..7"),
    ("retry_exp_cnt", 26, "TransportConfig.retry_exp_cnt: 26 is outside 0..25"),
    ("rto_max", 1e-3, "TransportConfig.rto_max: 0.001 is below the QP timeout"),
])
def test_bad_timer_parameters_are_named(field, value, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        TransportConfig(**{field: value})


def dead_end(mode: str, **overrides):
    """An endpoint sending one small message to a peer that never answers."""
    ep = Endpoint("tx", TransportConfig(mode=mode, **{**FAST, **overrides}))
    paths = [PathInfo(0, 0, bytes(16), bytes([0xFC, 0, 0, 0, 1, i]) + bytes(10)) for i in range(4)]
    conn = ep.connect("rx", 1, 2, paths)
    ep.send_message(conn, b"x" * 100)
    return ep, conn


def run_until_quiet(ep: Endpoint, horizon: float = 10.0):
    """Poll at every wake-up; return the send times of PSN 0 and the events."""
    sent, events, now = [], [], 0.0
    while now < horizon:
        sent += [now for _, p in ep.poll(now) if isinstance(p, DataPacket) and p.psn == 0]
        events += ep.drain_events()
        wake = ep.next_wakeup()
        if wake is None:
            break
        now = max(now, wake)
    return sent, events


def test_mrc_sender_retries_by_the_budget_then_fails_the_connection():
    ep, conn = dead_end("mrc", retry_linear_cnt=2, retry_exp_cnt=3)
    rto = conn.rtt.rto                                     # no RTT sample ever comes: it stays put
    assert rto >= qp_timeout_seconds(6)
    sent, events = run_until_quiet(ep)
    gaps = [b - a for a, b in zip(sent, sent[1:])]
    assert gaps == pytest.approx([rto, rto, rto, 2 * rto, 4 * rto])      # first + 2 linear, then doubling
    failed = [e for e in events if isinstance(e, ConnectionFailed)]
    assert len(failed) == 1 and failed[0].retries == 5 and failed[0].psn == 0
    assert failed[0].t == pytest.approx(sent[-1] + 8 * rto)
    assert "connection tx->rx:0x1 failed: PSN 0 unacknowledged after 5 retries" in failed[0].error
    assert conn.failed is failed[0] and ep.next_wakeup() is None and ep.poll(1e3) == []
    assert ep.stats()["connections_failed"] == 1
    assert ep.stats()["connections"][1]["error"] == failed[0].error
    with pytest.raises(ValueError, match="cannot send on tx->rx:0x1: connection tx->rx:0x1 failed"):
        ep.send_message(conn, b"more")


def test_retries_without_end_never_fail_the_connection():
    ep, conn = dead_end("mrc", retry_linear_cnt=0, retry_exp_cnt=25, rto_max=2e-3)
    sent, events = run_until_quiet(ep, horizon=0.1)
    assert len(sent) > 40 and conn.failed is None                        # every 2 ms (the ceiling) for 0.1 s
    assert not any(isinstance(e, ConnectionFailed) for e in events)


def test_baseline_sender_fails_after_the_same_number_of_retries():
    ep, conn = dead_end("roce", retry_linear_cnt=1, retry_exp_cnt=2)
    sent, events = run_until_quiet(ep)
    assert len(sent) == 4                                                # first transmission + 3 go-backs
    (failed,) = [e for e in events if isinstance(e, ConnectionFailed)]
    assert failed.retries == 3 and conn.failed is failed


def test_an_agents_failure_names_the_connection_error(tmp_path):
    """AgentProcess.failure (what experiment records and `transfer` print) carries the result's error."""
    class Exited:
        def poll(self):
            return 1
    log = tmp_path / "h0.jsonl"
    log.write_text('{"t": 1, "kind": "result", "ok": false, "detail": "not finished", '
                   '"error": "connection h0->h1:0x100 failed: PSN 3 unacknowledged after 5 retries"}\n')
    job = type("J", (), {"log": str(log)})()
    agent = AgentProcess("h0", job, tmp_path / "h0.json", Exited())
    assert agent.failure() == ("h0: agent exit 1, result connection h0->h1:0x100 failed: PSN 3 unacknowledged "
                               "after 5 retries")


def test_a_connection_out_of_retries_is_a_note_of_its_case():
    """RoCE with a retry limit on a link killed for good: its connection fails, and the case's
    record says which and why (the mininet backend gets the same from the agents' results)."""
    doc = {"name": "limit", "topology": "leafspine:2x2x1", "link": {"rate_bps": 100_000_000},
           "horizon_s": 0.5, "sample_interval_s": 0.002,
           "workload": {"kind": "allreduce", "bytes": 131072, "chunk_bytes": 16384},
           "faults": [{"kind": "link_kill", "link": "auto", "at": "30%"}],
           "transports": [{"name": "RoCE limited", "mode": "roce",
                           "params": {"retry_linear_cnt": 1, "retry_exp_cnt": 2}},
                          {"name": "RoCE", "mode": "roce"}]}
    from experiments.backends.netsim_backend import NetsimBackend
    from experiments.scenario import parse_scenario
    cases = parse_scenario(doc, "limit.yaml").cases()
    limited, plain = (NetsimBackend().run_case(case) for case in cases)
    assert not limited.completed and not plain.completed
    failed = [n for n in limited.notes if "failed: PSN" in n and "after 3 retries (retry limit reached" in n]
    assert failed, limited.notes
    assert not [n for n in plain.notes if "failed: PSN" in n]                # 25: retries without end


def _push(deadlines, tuples, entry, message):
    """Push the timer (at, seq, tx) on `deadlines` and, as a tuple, on the reference heap."""
    at, seq, tx = entry
    deadlines.push(at, Segment(seq, message, 0, 1, transmissions=tx))
    heapq.heappush(tuples, entry)


def _pop_both(deadlines, tuples):
    """Pop the earliest timer of `deadlines` and of the reference heap: (theirs as a tuple, the heap's)."""
    first = deadlines.pop()
    return (first.at, first.segment.seq, first.tx), heapq.heappop(tuples)


def _agree(deadlines, tuples):
    """`deadlines` holds as many timers as the heap, its first the heap's top."""
    assert len(deadlines) == len(tuples)
    if tuples:
        first = deadlines.first()
        assert (first.at, first.segment.seq, first.tx) == tuples[0]


def test_deadlines_pop_earliest_first_ties_by_packet_then_transmission_as_a_heap_of_tuples():
    rng = random.Random(7)
    deadlines, tuples, popped, expected = Deadlines(), [], [], []
    message = new_message(0, b"x", 1024)
    for step in range(2000):
        if rng.random() < 0.6 or not tuples:
            _push(deadlines, tuples, (rng.choice([1.0, 2.0, 2.5, 3.0]) + step // 500, rng.randrange(50),
                                      rng.randrange(3)), message)
        else:
            got, want = _pop_both(deadlines, tuples)
            popped.append(got)
            expected.append(want)
        _agree(deadlines, tuples)
    assert popped == expected and len(popped) > 500


def test_deadlines_mostly_in_order_pop_as_a_heap_of_tuples_would():
    rng = random.Random(11)
    deadlines, tuples, popped, expected = Deadlines(), [], [], []
    message = new_message(0, b"x", 1024)
    for step in range(3000):
        if rng.random() < 0.55 or not tuples:       # an RTO after now, now and then a shorter one
            _push(deadlines, tuples, (step * 1e-3 + (0.05 if rng.random() < 0.9 else rng.random() * 0.05), step, 1),
                  message)
        else:
            got, want = _pop_both(deadlines, tuples)
            popped.append(got)
            expected.append(want)
        _agree(deadlines, tuples)
    while tuples:
        got, want = _pop_both(deadlines, tuples)
        popped.append(got)
        expected.append(want)
    assert popped == expected and len(popped) == len({seq for _, seq, _ in popped}) > 1000
    deadlines.push(1.0, Segment(0, message, 0, 1, transmissions=1))
    deadlines.clear()
    assert len(deadlines) == 0


def test_deadlines_emptied_now_and_then_and_cleared_after_use_pop_as_a_heap_of_tuples_would():
    """Timers drained to none every few hundred, the run's taken timers forgotten (its list bounded),
    and timers pushed after a clear (with timers already taken off) popped as a fresh heap's."""
    rng = random.Random(13)
    deadlines, tuples = Deadlines(), []
    message = new_message(0, b"x", 1024)
    emptied = 0
    for step in range(3000):
        if step % 500 < 300 and (rng.random() < 0.6 or not tuples):
            _push(deadlines, tuples, (step * 1e-3 + (0.05 if rng.random() < 0.9 else rng.random() * 0.05), step, 1),
                  message)
        elif tuples:
            got, want = _pop_both(deadlines, tuples)
            assert got == want
            emptied += not tuples
        assert len(deadlines) == len(tuples) and (deadlines.first() is None) == (not tuples)
        run = deadlines._run
        assert run.backing_size - len(run) <= max(DROP_AT - 1, len(run))
    assert emptied >= 5 and not tuples and deadlines._run.backing_size == 0
    for step in range(10):
        deadlines.push(float(step), Segment(step, message, 0, 1, transmissions=1))
    assert deadlines.pop().at == 0.0 and deadlines.pop().at == 1.0       # taken off the run: it is past its start
    deadlines.clear()
    assert len(deadlines) == 0 and deadlines.first() is None
    for at in (5.0, 3.0, 4.0):
        deadlines.push(at, Segment(int(at), message, 0, 1, transmissions=1))
    assert [deadlines.pop().at for _ in range(3)] == [3.0, 4.0, 5.0] and deadlines.first() is None
