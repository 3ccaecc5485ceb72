"""The Mininet CLI's live EV commands (`evs H1 H2`, `ev ...`, `probe H1 H2 EV`): their output
with a stand-in session, and once on a real model-target network with real agents."""
from __future__ import annotations

import os

import pytest

from tests.conftest import requires_mininet
from host_agent.control import ControlError
from testbed.evsession import format_array

ROWS = [{"slot": 0, "ev": 0x1234, "state": "DENIED", "port": 0, "plane": 0, "path": 1, "drop_count": 0},
        {"slot": 1, "ev": 0xBEEF, "state": "ASSUMED_BAD", "port": 0, "plane": 0, "path": 0, "drop_count": 3,
         "in_use": {"ev": 0x77, "state": "GOOD", "path": 1}}]


def test_the_array_lists_states_drops_and_backups():
    lines = format_array(ROWS)
    assert "drops" in lines[0]
    assert "0x00001234" in lines[1] and "DENIED" in lines[1]
    assert lines[2].split()[2:7] == ["ASSUMED_BAD", "0", "0", "0", "3"]
    assert "backup 0x00000077 GOOD" in lines[2]
    assert lines[-1] == "ASSUMED_BAD 1  DENIED 1"


class FakeSession:
    def __init__(self):
        self.calls = []

    def request(self, host, op, **fields):
        self.calls.append((host, op, fields))
        if op == "array":
            return ROWS
        if op == "probe":
            return {"ev": 0x1234, "port": 1, "rtt_ns": 123_400}
        if fields.get("ev") == "bogus":
            raise ControlError("ev: 'bogus' is not a number (decimal or 0x hex)")
        return {"ev": 0x1234, "state": "DENIED", "slot": 0, "port": 0, "path": 1, "drop_count": 0}


class FakeSessions:
    def __init__(self):
        self.session = FakeSession()
        self.stopped = []

    def get(self, a, b):
        return self.session

    def stop(self, a=None, b=None):
        self.stopped.append((a, b))
        return 1


def cli():
    from cli.up import TestbedCLI
    c = TestbedCLI.__new__(TestbedCLI)          # without running the command loop
    c.ev_sessions = FakeSessions()
    return c


def test_commands_call_the_operations_and_print_results(capsys):
    c = cli()
    c.do_evs("h1 h2")
    assert "DENIED" in capsys.readouterr().out
    c.do_ev("deny h1 h2 0x1234")
    assert "EV 0x00001234 DENIED" in capsys.readouterr().out
    c.do_ev("bad h1 h2 0x1234")
    c.do_ev("replace h1 h2 0x1234 0x99")
    c.do_probe("h1 h2 0x1234")
    assert "RTT 123.4 us" in capsys.readouterr().out
    calls = c.ev_sessions.session.calls
    assert calls[1] == ("h1", "deny", {"ev": "0x1234"})
    assert calls[2] == ("h1", "modify", {"ev": "0x1234", "state": "ASSUMED_BAD"})
    assert calls[3] == ("h1", "replace", {"ev": "0x1234", "new_ev": "0x99"})
    c.do_ev("stop h1 h2")
    assert c.ev_sessions.stopped == [("h1", "h2")]


def test_errors_and_usage_are_printed_not_raised(capsys):
    c = cli()
    c.do_ev("deny h1 h2 bogus")
    assert "error: ev: 'bogus' is not a number" in capsys.readouterr().out
    c.do_ev("explode h1 h2 1")
    assert capsys.readouterr().out.startswith("usage: ev deny|allow")


@pytest.mark.integration
@pytest.mark.slow
@requires_mininet
def test_live_session_on_a_model_network(tmp_path, capsys):
    """Real agents in Mininet hosts: the array, a denial, a probe's RTT; the sockets go on stop."""
    from testbed.evsession import EvSessions
    from testbed.network import TestbedNetwork
    from topologies.builders import leaf_spine
    net = TestbedNetwork(leaf_spine(2, 2, 1), "model", run_dir=tmp_path, progress=lambda _: None)
    sessions = None
    try:
        net.start()
        sessions = EvSessions(net)
        session = sessions.get("h1", "h2")
        array = session.request("h1", "array")
        # every EV usable after the session's small transfer: GOOD, or SKIP for one turn when that
        # transfer's burst drew an ECN echo (a race with the read, more likely with the compiled agent)
        states = {r["state"] for r in array}
        assert len(array) == 128 and "GOOD" in states and states <= {"GOOD", "SKIP"}
        assert {r["path"] for r in array} == {0, 1}                      # two spines: two paths
        denied = session.request("h1", "deny", ev=array[0]["ev"])
        assert denied["state"] == "DENIED"
        result = session.request("h1", "probe", ev=array[1]["ev"], timeout_ns=2_000_000_000)
        assert result["rtt_ns"] is not None and result["rtt_ns"] > 0
        with pytest.raises(ControlError, match="^ev: "):
            session.request("h1", "query", ev=12345)
        sockets = list(session.sockets.values())
        assert all(os.path.exists(s) for s in sockets)
        sessions.stop()
        assert not any(os.path.exists(s) for s in sockets)
    finally:
        if sessions is not None:
            sessions.stop()
        assert net.stop() == []
