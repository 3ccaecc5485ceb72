"""What every collective shares: its result, its message tags and its send/receive bookkeeping.

A collective is a state machine. It never touches the network: it hands messages to a
`Messenger` (`send(peer_rank, data)`) and is told about arrivals (`on_message`) and about its own
messages being fully acknowledged (`on_send_complete`). `host_agent.collectives.driver` binds a
Messenger to the transport's Endpoint, so the same code runs on netsim and in the agent process.
"""
from __future__ import annotations

import struct
from dataclasses import asdict, dataclass
from typing import Protocol

# Every message starts with a tag: collective kind, reserved, step, index within the step.
TAG = struct.Struct("!BBHI")
KIND_CODES = {"allreduce": 1, "alltoall": 2, "transfer": 3}


@dataclass
class CollectiveResult:
    """Outcome of one collective on one rank.

    `bytes` is the collective's data size on this rank (all-reduce: the array; all-to-all: all
    blocks this rank sends; transfer: the transferred bytes), `elapsed` seconds from start to
    completion, `mismatches` the number of elements (bytes for byte data) that differ from the
    expected result, plus messages that were missing, duplicated or malformed.
    """

    ok: bool
    bytes: int
    elapsed: float
    mismatches: int
    detail: str = ""

    def as_dict(self) -> dict:
        """Plain dict, for JSON."""
        return asdict(self)


class Messenger(Protocol):
    """Where a collective sends its messages."""

    def send(self, peer: int, data: bytes) -> None:
        """Send one message to rank `peer`; the collective is told when it is fully acknowledged."""


class CollectiveError(ValueError):
    """A collective asked for something impossible (bad rank, size, dtype...)."""


class Collective:
    """Bookkeeping common to all collectives: tags, counts, completion time, protocol errors."""

    kind = ""

    def __init__(self, rank: int, world: int, messenger: Messenger) -> None:
        if world < 1:
            raise CollectiveError(f"{self.kind}: world size {world} must be at least 1")
        if not 0 <= rank < world:
            raise CollectiveError(f"{self.kind}: rank {rank} is outside 0..{world - 1}")
        self.rank = rank
        self.world = world
        self._messenger = messenger
        self._code = KIND_CODES[self.kind]
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.messages_sent = 0
        self.messages_acked = 0
        self.messages_received = 0
        self.protocol_errors: list[str] = []

    # --- what a subclass provides ------------------------------------------------------------
    def peers(self) -> list[int]:
        """Ranks this rank exchanges messages with (it needs a connection to each)."""
        raise NotImplementedError

    def _begin(self) -> None:
        """Send what can be sent at the start."""
        raise NotImplementedError

    def _deliver(self, peer: int, step: int, index: int, body: memoryview) -> None:
        """Take in one message body (tag already checked for kind)."""
        raise NotImplementedError

    def _all_received(self) -> bool:
        raise NotImplementedError

    def _check(self) -> tuple[int, int]:
        """(mismatches, data bytes) of the finished collective."""
        raise NotImplementedError

    # --- driving ---------------------------------------------------------------------------------
    def start(self, now: float) -> None:
        """Begin the collective at time `now`."""
        self.started_at = now
        self._begin()
        self._maybe_finish(now)

    def on_message(self, peer: int, data: bytes | memoryview, now: float) -> None:
        """A whole message from rank `peer` arrived."""
        self.messages_received += 1
        view = memoryview(data)
        if len(view) < TAG.size:
            self._error(f"message of {len(view)} bytes from rank {peer} has no tag")
        else:
            code, _, step, index = TAG.unpack_from(view, 0)
            if code != self._code:
                self._error(f"message from rank {peer} is tagged kind {code}, not {self._code} ({self.kind})")
            else:
                self._deliver(peer, step, index, view[TAG.size:])
        self._maybe_finish(now)

    def on_send_complete(self, peer: int, now: float) -> None:
        """One of this rank's messages to `peer` was fully acknowledged."""
        self.messages_acked += 1
        self._maybe_finish(now)

    @property
    def done(self) -> bool:
        """True when everything expected arrived and every sent message was acknowledged."""
        return self.finished_at is not None

    @property
    def received_all(self) -> bool:
        """True when every expected message arrived (own sends may still be unacknowledged)."""
        return self._all_received()

    def result(self) -> CollectiveResult:
        """The result so far (not ok until done)."""
        mismatches, nbytes = self._check()
        mismatches += len(self.protocol_errors)
        elapsed = ((self.finished_at if self.finished_at is not None else float("nan"))
                   - (self.started_at if self.started_at is not None else float("nan")))
        ok = self.done and mismatches == 0
        detail = "; ".join(self.protocol_errors[:5])
        if not self.done:
            detail = (detail + "; " if detail else "") + (
                f"not finished: {self.messages_acked}/{self.messages_sent} sent messages acknowledged, "
                f"all received: {self._all_received()}")
        return CollectiveResult(ok=ok, bytes=nbytes, elapsed=elapsed, mismatches=mismatches, detail=detail)

    # --- helpers for subclasses --------------------------------------------------------------------
    def _send(self, peer: int, step: int, index: int, body: bytes) -> None:
        self.messages_sent += 1
        self._messenger.send(peer, TAG.pack(self._code, 0, step, index) + body)

    def _error(self, what: str) -> None:
        self.protocol_errors.append(what)

    def _maybe_finish(self, now: float) -> None:
        if (self.finished_at is None and self.started_at is not None
                and self.messages_acked >= self.messages_sent and self._all_received()):
            self.finished_at = now
