"""The switch_ev_deny fault on netsim: hosts deny the EVs whose paths cross a switch (as an
operator would before maintenance), the workload finishes over the other paths, and the EVs
come back (UNKNOWN, then GOOD after a probe) when allowed again."""
from __future__ import annotations

import pytest

from tests.conftest import requires_mininet
from experiments.backends.netsim_backend import NetsimBackend
from experiments.ev_deny import set_evs_denied
from experiments.scenario import ScenarioError, parse_scenario

SCENARIO = {"name": "maintenance", "topology": "leafspine:2x2x1", "link": {"rate_bps": 100_000_000},
            "workload": {"kind": "alltoall", "bytes": 262144, "chunk_bytes": 16384},
            "transports": [{"name": "MRC", "mode": "mrc"}]}


def run(fault: dict):
    scenario = parse_scenario({**SCENARIO, "faults": [fault]})
    (case,) = scenario.cases()
    return NetsimBackend().run_case(case)


def test_denied_evs_go_out_of_use_and_the_job_completes():
    record = run({"kind": "switch_ev_deny", "switch": "auto", "at": 0.001})
    assert [f.what for f in record.faults] == ["EVs denied"]
    denied = [e for e in record.ev_events if e["kind"] == "ev_state" and e["new"] == "DENIED"]
    assert denied and all(e["cause"] == "operator" for e in denied)
    assert not [e for e in record.ev_events if e["kind"] == "ev_state" and e["new"] == "ASSUMED_BAD"]
    assert record.completion_time is not None


def test_allowed_again_the_evs_are_probed_then_good():
    record = run({"kind": "switch_ev_deny", "switch": "auto", "at": 0.001, "repair_after_s": 0.002})
    assert [f.what for f in record.faults] == ["EVs denied", "EVs allowed"]
    changes = [(e["old"], e["new"]) for e in record.ev_events if e["kind"] == "ev_state"]
    assert ("DENIED", "UNKNOWN") in changes and ("UNKNOWN", "GOOD") in changes


def test_a_denied_ev_carries_no_packet_through_the_switch():
    """After the denial no data packet of any host goes out on a path crossing the switch."""
    from experiments.backends.netsim_backend import NetsimTarget
    from experiments.backends.netsim_traffic import Traffic
    from experiments.transport_sizing import transport_config
    from experiments.workloads import variant_topology
    from netsim import Simulator
    from simulation import network
    from topologies.model import TIER_LEAF
    scenario = parse_scenario({**SCENARIO, "faults": []})
    (case,) = scenario.cases()
    topo = variant_topology(case.variant)
    fab = network(topo, Simulator(1))
    traffic = Traffic(fab, case, transport_config(case, topo))
    spine = next(s.name for s in topo.switches if s.tier != TIER_LEAF)
    assert set_evs_denied(NetsimTarget(fab, None, traffic.endpoints).ev_controls(), topo.switch(spine), True) > 0
    for host, ep in traffic.endpoints.items():
        for conn in ep.connections.values():
            crossing = {k for k, p in enumerate(conn.evset.paths) if spine in fab.path_of_address(p.plane, p.dst)}
            assert crossing
            for _ in range(200):
                ev = conn.evset.next_data_ev(0.0)
                assert ev.path_key not in crossing


def test_the_kind_names_a_switch():
    with pytest.raises(ScenarioError, match="link"):
        parse_scenario({**SCENARIO, "faults": [{"kind": "switch_ev_deny", "link": ["s1", "s3"]}]})


def live_maintenance_run(backend, rate_bps: int):
    """SCENARIO at `rate_bps` on a live `backend` (Mininet), the EVs through an `auto` switch denied
    at 20 % of the bytes and allowed 0.3 s later: the agents log operator denials, the job
    completes bit-exact and the control sockets' folders are gone. Returns the record."""
    import glob
    from experiments import metrics
    scenario = parse_scenario({**SCENARIO, "link": {"rate_bps": rate_bps},
                               "faults": [{"kind": "switch_ev_deny", "switch": "auto", "at": "20%",
                                           "repair_after_s": 0.3}]})
    (case,) = scenario.cases()
    before = set(glob.glob("/tmp/mrc-ctl-*"))
    record = backend.run_case(case)
    summary = metrics.summarise(record)
    assert [f.what for f in record.faults][:1] == ["EVs denied"], (record.notes, summary)
    denied = [e for e in record.ev_events if e["kind"] == "ev_state" and e["new"] == "DENIED"]
    assert denied and all(e["cause"] == "operator" for e in denied)
    assert summary["completed"] and summary["bit_exact"], summary
    assert set(glob.glob("/tmp/mrc-ctl-*")) == before
    return record


@pytest.mark.integration
@pytest.mark.slow
@requires_mininet
def test_on_the_model_testbed_agents_deny_through_their_control_sockets(tmp_path):
    """The mininet backend runs the fault through the agents' control sockets."""
    from experiments.backends.mininet_backend import MininetBackend
    record = live_maintenance_run(MininetBackend("model", run_root=tmp_path), 20_000_000)
    assert not [n for n in record.notes if n.startswith("left behind")], record.notes


@pytest.mark.slow
def test_the_ev_timeline_is_drawn_with_the_denied_and_unknown_states(tmp_path, monkeypatch):
    from experiments import metrics, plots
    record = run({"kind": "switch_ev_deny", "switch": "auto", "at": 0.001, "repair_after_s": 0.002})
    drawn = []
    real_patch = plots.Patch
    monkeypatch.setattr(plots, "Patch", lambda **kw: drawn.append(kw["label"]) or real_patch(**kw))
    paths = plots.make_figures([record], [metrics.summarise(record)], tmp_path, "maintenance")
    assert tmp_path / "ev_states.png" in paths
    assert {"DENIED", "UNKNOWN"} <= set(drawn)
