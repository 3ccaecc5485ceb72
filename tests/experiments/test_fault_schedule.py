"""One schedule of a case's faults for both backends, and one switch_ev_deny rule reached through
each backend's EV controls (in-process on netsim, the agents' sockets on the testbed)."""
from __future__ import annotations

import pytest

from experiments.backends.live_target import ControlSocket, LiveTarget
from experiments.backends.netsim_backend import NetsimTarget
from experiments.backends.netsim_traffic import Traffic
from experiments.ev_deny import crosses, set_evs_denied
from experiments.faults import FaultSchedule
from experiments.scenario import ScenarioError, parse_scenario
from experiments.transport_sizing import transport_config
from experiments.workloads import variant_topology
from wire.control import ControlError
from netsim import Simulator
from simulation import network
from topologies.paths import host_paths

BASE = {"name": "plan", "topology": "leafspine:2x2x1", "link": {"rate_bps": 100_000_000},
        "workload": {"kind": "alltoall", "bytes": 65536, "chunk_bytes": 16384},
        "transports": [{"name": "MRC", "mode": "mrc"}]}


def case_with(faults: list[dict], **extra):
    return parse_scenario({**BASE, **extra, "faults": faults}).cases()[0]


def test_faults_split_by_trigger_and_a_share_is_handed_out_once():
    case = case_with([{"kind": "link_kill", "link": "auto", "at": 0.01},
                      {"kind": "switch_blackhole", "switch": "s3", "at": "40%"},
                      {"kind": "gray_loss", "link": ["s1", "s4"], "loss": 0.1, "at": "20%"}])
    schedule = FaultSchedule.of_case(case, variant_topology(case.variant), 1.0)
    assert [p.label for p in schedule.plans()] == [f.label for f in case.variant.faults]
    assert [f.spec.kind for f in schedule.timed()] == ["link_kill"]
    assert schedule.waiting
    reached = lambda share: 7.0 if share <= 0.3 else None          # noqa: E731 - 30 % have arrived, at t = 7
    assert [(f.spec.kind, at) for f, at in schedule.reached(reached)] == [("gray_loss", 7.0)]
    assert schedule.reached(reached) == [] and schedule.waiting      # given once; the blackhole still waits
    assert [f.spec.kind for f, _ in schedule.reached(lambda share: 9.0)] == ["switch_blackhole"]
    assert not schedule.waiting


def test_every_action_carries_the_index_of_its_fault():
    case = case_with([{"kind": "link_flap", "link": ["s1", "s3"], "at": 0.0, "period_s": 0.1, "flaps": 3},
                      {"kind": "switch_ev_deny", "switch": "s4", "at": "10%", "repair_after_s": 0.2}])
    schedule = FaultSchedule.of_case(case, variant_topology(case.variant), 1.0)
    assert [[a.fault for a in f.actions] for f in schedule.faults] == [[0, 0, 0], [1, 1]]
    assert [a.what for a in schedule.faults[1].actions] == ["EVs denied", "EVs allowed"]


def test_a_named_switch_that_does_not_exist_is_refused_when_the_file_is_read():
    with pytest.raises(ScenarioError, match=r"faults\[0\].switch: 's99' is not a switch of leafspine"):
        case_with([{"kind": "switch_ev_deny", "switch": "s99", "at": 0.0}])


def netsim_hosts(floor: int | None = None):
    """A netsim fabric with the case's connections open, and its fault target."""
    params = {} if floor is None else {"ev_min_active": floor}
    case = parse_scenario({**BASE, "transports": [{"name": "MRC", "mode": "mrc", "params": params}]}).cases()[0]
    topo = variant_topology(case.variant)
    fab = network(topo, Simulator(1))
    traffic = Traffic(fab, case, transport_config(case, topo))
    return topo, traffic, NetsimTarget(fab, None, traffic.endpoints)


def test_deny_then_allow_changes_exactly_the_evs_through_the_switch():
    topo, traffic, target = netsim_hosts()
    spine = topo.switch("s3")
    denied = set_evs_denied(target.ev_controls(), spine, True)
    states = {(h, c.local_qp, ev.value): (ev.state.value, spine.name in fab_path(topo, h, c.peer, ev, c))
              for h, ep in traffic.endpoints.items() for c in ep.connections.values() for ev in c.evset.by_value.values()}
    assert denied == sum(through for _, through in states.values()) > 0
    assert all((state == "DENIED") == through for state, through in states.values())
    assert set_evs_denied(target.ev_controls(), spine, True) == 0               # denied already: nothing to do
    assert set_evs_denied(target.ev_controls(), spine, False) == denied
    assert all(ev.state.value == "UNKNOWN" for ep in traffic.endpoints.values() for c in ep.connections.values()
               for ev in c.evset.by_value.values() if crosses(c.evset.path_of(ev).dst.hex(), spine))


def fab_path(topo, host, peer, ev, conn) -> tuple[str, ...]:
    """The switches of the uSID path an EV takes, from the topology's own path list."""
    address = conn.evset.path_of(ev).dst
    return next(p.switches for p in host_paths(topo, host, peer) if p.address.packed == address)


def test_a_connection_at_its_floor_keeps_the_rest():
    """Half of each connection's 128 EVs cross a spine; with the floor at 100 the denial stops
    there: every connection keeps exactly 100 EVs not denied."""
    topo, traffic, target = netsim_hosts(floor=100)
    assert set_evs_denied(target.ev_controls(), topo.switch("s3"), True) == 2 * 28      # h1 and h2: a connection each
    for ep in traffic.endpoints.values():
        for conn in ep.connections.values():
            assert conn.evset.not_denied() == 100


class _Unreachable:
    host = "h9"

    def open(self):
        raise ControlError("control socket /nowhere: No such file or directory (is the agent running?)")


class _Answering:
    """An agent that answers the EV operations from a list of connections with no EVs."""

    host = "h1"

    def __init__(self):
        self.asked = []

    def open(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.closed = True

    def request(self, op, **fields):
        self.asked.append(op)
        return [{"peer": "h2", "qp": 256, "name": "x", "mode": "mrc"}] if op == "connections" else []


class _Net:
    topology = None


def test_the_live_target_passes_over_an_agent_it_cannot_reach(caplog):
    answering = _Answering()
    target = LiveTarget(_Net(), [_Unreachable(), ControlSocket("h8", "/nonexistent/mrc-ctl.sock"), answering])
    topo = variant_topology(case_with([]).variant)
    assert set_evs_denied(target.ev_controls(), topo.switch("s3"), True) == 0
    assert answering.asked == ["connections", "array"] and answering.closed
    assert "h9" in caplog.text and "h8" in caplog.text
