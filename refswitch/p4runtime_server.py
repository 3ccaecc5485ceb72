"""P4Runtime gRPC server of the reference switch (grpcio + the p4runtime protos).

Supports what the controller uses with BMv2: StreamChannel primary arbitration,
Set/GetForwardingPipelineConfig (the P4Info is kept, the device config is ignored), Write of
table entries (INSERT/MODIFY/DELETE, default action MODIFY), Read of table entries and
counter entries (with wildcards), Capabilities. Anything else gets a gRPC status with a
message. Listens on `unix:/path` or `127.0.0.1:port` only.
"""
from __future__ import annotations

import logging
import queue
import threading
from concurrent import futures

import grpc
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from pipeline_contract.entries import TableEntry
from pipeline_contract.p4info import P4InfoIndex
from refswitch.pipeline import Pipeline
from refswitch.tables import TableError, TableStore

log = logging.getLogger("mrc.refswitch")

P4RUNTIME_API_VERSION = "1.4.1"
READ_CHUNK = 1000            # entities per ReadResponse


class AddressError(ValueError):
    """A gRPC listen address other than a unix socket or 127.0.0.1."""


def check_address(address: str) -> str:
    """Return `address` if it is `unix:/path` or `127.0.0.1:port`; raise AddressError otherwise."""
    if address.startswith("unix:"):
        if len(address) <= len("unix:"):
            raise AddressError("gRPC address 'unix:' needs a socket path, e.g. unix:/tmp/s1.sock")
        return address
    host, sep, port = address.rpartition(":")
    if sep and host == "127.0.0.1" and port.isdigit():
        return address
    raise AddressError(f"gRPC address {address!r} refused: the switch listens only on unix:/path "
                       "or 127.0.0.1:PORT")


class _Abort(Exception):
    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


_CODES = {name: getattr(grpc.StatusCode, name) for name in
          ("INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "UNIMPLEMENTED", "FAILED_PRECONDITION",
           "PERMISSION_DENIED", "OUT_OF_RANGE", "INTERNAL")}


def decode_entry(index: P4InfoIndex, msg: p4runtime_pb2.TableEntry) -> TableEntry:
    """A TableEntry (names) from a written or queried protobuf entry; TableError when it is not valid."""
    if msg.table_id not in index.tables_by_id:
        raise TableError("NOT_FOUND", f"unknown table id {msg.table_id}")
    if msg.HasField("action"):
        if msg.action.WhichOneof("type") != "action":
            raise TableError("UNIMPLEMENTED", f"table {index.name_of(msg.table_id)}: only direct actions are supported")
        if msg.action.action.action_id not in index.actions_by_id:
            raise TableError("NOT_FOUND", f"unknown action id {msg.action.action.action_id}")
    try:
        return index.from_proto(msg)
    except ValueError as exc:          # P4InfoError included: an unknown field or parameter id
        raise TableError("INVALID_ARGUMENT", str(exc)) from None


def encode_entry(index: P4InfoIndex, entry: TableEntry, is_default: bool = False) -> p4runtime_pb2.TableEntry:
    """The protobuf form of a stored entry (or of a table's default action)."""
    msg = index.to_proto(entry)
    msg.is_default_action = is_default
    return msg


