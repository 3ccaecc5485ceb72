"""The verbs of a sans-IO transport endpoint as a base class, for the compiled build.

A host of the network model (`netsim.host.SimHost`) drives its endpoint through four verbs:
`receive`, `poll`, `next_wakeup` and `drain_events` (`netsim.host.SansIOTransport` says what each
means; any object with them will do). The transport (`host_agent.transport.Endpoint`) and the
network model are peers and may not import each other, so this base sits below both: an endpoint
derived from it is called natively by a compiled host, without boxing its arguments or looking its
methods up by name (about 320,000 calls per fat-tree k=8 case). Anything else is called as Python
calls it, in both builds.
"""
from __future__ import annotations

from typing import Any


class SansIOEndpoint:
    """A transport endpoint a simulated host drives; subclasses implement every verb."""

    __slots__ = ()

    def receive(self, now: float, nic: int, pkt: Any) -> None:
        """A packet arrived on NIC `nic` at time `now`."""
        raise NotImplementedError

    def poll(self, now: float) -> list[tuple[int, Any]]:
        """The (NIC, packet) pairs to transmit at time `now`."""
        raise NotImplementedError

    def next_wakeup(self) -> float | None:
        """When the endpoint next wants to be polled, or None."""
        raise NotImplementedError

    def drain_events(self) -> list:
        """What happened since the last call, oldest first."""
        raise NotImplementedError
