"""The senders sharing an endpoint's links, and their shares: the window penalty a SACK carries
(MRC's receiver window penalty; docs/transport.md, "Receiver window penalty")."""
from __future__ import annotations

import math
from typing import Final, Protocol

from wire import constants
from wire.packets import DATA_OVERHEAD
from host_agent.transport.config import TransportConfig
from host_agent.transport.congestion import TARGET_DELAY_BASE_FRACTION

PENALTY_UNITS: Final = constants.WINDOW_PENALTY_UNITS
MAX_PENALTY: Final = PENALTY_UNITS - 1
ACTIVE_BASE_RTTS: Final = 2.0         # a sender counts while its data came this recently (and it has not finished)
RECOUNT_BASE_RTTS: Final = 0.25       # the senders are counted again at most this often


class SharingFlow(Protocol):
    """What the count asks of each connection's receiving half."""

    def sending(self, now: float, within: float) -> bool:
        """True while the peer sends: data arrived within `within` seconds of `now`, and not
        everything up to the sender's tail is in."""


class SenderShares:
    """Counts the senders sharing this endpoint's links and works out the window penalty that
    gives each its share.

    The budget is what the endpoint's links carry in a base RTT plus NSCC's target delay: the
    window that keeps the last hop's queue near the target. Each of n senders is asked to keep
    1/n of it, as a fraction of its largest window (`max_cwnd`): the penalty is what is left over,
    in 256ths, rounded so that each keeps at least its share. Shares are equal whatever a sender
    uses: one held back elsewhere (its own link, a slow path) still counts as a whole share
    (docs/transport.md, "Receiver window penalty", says what that costs). A lone sender is asked
    nothing, except for ACTIVE_BASE_RTTS after others shared the links with it: then its share is
    the whole budget, so that the window it held as one of several is raised to all of it at once
    (`NsccWindow.on_window_penalty`).

    The base RTT is `initial_rtt` (sizing sets it to the network's), the rate `line_rate_bps` per
    NIC; without a line rate no penalty is ever asked.
    """

    def __init__(self, config: TransportConfig) -> None:
        rtt = config.initial_rtt
        target = config.target_delay or TARGET_DELAY_BASE_FRACTION * rtt
        self._rate = config.line_rate_bps / 8          # bytes/s of one NIC
        self._budget_s = rtt + target                  # seconds of the links' rate in the budget
        self._largest = config.max_cwnd * (config.mtu_payload + DATA_OVERHEAD)
        self._active_s = ACTIVE_BASE_RTTS * rtt
        self._recount_s = RECOUNT_BASE_RTTS * rtt
        self._flows: list[SharingFlow] = []
        self._nics = 1
        self._counted_at = -math.inf
        self._shared_until = -math.inf                 # until when a lone sender still gets the budget's share
        self._penalty = 0
        self.senders = 0                               # senders at the last count

    def join(self, flow: SharingFlow, nics: int) -> None:
        """Count `flow` (a connection's receiving half, on `nics` NICs) from now on."""
        self._flows.append(flow)
        self._nics = max(self._nics, nics)

    def close(self) -> None:
        """Forget every flow, its endpoint closing (`Endpoint.close`): each refers back to these shares."""
        self._flows = []

    def penalty(self, now: float) -> int:
        """The window penalty (0..255) for a SACK sent at `now`."""
        if now - self._counted_at >= self._recount_s:
            self._count(now)
        return self._penalty

    def _count(self, now: float) -> None:
        self._counted_at = now
        within = self._active_s
        n = 0
        for flow in self._flows:
            if flow.sending(now, within):
                n += 1
        self.senders = n
        if n > 1:
            self._shared_until = now + within
        elif now >= self._shared_until or not self._rate:
            self._penalty = 0
            return
        self._penalty = self.penalty_for(1.0 / max(n, 1))

    def penalty_for(self, fraction: float) -> int:
        """The penalty that leaves a sender `fraction` of the budget (at least)."""
        if not self._rate or self._budget_s <= 0:
            return 0
        share = fraction * self._rate * self._nics * self._budget_s / self._largest
        if share >= 1.0:
            return 0
        return min(MAX_PENALTY, PENALTY_UNITS - math.ceil(share * PENALTY_UNITS))
