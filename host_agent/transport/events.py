"""What an endpoint reports: one frozen dataclass per kind of event, drained by the caller.

`Endpoint.drain_events()` returns them oldest first; nothing is called back while a packet is
being taken in. Every event has `t` (transport time, seconds) and `conn` (the `ConnectionId` of
the connection it happened on); its class attribute `kind` is the stable name written to logs,
and `as_record()` gives the flat dict the agent's JSON-lines log and the experiment records
hold (`{"t", "kind", "conn": <connection name>, ...fields}`).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from operator import attrgetter
from typing import ClassVar

from host_agent.transport.peers import ConnectionId

# Event kinds (the `kind` of each class below; log readers match on these names).
EV_STATE = "ev_state"
EV_BACKUP = "ev_backup"
RETRANSMIT = "retransmit"
SEND_COMPLETE = "send_complete"
RECV_COMPLETE = "recv_complete"
GO_BACK = "go_back"
TRIM_NACK = "trim_nack"
EV_REPLACE = "ev_replace"
PROBE_RESULT = "probe_result"
CONN_FAILED = "conn_failed"

# Retransmission causes.
CAUSE_TRIM = "trim"            # trim NACK
CAUSE_TIMEOUT = "timeout"      # per-packet timer (MRC) or RTO (baseline)
CAUSE_NACK = "nack"            # baseline out-of-sequence NACK
CAUSE_SACK = "sack"            # SACKs showed the packet lost (MRC's reorder-window rule, or a plug-in SackProcessor)
CAUSE_TAIL_PROBE = "tail_probe"  # MRC: nothing acknowledged for a while, the newest packet sent again to draw a SACK
RETX_CAUSES = (CAUSE_TRIM, CAUSE_TIMEOUT, CAUSE_NACK, CAUSE_SACK, CAUSE_TAIL_PROBE)  # the built-in transports' causes


@dataclass(frozen=True, slots=True)
class TransportEvent:
    """Something that happened on connection `conn` at time `t`."""

    kind: ClassVar[str] = ""
    t: float
    conn: ConnectionId

    def as_record(self) -> dict:
        """The flat dict of this event, as logs and experiment records hold it: time, kind, the
        connection's name, then the event's own fields (a kind whose record differs overrides this)."""
        record = {"t": self.t, "kind": self.kind, "conn": self.conn.name}
        names, values = _own_fields(type(self))
        if names:
            record.update(zip(names, values(self)))
        return record


_OWN_FIELDS: dict[type, tuple] = {}


def _own_fields(cls: type) -> tuple:
    """The dataclass fields of an event class beyond `t` and `conn`, in declaration order, and a
    function giving their values (as a tuple)."""
    known = _OWN_FIELDS.get(cls)
    if known is None:
        names = tuple(f.name for f in fields(cls) if f.name not in ("t", "conn"))
        getter = attrgetter(*names) if names else None
        values = (lambda event: (getter(event),)) if len(names) == 1 else getter
        known = _OWN_FIELDS[cls] = (names, values)
    return known


@dataclass(frozen=True, slots=True)
class EvStateChanged(TransportEvent):
    """EV `ev` (of `plane`, on path `path` whose address is `dst`, hex, leaving by local NIC
    `port`) went from `old` to `new`; `drop_count` packets sent on it were found lost so far."""

    kind: ClassVar[str] = EV_STATE
    ev: int
    plane: int
    path: int
    dst: str
    old: str
    new: str
    cause: str
    port: int = 0
    drop_count: int = 0



@dataclass(frozen=True, slots=True)
class EvBackup(TransportEvent):
    """Backup EV `ev` took the rotation slot of retired EV `replaces`."""

    kind: ClassVar[str] = EV_BACKUP
    ev: int
    replaces: int
    plane: int
    path: int



@dataclass(frozen=True, slots=True)
class Retransmitted(TransportEvent):
    """PSN `psn` was sent again (for `cause`, one of the CAUSE_ names) on EV `ev`, last sent on
    `old_ev`. The MRC sender adds its smoothed RTT and RTO at that moment; the baseline does not."""

    kind: ClassVar[str] = RETRANSMIT
    psn: int
    cause: str
    ev: int
    old_ev: int | None
    srtt: float | None = None
    rto: float | None = None

    def as_record(self) -> dict:
        d = {"t": self.t, "kind": self.kind, "conn": self.conn.name, "psn": self.psn, "cause": self.cause,
             "ev": self.ev, "old_ev": self.old_ev}
        if self.srtt is not None:
            d["srtt"] = self.srtt
            d["rto"] = self.rto
        return d


@dataclass(frozen=True, slots=True)
class MessageSent(TransportEvent):
    """Every byte of message `msg_id` (`size` bytes) was acknowledged."""

    kind: ClassVar[str] = SEND_COMPLETE
    msg_id: int
    size: int

    def as_record(self) -> dict:
        return {"t": self.t, "kind": self.kind, "conn": self.conn.name, "msg_id": self.msg_id, "bytes": self.size}


@dataclass(frozen=True, slots=True)
class MessageReceived(TransportEvent):
    """Message `msg_id` arrived whole: `data` (its bytes; not part of the record)."""

    kind: ClassVar[str] = RECV_COMPLETE
    msg_id: int
    data: bytes

    def as_record(self) -> dict:
        return {"t": self.t, "kind": self.kind, "conn": self.conn.name, "msg_id": self.msg_id,
                "bytes": len(self.data)}


@dataclass(frozen=True, slots=True)
class WentBack(TransportEvent):
    """The baseline sender rewound to PSN `psn` (go-back-N) for `cause`."""

    kind: ClassVar[str] = GO_BACK
    psn: int
    cause: str



@dataclass(frozen=True, slots=True)
class TrimNack(TransportEvent):
    """A trim NACK (`reason`) came back for PSN `psn`, sent on EV `ev`; `srtt` when it arrived."""

    kind: ClassVar[str] = TRIM_NACK
    psn: int
    reason: int
    ev: int
    srtt: float



@dataclass(frozen=True, slots=True)
class EvReplaced(TransportEvent):
    """An operator replaced array EV `replaces` by `ev` (REPLACE_EV); `ev` is UNKNOWN until probed."""

    kind: ClassVar[str] = EV_REPLACE
    ev: int
    replaces: int
    plane: int
    path: int



@dataclass(frozen=True, slots=True)
class ProbeResult(TransportEvent):
    """The outcome of probe request `req_id` on EV `ev` (sent by local NIC `port`): answered after
    `rtt_ns` nanoseconds, or not answered within its timeout (`rtt_ns` None)."""

    kind: ClassVar[str] = PROBE_RESULT
    req_id: int
    ev: int
    port: int
    rtt_ns: int | None



@dataclass(frozen=True, slots=True)
class ConnectionFailed(TransportEvent):
    """The connection failed: PSN `psn` timed out again after its last retry (`retries` of them,
    the last waiting `timeout` seconds). The connection sends and takes nothing more."""

    kind: ClassVar[str] = CONN_FAILED
    psn: int
    retries: int
    timeout: float

    @property
    def error(self) -> str:
        """The failure in words, naming the connection."""
        return (f"connection {self.conn.name} failed: PSN {self.psn} unacknowledged after {self.retries} "
                f"retries (retry limit reached; last timeout {self.timeout * 1e3:.3g} ms)")

    def as_record(self) -> dict:
        return {"t": self.t, "kind": self.kind, "conn": self.conn.name, "psn": self.psn, "retries": self.retries,
                "timeout": self.timeout, "error": self.error}


EVENT_CLASSES = (EvStateChanged, EvBackup, Retransmitted, MessageSent, MessageReceived, WentBack, TrimNack,
                 EvReplaced, ProbeResult, ConnectionFailed)
"""Every event class, one per kind."""
