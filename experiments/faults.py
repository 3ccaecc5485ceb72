"""Faults: what an experiment breaks, turned into timed actions on a backend.

A backend implements `FaultTarget` (take a link down or up, install or clear a port fault in a
switch's `MrcIngress.port_fault` table, kill or restart a switch). `plan_actions` turns one
`FaultSpec` whose targets are resolved into `FaultAction`s, each at a time relative to the
fault's start; the backend schedules them and records each as it happens.

- link_kill: the link goes down (both directions); optionally back up after `repair_after_s`.
- link_flap: the link changes state every `period_s` (down first), `flaps` times or until the end.
- switch_blackhole: every port of the switch drops everything (fault table), links stay up.
- switch_kill: the switch process stops (netsim: the switch stops and its links go down).
- gray_loss: both ends of the link drop each packet with probability `loss` (fault table).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from experiments.scenario import FaultSpec

FLAP_LIMIT = 10_000        # a flap "until the end" stops scheduling after this many changes


class FaultTarget(Protocol):
    """What a backend offers to faults."""

    def set_link(self, a: str, b: str, up: bool) -> None:
        """Bring the link between nodes `a` and `b` up or down (both directions)."""

    def set_port_fault(self, switch: str, port: int, drop_all: bool, drop_prob: float) -> None:
        """Install (drop_all or drop_prob > 0) or clear (neither) a fault on a switch's egress port."""

    def switch_ports(self, switch: str) -> list[int]:
        """The ports of `switch`."""

    def port_towards(self, switch: str, neighbour: str) -> int:
        """The port of `switch` facing `neighbour`."""

    def set_switch_alive(self, switch: str, alive: bool) -> None:
        """Kill (False) or restart (True) a switch."""


@dataclass(frozen=True)
class FaultAction:
    """One change at `offset` seconds after the fault starts."""

    offset: float
    what: str                     # e.g. "link down", "blackhole on"
    target: str                   # e.g. "s1-s3"
    apply: Callable[[FaultTarget], None]
    breaks: bool                  # True when this action makes things worse (a failure instant)


def plan_actions(fault: FaultSpec, link: tuple[str, str] | None, switch: str | None,
                 horizon: float) -> list[FaultAction]:
    """The timed actions of `fault` on its resolved `link` or `switch`, up to `horizon` seconds."""
    make = _PLANNERS[fault.kind]
    return make(fault, link, switch, horizon)


def _link_kill(fault, link, _switch, _horizon):
    a, b = link
    name = f"{a}-{b}"
    actions = [FaultAction(0.0, "link down", name, lambda t: t.set_link(a, b, False), True)]
    if fault.repair_after_s is not None:
        actions.append(FaultAction(fault.repair_after_s, "link up", name, lambda t: t.set_link(a, b, True), False))
    return actions


def _link_flap(fault, link, _switch, horizon):
    a, b = link
    name = f"{a}-{b}"
    count = fault.flaps or min(FLAP_LIMIT, int(horizon / fault.period_s) + 1)
    actions = []
    for k in range(count):
        up = bool(k % 2)
        actions.append(FaultAction(k * fault.period_s, "link up" if up else "link down", name,
                                   (lambda t, up=up: t.set_link(a, b, up)), not up))
    return actions


def _blackhole(fault, _link, switch, _horizon):
    def on(t: FaultTarget) -> None:
        for port in t.switch_ports(switch):
            t.set_port_fault(switch, port, True, 0.0)

    def off(t: FaultTarget) -> None:
        for port in t.switch_ports(switch):
            t.set_port_fault(switch, port, False, 0.0)

    actions = [FaultAction(0.0, "blackhole on", switch, on, True)]
    if fault.repair_after_s is not None:
        actions.append(FaultAction(fault.repair_after_s, "blackhole off", switch, off, False))
    return actions


def _switch_kill(fault, _link, switch, _horizon):
    actions = [FaultAction(0.0, "switch killed", switch, lambda t: t.set_switch_alive(switch, False), True)]
    if fault.repair_after_s is not None:
        actions.append(FaultAction(fault.repair_after_s, "switch restarted", switch,
                                   lambda t: t.set_switch_alive(switch, True), False))
    return actions


def _gray(fault, link, _switch, _horizon):
    a, b = link

    def lossy(t: FaultTarget, prob: float) -> None:
        for node, other in ((a, b), (b, a)):
            try:
                port = t.port_towards(node, other)
            except KeyError:
                continue                    # a host end: only switches have a fault table
            t.set_port_fault(node, port, False, prob)

    actions = [FaultAction(0.0, f"{fault.loss:.0%} loss on", f"{a}-{b}", lambda t: lossy(t, fault.loss), True)]
    if fault.repair_after_s is not None:
        actions.append(FaultAction(fault.repair_after_s, "loss off", f"{a}-{b}", lambda t: lossy(t, 0.0), False))
    return actions


_PLANNERS = {"link_kill": _link_kill, "link_flap": _link_flap, "switch_blackhole": _blackhole,
             "switch_kill": _switch_kill, "gray_loss": _gray}


def needs_link(fault: FaultSpec) -> bool:
    """True when the fault acts on a link (else on a switch)."""
    return not fault.kind.startswith("switch")


def notifies_control_plane(fault: FaultSpec) -> bool:
    """True when a routing protocol would notice the fault (links going down), False when it is
    silent (a blackholing switch, a lossy link: the links stay up)."""
    return fault.kind in ("link_kill", "link_flap", "switch_kill")
