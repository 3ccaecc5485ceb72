"""The agent's control socket (host_agent.control) end to end in-process: a ControlServer on a
unix socket in front of two endpoints wired back to back, driven by one loop thread; the
blocking ControlClient in the test."""
from __future__ import annotations

import json
import os
import select
import threading

import pytest

from host_agent.control import ControlClient, ControlError, ControlServer, ControlService, ControlSocketError
from wire.packets import Probe
from tests.host_agent.test_ev_control import Pair


class Served:
    """Endpoint `a` of a Pair behind a control socket; a thread runs the pair and the server."""

    def __init__(self, path: str) -> None:
        self.pair = Pair()
        self.server = ControlServer(path, ControlService(self.pair.a, lambda: self.pair.now))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        pair, server = self.pair, self.server
        while not self._stop.is_set():
            for fd in select.select(server.fds(), (), (), 0.001)[0]:
                server.on_readable(fd)
            before = len(pair.events)
            pair.run(pair.now + 20e-6)
            if len(pair.events) > before:
                server.on_events(pair.events[before:])

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.server.close()


@pytest.fixture
def served(tmp_path):
    s = Served(str(tmp_path / "a.sock"))
    try:
        yield s
    finally:
        s.close()


def test_query_modify_replace_and_probe_over_the_socket(served, tmp_path):
    with ControlClient(str(tmp_path / "a.sock")) as client:
        (conn,) = client.request("connections")
        assert conn["peer"] == "b" and conn["mode"] == "mrc"
        array = client.request("array", peer="b")
        assert len(array) == 16 and {r["state"] for r in array} == {"GOOD"}
        ev = array[0]["ev"]
        assert client.request("deny", peer="b", ev=hex(ev))["state"] == "DENIED"
        assert client.request("query", peer="b", ev=ev)["state"] == "DENIED"
        assert client.request("allow", peer="b", ev=ev)["state"] in ("UNKNOWN", "GOOD")
        new = client.request("replace", peer="b", ev=array[1]["ev"])
        assert new["slot"] == 1 and new["ev"] != array[1]["ev"]
        result = client.request("probe", peer="b", ev=array[2]["ev"])
        assert result["ev"] == array[2]["ev"] and result["port"] == array[2]["port"]
        assert result["rtt_ns"] >= 10_000                           # two 5 us hops of the pair
        assert client.request("modify", peer="b", ev=ev, state="ASSUMED_BAD")["state"] == "ASSUMED_BAD"


def test_an_unanswered_probe_answers_with_no_rtt(served, tmp_path):
    served.pair.lose = lambda pkt: isinstance(pkt, Probe)
    with ControlClient(str(tmp_path / "a.sock")) as client:
        ev = client.request("array", peer="b")[0]["ev"]
        assert client.request("probe", peer="b", ev=ev, timeout_ns=50_000)["rtt_ns"] is None


def test_a_subscriber_gets_ev_events_with_drop_counts(served, tmp_path):
    path = str(tmp_path / "a.sock")
    with ControlClient(path) as watcher, ControlClient(path) as operator:
        assert watcher.subscribe(["ASSUMED_BAD"]) == {"states": ["ASSUMED_BAD"]}
        ev = operator.request("array", peer="b")[3]["ev"]
        operator.request("deny", peer="b", ev=ev)                     # DENIED: not subscribable
        operator.request("modify", peer="b", ev=ev, state="ASSUMED_BAD")
        event = watcher.next_event()
        assert (event["ev"], event["old"], event["new"], event["cause"]) == (ev, "DENIED", "ASSUMED_BAD", "operator")
        assert "drop_count" in event and "port" in event


@pytest.mark.parametrize("line,field", [
    ("not json", "request"),
    ("[1, 2]", "request"),
    ('{"id": 4}', "op"),
    ('{"op": "explode"}', "op"),
    ('{"op": "query", "ev": 1}', "peer"),
    ('{"op": "query", "peer": "zz", "ev": 1}', "peer"),
    ('{"op": "query", "peer": "b"}', "ev"),
    ('{"op": "query", "peer": "b", "ev": "0xzz"}', "ev"),
    ('{"op": "query", "peer": "b", "ev": 5}', "ev"),
    ('{"op": "query", "peer": "b", "qp": 9, "ev": EV}', "qp"),
    ('{"op": "modify", "peer": "b", "ev": EV}', "state"),
    ('{"op": "subscribe", "states": ["DENIED"]}', "states"),
    ('{"op": "probe", "peer": "b", "ev": EV, "timeout_ns": -3}', "timeout_ns"),
])
def test_bad_requests_get_an_error_naming_the_field(served, tmp_path, line, field):
    with ControlClient(str(tmp_path / "a.sock")) as client:
        ev = client.request("array", peer="b")[0]["ev"]
        response = client.send_line(line.replace("EV", str(ev)))           # EV: a real EV of the connection
        assert response["ok"] is False and response["error"].startswith(f"{field}: "), response
        if line.startswith("{") and '"id"' in line:
            assert response["id"] == json.loads(line)["id"]
        assert client.request("connections")                      # the connection still serves


def test_the_client_raises_the_agents_message(served, tmp_path):
    with ControlClient(str(tmp_path / "a.sock")) as client:
        with pytest.raises(ControlError, match="^state: 'SKIP'"):
            client.request("modify", peer="b", ev=client.request("array", peer="b")[0]["ev"], state="SKIP")


def test_the_socket_file_goes_on_close_and_a_live_one_is_not_taken(tmp_path):
    path = str(tmp_path / "c.sock")
    served = Served(path)
    try:
        with pytest.raises(ControlSocketError, match="another agent"):
            ControlServer(path, ControlService(served.pair.a, lambda: 0.0))
    finally:
        served.close()
    assert not os.path.exists(path)
    with pytest.raises(ControlError, match="is the agent running"):
        ControlClient(path)


def test_a_socket_path_too_long_is_refused_with_its_limit(tmp_path):
    served = Served(str(tmp_path / "d.sock"))
    try:
        with pytest.raises(ControlSocketError, match="longer than 107 bytes"):
            ControlServer(str(tmp_path / ("x" * 120)), ControlService(served.pair.a, lambda: 0.0))
    finally:
        served.close()
