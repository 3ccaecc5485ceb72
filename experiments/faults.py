"""Faults: what an experiment breaks, turned into timed actions on a backend.

A backend implements `FaultTarget` (take a link down or up, install or clear a port fault in a
switch's `MrcIngress.port_fault` table, kill or restart a switch, reach the hosts' EV controls).
`FaultSchedule.of_case` resolves every fault's targets once (a named link or switch is checked;
"auto" picks the fabric link and the spine that carry most of the baseline's data,
`experiments.fault_targets`) and turns each into `FaultAction`s at times relative to the fault's
start; it hands the backend the faults due at a time, and those due at a share of the workload as
that share arrives. The backend runs each action with `apply_action`, which records it, with the
share of the workload delivered when it took effect where the backend knows it then (netsim; the
Mininet backend fills it in from the agents' goodput records afterwards). Each action carries the
index of its fault, so the record tells where every planned fault landed (`experiments.validity`).

- link_kill: the link goes down (both directions); optionally back up after `repair_after_s`.
- link_flap: the link changes state every `period_s` (down first), `flaps` times or until the end.
- switch_blackhole: every port of the switch drops everything (fault table), links stay up.
- switch_kill: the switch process stops (netsim: the switch stops and its links go down; mininet
  does not restart it, so a repair there is refused).
- gray_loss: both ends of the link drop each packet with probability `loss` (fault table).
- switch_ev_deny: an operator takes the switch out for maintenance: every host DENIES the EVs of
  its MRC connections whose path crosses it (down to each connection's `ev_min_active` floor);
  with `repair_after_s` they are allowed again (UNKNOWN, probed before use). The switch keeps
  forwarding: nothing is lost, traffic just moves off it. Written once (`experiments.ev_deny`), through
  the agents' EV control operations (netsim: served in-process; mininet: the control sockets).
- random_loss: every switch port facing a host drops each packet with probability `loss` (fault
  table), so every packet, data or acknowledgement, meets that loss once on its last hop.
- switch_slow: every link of the switch (both directions) runs at `share` of its rate: a gray
  switch, up and forwarding, but slow. (netsim: the links' rates; mininet: the egress queue rates
  of the switch and of its neighbour switches' ports facing it, a host's NIC keeping its pace.)
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Protocol

from experiments.ev_deny import EvControls, set_evs_denied
from experiments.fault_targets import busiest_targets, last_hops
from experiments.record import CaseRecord, FaultEvent, FaultPlan
from experiments.scenario import Case, FaultSpec
from topologies.model import Topology

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

    def ev_controls(self) -> Iterable[tuple[str, EvControls]]:
        """(host, its agent's EV control operations) for every agent that serves them, each usable
        while it is handed out (the switch_ev_deny fault, `experiments.ev_deny`)."""

    def set_switch_rate(self, switch: str, share: float) -> None:
        """Run every link of `switch`, both directions, at `share` of its rate (1.0: restored)."""


@dataclass(frozen=True)
class FaultAction:
    """One change at `offset` seconds after the fault starts."""

    offset: float
    what: str                     # e.g. "link down", "blackhole on"
    target: str                   # e.g. "s1-s3"
    apply: Callable[[FaultTarget], None]
    breaks: bool                  # True when this action makes things worse (a failure instant)
    fault: Optional[int] = None   # index of its fault in the case's plan


@dataclass(frozen=True)
class PlannedFault:
    """A fault with its targets resolved: its actions, and when it starts (at `seconds` into the
    workload, or when `fraction` of the workload's bytes have arrived)."""

    spec: FaultSpec
    actions: list[FaultAction]

    @property
    def fraction(self) -> float | None:
        return self.spec.at.fraction

    @property
    def seconds(self) -> float | None:
        return self.spec.at.seconds

    def plan(self) -> FaultPlan:
        """What the case's record keeps of it: what, and when it was planned to start."""
        return FaultPlan(self.spec.label, self.seconds, self.fraction)


class FaultSchedule:
    """A case's planned faults by what starts them, the same for every backend: a time into the
    workload (`timed`), or a share of the workload's bytes having arrived (`reached`, asked as the
    workload goes on; each such fault is handed out once)."""

    def __init__(self, faults: list[PlannedFault]) -> None:
        self.faults = list(faults)
        self._waiting = [f for f in self.faults if f.fraction is not None]

    @classmethod
    def of_case(cls, case: Case, topo: Topology, horizon: float) -> "FaultSchedule":
        """The schedule of every fault of the case's variant (`plan_faults`)."""
        return cls(plan_faults(case, topo, horizon))

    def plans(self) -> list[FaultPlan]:
        """What a case's record keeps of each fault, in the order of the scenario."""
        return [fault.plan() for fault in self.faults]

    def timed(self) -> list[PlannedFault]:
        """The faults that start at a time (`PlannedFault.seconds` into the workload)."""
        return [f for f in self.faults if f.fraction is None]

    @property
    def waiting(self) -> bool:
        """True while a fault waits for its share of the workload."""
        return bool(self._waiting)

    def reached(self, start_of: Callable[[float], Optional[float]]) -> list[tuple[PlannedFault, float]]:
        """The waiting faults whose share is reached, with when each starts: `start_of(share)` is
        that time (the backend's clock), or None while the share is not reached. They wait no more."""
        due = []
        for fault in list(self._waiting):
            at = start_of(fault.fraction)
            if at is not None:
                self._waiting.remove(fault)
                due.append((fault, at))
        return due


def plan_faults(case: Case, topo: Topology, horizon: float) -> list[PlannedFault]:
    """Every fault of the case's variant, its `auto` link or switch resolved, as actions."""
    planned, auto = [], None
    for index, fault in enumerate(case.variant.faults):
        link, switch = None, None
        if fault.kind == "random_loss":
            planned.append(PlannedFault(fault, _numbered(index, _random_loss(fault, last_hops(topo)))))
            continue
        if needs_link(fault):
            if fault.link == "auto":
                auto = auto or busiest_targets(case, topo)
                link = auto[0]
            else:
                link = fault.link             # a named link or switch was checked when the file was read
        else:
            if fault.switch == "auto":
                auto = auto or busiest_targets(case, topo)
                switch = auto[1]
            else:
                switch = fault.switch
        planned.append(PlannedFault(fault, _numbered(index, plan_actions(fault, link, switch, horizon, topo))))
    return planned


def _numbered(index: int, actions: list[FaultAction]) -> list[FaultAction]:
    return [dataclasses.replace(action, fault=index) for action in actions]


def apply_action(action: FaultAction, target: FaultTarget, record: CaseRecord, now: Callable[[], float],
                 delivered: Optional[Callable[[], float]] = None) -> float:
    """Run one action on `target` and record it as happening when it has taken effect: `now()`
    (seconds into the workload) once it returns, which it also returns; when its first change
    took effect (`began`); with `delivered`, the share of the workload's bytes delivered by then."""
    watched = _FirstChange(target, now)
    action.apply(watched)
    t = now()
    share = delivered() if delivered is not None else None
    began = t if watched.first is None else watched.first
    record.faults.append(FaultEvent(t, action.what, action.target, action.breaks, share, action.fault, began))
    return t


class _FirstChange:
    """A FaultTarget that passes every call on and notes `now()` when the first change (a `set_`
    verb) has returned."""

    def __init__(self, target: FaultTarget, now: Callable[[], float]) -> None:
        self._target = target
        self._now = now
        self.first: Optional[float] = None

    def __getattr__(self, name: str):
        verb = getattr(self._target, name)
        if not name.startswith("set_"):
            return verb

        def change(*args, **kwargs):
            result = verb(*args, **kwargs)
            if self.first is None:
                self.first = self._now()
            return result
        return change


def plan_actions(fault: FaultSpec, link: tuple[str, str] | None, switch: str | None,
                 horizon: float, topo: Topology | None = None) -> list[FaultAction]:
    """The timed actions of `fault` on its resolved `link` or `switch` (of `topo`, which
    switch_ev_deny needs to tell the paths through it), up to `horizon` seconds."""
    make = _PLANNERS[fault.kind]
    return make(fault, link, switch, horizon, topo)


def _link_kill(fault, link, _switch, _horizon, _topo):
    a, b = link
    name = f"{a}-{b}"
    actions = [FaultAction(0.0, "link down", name, lambda t: t.set_link(a, b, False), True)]
    if fault.repair_after_s is not None:
        actions.append(FaultAction(fault.repair_after_s, "link up", name, lambda t: t.set_link(a, b, True), False))
    return actions


def _link_flap(fault, link, _switch, horizon, _topo):
    a, b = link
    name = f"{a}-{b}"
    count = fault.flaps or min(FLAP_LIMIT, int(horizon / fault.period_s) + 1)
    actions = []
    for k in range(count):
        up = bool(k % 2)
        actions.append(FaultAction(k * fault.period_s, "link up" if up else "link down", name,
                                   (lambda t, up=up: t.set_link(a, b, up)), not up))
    return actions


def _blackhole(fault, _link, switch, _horizon, _topo):
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


def _switch_kill(fault, _link, switch, _horizon, _topo):
    actions = [FaultAction(0.0, "switch killed", switch, lambda t: t.set_switch_alive(switch, False), True)]
    if fault.repair_after_s is not None:
        actions.append(FaultAction(fault.repair_after_s, "switch restarted", switch,
                                   lambda t: t.set_switch_alive(switch, True), False))
    return actions


def _gray(fault, link, _switch, _horizon, _topo):
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


def _ev_deny(fault, _link, name, _horizon, topo):
    if topo is None:
        raise ValueError("switch_ev_deny: planning it needs the topology, to tell the paths through its switch")
    switch = topo.switch(name)
    actions = [FaultAction(0.0, "EVs denied", name, lambda t: set_evs_denied(t.ev_controls(), switch, True), True)]
    if fault.repair_after_s is not None:
        actions.append(FaultAction(fault.repair_after_s, "EVs allowed", name,
                                   lambda t: set_evs_denied(t.ev_controls(), switch, False), False))
    return actions


def _random_loss(fault, hops: list[tuple[str, str]]) -> list[FaultAction]:
    def lossy(t: FaultTarget, prob: float) -> None:
        for sw, host in hops:
            t.set_port_fault(sw, t.port_towards(sw, host), False, prob)

    name = f"{len(hops)} host links"
    actions = [FaultAction(0.0, f"{fault.loss:.2%} random loss on", name, lambda t: lossy(t, fault.loss), True)]
    if fault.repair_after_s is not None:
        actions.append(FaultAction(fault.repair_after_s, "random loss off", name, lambda t: lossy(t, 0.0), False))
    return actions


def _switch_slow(fault, _link, switch, _horizon, _topo):
    actions = [FaultAction(0.0, f"links at {fault.share:.0%} rate", switch,
                           lambda t: t.set_switch_rate(switch, fault.share), True)]
    if fault.repair_after_s is not None:
        actions.append(FaultAction(fault.repair_after_s, "links at full rate", switch,
                                   lambda t: t.set_switch_rate(switch, 1.0), False))
    return actions


_PLANNERS = {"link_kill": _link_kill, "link_flap": _link_flap, "switch_blackhole": _blackhole,
             "switch_kill": _switch_kill, "gray_loss": _gray, "switch_ev_deny": _ev_deny,
             "switch_slow": _switch_slow}


def needs_link(fault: FaultSpec) -> bool:
    """True when the fault acts on a link (else on a switch)."""
    return not fault.kind.startswith("switch") and fault.kind != "random_loss"


def notifies_control_plane(fault: FaultSpec) -> bool:
    """True when a routing protocol would notice the fault (links going down), False when it is
    silent (a blackholing switch, a lossy link: the links stay up)."""
    return fault.kind in ("link_kill", "link_flap", "switch_kill")
