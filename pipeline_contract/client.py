"""A P4Runtime connection to one switch, over grpcio and the `p4runtime` protos.

One `P4RuntimeClient` object per switch connection and no global state, so that one process can
program many switches (p4runtime-shell keeps a single global client, which is why it is not used).
Connections go to a unix socket (`unix:/path`) or to 127.0.0.1 only.
"""
from __future__ import annotations

import contextlib
import queue
import signal
import threading
from dataclasses import dataclass
from typing import Iterable, Iterator

import grpc
from google.rpc import status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from pipeline_contract.entries import TableEntry
from pipeline_contract.p4info import P4InfoIndex

LOOPBACK_PREFIXES = ("unix:", "127.0.0.1:", "localhost:", "[::1]:")
HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class P4RuntimeError(RuntimeError):
    """A P4Runtime call failed; the message names the switch, the call and the target's reason."""


@dataclass(frozen=True)
class CounterValue:
    """Packets and bytes of one counter cell."""

    packets: int
    bytes: int


def check_local_address(address: str) -> None:
    """Refuse any P4Runtime address that is not a unix socket or loopback."""
    if not address.startswith(LOOPBACK_PREFIXES):
        raise ValueError(f"P4Runtime address {address!r} is not a unix socket or 127.0.0.1")


def _describe_rpc_error(exc: grpc.RpcError) -> str:
    """The gRPC status and, for a Write, the per-update errors the target sent back."""
    text = f"{exc.code().name}: {exc.details()}"
    for key, value in exc.trailing_metadata() or ():
        if key != "grpc-status-details-bin":
            continue
        status = status_pb2.Status()
        status.ParseFromString(value)
        for index, detail in enumerate(status.details):
            error = p4runtime_pb2.Error()
            if detail.Unpack(error) and error.canonical_code != 0:
                text += f"\n  update {index}: code {error.canonical_code}: {error.message}"
    return text


@contextlib.contextmanager
def _signals_held():
    """Hold Ctrl-C and SIGTERM while the block runs in the main thread; deliver them when it ends.

    An exception raised by a signal handler in the middle of a gRPC call can leave the channel
    with a call that never completes, and closing that channel then waits forever (a SIGTERM
    during bring-up once hung `mrc-testbed up` that way). Each call is bounded by the client's
    timeout, so a held signal waits at most that long.
    """
    if threading.current_thread() is not threading.main_thread():
        yield                   # signal handlers run only in the main thread
        return
    held: list[int] = []
    previous = {}
    try:                # each handler noted before it is replaced: a signal in between finds it put back
        for signum in HELD_SIGNALS:
            handler = signal.getsignal(signum)
            if handler is not None:                       # None: a handler Python cannot restore
                previous[signum] = handler
                signal.signal(signum, lambda number, _frame: held.append(number))
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(held):
            signal.raise_signal(signum)


