"""Fault matrix (issue 5): every fault x {all-reduce, all-to-all} on MRC, on the netsim backend.

Each cell must complete bit-exact with nothing lost and nothing handed twice to the application,
and the fault must really have happened while the collective ran.
"""
from __future__ import annotations

import pytest

from experiments import metrics
from experiments.backends.netsim_backend import NetsimBackend
from experiments.scenario import parse_scenario

FAULTS = {
    "link kill": {"kind": "link_kill", "link": "auto", "at": "30%"},
    "link flap": {"kind": "link_flap", "link": "auto", "at": "20%", "period_s": 0.01},
    "switch blackhole": {"kind": "switch_blackhole", "switch": "auto", "at": "30%"},
    "switch process kill": {"kind": "switch_kill", "switch": "auto", "at": "30%"},
    "1% loss": {"kind": "gray_loss", "link": "auto", "loss": 0.01, "at": 0.0},
}
WORKLOADS = {
    "all-reduce": {"kind": "allreduce", "bytes": 262144, "chunk_bytes": 32768},
    "all-to-all": {"kind": "alltoall", "bytes": 65536, "chunk_bytes": 16384},
}


def cell(fault: dict, workload: dict):
    scenario = parse_scenario({
        "name": "matrix", "topology": "leafspine:2x2x2", "link": {"rate_bps": 100_000_000},
        "horizon_s": 3.0, "sample_interval_s": 0.002, "workload": workload, "faults": [fault],
        "transports": [{"name": "MRC", "mode": "mrc"}]}, "<fault matrix>")
    return NetsimBackend().run_case(scenario.cases()[0])


@pytest.mark.slow
@pytest.mark.parametrize("workload", list(WORKLOADS))
@pytest.mark.parametrize("fault", list(FAULTS))
def test_mrc_completes_bit_exact_under_every_fault(fault, workload):
    record = cell(FAULTS[fault], WORKLOADS[workload])
    s = metrics.summarise(record)
    assert record.faults and record.faults[0].t < (record.completion_time or record.end), "fault after the end"
    assert s["completed"], f"{fault} / {workload}: did not complete within {record.horizon} s"
    assert s["bit_exact"], f"{fault} / {workload}: result differs from the expected one"
    assert s["app_missing"] == 0 and s["app_duplicates"] == 0
    for flow in record.flows:
        assert flow.received_bytes >= flow.expected_bytes, flow
    if fault in ("switch blackhole", "1% loss"):
        assert s["packets_dropped_by_faults"] > 0          # the fault table really dropped packets
