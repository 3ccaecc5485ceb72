"""A cap on the packets one path holds in flight, opened by acknowledgements at a normal RTT.

Before any signal comes back, spraying sends every path its share of the window, and a slow path
(a gray spine: every link of one switch at a quarter of its rate) queues that share for many
RTTs; congestion signals from it come back only as late. With `TransportConfig.path_cap_pkts`
(docs/transport.md, "Path cap"):

- every path of a connection (`Ev.path_key`: all EVs of one path share one `PathLoad`) may hold
  at most `cap` packets in flight; `cap` starts at `path_cap_pkts`;
- each first transmission acknowledged within `path_cap_rtts` base RTTs of being sent (the time
  since it was sent bounds its RTT from above) raises its path's cap by one, up to the largest
  window: a path that answers at a normal RTT opens as slow start would (doubling per RTT), a
  slow one stays at its first cap, so it carries what it drains (self-clocked) and its queue
  stays at a few packets per connection;
- when the EV chosen for a packet is on a path at its cap, the packet takes the next EV of the
  rotation whose path is under its cap (and is not held out by the steering); when every path is
  at its cap the packet goes on the EV first chosen: the cap never stalls the sender.

The sender counts the packets in flight per path (`PathLoad.inflight`) whether or not the cap is
on; `PathCapSelector` wraps the connection's EV selector when it is.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Final, Iterable

if TYPE_CHECKING:                       # the EV set holds the loads: types only, no import cycle
    from host_agent.transport.config import TransportConfig
    from host_agent.transport.evset import Ev, EvSet
    from host_agent.transport.message import Segment
    from host_agent.transport.policies import EvSelector, RotationSelector

_INF: Final = float("inf")


class PathLoad:
    """One path's packets in flight, how many it may hold (`cap`; inf: no cap), how many were
    sent on it (`sent`, transmissions; `pathloss` weighs the path's losses against them), and until
    which of them the judge of its losses asks for more of them (`sample_until`, `pathloss.Sampler`)."""

    __slots__ = ("inflight", "cap", "sent", "sample_until")

    def __init__(self, cap: float = _INF) -> None:
        self.inflight = 0
        self.cap = cap
        self.sent = 0
        self.sample_until = 0


def open_caps(acked: Iterable[Segment], now: float, bound: float, most: float) -> None:
    """Raise by one the cap of the path of every packet in `acked` (first transmissions just
    acknowledged: `message.Segment`s) sent no more than `bound` seconds before `now`; at most to `most`."""
    for seg in acked:
        if seg.transmissions == 1 and now - seg.sent_at <= bound:
            ev: Ev = seg.ev                     # typed here: a segment holds its EV untyped
            load = ev.load
            if load.cap < most:
                load.cap += 1


class PathCapSelector:
    """An EV selector (`policies.EvSelector`) that keeps the packets off paths at their cap:
    `inner`'s choice while its path has room, else the next EV of the rotation whose path has room
    and which the steering does not hold out (a retransmission: not the EV it was lost on), else
    `inner`'s choice."""

    def __init__(self, inner: RotationSelector | EvSelector, config: TransportConfig) -> None:
        self.inner: RotationSelector | EvSelector = inner     # MRC's called natively when compiled
        self.peek_ev = inner.peek_ev           # the NIC a packet would take: `inner`'s guess
        self._bound_rtts = config.path_cap_rtts   # read per acknowledgement: copies (the config is not compiled)
        self._most = config.max_cwnd

    def open_caps(self, acked: Iterable[Segment], now: float, base_rtt: float) -> None:
        """Acknowledgements at a normal RTT open their paths' caps: `open_caps` for the first
        transmissions in `acked`, sent within `path_cap_rtts` base RTTs, up to the largest window."""
        open_caps(acked, now, self._bound_rtts * base_rtt, self._most)

    def next_ev(self, evset: EvSet, now: float, resend_of: Ev | None) -> Ev:
        ev = self.inner.next_ev(evset, now, resend_of)
        load = ev.load
        if load.inflight < load.cap:
            return ev
        steering = evset.steering               # its `held` called natively (a bound method is called generically)
        for _turn in range(evset.active_count()):  # `_turn`, not `_`: mypyc boxes every value of `_`
            other = evset.next_data_ev(now)
            load = other.load
            if load.inflight < load.cap and other is not resend_of and not steering.held(other):
                return other
        return ev
