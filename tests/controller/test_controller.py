"""Controller: P4Info conversion, the P4Runtime client, the installer and the converging control plane.

The client is exercised against `RecordingP4RuntimeServer`, a small in-process P4Runtime server
(gRPC on a unix socket) that keeps table entries the way a target does: INSERT of an existing key
and MODIFY/DELETE of a missing one fail, LPM values must be masked. It is a test double for the
wire protocol; the same client is run against the real switches in tests/testbed/test_integration*.py.
"""
from __future__ import annotations

from concurrent import futures

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from controller import convergence
from controller.entries import SwitchProgram
from pipeline_contract.entries import TableEntry
from controller.installer import InstallError, CompiledProgram, compare, install, verify
from pipeline_contract.p4info import P4InfoIndex, decode_value, encode_value, load_p4info
from pipeline_contract.client import P4RuntimeClient, P4RuntimeError, check_local_address

ROUTING = "MrcIngress.routing"
MEMBER = "MrcIngress.ecmp_member"
LOCAL = "MrcIngress.usid_local"


class RecordingP4RuntimeServer(p4runtime_pb2_grpc.P4RuntimeServicer):
    """An in-memory P4Runtime target: pipeline, table entries, one counter with set values."""

    def __init__(self):
        self.p4info = None
        self.entries: dict[bytes, p4runtime_pb2.TableEntry] = {}
        self.counter_cells: dict[tuple[int, int], tuple[int, int]] = {}
        self.writes = 0
        self.drop_on_read: set[bytes] = set()       # keys "lost" by the target (read back missing)
        self.ignore_last_update = False               # silently skip the last update of a Write

    @staticmethod
    def _key(entry: p4runtime_pb2.TableEntry) -> bytes:
        probe = p4runtime_pb2.TableEntry(table_id=entry.table_id, priority=entry.priority)
        probe.match.extend(sorted(entry.match, key=lambda m: m.field_id))
        return probe.SerializeToString(deterministic=True)

    def StreamChannel(self, request_iterator, context):
        for request in request_iterator:
            if request.WhichOneof("update") == "arbitration":
                reply = p4runtime_pb2.StreamMessageResponse()
                reply.arbitration.CopyFrom(request.arbitration)
                reply.arbitration.status.code = code_pb2.OK
                yield reply

    def SetForwardingPipelineConfig(self, request, context):
        self.p4info = request.config.p4info
        self.entries.clear()
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request, context):
        reply = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        reply.config.p4info.CopyFrom(self.p4info)
        return reply

    def Write(self, request, context):
        updates = request.updates[:-1] if self.ignore_last_update else request.updates
        for update in updates:
            entry = update.entity.table_entry
            key = self._key(entry)
            for fm in entry.match:
                if fm.HasField("lpm"):
                    width = 128
                    value = decode_value(fm.lpm.value)
                    if value & ((1 << (width - fm.lpm.prefix_len)) - 1):
                        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "LPM value has bits past the prefix")
            if update.type == p4runtime_pb2.Update.INSERT and key in self.entries:
                context.abort(grpc.StatusCode.ALREADY_EXISTS, "entry exists")
            if update.type in (p4runtime_pb2.Update.MODIFY, p4runtime_pb2.Update.DELETE) \
                    and key not in self.entries:
                context.abort(grpc.StatusCode.NOT_FOUND, "no such entry")
            if update.type == p4runtime_pb2.Update.DELETE:
                del self.entries[key]
            else:
                self.entries[key] = entry
            self.writes += 1
        return p4runtime_pb2.WriteResponse()

    def Read(self, request, context):
        for wanted in request.entities:
            reply = p4runtime_pb2.ReadResponse()
            if wanted.HasField("table_entry"):
                for key, entry in self.entries.items():
                    if entry.table_id == wanted.table_entry.table_id and key not in self.drop_on_read:
                        reply.entities.add().table_entry.CopyFrom(entry)
            elif wanted.HasField("counter_entry"):
                cid = wanted.counter_entry.counter_id
                for (counter_id, index), (pkts, nbytes) in sorted(self.counter_cells.items()):
                    if counter_id != cid:
                        continue
                    if wanted.counter_entry.HasField("index") and wanted.counter_entry.index.index != index:
                        continue
                    cell = reply.entities.add().counter_entry
                    cell.counter_id, cell.index.index = counter_id, index
                    cell.data.packet_count, cell.data.byte_count = pkts, nbytes
            yield reply


