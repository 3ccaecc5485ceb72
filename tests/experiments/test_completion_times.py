"""A flow's completion as its receiver and as its sender see it, and the ideal it is divided by
(`metrics.flows_over_ideal`): what `crosscheck` compares netsim and htsim_uec on."""
from __future__ import annotations

from pathlib import Path

import pytest

from experiments import metrics
from experiments.record import CaseRecord, FlowRecord
from experiments.scenario import load_scenario

DATACENTER = Path(__file__).resolve().parents[2] / "experiments" / "datacenter.yaml"


def two_into_one() -> CaseRecord:
    record = CaseRecord("s", "incast", "MRC", "mrc", "netsim", 1, "t", 3, "incast")
    record.flows = [FlowRecord("a", "r", 1000, finish=2e-6, acked=3e-6),
                    FlowRecord("b", "r", 1000, finish=4e-6, acked=5e-6)]
    return record


def test_the_ideal_counts_every_byte_into_the_receiver_plus_a_base_rtt():
    # 2,000 bytes at 8 Gbit/s take 2 us; with a 1 us base RTT the ideal is 3 us
    assert metrics.flows_over_ideal(two_into_one(), 8e9, 1e-6) == pytest.approx([2 / 3, 4 / 3])


def test_acked_divides_the_senders_completion_and_wire_bytes_lengthen_the_ideal():
    record = two_into_one()
    assert metrics.flows_over_ideal(record, 8e9, 1e-6, acked=True) == pytest.approx([1.0, 5 / 3])
    # headers of half the payload: 3,000 wire bytes, 3 us, plus the base RTT
    assert metrics.flows_over_ideal(record, 8e9, 1e-6, acked=True, wire_factor=1.5) == pytest.approx([0.75, 1.25])
    record.flows[0].acked = None
    assert metrics.flows_over_ideal(record, 8e9, 1e-6, acked=True) is None
    assert metrics.flows_over_ideal(record, 8e9, 1e-6) is not None


def test_netsim_runs_until_the_senders_saw_their_flows_acknowledged_only_when_asked():
    from experiments.backends.netsim_backend import NetsimBackend
    scenario = load_scenario(DATACENTER, quick=True, seed=1)
    case = next(c for c in scenario.cases() if c.variant.label == "incast" and c.transport.mode == "mrc")
    record = NetsimBackend(until_acked=True).run_case(case)
    assert record.completed and all(f.acked is not None and f.acked > f.finish for f in record.flows)
    assert record.end == pytest.approx(max(f.acked for f in record.flows))
    early = NetsimBackend().run_case(case)                    # stops when the last byte arrived
    last = max(early.flows, key=lambda f: f.finish)
    assert last.acked is None and early.end == pytest.approx(last.finish)
    assert [f.finish for f in early.flows] == [f.finish for f in record.flows]


def test_a_netsim_record_gives_link_rates_as_floats_in_either_build():
    # the compiled build holds a link's rate as a float, pure Python as given: the records (and so
    # raw.jsonl) of the two builds must read the same
    from experiments.backends.netsim_backend import NetsimBackend
    scenario = load_scenario(DATACENTER, quick=True, seed=1)
    case = next(c for c in scenario.cases() if c.variant.label == "incast" and c.transport.mode == "mrc")
    record = NetsimBackend().run_case(case)
    assert record.links and all(type(link.rate_bps) is float for link in record.links)
