"""A simulated host: the transport endpoint it is given, and its NICs, driven by the simulator's clock."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Final, Mapping

from netsim.link import SimLink
from netsim.sim import Event, Simulator
from wire import constants
from wire.packets import DataPacket, Sack
from wire.endpoint import SansIOEndpoint, SansIOTransport

_HIGH_DSCP: Final = constants.HIGH_PRIORITY_DSCP
_HIGH: Final = constants.PRIORITY_HIGH
_LOW: Final = constants.PRIORITY_LOW
_NO_WAKE_UP: Final = float("-inf")      # the wake-up time of a host that wants none (a float, compared natively)


class SimHost(Event):
    """Feeds arriving packets to its endpoint and transmits what `poll` returns.

    `nics[i]` is the egress link of NIC i (one per plane; `plug` plugs one in). The host wakes itself at the
    endpoint's `next_wakeup()`. With an `on_event` handler (the application on this host) it
    drains the endpoint's events and hands them over before each poll and after it, so that
    what the application sends in answer goes out at once; without one, events wait in the
    endpoint for whoever drains them. While the host is paused (`pause`) it neither polls nor
    takes packets: they wait and are handed over, in order, when the pause ends.
    """

    def __init__(self, sim: Simulator, name: str, index: int) -> None:
        self.sim = sim
        self.name = name
        self.index = index
        self._nics: dict[int, SimLink] = {}
        self._by_nic: list[SimLink | None] = []     # the same links by NIC index, read per packet (no boxed key)
        self.nic_addr: dict[int, bytes] = {}
        self.usid = 0
        # typed as the verbs' base or any other endpoint (a union): the compiled build calls a
        # SansIOEndpoint's natively after a type check, anything else as Python does
        self.endpoint: SansIOEndpoint | SansIOTransport | None = None
        self.on_event: Any = None
        self._wake_at = _NO_WAKE_UP             # the wake-up it wants (scheduled: the host is its event), or _NO_WAKE_UP
        self.closed = False                     # by `close`
        self._pauses: list[tuple[float, float]] = []      # (start, end) of the pauses not over yet
        self._held: list = []                   # packets held by pauses, in arrival order
        self._handed = 0                        # how many of them were handed over

    @property
    def nics(self) -> Mapping[int, SimLink]:
        """NIC index -> its egress link (read-only: `plug` plugs one in)."""
        return MappingProxyType(self._nics)

    def plug(self, nic: object, link: SimLink) -> None:
        """Make `link` the egress link of NIC `nic` (from 0)."""
        if not isinstance(nic, int) or isinstance(nic, bool) or nic < 0:
            raise ValueError(f"host {self.name}: NIC {nic!r} is not a NIC number (an int from 0)")
        self._nics[nic] = link
        if nic >= len(self._by_nic):
            self._by_nic.extend([None] * (nic + 1 - len(self._by_nic)))
        self._by_nic[nic] = link

    def attach(self, endpoint: SansIOEndpoint | SansIOTransport, on_event=None) -> None:
        """Drive `endpoint` from now on, handing its events to `on_event(event)` if given."""
        self.endpoint = endpoint
        self.on_event = on_event
        self.service()

    def close(self) -> None:
        """End the host, its network closing (`Network.close`): it lets go of its endpoint and of
        the application's handler (which may refer to the network), so that reference counting
        frees it. It serves nothing after; closing it again does nothing."""
        if self.closed:
            return
        self.closed = True
        self.endpoint = None
        self.on_event = None

    def pause(self, start: float, end: float) -> list:
        """From `start` to `end` the host's process does not run (a descheduled agent): what arrives
        waits, as in a socket buffer, and its timers fire only when no pause holds it any more.
        Pauses may overlap. Returns the list of the (packet, NIC) pairs pauses held (it keeps them)."""
        self._pauses.append((start, end))
        self.sim.at(end, self._resume)
        return self._held

    def _paused(self) -> bool:
        now = self.sim.now
        return any(start <= now < end for start, end in self._pauses)

    def _resume(self) -> None:
        now = self.sim.now
        self._pauses = [(start, end) for start, end in self._pauses if end > now]
        if self._paused():
            return                              # another pause still holds the host
        held = self._held
        while self._handed < len(held):         # what arrived in the pause, in order
            pkt, nic = held[self._handed]
            self._handed += 1
            self.receive(pkt, nic)
        self.service()

    def receive(self, pkt, nic: int) -> None:
        """A packet arrived on NIC `nic`."""
        if self._pauses and self._paused():
            self._held.append((pkt, nic))
            return
        endpoint = self.endpoint
        if endpoint is None:
            return
        endpoint.receive(self.sim.now, nic, pkt)
        self.service()

    def service(self) -> None:
        """Poll the endpoint, transmit its packets and set the next wake-up."""
        now = self.sim.now
        if self._pauses and self._paused():
            return
        endpoint = self.endpoint
        if endpoint is None:                    # nothing attached yet: nothing to poll
            return
        handle = self.on_event
        if handle is not None:
            drained: list = endpoint.drain_events()     # a list: its emptiness read natively
            if drained:
                self._hand_over(drained, handle)
        nics = self._by_nic
        sent = endpoint.poll(now)
        # a list of (int, packet) pairs is walked and its pairs unpacked natively when compiled
        batch: list[tuple[int, Any]] = sent if type(sent) is list else list(sent)
        for nic, pkt in batch:
            link = nics[nic] if 0 <= nic < len(nics) else None
            if link is None:
                raise KeyError(f"host {self.name}: endpoint sent on NIC {nic}, which this host does not have")
            # wire.packets.priority_of; narrowed for mypyc: a data packet's and a SACK's DSCP read natively,
            # the others' generically
            dscp: int = pkt.dscp if type(pkt) is DataPacket else pkt.dscp if type(pkt) is Sack else pkt.dscp
            link.send(pkt, _HIGH if dscp in _HIGH_DSCP else _LOW)
        if handle is not None:
            drained = endpoint.drain_events()
            if drained:
                self._hand_over(drained, handle)
        wakeup = endpoint.next_wakeup()
        if wakeup is None:
            return
        t: float = wakeup                       # compared as a float, not as any object, when compiled
        soonest = now + 1e-9
        if t < soonest:
            t = soonest
        wake_at = self._wake_at
        if t < wake_at or wake_at <= now:       # sooner than the one it wants, or that one is past
            self._wake_at = t
            self.sim.schedule(t, self)              # its wake-up (`fire`); sim.at without its check: t is past now

    @staticmethod
    def _hand_over(drained: list, handle: Any) -> None:
        """Hand the endpoint's events to the application (`service` calls it only when there are some)."""
        for event in drained:
            handle(event)

    def fire(self, item: Any) -> None:
        """The simulator's call at a wake-up the host asked for (the host is the event of its
        wake-ups: no object of their own): it serves its endpoint if this is still the wake-up it wants."""
        self._wake()

    def _wake(self) -> None:
        if self._wake_at != self.sim.now:       # a later service asked for another time
            return
        self._wake_at = _NO_WAKE_UP
        self.service()
