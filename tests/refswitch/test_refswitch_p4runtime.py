"""The reference switch's P4Runtime server, driven by the controller's own client over a unix socket."""
from __future__ import annotations

import ipaddress
import os
import signal
import threading

import grpc
import pytest
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from pipeline_contract.entries import TableEntry
from pipeline_contract.client import P4RuntimeClient, P4RuntimeError
from wire import codec, constants
from wire.packets import DataPacket
from pipeline_contract.p4info import load_p4info
from refswitch.p4runtime_server import P4RuntimeServer, P4RuntimeService
from refswitch.switch import SwitchCore

DEVICE = 3


def prefix(text):
    net = ipaddress.IPv6Network(text)
    return int(net.network_address), net.prefixlen


def route(dst, port):
    return TableEntry("MrcIngress.routing", {"dst_addr": prefix(dst)}, "MrcIngress.forward", {"port": port})


@pytest.fixture
def switch(tmp_path):
    sent = []
    core = SwitchCore(lambda port, frame, prio: sent.append((port, frame)) or True)
    server = P4RuntimeServer(core, DEVICE, f"unix:{tmp_path}/p4rt.sock")
    server.start()
    try:
        yield core, server, sent
    finally:
        server.stop()


@pytest.fixture
def client(switch):
    _, server, _ = switch
    c = P4RuntimeClient(server.address, DEVICE, name="s-test", timeout=5).connect()
    c.set_pipeline(load_p4info())
    try:
        yield c
    finally:
        c.close()


def frame_to(dst: str, payload: int = 200) -> bytes:
    pkt = DataPacket(src=ipaddress.IPv6Address("fc00:1:1000::").packed, dst=ipaddress.IPv6Address(dst).packed,
                     ev=1, qp=1, psn=0, va=0, rkey=1, length=payload, msg_id=1, msg_len=payload, tsval=0,
                     payload=bytes(payload))
    return codec.encode(pkt, bytes(6), bytes(6))


def test_entries_written_are_read_back_and_forward(switch, client):
    core, _, sent = switch
    entries = [
        TableEntry("MrcIngress.usid_local", {"dst_usid_prefix": 0xFC0000010100}, "MrcIngress.usid_shift"),
        route("fc00:1:1001::/48", 2),
        TableEntry("MrcIngress.routing", {"dst_addr": prefix("fc00:1:1002::/48")}, "MrcIngress.ecmp_select",
                   {"group": 1, "size": 2}),
        TableEntry("MrcIngress.ecmp_member", {"group": 1, "index": 0}, "MrcIngress.forward", {"port": 3}),
        TableEntry("MrcIngress.ecmp_member", {"group": 1, "index": 1}, "MrcIngress.forward", {"port": 4}),
        TableEntry("MrcIngress.port_config", {"port": 2}, "MrcIngress.set_port_config",
                   {"trim_threshold": 8, "ecn_threshold": 4, "host_facing": 1, "ecn_max_threshold": 4}),
        TableEntry("MrcIngress.port_fault", {"port": 4}, "MrcIngress.fault_drop_random", {"drop_ppm": 5000}),
    ]
    assert client.insert(entries) == len(entries)
    for table in {e.table for e in entries}:
        assert sorted(client.read_table(table), key=repr) == sorted((e for e in entries if e.table == table), key=repr)
    core.receive(frame_to("fc00:1:100:1001::"), 1)
    assert [p for p, _ in sent] == [2]
    assert sent[0][1][38:54] == ipaddress.IPv6Address("fc00:1:1001::").packed


def test_counters_read_by_index_and_whole_array(switch, client):
    core, _, _ = switch
    client.insert([route("fc00:1:1001::/48", 2)])
    frame = frame_to("fc00:1:1001::")
    for _ in range(3):
        core.receive(frame, 1)
    core.receive(frame_to("fc00:9::"), 5)                    # no route
    assert client.read_counter("MrcIngress.rx", 1)[1].packets == 3
    assert client.read_counter("MrcIngress.rx", 1)[1].bytes == 3 * len(frame)
    tx = client.read_counter("MrcEgress.tx")
    assert len(tx) == 512 and tx[2].packets == 3 and sum(v.packets for v in tx.values()) == 3
    assert client.read_counter("MrcIngress.no_route_drops", 5)[5].packets == 1


