"""A simulated host: the transport endpoint it is given, and its NICs, driven by the simulator's clock."""
from __future__ import annotations

from heapq import heappush
from typing import Iterable, Optional, Protocol

from wire import constants as C

_HIGH_DSCP, _HIGH, _LOW = C.HIGH_PRIORITY_DSCP, C.PRIORITY_HIGH, C.PRIORITY_LOW


class Endpoint(Protocol):
    """What a host needs of a transport endpoint (host_agent.transport.Endpoint is one)."""

    def receive(self, now: float, nic: int, pkt) -> None:
        """A packet arrived on NIC `nic` at time `now`."""

    def poll(self, now: float) -> Iterable[tuple[int, object]]:
        """The (NIC, packet) pairs to transmit at time `now`."""

    def next_wakeup(self) -> Optional[float]:
        """When the endpoint next wants to be polled, or None."""

    def drain_events(self) -> list:
        """What happened since the last call, oldest first (handed to the host's `on_event`)."""


class SimHost:
    """Feeds arriving packets to its endpoint and transmits what `poll` returns.

    `nics[i]` is the egress link of NIC i (one per plane). The host wakes itself at the
    endpoint's `next_wakeup()`. With an `on_event` handler (the application on this host) it
    drains the endpoint's events and hands them over before each poll and after it, so that
    what the application sends in answer goes out at once; without one, events wait in the
    endpoint for whoever drains them.
    """

    def __init__(self, sim, name: str, index: int) -> None:
        self.sim = sim
        self._heap, self._tickets = sim.heap, sim.tickets     # wake-ups are pushed straight onto them
        self.name = name
        self.index = index
        self.nics: dict[int, object] = {}
        self.nic_addr: dict[int, bytes] = {}
        self.usid = 0
        self.endpoint: Optional[Endpoint] = None
        self.on_event = None
        self._wake_at: float | None = None

    def attach(self, endpoint: Endpoint, on_event=None) -> None:
        """Drive `endpoint` from now on, handing its events to `on_event(event)` if given."""
        self.endpoint = endpoint
        self.on_event = on_event
        self.service()

    def receive(self, pkt, nic: int) -> None:
        """A packet arrived on NIC `nic`."""
        if self.endpoint is None:
            return
        self.endpoint.receive(self.sim.now, nic, pkt)
        self.service()

    def service(self) -> None:
        """Poll the endpoint, transmit its packets and set the next wake-up."""
        now = self.sim.now
        endpoint = self.endpoint
        handle = self.on_event
        if handle is not None:
            for event in endpoint.drain_events():
                handle(event)
        nics = self.nics
        for nic, pkt in endpoint.poll(now):
            link = nics.get(nic)
            if link is None:
                raise KeyError(f"host {self.name}: endpoint sent on NIC {nic}, which this host does not have")
            link.send(pkt, _HIGH if pkt.dscp in _HIGH_DSCP else _LOW)   # wire.packets.priority_of
        if handle is not None:
            for event in endpoint.drain_events():
                handle(event)
        t = endpoint.next_wakeup()
        if t is None:
            return
        soonest = now + 1e-9
        if t < soonest:
            t = soonest
        wake_at = self._wake_at
        if wake_at is None or t < wake_at or wake_at <= now:
            self._wake_at = t
            heappush(self._heap, (t, next(self._tickets), self._wake, (t,)))    # sim.at: t is past now

    def _wake(self, t: float) -> None:
        if self._wake_at != t:
            return
        self._wake_at = None
        self.service()
