"""The reference switch's control socket (refswitch.control): egress queue rates changed at run time."""
from __future__ import annotations

import pytest

from refswitch.control import ControlError, ControlServer, execute, request
from refswitch.queues import EgressQueues


@pytest.fixture
def served(tmp_path):
    queues = EgressQueues()
    queues.configure(2, depth=64, rate_bps=100_000_000)
    server = ControlServer(queues, str(tmp_path / "s1.ctl.sock"))
    server.start()
    yield queues, server.path
    server.stop()


def test_a_rate_set_on_the_socket_is_the_queue_rate_and_its_depth_stays(served):
    queues, path = served
    assert request(path, ["get_queue_rate 2"]) == ["ok 100000000"]
    assert request(path, ["set_queue_rate 2 25000000", "get_queue_rate 2"]) == ["ok", "ok 25000000"]
    assert queues.queue(2).rate_bps == 25_000_000 and queues.queue(2).depth == 64


def test_a_bad_command_is_refused_naming_what_is_wrong(served):
    _, path = served
    with pytest.raises(ControlError, match="RATE_BPS '-5'"):
        request(path, ["set_queue_rate 2 -5"])
    with pytest.raises(ControlError, match="unknown command"):
        request(path, ["set_queue_depth 2 8"])
    with pytest.raises(ControlError, match="out of range"):
        request(path, ["set_queue_rate 600 1000"])


def test_stopping_removes_the_socket_and_a_missing_switch_is_a_control_error(tmp_path):
    path = tmp_path / "s9.ctl.sock"
    server = ControlServer(EgressQueues(), str(path))
    server.start()
    assert path.exists()
    server.stop()
    assert not path.exists()
    with pytest.raises(ControlError, match="s9.ctl.sock"):
        request(str(path), ["get_queue_rate 1"])


def test_execute_answers_without_a_socket():
    queues = EgressQueues()
    assert execute(queues, "set_queue_rate 1 0") == "ok"
    assert execute(queues, "get_queue_rate 1") == "ok 0"
    assert execute(queues, "").startswith("error")