@pytest.fixture
def server(tmp_path):
    """A RecordingP4RuntimeServer on a unix socket; yields (servicer, address)."""
    servicer = RecordingP4RuntimeServer()
    grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(servicer, grpc_server)
    address = f"unix:{tmp_path}/p4rt.sock"
    grpc_server.add_insecure_port(address)
    grpc_server.start()
    try:
        yield servicer, address
    finally:
        grpc_server.stop(grace=None)


@pytest.fixture
def pipeline():
    return CompiledProgram(load_p4info(), b"{}")


@pytest.fixture
def client(server):
    _, address = server
    c = P4RuntimeClient(address, device_id=1, name="s1", timeout=5).connect()
    try:
        yield c
    finally:
        c.close()


def route(prefix: int, plen: int, port: int) -> TableEntry:
    return TableEntry(ROUTING, {"dst_addr": (prefix << (128 - plen), plen)}, "MrcIngress.forward",
                      {"port": port})


def small_program() -> SwitchProgram:
    return SwitchProgram("s1", 1, entries=[
        TableEntry(LOCAL, {"dst_usid_prefix": 0xFC000000_0100}, "MrcIngress.usid_shift"),
        route(0xFC000000_1000, 48, 1),
        route(0xFC000000_1001, 48, 2),
        TableEntry(ROUTING, {"dst_addr": (0xFC000000_0000 << 80, 32)}, "MrcIngress.ecmp_select",
                   {"group": 1, "size": 2}),
        TableEntry(MEMBER, {"group": 1, "index": 0}, "MrcIngress.forward", {"port": 3}),
        TableEntry(MEMBER, {"group": 1, "index": 1}, "MrcIngress.forward", {"port": 4}),
    ])


# --- P4Info conversion -----------------------------------------------------------------------
def test_values_are_canonical_and_range_checked():
    assert encode_value(0, 9) == b"\x00"
    assert encode_value(0x1FF, 9) == b"\x01\xff"
    assert decode_value(b"\x00\x00\x01\xff") == 0x1FF
    with pytest.raises(ValueError, match="does not fit in 9 bits"):
        encode_value(512, 9)


def test_entry_round_trips_through_p4runtime_message():
    index = P4InfoIndex(load_p4info())
    for entry in small_program().entries:
        assert index.from_proto(index.to_proto(entry)) == entry


def test_lpm_value_is_masked_to_its_prefix():
    index = P4InfoIndex(load_p4info())
    msg = index.to_proto(TableEntry(ROUTING, {"dst_addr": ((1 << 128) - 1, 8)}, "MrcIngress.forward",
                                    {"port": 1}))
    assert decode_value(msg.match[0].lpm.value) == 0xFF << 120


def test_bad_names_are_reported_by_name():
    index = P4InfoIndex(load_p4info())
    with pytest.raises(KeyError, match="no table named 'MrcIngress.nope'"):
        index.to_proto(TableEntry("MrcIngress.nope", {}, "MrcIngress.forward", {"port": 1}))
    with pytest.raises(KeyError, match="no match field 'dst'"):
        index.to_proto(TableEntry(ROUTING, {"dst": (0, 0)}, "MrcIngress.forward", {"port": 1}))
    with pytest.raises(ValueError, match=r"needs parameters \['port'\]"):
        index.to_proto(TableEntry(ROUTING, {"dst_addr": (0, 8)}, "MrcIngress.forward", {}))


