"""The verbs by which a simulated host drives a sans-IO transport endpoint, written once.

A host of the network model (`netsim.host.SimHost`) drives its endpoint through four verbs:
`receive`, `poll`, `next_wakeup` and `drain_events`. `SansIOTransport` says what each means: any
object with them will do (the benchmarks' sprayer, test doubles). `SansIOEndpoint` is the same
verbs as a base class: the transport (`host_agent.transport.Endpoint`) derives from it, and a
compiled host calls such an endpoint natively, without boxing its arguments or looking its methods
up by name (about 320,000 calls per fat-tree k=8 case). The transport and the network model are
peers and may not import each other, so both sit here, below both.
"""
from __future__ import annotations

from typing import Any, Iterable, Optional, Protocol


class SansIOTransport(Protocol):
    """What a host needs of the transport it runs: a sans-IO endpoint driven by arriving packets,
    polls and wake-ups."""

    def receive(self, now: float, nic: int, pkt: Any) -> None:
        """A packet arrived on NIC `nic` at time `now`."""

    def poll(self, now: float) -> Iterable[tuple[int, Any]]:
        """The (NIC, packet) pairs to transmit at time `now`."""

    def next_wakeup(self) -> Optional[float]:
        """When the endpoint next wants to be polled, or None."""

    def drain_events(self) -> list:
        """What happened since the last call, oldest first (handed to the host's `on_event`)."""


class SansIOEndpoint:
    """The verbs of `SansIOTransport` as a base class the compiled build calls natively. Only
    compiled classes may derive from it (the transport's `Endpoint`): a class written in Python
    that derives from it works in pure Python and is refused by the compiled build ("interpreted
    classes cannot inherit from compiled"), so anything written in Python (a test double, a lab's
    endpoint) implements `SansIOTransport` instead."""

    __slots__ = ()

    def receive(self, now: float, nic: int, pkt: Any) -> None:
        """As `SansIOTransport.receive`."""
        raise NotImplementedError

    def poll(self, now: float) -> Iterable[tuple[int, Any]]:
        """As `SansIOTransport.poll`."""
        raise NotImplementedError

    def next_wakeup(self) -> Optional[float]:
        """As `SansIOTransport.next_wakeup`."""
        raise NotImplementedError

    def drain_events(self) -> list:
        """As `SansIOTransport.drain_events`."""
        raise NotImplementedError
