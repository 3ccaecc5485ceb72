"""The NIC clock: when each local NIC will have sent what the endpoint handed it."""
from __future__ import annotations


class NicClock:
    """Per-NIC transmit horizon at a known line rate, shared by every connection of an endpoint.

    Data may be handed to a NIC while at most `backlog_bytes` wait in it: `free_at(nic)` is
    when that is so again. With no line rate (`line_rate_bps` 0) there is no clock: `rate` is 0,
    nothing is accounted and every NIC is always free.
    """

    def __init__(self, line_rate_bps: float, backlog_bytes: int) -> None:
        self.rate = line_rate_bps / 8                      # bytes/s of each NIC
        self._free: list[float] = []                       # by NIC index: when what it holds will have left
        self._backlog = backlog_bytes / self.rate if self.rate else 0.0
        self.version = 0                                   # bumped whenever a NIC's horizon moves

    def account(self, nic: int, nbytes: int, now: float) -> None:
        """Note `nbytes` handed to NIC `nic` (an index from 0) at `now`."""
        rate = self.rate
        if rate:
            horizons = self._free
            while len(horizons) <= nic:                   # a NIC never used yet: free since time 0
                horizons.append(0.0)
            free = horizons[nic]
            horizons[nic] = (free if free > now else now) + nbytes / rate
            self.version += 1

    def free_at(self, nic: int) -> float:
        """When NIC `nic` may take another data packet (by our clock)."""
        horizons = self._free
        return (horizons[nic] if nic < len(horizons) else 0.0) - self._backlog
