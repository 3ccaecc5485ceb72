"""The senders sharing an endpoint's links, and their shares: the window penalty a SACK carries
(MRC's receiver window penalty; docs/transport.md, "Receiver window penalty")."""
from __future__ import annotations

import math
from typing import Final, Protocol

from wire import constants
from wire.packets import DATA_OVERHEAD
from host_agent.transport.config import TransportConfig

PENALTY_UNITS: Final = constants.WINDOW_PENALTY_UNITS
MAX_PENALTY: Final = PENALTY_UNITS - 1
TARGET_DELAY_BASE_FRACTION: Final = 0.3   # NSCC's target when `target_delay` is 0 (as congestion.py)
ACTIVE_BASE_RTTS: Final = 2.0         # a sender counts while its data came this recently (and it has not finished)
RECOUNT_BASE_RTTS: Final = 0.25       # the senders are counted again at most this often
RATE_BASE_RTTS: Final = 2.0           # a sender's rate is measured over spans of at least this long
LIMITED_FRACTION: Final = 0.8         # a sender below this fraction of an equal share is held back elsewhere


class SharingFlow(Protocol):
    """What the count asks of each connection's receiving half."""

    def sending(self, now: float, within: float) -> bool:
        """True while the peer sends: data arrived within `within` seconds of `now`, and not
        everything up to the sender's tail is in."""

    def bytes_received(self) -> int:
        """Payload bytes taken so far."""


class SenderShares:
    """Counts the senders sharing this endpoint's links and works out the window penalty that
    gives each its share.

    The budget is what the endpoint's links carry in a base RTT plus NSCC's target delay: the
    window that keeps the last hop's queue near the target. It is shared max-min: a sender whose
    rate (over its latest span of RATE_BASE_RTTS or more while sending) is below LIMITED_FRACTION
    of an equal share of the links is held back elsewhere (its own link, a slow path, other connections on its NIC) and
    keeps what it uses; the others split the rest equally. One penalty goes to all: what is left
    of the largest window (`max_cwnd`) once that equal share is kept, in 256ths, rounded so that
    each keeps at least its share (a sender held back elsewhere is then allowed more than it
    uses). A lone sender is asked nothing, except for ACTIVE_BASE_RTTS after others shared the
    links with it: then its share is the whole budget, so that the window it held as one of
    several is raised to all of it at once (`NsccWindow.on_window_penalty`).

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
        self._rate_s = RATE_BASE_RTTS * rtt
        self._flows: list[SharingFlow] = []
        self._mark_bytes: list[int] = []               # each flow's bytes when its current span began
        self._mark_at: list[float] = []                # when that was (inf: not sending)
        self._rates: list[float] = []                  # each flow's rate over its latest span, bytes/s (-1: none yet)
        self._nics = 1
        self._counted_at = -math.inf
        self._shared_until = -math.inf                 # until when a lone sender still gets the budget's share
        self._penalty = 0
        self.senders = 0                               # senders at the last count
        self.limited = 0                               # of them, held back elsewhere

    def join(self, flow: SharingFlow, nics: int) -> None:
        """Count `flow` (a connection's receiving half, on `nics` NICs) from now on."""
        self._flows.append(flow)
        self._mark_bytes.append(0)
        self._mark_at.append(math.inf)
        self._rates.append(-1.0)
        self._nics = max(self._nics, nics)

    def penalty(self, now: float) -> int:
        """The window penalty (0..255) for a SACK sent at `now`."""
        if now - self._counted_at >= self._recount_s:
            self._count(now)
        return self._penalty

    def _count(self, now: float) -> None:
        self._counted_at = now
        within = self._active_s
        rates, marks, mark_bytes = self._rates, self._mark_at, self._mark_bytes
        sending: list[int] = []
        for i, flow in enumerate(self._flows):
            if not flow.sending(now, within):
                marks[i] = math.inf
                rates[i] = -1.0
                continue
            sending.append(i)
            span = now - marks[i]
            if span == -math.inf:                      # it started sending: a span begins
                marks[i], mark_bytes[i] = now, flow.bytes_received()
            elif span >= self._rate_s:
                taken = flow.bytes_received()
                rates[i] = (taken - mark_bytes[i]) / span
                marks[i], mark_bytes[i] = now, taken
        n = len(sending)
        self.senders = n
        self.limited = 0
        if n > 1:
            self._shared_until = now + within
        elif now >= self._shared_until or not self._rate:
            self._penalty = 0
            return
        capacity = self._rate * self._nics
        left, free = max(n, 1), capacity
        measured = sorted(rates[i] for i in sending if rates[i] >= 0)
        for rate in measured:                          # the slowest first: max-min
            if left == 1 or rate >= LIMITED_FRACTION * free / left:
                break
            free -= rate
            left -= 1
            self.limited += 1
        self._penalty = self.penalty_for(free / left / capacity)

    def penalty_for(self, fraction: float) -> int:
        """The penalty that leaves a sender `fraction` of the budget (at least)."""
        if not self._rate or self._budget_s <= 0:
            return 0
        share = fraction * self._rate * self._nics * self._budget_s / self._largest
        if share >= 1.0:
            return 0
        return min(MAX_PENALTY, PENALTY_UNITS - math.ceil(share * PENALTY_UNITS))
