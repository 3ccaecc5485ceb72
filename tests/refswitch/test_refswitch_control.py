"""The reference switch's control socket (refswitch.control): egress queue rates changed at run time,
in the one control protocol (wire.control)."""
from __future__ import annotations

import pytest

from refswitch.control import SERVER, QueueControl, serve
from refswitch.queues import EgressQueues
from wire.control import ControlClient, ControlError


@pytest.fixture
def served(tmp_path):
    queues = EgressQueues()
    queues.configure(2, depth=64, rate_bps=100_000_000)
    server = serve(queues, str(tmp_path / "s1.ctl.sock"))
    yield queues, server.path
    server.stop()


def test_a_rate_set_on_the_socket_is_the_queue_rate_and_its_depth_stays(served):
    queues, path = served
    with ControlClient(path, server=SERVER) as client:
        assert client.request("get_queue_rate", port=2) == {"rate_bps": 100_000_000}
        assert client.request("set_queue_rate", port=2, rate_bps=25_000_000) is None
        assert client.request("get_queue_rate", port=2) == {"rate_bps": 25_000_000}
    assert queues.queue(2).rate_bps == 25_000_000 and queues.queue(2).depth == 64


def test_a_bad_request_is_refused_naming_the_field_and_the_connection_still_serves(served):
    _, path = served
    with ControlClient(path, server=SERVER) as client:
        with pytest.raises(ControlError, match="^rate_bps: -5 is below the minimum 0"):
            client.request("set_queue_rate", port=2, rate_bps=-5)
        with pytest.raises(ControlError, match="^op: 'set_queue_depth' is not one of get_queue_rate, set_queue_rate"):
            client.request("set_queue_depth", port=2, depth=8)
        with pytest.raises(ControlError, match="^port: missing"):
            client.request("get_queue_rate")
        with pytest.raises(ControlError, match="out of range"):
            client.request("set_queue_rate", port=600, rate_bps=1000)
        assert client.send_line("set_queue_rate 2 5")["error"].startswith("request: not JSON")
        assert client.request("get_queue_rate", port=2) == {"rate_bps": 100_000_000}


def test_stopping_removes_the_socket_and_a_missing_switch_is_a_control_error(tmp_path):
    path = tmp_path / "s9.ctl.sock"
    server = serve(EgressQueues(), str(path))
    assert path.exists()
    server.stop()
    assert not path.exists()
    with pytest.raises(ControlError, match=r"s9.ctl.sock: .* \(is the switch running\?\)"):
        ControlClient(str(path), server=SERVER)


def test_the_operations_answer_without_a_socket():
    control = QueueControl(EgressQueues())
    assert control.handle(None, b'{"op": "set_queue_rate", "port": 1, "rate_bps": 0, "id": 7}') == \
        {"id": 7, "ok": True, "result": None}
    assert control.handle(None, b'{"op": "get_queue_rate", "port": 1}')["result"] == {"rate_bps": 0}
    assert control.handle(None, b'')["error"].startswith("request: not JSON")
