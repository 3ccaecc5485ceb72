"""Log events: what an endpoint reports through `Endpoint.drain_events`."""
from __future__ import annotations

from dataclasses import dataclass, field

# Event kinds.
EV_STATE = "ev_state"          # an EV changed state: ev, plane, path, old, new, cause
EV_BACKUP = "ev_backup"        # a backup EV took the slot of a retired one: ev, replaces, plane, path
RETRANSMIT = "retransmit"      # psn, cause (one of RETX_CAUSES), ev (the EV it is resent on)
SEND_COMPLETE = "send_complete"    # msg_id, bytes: every byte acknowledged
RECV_COMPLETE = "recv_complete"    # msg_id, bytes: whole message received
GO_BACK = "go_back"            # baseline rewound to psn, cause
TRIM_NACK = "trim_nack"        # a trim NACK arrived for psn (reason, ev it was sent on)

# Retransmission causes.
CAUSE_TRIM = "trim"            # trim NACK
CAUSE_TIMEOUT = "timeout"      # per-packet timer (MRC) or RTO (baseline)
CAUSE_NACK = "nack"            # baseline out-of-sequence NACK
RETX_CAUSES = (CAUSE_TRIM, CAUSE_TIMEOUT, CAUSE_NACK)


@dataclass
class Event:
    """Something that happened in one connection at time `t` (seconds)."""

    t: float
    kind: str
    conn: str                      # "<endpoint>-><peer>:<local qp>"
    info: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        """A flat dict, for JSON lines."""
        return {"t": self.t, "kind": self.kind, "conn": self.conn, **self.info}


class EventLog:
    """Events collected until drained."""

    def __init__(self) -> None:
        self._events: list[Event] = []

    def add(self, t: float, kind: str, conn: str, **info) -> None:
        """Record one event."""
        self._events.append(Event(t, kind, conn, info))

    def drain(self) -> list[Event]:
        """Return the events recorded since the last drain, oldest first."""
        out, self._events = self._events, []
        return out