class P4RuntimeClient:
    """Primary-controller session with one P4Runtime device: pipeline, writes, reads."""

    def __init__(self, address: str, device_id: int, name: str = "", election_id: int = 1,
                 timeout: float = 10.0):
        check_local_address(address)
        self.address = address
        self.device_id = device_id
        self.name = name or address
        self.election_id = election_id
        self.timeout = timeout
        self.index: P4InfoIndex | None = None
        self._channel: grpc.Channel | None = None
        self._stub: p4runtime_pb2_grpc.P4RuntimeStub | None = None
        self._requests: queue.Queue = queue.Queue()
        self._arbitration = threading.Event()
        self._arbitration_status: int | None = None
        self._stream_thread: threading.Thread | None = None

    # --- session -------------------------------------------------------------------
    def connect(self) -> "P4RuntimeClient":
        """Open the channel and become primary controller; raise P4RuntimeError on failure.

        Whatever ends the attempt early (an error, Ctrl-C, SIGTERM unwinding) closes the channel and
        the stream first: an open gRPC stream left behind keeps the process from exiting.
        """
        try:
            with _signals_held():
                self._open()
        except BaseException:
            self.close()
            raise
        return self

    def _open(self) -> None:
        self._channel = grpc.insecure_channel(self.address)
        try:
            grpc.channel_ready_future(self._channel).result(timeout=self.timeout)
        except grpc.FutureTimeoutError:
            raise P4RuntimeError(f"{self.name}: no P4Runtime server at {self.address} "
                                 f"after {self.timeout:.0f} s") from None
        self._stub = p4runtime_pb2_grpc.P4RuntimeStub(self._channel)
        responses = self._stub.StreamChannel(self._request_iterator())
        self._stream_thread = threading.Thread(target=self._read_stream, args=(responses,),
                                               name=f"p4rt-stream-{self.name}", daemon=True)
        self._stream_thread.start()
        arbitration = p4runtime_pb2.StreamMessageRequest()
        arbitration.arbitration.device_id = self.device_id
        arbitration.arbitration.election_id.low = self.election_id
        self._requests.put(arbitration)
        if not self._arbitration.wait(self.timeout):
            raise P4RuntimeError(f"{self.name}: no arbitration answer from {self.address}")
        if self._arbitration_status != grpc.StatusCode.OK.value[0]:
            raise P4RuntimeError(f"{self.name}: not primary controller for device {self.device_id} "
                                 f"(arbitration status {self._arbitration_status})")

    def close(self) -> None:
        """End the stream and the channel."""
        self._requests.put(None)
        with _signals_held():
            if self._channel is not None:
                self._channel.close()
                self._channel = None
            if self._stream_thread is not None:
                self._stream_thread.join(timeout=2)
                self._stream_thread = None

    def __enter__(self) -> "P4RuntimeClient":
        return self.connect()

    def __exit__(self, *exc) -> None:
        self.close()

    def _request_iterator(self) -> Iterator[p4runtime_pb2.StreamMessageRequest]:
        while True:
            request = self._requests.get()
            if request is None:
                return
            yield request

    def _read_stream(self, responses) -> None:
        try:
            for response in responses:
                if response.WhichOneof("update") == "arbitration":
                    self._arbitration_status = response.arbitration.status.code
                    self._arbitration.set()
        except grpc.RpcError:
            pass            # the channel was closed or the switch went away
        finally:
            self._arbitration.set()

    def _call(self, what: str, fn, request):
        if self._stub is None:
            raise P4RuntimeError(f"{self.name}: {what} before connect()")
        try:
            with _signals_held():
                return fn(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise P4RuntimeError(f"{self.name}: {what} failed: {_describe_rpc_error(exc)}") from None

    # --- pipeline ------------------------------------------------------------------------
    def set_pipeline(self, p4info: p4info_pb2.P4Info, device_config: bytes = b"") -> None:
        """Install a P4 program (P4Info + target config, e.g. the BMv2 JSON) and commit it."""
        request = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        request.election_id.low = self.election_id
        request.config.p4info.CopyFrom(p4info)
        request.config.p4_device_config = device_config
        self._call("SetForwardingPipelineConfig", self._stub.SetForwardingPipelineConfig, request)
        self.index = P4InfoIndex(p4info)

    def get_p4info(self) -> p4info_pb2.P4Info:
        """The P4Info the switch runs now."""
        request = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            response_type=p4runtime_pb2.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE)
        reply = self._call("GetForwardingPipelineConfig", self._stub.GetForwardingPipelineConfig,
                           request)
        return reply.config.p4info

    def use_p4info(self, p4info: p4info_pb2.P4Info) -> None:
        """Name lookups against `p4info` without reinstalling the pipeline (a second session)."""
        self.index = P4InfoIndex(p4info)

    def _require_index(self) -> P4InfoIndex:
        if self.index is None:
            raise P4RuntimeError(f"{self.name}: no P4Info: call set_pipeline() or use_p4info() first")
        return self.index

    # --- writes ----------------------------------------------------------------------------
    def write(self, changes: Iterable[tuple[int, TableEntry]], batch: int = 500) -> int:
        """Apply (Update.Type, entry) changes in order, `batch` per request; return how many."""
        index = self._require_index()
        updates = [p4runtime_pb2.Update(type=kind, entity=p4runtime_pb2.Entity(
            table_entry=index.to_proto(entry))) for kind, entry in changes]
        for start in range(0, len(updates), batch):
            request = p4runtime_pb2.WriteRequest(device_id=self.device_id)
            request.election_id.low = self.election_id
            request.updates.extend(updates[start:start + batch])
            self._call("Write", self._stub.Write, request)
        return len(updates)

    def insert(self, entries: Iterable[TableEntry]) -> int:
        """INSERT every entry; return how many."""
        return self.write((p4runtime_pb2.Update.INSERT, e) for e in entries)

    # --- reads -------------------------------------------------------------------------------
    def _read(self, entity: p4runtime_pb2.Entity) -> Iterator[p4runtime_pb2.Entity]:
        request = p4runtime_pb2.ReadRequest(device_id=self.device_id, entities=[entity])
        if self._stub is None:
            raise P4RuntimeError(f"{self.name}: Read before connect()")
        try:
            with _signals_held():           # the whole stream is read before the caller resumes
                replies = list(self._stub.Read(request, timeout=self.timeout))
        except grpc.RpcError as exc:
            raise P4RuntimeError(f"{self.name}: Read failed: {_describe_rpc_error(exc)}") from None
        for reply in replies:
            yield from reply.entities

    def read_table(self, table: str) -> list[TableEntry]:
        """Every entry of one table, as the switch reports it."""
        index = self._require_index()
        wanted = p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(
            table_id=index.table(table).preamble.id))
        return [index.from_proto(e.table_entry) for e in self._read(wanted)]

    def read_counter(self, counter: str, port: int | None = None) -> dict[int, CounterValue]:
        """Cells of one indexed counter ({index: value}); all cells when `port` is None."""
        index = self._require_index()
        entry = p4runtime_pb2.CounterEntry(counter_id=index.counter(counter).preamble.id)
        if port is not None:
            entry.index.index = port
        cells = {}
        for entity in self._read(p4runtime_pb2.Entity(counter_entry=entry)):
            cell = entity.counter_entry
            cells[cell.index.index] = CounterValue(cell.data.packet_count, cell.data.byte_count)
        return cells

    def counter_names(self) -> list[str]:
        """Names of every counter in the installed P4Info."""
        return sorted(self._require_index().counters)
