"""Times in base RTTs: the base RTT a run measured, and completion and recovery over it."""
from __future__ import annotations

import pytest

from experiments import metrics, results
from experiments.backends.netsim_backend import NetsimBackend
from experiments.record import CaseRecord, FaultEvent
from experiments.scenario import parse_scenario
from host_agent.transport.config import TransportConfig
from host_agent.transport.endpoint import Endpoint


def failed_record(base_rtt):
    """Goodput stops for 50 ms after a failure at 0.1 s; the work completes at 0.4 s."""
    rec = CaseRecord("s", "v", "t", "mrc", "mininet:model", 0, "topo", 2, "allreduce", sample_interval=0.01)
    cum, samples = 0, []
    for k in range(41):
        if k and not (10 < k <= 15):
            cum += 1000
        samples.append([k * 0.01, [cum]])
    rec.samples, rec.faults = samples, [FaultEvent(0.1, "link down", "s1-s3", True)]
    rec.completion_time = rec.end = 0.4
    rec.base_rtt = base_rtt
    return rec


def test_completion_and_recovery_are_given_in_base_rtts_of_the_record():
    summary = metrics.summarise(failed_record(0.002))
    assert summary["base_rtt_s"] == 0.002
    assert summary["completion_rtts"] == pytest.approx(200)
    assert summary["time_to_recover_rtts"] == pytest.approx(summary["time_to_recover_s"] / 0.002)
    assert summary["time_to_recover_rtts"] == pytest.approx(25)
    assert summary["longest_delivery_gap_rtts"] == pytest.approx(summary["longest_delivery_gap_s"] / 0.002)
    header, rows = results.table_rows([summary])
    assert rows[0][header.index("completion")] == "400 ms (200 RTT)"
    assert rows[0][header.index("recover")] == "50 ms (25 RTT)"
    summary["completion_rtts"] = 7116.4
    assert results.table_rows([summary])[1][0][header.index("completion")] == "400 ms (7116 RTT)"


def test_a_slower_run_with_a_longer_rtt_compares_in_rtts():
    fast, slow = failed_record(0.002), failed_record(0.004)
    slow.samples = [[2 * t, b] for t, b in slow.samples]          # the same run, at half the speed
    slow.faults = [FaultEvent(0.2, "link down", "s1-s3", True)]
    slow.completion_time = slow.end = 0.8
    slow.sample_interval, slow.recovery_window = 0.02, 0.04
    a, b = metrics.summarise(fast), metrics.summarise(slow)
    assert b["time_to_recover_s"] == pytest.approx(2 * a["time_to_recover_s"])
    assert b["time_to_recover_rtts"] == pytest.approx(a["time_to_recover_rtts"])
    assert b["completion_rtts"] == pytest.approx(a["completion_rtts"])


def test_without_a_measured_rtt_there_are_no_rtt_figures():
    summary = metrics.summarise(failed_record(None))
    assert summary["base_rtt_s"] is None and summary["completion_rtts"] is None
    header, rows = results.table_rows([summary])
    assert rows[0][header.index("completion")] == "400 ms"


def test_an_endpoint_reports_no_rtt_before_any_sample():
    assert Endpoint("h0", TransportConfig()).min_rtt() is None


def test_a_netsim_run_records_its_base_rtt():
    scenario = parse_scenario({"name": "rtt", "topology": "leafspine:2x2x1", "horizon_s": 5.0,
                               "workload": {"kind": "allreduce", "bytes": 65536, "chunk_bytes": 16384},
                               "transports": [{"name": "MRC", "mode": "mrc"}]})
    record = NetsimBackend().run_case(scenario.cases()[0], lambda f: None)
    assert record.completed
    # at least a full packet's serialisation on each of the 4 links of a leaf-spine-leaf path
    assert 4 * 1024 * 8 / 20e6 < record.base_rtt < record.completion_time
    summary = metrics.summarise(record)
    assert summary["completion_rtts"] == pytest.approx(record.completion_time / record.base_rtt)


def test_a_short_packet_gives_no_base_rtt_sample():
    from host_agent.transport.congestion import RttEstimator
    rtt = RttEstimator(TransportConfig())
    rtt.sent_short(1000)
    rtt.sample_echo(0.001, 1000)                        # an 8-byte message's quick round trip
    assert rtt.min_rtt == float("inf") and rtt.samples == 1
    rtt.sample_echo(0.004, 2000)                        # a full packet's
    assert rtt.min_rtt == 0.004


def test_the_base_rtt_of_an_all_reduce_is_a_full_packets():
    """Ring neighbours under one switch at 2 Mbit/s: a full packet crosses two links (4.5 ms each);
    the all-reduce's 8-byte messages came back in 7.4 ms and were taken as the base RTT."""
    scenario = parse_scenario({"name": "rtt", "topology": "fattree:4", "horizon_s": 20.0,
                               "link": {"rate_bps": 2_000_000},
                               "workload": {"kind": "allreduce", "bytes": 32768, "chunk_bytes": 16384},
                               "transports": [{"name": "MRC", "mode": "mrc"}]})
    record = NetsimBackend().run_case(scenario.cases()[0], lambda f: None)
    assert record.completed
    assert record.base_rtt >= 2 * 1130 * 8 / 2e6