def test_write_errors_come_back_per_update(client):
    client.insert([route("fc00:1:1001::/48", 2)])
    with pytest.raises(P4RuntimeError) as err:
        client.insert([route("fc00:1:1001::/48", 3)])
    assert "UNKNOWN" in str(err.value) and "update 0" in str(err.value) and "exists" in str(err.value)
    client.write([(p4runtime_pb2.Update.MODIFY, route("fc00:1:1001::/48", 7))])
    client.write([(p4runtime_pb2.Update.DELETE, route("fc00:1:1001::/48", 7))])
    assert client.read_table("MrcIngress.routing") == []


def test_a_foreign_p4info_is_rejected(switch):
    from p4.config.v1 import p4info_pb2
    _, server, _ = switch
    with P4RuntimeClient(server.address, DEVICE, name="s-test", timeout=5) as c:
        foreign = p4info_pb2.P4Info()
        foreign.tables.add().preamble.name = "Other.table"
        with pytest.raises(P4RuntimeError, match="INVALID_ARGUMENT.*P4Info rejected"):
            c.set_pipeline(foreign)


def test_second_controller_is_not_primary_and_cannot_write(switch, client):
    _, server, _ = switch
    backup = P4RuntimeClient(server.address, DEVICE, name="backup", election_id=0, timeout=5)
    with pytest.raises(P4RuntimeError, match="not primary"):
        backup.connect()


@pytest.mark.slow
def test_raw_requests_get_statuses_not_crashes(switch, client):
    _, server, _ = switch
    channel = grpc.insecure_channel(server.address)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
    try:
        caps = stub.Capabilities(p4runtime_pb2.CapabilitiesRequest())
        assert caps.p4runtime_api_version.startswith("1.")
        got = stub.GetForwardingPipelineConfig(p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=DEVICE, response_type=p4runtime_pb2.GetForwardingPipelineConfigRequest.ALL))
        assert {t.preamble.name for t in got.config.p4info.tables} >= {"MrcIngress.routing", "MrcIngress.port_config"}
        # a read of every table (wildcard) after one insert
        client.insert([route("fc00:1:1001::/48", 2)])
        every = [e for r in stub.Read(p4runtime_pb2.ReadRequest(
            device_id=DEVICE, entities=[p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry())])) for e in r.entities]
        assert len(every) == 1
        # the default action of a table reads back as its const default
        default = [e for r in stub.Read(p4runtime_pb2.ReadRequest(device_id=DEVICE, entities=[p4runtime_pb2.Entity(
            table_entry=p4runtime_pb2.TableEntry(table_id=every[0].table_entry.table_id, is_default_action=True))]))
            for e in r.entities]
        assert len(default) == 1 and default[0].table_entry.is_default_action
        # every counter, every index (counter_id 0, no index)
        cells = [e for r in stub.Read(p4runtime_pb2.ReadRequest(device_id=DEVICE, entities=[
            p4runtime_pb2.Entity(counter_entry=p4runtime_pb2.CounterEntry())])) for e in r.entities]
        assert len(cells) == sum(c.size for c in got.config.p4info.counters)
        # unsupported things: a status with a message
        with pytest.raises(grpc.RpcError) as err:
            list(stub.Read(p4runtime_pb2.ReadRequest(device_id=DEVICE, entities=[
                p4runtime_pb2.Entity(register_entry=p4runtime_pb2.RegisterEntry())])))
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED and "register_entry" in err.value.details()
        with pytest.raises(grpc.RpcError) as err:
            list(stub.Read(p4runtime_pb2.ReadRequest(device_id=DEVICE + 1, entities=[
                p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry())])))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        write = p4runtime_pb2.WriteRequest(device_id=DEVICE)
        write.election_id.low = 99                           # not the primary's election id
        write.updates.add(type=p4runtime_pb2.Update.INSERT).entity.table_entry.table_id = 1
        with pytest.raises(grpc.RpcError) as err:
            stub.Write(write)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        # default-action MODIFY of a const default action is refused per update
        write = p4runtime_pb2.WriteRequest(device_id=DEVICE)
        write.election_id.low = 1
        upd = write.updates.add(type=p4runtime_pb2.Update.MODIFY)
        upd.entity.table_entry.CopyFrom(default[0].table_entry)
        with pytest.raises(grpc.RpcError) as err:
            stub.Write(write)
        assert err.value.code() == grpc.StatusCode.UNKNOWN and "const" in err.value.details()
        # a parameter wider than its bitwidth (port 600 in bit<9>)
        proto = client.index.to_proto(route("fc00:1:1003::/48", 5))
        proto.action.action.params[0].value = (600).to_bytes(2, "big")
        write = p4runtime_pb2.WriteRequest(device_id=DEVICE)
        write.election_id.low = 1
        write.updates.add(type=p4runtime_pb2.Update.INSERT).entity.table_entry.CopyFrom(proto)
        with pytest.raises(grpc.RpcError) as err:
            stub.Write(write)
        assert "does not fit" in err.value.details()
    finally:
        channel.close()


