"""The one control protocol (wire.control): framing, typed requests refused naming the field, the
server on its own thread with events, and the client's errors."""
from __future__ import annotations

import io
from typing import Literal

import pytest
from pydantic import Field

from wire.control import (LATER, ControlClient, ControlError, ControlServer, ControlSocketError, Handlers,
                          Operations, Request, decode, encode, event, read_message, write_message)


class Add(Request):
    op: Literal["add"]
    a: int
    b: int = Field(0, ge=0)


class Watch(Request):
    op: Literal["watch"]


class Adder(Handlers):
    """Adds; `watch` answers later, as an event and then a response."""

    def __init__(self) -> None:
        super().__init__(Operations(Add, Watch), {"add": lambda _c, r: r.a + r.b, "watch": self._watch})
        self.server = None

    def _watch(self, client, request):
        self.server.send(client, event("tick", {"n": 1}))
        self.server.send(client, {"id": request.id, "ok": True, "result": "watched"})
        return LATER


@pytest.fixture
def served(tmp_path):
    service = Adder()
    server = ControlServer(str(tmp_path / "a.sock"), service)
    service.server = server
    server.start()
    yield server
    server.stop()


def test_a_message_is_one_line_and_a_bad_line_is_named():
    assert encode({"op": "add", "a": 1}) == b'{"op":"add","a":1}\n'
    assert decode(b'{"op": "add"}\n') == {"op": "add"}
    with pytest.raises(ValueError, match="^request: not JSON"):
        decode("add 1 2")
    with pytest.raises(ValueError, match="^request: not a JSON object"):
        decode("[1]")


@pytest.mark.parametrize("message, error", [
    ({"a": 1}, "op: missing"),
    ({"op": "sub", "a": 1}, "op: 'sub' is not one of add, watch"),
    ({"op": "add"}, "a: missing"),
    ({"op": "add", "a": "1"}, "a: expected an integer, got str '1'"),
    ({"op": "add", "a": 1, "b": -1}, "b: -1 is below the minimum 0"),
    ({"op": "add", "a": 1, "c": 2}, "c: unknown field; expected one of a, b, id, op"),
])
def test_a_bad_request_is_refused_naming_the_field(message, error):
    service = Adder()
    assert service.handle(None, encode({**message, "id": 9})) == {"id": 9, "ok": False, "error": error}
    assert service.handle(None, encode({"op": "add", "a": 2, "b": 3})) == {"id": None, "ok": True, "result": 5}


def test_the_server_on_its_thread_answers_in_order_and_sends_events(served):
    with ControlClient(served.path) as client:
        assert client.request("add", a=1, b=2) == 3
        with pytest.raises(ControlError, match="^b: -4 is below the minimum 0$"):
            client.request("add", a=1, b=-4)
        assert client.request("watch") == "watched"
        assert client.next_event() == {"n": 1}
        assert client.send_line("oops")["error"].startswith("request: not JSON")


def test_a_live_socket_is_not_taken_and_a_gone_server_is_a_control_error(served, tmp_path):
    with pytest.raises(ControlSocketError, match="another process is listening"):
        ControlServer(served.path, Adder())
    with pytest.raises(ControlError, match=r"\(is the adder running\?\)"):
        ControlClient(str(tmp_path / "none.sock"), server="the adder")


def test_messages_on_a_pipe_text_or_binary():
    binary, text = io.BytesIO(), io.StringIO()
    write_message(binary, event("ready"))
    write_message(text, {"op": "go"})
    binary.seek(0)
    text.seek(0)
    assert read_message(binary) == {"event": "ready", "data": None} and read_message(binary) is None
    assert read_message(text) == {"op": "go"}
