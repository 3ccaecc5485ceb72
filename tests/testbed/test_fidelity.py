"""The fidelity monitor: a run the machine's CPU shaped is flagged distorted, with the reason; a light
one is faithful. The verdict's rules on measures given directly, then the measuring on real
processes: one that waits for a CPU because a hog shares its core is named."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from testbed.fidelity import (MACHINE_CPU_LIMIT, PROCESS_CPU_LIMIT, SCHED_WAIT_LIMIT_S, CpuShare, CpuWatch,
                              LinkLoss, Span, judge, judge_measures, link_losses, merge_spans)
from topologies.builders import leaf_spine

LIGHT = CpuShare(mean=0.10, peak=0.25, wait_mean_s=20e-6, wait_peak_s=80e-6)


def test_a_light_case_is_faithful():
    verdict = judge_measures({"s1": LIGHT, "h1": LIGHT}, CpuShare(0.3, 0.5), 0.8,
                             [LinkLoss("s1->s3", 10_000, 10_000), LinkLoss("s3->s1", 9_000, 8_995)], cpus=2)
    assert verdict.faithful and verdict.label == "faithful" and verdict.reasons == []
    assert verdict.as_dict()["measured"]["link_loss"]["s3->s1"] == [9_000, 8_995]


def test_a_switch_at_a_full_core_is_named():
    busy = CpuShare(mean=0.8, peak=PROCESS_CPU_LIMIT + 0.05)
    verdict = judge_measures({"s3": busy, "h1": LIGHT}, CpuShare(0.5, 0.6), 1.0, [], cpus=2)
    assert verdict.label == "distorted"
    assert verdict.reasons == ["s3: CPU 95% of a core at its busiest (mean 80%)"]


def test_waiting_for_a_cpu_and_lost_packets_are_each_a_reason_with_the_busy_machine_as_context():
    late = CpuShare(mean=0.2, peak=0.3, wait_mean_s=0.4e-3, wait_peak_s=SCHED_WAIT_LIMIT_S * 4)
    verdict = judge_measures({"h2": late}, CpuShare(0.9, MACHINE_CPU_LIMIT + 0.04), 3.5,
                             [LinkLoss("s1->s3", 10_000, 9_590)], cpus=2)
    assert [r.split(":")[0] for r in verdict.reasons] == ["h2", "s1->s3", "machine"]
    assert "waited 2 ms for a CPU per wake-up" in verdict.reasons[0]
    assert "4.1% of packets lost before the pipeline (410 of 10000)" in verdict.reasons[1]
    assert "99% busy" in verdict.reasons[2] and "load average up to 3.5" in verdict.reasons[2]


def test_a_busy_machine_alone_is_no_reason():
    """A job at nice 19 keeps the machine busy but yields the CPU to the emulation at once."""
    assert judge_measures({"s1": LIGHT}, CpuShare(1.0, 1.0), 3.0, []).faithful


def test_a_few_packets_in_flight_are_not_a_loss():
    assert judge_measures({}, CpuShare(), 0.0, [LinkLoss("s1->s3", 500, 490)]).faithful


def test_link_losses_pair_each_switch_s_tx_with_its_neighbour_s_rx_and_skip_faulted_nodes():
    topo = leaf_spine(2, 1, 1)                        # s1, s2 leaves; s3 the spine
    tx = {name: {port: 100 for port in topo.ports_of(name)} for name in ("s1", "s2", "s3")}
    rx = {name: {port: 90 for port in topo.ports_of(name)} for name in ("s1", "s2", "s3")}
    losses = {x.link: x.lost for x in link_losses(topo, tx, rx)}
    assert losses == {"s1->s3": 10, "s3->s1": 10, "s2->s3": 10, "s3->s2": 10}
    assert {x.link for x in link_losses(topo, tx, rx, skip={"s2"})} == {"s1->s3", "s3->s1"}


def _pinned(cpu: int, code: str) -> subprocess.Popen:
    return subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c", code])


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("taskset") is None, reason="needs taskset (util-linux) to pin processes")
def test_a_cpu_hog_beside_a_process_that_wakes_often_is_caught():
    """A 'switch' that works 2 ms after each 1 ms sleep shares its core with two busy loops: it waits
    for the CPU after its wake-ups, and the verdict names it."""
    cpu = max(os.sched_getaffinity(0))
    waker = _pinned(cpu, "import time\nwhile True:\n    t = time.perf_counter()\n"
                         "    while time.perf_counter() - t < 0.002: pass\n    time.sleep(0.001)")
    hogs = [_pinned(cpu, "while True: pass") for _ in range(2)]
    watch = CpuWatch(sample_s=0.1, window_s=0.5)
    try:
        watch.watch("s1", waker.pid)
        for i, hog in enumerate(hogs):
            watch.watch(f"hog{i}", hog.pid)
        began = time.time()
        watch.start()
        time.sleep(2.0)
        watch.stop()
    finally:
        for proc in [waker, *hogs]:
            proc.kill()
            proc.wait()
    verdict = judge(watch, [], origin=began)
    mine = [r for r in verdict.reasons if r.startswith("s1:")]
    assert verdict.label == "distorted"
    assert mine and "for a CPU per wake-up" in mine[0], verdict.reasons
    assert watch.processes()["s1"].wait_peak_s > SCHED_WAIT_LIMIT_S
    # and when: spans in seconds since the watch began, merged into one per process and reason
    [(start, end, _)] = [s for s in verdict.spans if s[2] == "s1: CPU wait"]
    assert -0.1 <= start < end <= 2.6
    assert verdict.as_dict()["spans"]


def test_overlapping_spans_of_one_process_and_reason_are_merged():
    spans = [Span(0.0, 1.0, "h1", "CPU"), Span(0.25, 1.25, "h1", "CPU"), Span(0.5, 1.5, "h1", "CPU wait"),
             Span(2.0, 3.0, "h1", "CPU"), Span(0.0, 1.0, "s1", "CPU")]
    assert merge_spans(spans) == [Span(0.0, 1.25, "h1", "CPU"), Span(0.0, 1.0, "s1", "CPU"),
                                  Span(0.5, 1.5, "h1", "CPU wait"), Span(2.0, 3.0, "h1", "CPU")]


def test_a_watch_never_started_has_nothing_to_say():
    watch = CpuWatch()
    watch.stop()                                        # harmless
    assert watch.processes() == {} and watch.machine() == CpuShare()


def test_wakeup_lateness_percentiles_are_bucket_edges_and_the_max_is_exact():
    from host_agent.lateness import WakeupLateness
    late = WakeupLateness()
    assert late.summary() == {"n": 0, "p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    for _ in range(98):
        late.record(30e-6)                  # in [26.9, 32) us: quarter-octave buckets
    late.record(-1e-6)                      # early: counts as on time
    late.record(0.0123)
    s = late.summary()
    assert s["n"] == 100 and s["p50_ms"] == 0.032 and s["max_ms"] == 12.3
    assert s["p99_ms"] == 0.032              # 99 of 100 are at most 32 us
    one = WakeupLateness()
    one.record(0.9e-3)
    assert one.percentile(0.5) == pytest.approx(0.9e-3)          # capped at the max
    for _ in range(10):
        one.record(0.55e-3)
    assert 0.55e-3 <= one.percentile(0.5) <= 0.55e-3 * 1.19     # a bucket edge within 19 %
    late.record(0.0123)
    assert late.summary()["p99_ms"] == 12.3  # now the 99th percentile is in the last, capped at the max


def test_late_timer_wakeups_of_an_agent_are_a_reason():
    verdict = judge_measures({"h1": LIGHT}, CpuShare(0.3, 0.5), 0.8, [], cpus=2)
    verdict.add_lateness({"h1": {"n": 5000, "p50_ms": 0.064, "p99_ms": 4.096, "max_ms": 9.1},
                          "h2": {"n": 5000, "p50_ms": 0.032, "p99_ms": 0.256, "max_ms": 2.0},
                          "h3": {"n": 10, "p50_ms": 5.0, "p99_ms": 9.0, "max_ms": 9.0}})   # too few to judge
    assert verdict.label == "distorted"
    assert verdict.reasons == ["h1: timer wake-ups late by 4.1 ms at p99 (p50 0.064 ms, max 9.1 ms, "
                               "5000 wake-ups; limit 1 ms)"]
    assert verdict.as_dict()["measured"]["wakeups"]["h2"]["p99_ms"] == 0.256


def test_one_timer_wakeup_later_than_a_faults_limit_is_a_reason_though_the_p99_is_within():
    """Under CPU load an agent's single latest wake-up came 12-156 ms late with its p99 within
    1 ms: its connections stalled that long once. One reason, naming the latest; an agent whose
    p99 is a reason already is not named twice."""
    verdict = judge_measures({"h1": LIGHT}, CpuShare(0.3, 0.5), 0.8, [], cpus=2)
    verdict.add_lateness({"h1": {"n": 5000, "p50_ms": 0.064, "p99_ms": 0.512, "max_ms": 156.2},
                          "h2": {"n": 20, "p50_ms": 0.032, "p99_ms": 0.256, "max_ms": 31.0},   # few, still judged
                          "h3": {"n": 5000, "p50_ms": 0.032, "p99_ms": 0.256, "max_ms": 19.9},
                          "h4": {"n": 5000, "p50_ms": 0.064, "p99_ms": 4.096, "max_ms": 90.0}})
    assert verdict.reasons == ["h4: timer wake-ups late by 4.1 ms at p99 (p50 0.064 ms, max 90 ms, "
                               "5000 wake-ups; limit 1 ms)",
                               "h1: a timer wake-up came 156 ms late (2 of the 3 agents whose p99 was "
                               "within its limit had one later than 20 ms)"]
    within = judge_measures({"h1": LIGHT}, CpuShare(0.3, 0.5), 0.8, [], cpus=2)
    within.add_lateness({"h3": {"n": 5000, "p50_ms": 0.032, "p99_ms": 0.256, "max_ms": 19.9}})
    assert within.label == "faithful"


def test_a_queue_served_below_its_rate_while_backlogged_is_a_reason():
    verdict = judge_measures({}, CpuShare(), 0.0, [], cpus=2)
    verdict.add_queue_service({"s3": {2: {"rate_bps": 20_000_000, "busy_s": 0.8, "lost_s": 0.2},
                                      4: {"rate_bps": 20_000_000, "busy_s": 1.0, "lost_s": 0.01}},
                               "s4": {1: {"rate_bps": 20_000_000, "busy_s": 0.01, "lost_s": 0.02}}})  # too short
    assert verdict.reasons == ["s3 port 2: queue served at 80% of its 20 Mbit/s while backlogged "
                               "(200 ms behind over 1.00 s)"]


def test_the_model_queue_counts_service_it_could_not_catch_up_on():
    from refswitch.queues import MAX_LAG, EgressQueue
    q = EgressQueue(1, [0] * 4, rate_bps=8_000_000)          # 1000 bytes take 1 ms
    assert q.service() is None
    q.charge(1000, 0.0, backlogged=True)                     # on time
    q.charge(1000, 0.001 + MAX_LAG / 2, backlogged=True)     # late, but within what it may catch up on
    assert q.service()["lost_s"] == 0.0
    q.charge(1000, 0.002 + MAX_LAG + 0.010, backlogged=True)  # 10 ms later than it can catch up on
    s = q.service()
    assert s["busy_s"] == pytest.approx(0.003) and s["lost_s"] == pytest.approx(0.010)


def test_a_slow_emulated_network_tolerates_longer_waits_and_later_wakeups():
    from testbed.fidelity import VerdictLimits
    # 1 KB at 20 and 0.625 Mbit/s
    fast, slow = VerdictLimits.for_packet_time(0.4e-3), VerdictLimits.for_packet_time(13e-3)
    assert (fast.sched_wait_s, fast.wakeup_late_s) == (SCHED_WAIT_LIMIT_S, 1e-3)
    assert slow.sched_wait_s == pytest.approx(6.5e-3) and slow.wakeup_late_s == pytest.approx(13e-3)
    waited = {"s6": CpuShare(mean=0.1, peak=0.2, wait_mean_s=0.1e-3, wait_peak_s=0.65e-3)}
    late = {"h1": {"n": 900, "p50_ms": 0.064, "p99_ms": 1.2, "max_ms": 1.4}}
    for limits, distorted in ((fast, True), (slow, False)):
        verdict = judge_measures(waited, CpuShare(0.3, 0.5), 0.8, [], cpus=2, limits=limits)
        verdict.add_lateness(late)
        assert (verdict.label == "distorted") is distorted, verdict.reasons
        assert len(verdict.reasons) == (2 if distorted else 0)


def test_a_fault_that_took_effect_late_is_a_reason():
    """A link set down waits for the kernel's own threads: an emulation keeping every CPU busy at
    real-time priority made that 235-290 ms, and the run had looked faithful."""
    verdict = judge_measures({"h1": LIGHT}, CpuShare(0.3, 0.5), 0.8, [], cpus=2)
    verdict.add_fault_lateness([("link down", "s1-s3", 0.0058), ("link up", "s1-s3", 0.004)])
    assert verdict.faithful
    verdict.add_fault_lateness([("link down", "s1-s3", 0.2466)])
    assert verdict.label == "distorted"
    assert verdict.reasons == ["s1-s3: link down took effect 247 ms after it was due (limit 20 ms)"]
    assert verdict.as_dict()["measured"]["faults_late_ms"] == [["link down", "s1-s3", 246.6]]


def test_fault_timers_record_a_fault_when_it_has_taken_effect():
    from experiments.backends.mininet_backend import FaultTimers
    from experiments.faults import FaultAction
    from experiments.record import CaseRecord

    class SlowTarget:                                    # a link that takes 60 ms to go down
        def set_link(self, a, b, up):
            time.sleep(0.06)

    record = CaseRecord("s", "v", "t", "mrc", "mininet", 0, "topo", 2, "allreduce")
    start = time.time()
    timers = FaultTimers(SlowTarget(), record, start)
    action = FaultAction(0.0, "link down", "s1-s3", lambda t: t.set_link("s1", "s3", False), True)
    timers.start([action], start)
    timers.timers[0].join(5)
    [event] = record.faults
    [(what, where, late)] = timers.late
    assert (what, where) == ("link down", "s1-s3") and late >= 0.06
    assert event.t >= 0.06 and event.t == pytest.approx(late, abs=0.01)


def test_agents_that_began_their_workload_late_are_a_reason_naming_the_last():
    """A collective waits for its last member: agents launched over ssh on a busy machine came up
    seconds after the common start, and the all-reduce lost that much of its horizon."""
    verdict = judge_measures({"h1": LIGHT}, CpuShare(0.3, 0.5), 0.8, [], cpus=2)
    verdict.add_start_lateness({"h1": 0.0, "h2": 0.012})
    assert verdict.faithful
    verdict.servers = {"h1": "10.0.0.1", "h2": "10.0.0.1", "h15": "10.0.0.2", "h16": "10.0.0.2"}
    verdict.add_start_lateness({"h1": 0.0, "h2": 0.012, "h15": 6.1, "h16": 6.9})
    assert verdict.label == "distorted"
    assert verdict.as_dict()["reasons"] == [
        "h16 (server 10.0.0.2): began its workload 6.9 s after the common start (2 of 4 agents late; limit 20 ms)"]
    assert verdict.measured["starts_late_ms"] == {"h1": 0.0, "h15": 6100.0, "h16": 6900.0, "h2": 12.0}
    never = judge_measures({"h1": LIGHT}, CpuShare(0.3, 0.5), 0.8, [], cpus=2)
    never.add_start_lateness({"h1": 0.0, "h2": None, "h3": None})
    assert never.reasons == ["h2: never began its workload (no begin record in its log; neither did h3)"]