def test_only_local_addresses_are_accepted():
    check_local_address("unix:/tmp/x.sock")
    check_local_address("127.0.0.1:9559")
    with pytest.raises(ValueError, match="not a unix socket or 127.0.0.1"):
        check_local_address("10.0.0.1:9559")
    with pytest.raises(ValueError):
        P4RuntimeClient("0.0.0.0:9559", device_id=1)


# --- client + installer ------------------------------------------------------------------------
def test_install_writes_reads_back_and_verifies(server, client, pipeline):
    servicer, _ = server
    program = small_program()
    report = install(client, program, pipeline)
    assert report.ok and report.installed == 6
    assert len(servicer.entries) == 6
    assert "6 entries installed and verified" in report.describe()
    assert sorted(client.read_table(MEMBER), key=lambda e: e.match["index"]) == program.entries_of(MEMBER)


def test_verify_names_missing_and_changed_entries(server, client, pipeline):
    servicer, _ = server
    program = small_program()
    install(client, program, pipeline)
    lost = next(iter(servicer.entries))
    servicer.drop_on_read.add(lost)
    client.write([(p4runtime_pb2.Update.MODIFY, route(0xFC000000_1001, 48, 7))])
    report = verify(client, program)
    assert not report.ok
    assert len(report.missing) == 1 and len(report.changed) == 1 and not report.unexpected
    text = report.describe()
    assert "1 missing" in text and "1 changed" in text and "port=7" in text


def test_install_raises_with_the_differences(server, client, pipeline):
    servicer, _ = server
    servicer.ignore_last_update = True
    with pytest.raises(InstallError, match="1 missing") as err:
        install(client, small_program(), pipeline)
    assert err.value.report.missing == [small_program().entries[-1]]


def test_compare_reports_unexpected_entries():
    program = small_program()
    extra = route(0xFC000001_1000, 48, 9)
    report = compare("s1", program.entries, program.entries + [extra])
    assert report.unexpected == [extra] and not report.missing


def test_rejected_write_names_switch_and_reason(server, client, pipeline):
    install(client, small_program(), pipeline)
    with pytest.raises(P4RuntimeError, match=r"s1: Write failed: ALREADY_EXISTS"):
        client.insert([small_program().entries[1]])


def test_counters_read_per_port_and_all(server, client, pipeline):
    servicer, _ = server
    client.set_pipeline(pipeline.p4info)
    cid = client.index.counter("MrcEgress.tx").preamble.id
    servicer.counter_cells[(cid, 1)] = (10, 1000)
    servicer.counter_cells[(cid, 3)] = (5, 640)
    assert client.read_counter("MrcEgress.tx", port=3)[3].packets == 5
    cells = client.read_counter("MrcEgress.tx")
    assert {p: (c.packets, c.bytes) for p, c in cells.items()} == {1: (10, 1000), 3: (5, 640)}


@pytest.mark.slow
def test_connect_to_nothing_fails_with_address(tmp_path):
    client = P4RuntimeClient(f"unix:{tmp_path}/none.sock", device_id=1, name="s9", timeout=0.5)
    with pytest.raises(P4RuntimeError, match="s9: no P4Runtime server at unix:"):
        client.connect()


def test_read_before_pipeline_is_a_clear_error(client):
    with pytest.raises(P4RuntimeError, match="no P4Info"):
        client.read_table(ROUTING)


# --- converging control plane ------------------------------------------------------------------
def test_program_changes_insert_modify_delete_in_safe_order():
    old = small_program()
    new = SwitchProgram("s1", 1, entries=[e for e in old.entries if e.match.get("index") != 1])
    new.entries = [TableEntry(ROUTING, {"dst_addr": (0xFC000000_0000 << 80, 32)},
                              "MrcIngress.ecmp_select", {"group": 1, "size": 1})
                   if e.action == "MrcIngress.ecmp_select" else e for e in new.entries]
    new.entries.append(route(0xFC000000_1002, 48, 5))
    changes = convergence.program_changes(old, new)
    kinds = [k for k, _ in changes]
    assert kinds == [convergence.INSERT, convergence.MODIFY, convergence.DELETE]
    assert changes[1][1].params == {"group": 1, "size": 1}
    assert changes[2][1].match == {"group": 1, "index": 1}
    assert convergence.program_changes(old, old) == []