def test_trimmed_counter_visible_over_p4runtime(switch, client):
    core, _, sent = switch
    client.insert([route("fc00:1:1001::/48", 2),
                   TableEntry("MrcIngress.port_config", {"port": 2}, "MrcIngress.set_port_config",
                              {"trim_threshold": 0, "ecn_threshold": 0, "host_facing": 0,
                               "ecn_max_threshold": 0})])
    core.receive(frame_to("fc00:1:1001::", payload=500), 1)
    assert len(sent[0][1]) == constants.DATA_HEADERS_LEN
    assert client.read_counter("MrcIngress.trimmed", 2)[2].packets == 1


def test_primary_changes_are_announced_to_every_stream(switch):
    import queue as queue_module
    _, server, _ = switch
    channel = grpc.insecure_channel(server.address)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)

    def open_stream(election_low):
        requests: queue_module.Queue = queue_module.Queue()
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = DEVICE
        req.arbitration.election_id.low = election_low
        requests.put(req)
        responses = stub.StreamChannel(iter(requests.get, None))
        return requests, responses

    def status(responses):
        msg = next(responses)
        return msg.arbitration.status.code, msg.arbitration.election_id.low

    try:
        a_requests, a = open_stream(1)
        assert status(a) == (0, 1)                                  # OK: a is primary
        b_requests, b = open_stream(5)
        assert status(b) == (0, 5)                                  # b takes over ...
        assert status(a) == (6, 5)                                  # ... and a hears it (ALREADY_EXISTS)
        b_requests.put(None)                                        # b leaves
        assert status(a) == (0, 1)                                  # a is primary again
        a_requests.put(None)
    finally:
        channel.close()



class SignalledDuringRead(P4RuntimeService):
    """Sends this process SIGTERM while serving a Read, then waits to see if the handler ran."""

    def __init__(self, core, device_id, handled: threading.Event):
        super().__init__(core, device_id)
        self.handled = handled
        self.handled_while_serving: bool | None = None

    def Read(self, request, context):
        os.kill(os.getpid(), signal.SIGTERM)
        self.handled_while_serving = self.handled.wait(1.0)
        return super().Read(request, context)


@pytest.mark.slow
def test_a_signal_during_a_call_is_held_until_the_call_is_over(tmp_path):
    """An exception raised inside a gRPC call can leave its channel unable to close: SIGTERM once
    hung `mrc-testbed up` that way. The client holds the signal and delivers it after the call."""
    from concurrent import futures
    handled = threading.Event()

    class Stopped(Exception):
        pass

    def on_sigterm(_signum, _frame):
        handled.set()
        raise Stopped

    core = SwitchCore(lambda port, frame, prio: True)
    service = SignalledDuringRead(core, DEVICE, handled)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(service, server)
    address = f"unix:{tmp_path}/p4rt.sock"
    server.add_insecure_port(address)
    server.start()
    previous = signal.signal(signal.SIGTERM, on_sigterm)
    client = P4RuntimeClient(address, DEVICE, name="s-test", timeout=5)
    try:
        client.connect()
        client.set_pipeline(load_p4info())
        with pytest.raises(Stopped):
            client.read_table("MrcIngress.routing")
        assert service.handled_while_serving is False      # held: not run inside the call
        assert handled.is_set()                            # delivered once the call was over
    finally:
        signal.signal(signal.SIGTERM, previous)
        client.close()
        server.stop(0).wait()