class P4RuntimeService(p4runtime_pb2_grpc.P4RuntimeServicer):
    """The P4Runtime service over a SwitchCore."""

    def __init__(self, core, device_id: int):
        self.core = core
        self.device_id = device_id
        self.lock = threading.Lock()
        self.streams: dict[int, tuple[int, int]] = {}   # stream token -> election id (high, low)
        self.outboxes: dict[int, queue.Queue] = {}      # stream token -> messages to send on it
        self._next_token = 0

    # --- arbitration ---------------------------------------------------------------------
    def _primary(self):
        return max(self.streams.values(), default=None)

    def _check_primary(self, election_id) -> None:
        eid = (election_id.high, election_id.low)
        primary = self._primary()
        if primary is None or eid != primary:
            raise _Abort(grpc.StatusCode.PERMISSION_DENIED,
                         f"election id {eid} is not the primary controller's ({primary})")

    def _check_device(self, device_id: int) -> None:
        if device_id != self.device_id:
            raise _Abort(grpc.StatusCode.NOT_FOUND, f"unknown device id {device_id} (this is {self.device_id})")

    def _arbitration_reply(self, token: int):
        """The arbitration message telling stream `token` who is primary (call with the lock held)."""
        eid = self.streams.get(token)
        primary = self._primary()
        resp = p4runtime_pb2.StreamMessageResponse()
        resp.arbitration.device_id = self.device_id
        if primary is not None:
            resp.arbitration.election_id.high, resp.arbitration.election_id.low = primary
        is_primary = eid is not None and eid == primary
        resp.arbitration.status.code = code_pb2.OK if is_primary else code_pb2.ALREADY_EXISTS
        resp.arbitration.status.message = "is primary" if is_primary else "is not primary"
        return resp

    def _announce_primary(self, before, skip: int) -> None:
        """When the primary changed, tell every other open stream (call with the lock held)."""
        if self._primary() == before:
            return
        for token, outbox in self.outboxes.items():
            if token != skip and token in self.streams:
                outbox.put(self._arbitration_reply(token))

    def _read_stream(self, token: int, request_iterator, outbox: queue.Queue) -> None:
        """Handle one controller's stream messages; replies and errors go to its outbox."""
        try:
            for req in request_iterator:
                kind = req.WhichOneof("update")
                if kind == "arbitration":
                    arb = req.arbitration
                    if arb.device_id != self.device_id:
                        outbox.put(_Abort(grpc.StatusCode.NOT_FOUND,
                                          f"unknown device id {arb.device_id} (this is {self.device_id})"))
                        return
                    eid = (arb.election_id.high, arb.election_id.low)
                    with self.lock:
                        if any(t != token and e == eid for t, e in self.streams.items()):
                            outbox.put(_Abort(grpc.StatusCode.INVALID_ARGUMENT,
                                              f"election id {eid} is already used by another controller"))
                            return
                        before = self._primary()
                        self.streams[token] = eid
                        outbox.put(self._arbitration_reply(token))
                        self._announce_primary(before, skip=token)
                    log.info("P4Runtime: stream %d arbitration, election id %s", token, eid)
                elif kind == "packet":
                    log.debug("P4Runtime: packet-out ignored (no CPU port in this pipeline)")
                else:
                    log.debug("P4Runtime: stream message %s ignored", kind)
        except grpc.RpcError:
            pass                     # the controller went away
        finally:
            outbox.put(None)

    def StreamChannel(self, request_iterator, context):
        outbox: queue.Queue = queue.Queue()
        with self.lock:
            token = self._next_token
            self._next_token += 1
            self.outboxes[token] = outbox
        context.add_callback(lambda: outbox.put(None))
        threading.Thread(target=self._read_stream, args=(token, request_iterator, outbox),
                         name=f"p4rt-stream-{token}", daemon=True).start()
        try:
            while True:
                item = outbox.get()
                if item is None:
                    return
                if isinstance(item, _Abort):
                    context.abort(item.code, item.message)
                yield item
        finally:
            with self.lock:
                before = self._primary()
                self.streams.pop(token, None)
                self.outboxes.pop(token, None)
                self._announce_primary(before, skip=token)
            log.info("P4Runtime: stream %d closed", token)

    # --- pipeline config -----------------------------------------------------------------
    def SetForwardingPipelineConfig(self, request, context):
        return self._guard(context, self._set_pipeline, request)

    def _set_pipeline(self, request):
        self._check_device(request.device_id)
        self._check_primary(request.election_id)
        A = p4runtime_pb2.SetForwardingPipelineConfigRequest
        if request.action in (A.VERIFY, A.VERIFY_AND_SAVE, A.VERIFY_AND_COMMIT):
            try:
                Pipeline(TableStore(P4InfoIndex(request.config.p4info)))
            except Exception as exc:  # a P4Info without the tables and actions of the contract
                raise _Abort(grpc.StatusCode.INVALID_ARGUMENT,
                             f"P4Info rejected (this switch runs the MRC pipeline of docs/design.md): {exc}") from None
            if request.action == A.VERIFY_AND_COMMIT:
                with self.lock:
                    self.core.set_p4info(request.config.p4info, request.config.cookie.cookie)
                log.info("P4Runtime: pipeline config committed (%d tables)", len(request.config.p4info.tables))
        elif request.action == A.COMMIT:
            raise _Abort(grpc.StatusCode.UNIMPLEMENTED, "COMMIT without VERIFY_AND_COMMIT is not supported")
        else:
            raise _Abort(grpc.StatusCode.UNIMPLEMENTED,
                         f"SetForwardingPipelineConfig action {A.Action.Name(request.action)} is not supported")
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request, context):
        return self._guard(context, self._get_pipeline, request)

    def _get_pipeline(self, request):
        self._check_device(request.device_id)
        resp = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        if self.core.p4info is None:
            raise _Abort(grpc.StatusCode.FAILED_PRECONDITION, "no forwarding pipeline config set")
        R = p4runtime_pb2.GetForwardingPipelineConfigRequest
        if request.response_type in (R.ALL, R.P4INFO_AND_COOKIE):
            resp.config.p4info.CopyFrom(self.core.p4info)
        if request.response_type in (R.ALL, R.P4INFO_AND_COOKIE, R.COOKIE_ONLY):
            resp.config.cookie.cookie = self.core.cookie
        return resp

    def Capabilities(self, request, context):
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=P4RUNTIME_API_VERSION)

    # --- write -------------------------------------------------------------------------
    def Write(self, request, context):
        return self._guard(context, self._write, request, context)

    def _write(self, request, context):
        self._check_device(request.device_id)
        self._check_primary(request.election_id)
        if self.core.tables is None:
            raise _Abort(grpc.StatusCode.FAILED_PRECONDITION, "no forwarding pipeline config set")
        if request.atomicity != p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR:
            raise _Abort(grpc.StatusCode.UNIMPLEMENTED, "only CONTINUE_ON_ERROR atomicity is supported")
        errors = []
        with self.lock:
            for update in request.updates:
                errors.append(self._apply(self.core.index, update))
        failed = [e for e in errors if e[0] != code_pb2.OK]
        if failed:
            status = status_pb2.Status(code=code_pb2.UNKNOWN, message=f"{len(failed)} of {len(errors)} updates failed")
            for code, message in errors:
                detail = p4runtime_pb2.Error(canonical_code=code, message=message)
                status.details.add().Pack(detail)
            context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
            raise _Abort(grpc.StatusCode.UNKNOWN, "; ".join(m for c, m in failed))
        return p4runtime_pb2.WriteResponse()

    def _apply(self, index: P4InfoIndex, update) -> tuple[int, str]:
        U = p4runtime_pb2.Update
        if update.entity.WhichOneof("entity") != "table_entry":
            return code_pb2.UNIMPLEMENTED, f"writing {update.entity.WhichOneof('entity')} is not supported"
        try:
            msg = update.entity.table_entry
            entry = decode_entry(index, msg)
            tables = self.core.tables
            if msg.is_default_action:
                if update.type != U.MODIFY:
                    return code_pb2.INVALID_ARGUMENT, "the default action can only be MODIFYed"
                tables.table(entry.table).set_default(entry.action, entry.params)
            elif update.type == U.INSERT:
                tables.insert(entry)
            elif update.type == U.MODIFY:
                tables.modify(entry)
            elif update.type == U.DELETE:
                tables.delete(entry)
            else:
                return code_pb2.INVALID_ARGUMENT, f"update type {update.type} unspecified"
        except TableError as exc:
            return getattr(code_pb2, exc.code), str(exc)
        return code_pb2.OK, ""

    # --- read --------------------------------------------------------------------------
    def Read(self, request, context):
        try:
            self._check_device(request.device_id)
            if self.core.tables is None:
                raise _Abort(grpc.StatusCode.FAILED_PRECONDITION, "no forwarding pipeline config set")
            entities = []
            for ent in request.entities:
                kind = ent.WhichOneof("entity")
                if kind == "table_entry":
                    entities.extend(self._read_tables(ent.table_entry))
                elif kind == "counter_entry":
                    entities.extend(self._read_counters(ent.counter_entry))
                else:
                    raise _Abort(grpc.StatusCode.UNIMPLEMENTED, f"reading {kind} is not supported")
        except _Abort as exc:
            context.abort(exc.code, exc.message)
        except TableError as exc:
            context.abort(_CODES.get(exc.code, grpc.StatusCode.UNKNOWN), str(exc))
        for start in range(0, max(len(entities), 1), READ_CHUNK):
            yield p4runtime_pb2.ReadResponse(entities=entities[start:start + READ_CHUNK])

    def _read_tables(self, query) -> list:
        index, tables = self.core.index, self.core.tables
        if query.table_id == 0:
            names = list(tables.tables)
        else:
            info = index.tables_by_id.get(query.table_id)
            if info is None:
                raise _Abort(grpc.StatusCode.NOT_FOUND, f"unknown table id {query.table_id}")
            names = [info.preamble.name]
        out = []
        for name in names:
            table = tables.table(name)
            if query.is_default_action:
                action, params = table.default
                msg = encode_entry(index, TableEntry(name, {}, action, params), is_default=True)
                out.append(p4runtime_pb2.Entity(table_entry=msg))
                continue
            wanted = None
            if query.match:
                wanted = decode_entry(index, query).key()
            for entry in list(table.entries.values()):
                if wanted is None or entry.key() == wanted:
                    out.append(p4runtime_pb2.Entity(table_entry=encode_entry(index, entry)))
        return out

    def _read_counters(self, query) -> list:
        index, pipeline = self.core.index, self.core.pipeline
        if query.counter_id == 0:
            infos = list(index.counters.values())
        else:
            info = index.counters_by_id.get(query.counter_id)
            if info is None:
                raise _Abort(grpc.StatusCode.NOT_FOUND, f"unknown counter id {query.counter_id}")
            infos = [info]
        out = []
        for info in infos:
            packets = pipeline.counters.packets.get(info.preamble.name)
            octets = pipeline.counters.bytes.get(info.preamble.name)
            if packets is None:
                packets = octets = [0] * info.size
            if query.HasField("index"):
                i = query.index.index
                if not 0 <= i < info.size:
                    raise _Abort(grpc.StatusCode.OUT_OF_RANGE, f"counter {info.preamble.name}: index {i} out of 0..{info.size - 1}")
                indices = [i]
            else:
                indices = range(info.size)
            for i in indices:
                e = p4runtime_pb2.Entity()
                c = e.counter_entry
                c.counter_id = info.preamble.id
                c.index.index = i
                c.data.packet_count = packets[i] if i < len(packets) else 0
                c.data.byte_count = octets[i] if i < len(octets) else 0
                out.append(e)
        return out

    # --- helpers -----------------------------------------------------------------------
    def _guard(self, context, fn, *args):
        try:
            return fn(*args)
        except _Abort as exc:
            context.abort(exc.code, exc.message)
        except TableError as exc:
            context.abort(_CODES.get(exc.code, grpc.StatusCode.UNKNOWN), str(exc))


class P4RuntimeServer:
    """A grpc.Server serving P4RuntimeService on a unix socket or 127.0.0.1."""

    def __init__(self, core, device_id: int, address: str):
        self.address = check_address(address)
        self.service = P4RuntimeService(core, device_id)
        # every open StreamChannel holds one worker thread for its lifetime
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="p4rt"))
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(self.service, self.server)
        port = self.server.add_insecure_port(self.address)
        if not self.address.startswith("unix:"):
            if port == 0:
                raise AddressError(f"cannot listen on {self.address}")
            self.address = f"127.0.0.1:{port}"

    def start(self) -> None:
        """Start serving."""
        self.server.start()

    def stop(self, grace: float = 0.5) -> None:
        """Stop serving."""
        self.server.stop(grace).wait()