def test_control_plane_reprograms_after_its_delay_and_restores(server, client, pipeline):
    servicer, _ = server
    baseline = small_program()
    install(client, baseline, pipeline)
    rerouted = SwitchProgram("s1", 1, entries=baseline.entries[:-1] + [
        TableEntry(MEMBER, {"group": 1, "index": 1}, "MrcIngress.forward", {"port": 3})])
    calls = []

    def reroute(topo, down):
        calls.append(down)
        return {"s1": rerouted if down else baseline}

    plane = convergence.ConvergingControlPlane("topo", {"s1": client}, {"s1": baseline},
                                               reroute=reroute, delay=0.2)
    try:
        plane.link_down(("s1", "s3"))
        assert verify(client, baseline).ok            # nothing happens before the delay
        assert plane.wait_idle(timeout=5)
        assert calls == [frozenset({("s1", "s3")})]
        assert verify(client, rerouted).ok
        record = plane.history[-1]
        assert record.updates == {"s1": 1}
        assert record.done_at - record.notified_at >= 0.2
        plane.link_up(("s1", "s3"))
        assert plane.wait_idle(timeout=5)
        assert verify(client, baseline).ok and plane.down_links == frozenset()
        assert not plane.errors
    finally:
        plane.stop()


def test_control_plane_never_writes_to_a_stopped_switch(server, client, pipeline):
    baseline = small_program()
    install(client, baseline, pipeline)
    writes = []

    class DeadSwitch:                                    # a switch whose process is gone
        def write(self, changes):
            writes.append(changes)
            raise RuntimeError("UNAVAILABLE: connection refused")
    dead = DeadSwitch()
    rerouted = SwitchProgram("s1", 1, entries=baseline.entries[:-1] + [
        TableEntry(MEMBER, {"group": 1, "index": 1}, "MrcIngress.forward", {"port": 3})])

    def reroute(topo, down):
        return {"s1": rerouted if down else baseline, "s9": rerouted if down else baseline}
    plane = convergence.ConvergingControlPlane("topo", {"s1": client, "s9": dead},
                                               {"s1": baseline, "s9": baseline}, reroute=reroute, delay=0)
    try:
        plane.switch_down("s9", ["s1-s9", "s2-s9"])
        assert plane.wait_idle(timeout=5)
        assert plane.down_links == frozenset({"s1-s9", "s2-s9"})
        assert not plane.errors and writes == []                # the live switch is rerouted, the dead one left alone
        assert verify(client, rerouted).ok
    finally:
        plane.stop()


def test_control_plane_reports_failed_reprogramming(server, client, pipeline):
    install(client, small_program(), pipeline)

    def reroute(topo, down):
        raise RuntimeError("no route to h9")
    plane = convergence.ConvergingControlPlane("topo", {"s1": client}, {"s1": small_program()},
                                               reroute=reroute, delay=0)
    plane.link_down("l1")
    assert plane.wait_idle(timeout=5)
    assert plane.errors and "no route to h9" in plane.errors[0]
    assert plane.history == []


def test_verify_reports_entries_in_tables_the_program_does_not_use(server, client, pipeline):
    install(client, small_program(), pipeline)
    fault = TableEntry("MrcIngress.port_fault", {"port": 2}, "MrcIngress.fault_drop")
    client.insert([fault])
    report = verify(client, small_program())
    assert report.unexpected == [fault] and not report.missing
    assert "unexpected MrcIngress.port_fault[port=2] -> MrcIngress.fault_drop()" in report.describe()
