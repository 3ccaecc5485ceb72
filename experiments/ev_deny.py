"""The switch_ev_deny fault, written once for every backend: as an operator taking a switch out for
maintenance would, every host denies the EVs of its MRC connections whose path crosses the switch,
or allows them again, through the agent's EV control operations (`host_agent.control`).

A backend only says how those operations are reached: its fault target's `ev_controls()` hands out
one `EvControls` per host (netsim: `LocalControls`, the agent's operations served in-process on the
host's endpoint; Mininet: the agents' control sockets, `host_agent.control.ControlClient`). An EV's
path is told by its destination address (a uSID path address names its plane and its switches).
"""
from __future__ import annotations

import json
import logging
from typing import Callable, Iterable, Protocol

from host_agent.control import ControlError, ControlService
from host_agent.transport import Endpoint
from topologies.addressing import AddressingError, parse_usid_address
from topologies.model import Switch

log = logging.getLogger("mrc.experiments")
FLOOR = "ev_min_active"        # the word an agent's refusal names when a denial would cross the floor


class EvControls(Protocol):
    """One host agent's EV control operations (`host_agent.control`: connections, array, deny,
    allow, ...), as `host_agent.control.ControlClient` offers them."""

    def request(self, op: str, **fields):
        """Run one operation; its result, or ControlError with the agent's message."""


class LocalControls:
    """The EV control operations of an endpoint in this process (a netsim host's), answered by the
    agent's own `ControlService` at the time `now()`."""

    def __init__(self, endpoint: Endpoint, now: Callable[[], float]) -> None:
        self._service = ControlService(endpoint, now)

    def request(self, op: str, **fields):
        response = self._service.handle(self, json.dumps({"op": op, **fields}))
        if not response["ok"]:
            raise ControlError(response["error"])
        return response["result"]


def set_evs_denied(controls: Iterable[tuple[str, EvControls]], switch: Switch, denied: bool) -> int:
    """On every (host, its EV controls) of `controls`: deny (or allow again) the EVs of every MRC
    connection whose path crosses `switch`; a connection at its floor (`ev_min_active`) keeps the
    rest. A host whose agent cannot answer (finished already) is passed over with a warning.
    Returns the number of EVs changed."""
    changed = 0
    for host, agent in controls:
        try:
            for conn in agent.request("connections"):
                if conn["mode"] == "mrc":
                    changed += _set_connection(agent, {"peer": conn["peer"], "qp": conn["qp"]}, switch, denied)
        except ControlError as err:
            log.warning("%s: %s", host, err)
    return changed


def _set_connection(agent: EvControls, conn: dict, switch: Switch, denied: bool) -> int:
    """Deny (or allow) the EVs of one connection whose path crosses `switch`: each slot's EV and the
    backup standing in for it, in the slots' order; stops at the floor."""
    changed = 0
    for row in agent.request("array", **conn):
        for ev in (row, row.get("in_use")):
            if ev is None or not crosses(ev["dst"], switch):
                continue
            if denied and ev["state"] != "DENIED":
                try:
                    agent.request("deny", ev=ev["ev"], **conn)
                except ControlError as err:
                    if FLOOR in str(err):
                        return changed                  # at the floor: the rest stays
                    raise
                changed += 1
            elif not denied and ev["state"] == "DENIED":
                agent.request("allow", ev=ev["ev"], **conn)
                changed += 1
    return changed


def crosses(dst_hex: str, switch: Switch) -> bool:
    """True when the path address `dst_hex` (hex, as the control operations give it) steers
    through `switch`; a peer's own address (the baseline's) steers through none."""
    try:
        plane, usids = parse_usid_address(bytes.fromhex(dst_hex))
    except (AddressingError, ValueError):
        return False
    return plane == switch.plane and switch.usid in usids[:-1]
