"""An operator's view of one connection's EV set: the OCP MRC control operations, sans-IO.

`QUERY_EV_STATE` (`query`), `QUERY_EV_ARRAY` (`array`), `MODIFY_EV_STATE` (`modify`),
`REPLACE_EV` (`replace`) and EV probes on request (`probe`, answered by a `ProbeResult` event).
EVs are named by their 32-bit value; states by their names (`evset.EvState`). Every bad argument
raises ValueError naming the field (`ev`, `state`, `new_ev`, `timeout`).
"""
from __future__ import annotations

from typing import Callable

from host_agent.transport import events
from host_agent.transport.peers import ConnectionId
from host_agent.transport.evset import OPERATOR, OPERATOR_STATES, Ev, EvSet, EvState
from host_agent.transport.probes import Prober


def parse_ev(value) -> int:
    """An EV value from an int or a string (decimal or 0x hex); ValueError naming `ev` otherwise."""
    if isinstance(value, str):
        try:
            value = int(value, 0)
        except ValueError:
            raise ValueError(f"ev: {value!r} is not a number (decimal or 0x hex)") from None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"ev: {value!r} is not a 32-bit EV value")
    return value


def parse_state(name) -> EvState:
    """The state an operator may set, by name; ValueError naming `state` otherwise."""
    names = ", ".join(s.value for s in OPERATOR_STATES)
    if not isinstance(name, str) or name.upper() not in {s.value for s in OPERATOR_STATES}:
        raise ValueError(f"state: {name!r} is not one of {names}")
    return EvState(name.upper())


class EvControl:
    """The control operations on one connection's EV set (`now` passed in, nothing blocks)."""

    def __init__(self, ident: ConnectionId, evset: EvSet, prober: Prober, emit: Callable,
                 touched: Callable[[], None] = lambda: None) -> None:
        self.ident = ident
        self.evset = evset
        self.prober = prober
        self._emit = emit
        self._touched = touched          # told before every change (the connection polls again)

    def ev(self, value) -> Ev:
        """Our EV with this value; ValueError naming `ev` when it is not one of ours."""
        number = parse_ev(value)
        ev = self.evset.get(number)
        if ev is None:
            raise ValueError(f"ev: {number:#x} is not an EV of {self.ident.name}")
        return ev

    # --- queries --------------------------------------------------------------------------------
    def describe(self, ev: Ev) -> dict:
        """One EV as the operator sees it: value, state, local port (NIC), plane, path, drops."""
        path = self.evset.path_of(ev)
        return {"ev": ev.value, "state": ev.state.value, "port": path.nic, "plane": ev.plane,
                "path": ev.path_key, "dst": path.dst.hex(), "drop_count": ev.drops, "backup": not ev.home}

    def query(self, value) -> dict:
        """QUERY_EV_STATE: the state of one EV, and the slot it is in (None: a forgotten backup)."""
        ev = self.ev(value)
        return {**self.describe(ev), "slot": self.evset.slot_index(ev)}

    def array(self) -> list[dict]:
        """QUERY_EV_ARRAY: every slot in rotation order: its EV and, when a backup stands in for
        it, that backup (`in_use`)."""
        rows = []
        for i, slot in enumerate(self.evset.slots):
            row = {"slot": i, **self.describe(slot.home)}
            if slot.current is not slot.home:
                row["in_use"] = self.describe(slot.current)
            rows.append(row)
        return rows

    # --- changes -------------------------------------------------------------------------------
    def modify(self, value, state, now: float) -> dict:
        """MODIFY_EV_STATE: set one EV's state (GOOD, ASSUMED_BAD, DENIED, UNKNOWN); return it.
        Denying below the floor raises `evset.FloorError` (a ValueError)."""
        ev = self.ev(value)
        self._touched()
        self.evset.set_state(ev, parse_state(state), now, OPERATOR)
        return self.query(ev.value)

    def deny(self, value, now: float) -> dict:
        """DENIED: the EV carries nothing until allowed."""
        return self.modify(value, "DENIED", now)

    def allow(self, value, now: float) -> dict:
        """A DENIED EV becomes UNKNOWN: probed, then used once a probe reply came back."""
        ev = self.ev(value)
        if ev.state is not EvState.DENIED:
            raise ValueError(f"ev: {ev.value:#x} is {ev.state.value}, not DENIED")
        return self.modify(value, "UNKNOWN", now)

    def replace(self, value, now: float, new_value=None) -> dict:
        """REPLACE_EV: put a new EV (`new_value`, or a random one) in the slot of array EV `value`;
        it is UNKNOWN until a probe answers. Returns the new EV."""
        old = self.ev(value)
        if new_value is not None:
            try:
                new_value = parse_ev(new_value)
            except ValueError as err:
                raise ValueError(str(err).replace("ev:", "new_ev:", 1)) from None
        self._touched()
        new = self.evset.replace(old, now, new_value)
        self._emit(events.EvReplaced(now, self.ident, new.value, old.value, new.plane, new.path_key))
        return self.query(new.value)

    def probe(self, value, req_id: int, now: float, timeout: float | None = None) -> None:
        """Send a probe on one EV; a `ProbeResult` with `req_id` reports the port and the RTT (ns),
        or no answer within `timeout` seconds (default the RTO). A DENIED EV is not probed."""
        ev = self.ev(value)
        if ev.state is EvState.DENIED:
            raise ValueError(f"ev: {ev.value:#x} is DENIED: it carries no packet, not even a probe")
        if timeout is not None and (not isinstance(timeout, (int, float)) or isinstance(timeout, bool)
                                    or not 0 < timeout <= 10):
            raise ValueError(f"timeout: {timeout!r} is not a number of seconds in (0, 10]")
        self._touched()
        self.prober.request(ev, req_id, timeout, now)
