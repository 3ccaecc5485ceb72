"""The registry of transport kinds: `TransportConfig.mode` names one, which builds a connection's parts.

    "mrc"   MrcSender + MrcReceiver over an EV set of `num_evs` EVs on every path
    "roce"  BaselineSender + BaselineReceiver (go-back-N) over one EV on the first path

A builder takes the `Wiring` of one connection (its identity, configuration, paths, the shared
collaborators and the policies) and returns its `Parts`. `register_transport` adds a kind
(for an experiment in another transport design); the built-in names cannot be replaced.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from host_agent.transport import events
from host_agent.transport.baseline import BaselineReceiver, BaselineSender
from host_agent.transport.peers import ConnectionId, PathInfo
from host_agent.transport.config import TransportConfig
from host_agent.transport.congestion import RttEstimator
from host_agent.transport.evset import EvSet
from host_agent.transport.shares import SenderShares
from host_agent.transport.steering import SteeringParams
from host_agent.transport.nicclock import NicClock
from host_agent.transport.pathcap import PathCapSelector
from host_agent.transport.policies import CongestionControl, PathMonitor, Policies
from host_agent.transport.receiver import MrcReceiver
from host_agent.transport.sender import MrcSender
from host_agent.transport.tally import Tally


class SenderPart(Protocol):
    """What a connection asks of its sender."""

    failed: Any               # None, or the ConnectionFailed event once a packet ran out of retries

    @property
    def cum_acked(self) -> int: ...
    @property
    def idle(self) -> bool: ...
    def send_message(self, data) -> int: ...
    def expire(self, now: float) -> None: ...
    def poll(self, now: float, out: list) -> None: ...
    def next_wakeup(self) -> float | None: ...
    def on_sack(self, now: float, sack) -> None: ...
    def on_nack(self, now: float, nack) -> None: ...


class ReceiverPart(Protocol):
    """What a connection asks of its receiver."""

    last_data_at: float            # when data last arrived (-1: never)

    def on_data(self, now: float, plane: int | None, pkt, out: list) -> None: ...
    def poll(self, now: float, out: list) -> None: ...
    def next_wakeup(self) -> float | None: ...


@dataclass(frozen=True)
class Wiring:
    """Everything the parts of one connection may be built from."""

    ident: ConnectionId
    config: TransportConfig
    paths: list[PathInfo]
    rng: random.Random
    stats: Tally                                      # the connection's counters
    emit: Callable[[events.TransportEvent], None]          # report an event to the endpoint's caller
    rtt: RttEstimator
    cc: CongestionControl
    nic: NicClock                                     # the endpoint's NICs, shared by its connections
    shares: SenderShares                              # the endpoint's senders and their shares (window penalty)
    monitor: PathMonitor
    policies: Policies
    on_ev_change: Callable                            # EvSet on_change(ev, old, cause, now)
    on_ev_backup: Callable                            # EvSet on_backup(new, old, now)


@dataclass(frozen=True)
class Parts:
    """The parts of one connection a builder returns."""

    evset: EvSet
    sender: SenderPart
    receiver: ReceiverPart
    keepalive: bool                                   # may the prober send keepalives (a multipath EV set)


def build_mrc(w: Wiring) -> Parts:
    """MRC: EVs sprayed over every path, selective acknowledgement, trims, EV retirement."""
    cfg = w.config
    evset = EvSet(w.paths, cfg.num_evs, cfg.ev_floor, w.rng, cfg.share_fate_by_path,
                  on_change=w.on_ev_change, on_backup=w.on_ev_backup,
                  steering=SteeringParams(share_struck=True) if cfg.steer_share_struck else None,
                  path_cap=cfg.path_cap_pkts or None, stripe=cfg.stripe_paths)
    selector = w.policies.ev_selector(cfg)
    if cfg.path_cap_pkts:
        selector = PathCapSelector(selector, cfg)     # no path holds more than its cap while another has room
    sender = MrcSender(w.ident, cfg, evset, w.rtt, w.cc, w.nic, w.stats, w.emit,
                       selector, w.policies.sack(cfg), w.monitor)
    receiver = MrcReceiver(w.ident, cfg, evset, w.stats, w.emit, w.shares if cfg.window_penalty else None)
    return Parts(evset, sender, receiver, keepalive=True)


def build_baseline(w: Wiring) -> Parts:
    """The RoCE-style baseline: one EV on the first path, go-back-N."""
    cfg = w.config
    evset = EvSet(w.paths[:1], 1, 1, w.rng, False)
    sender = BaselineSender(w.ident, cfg, evset, w.rtt, w.cc, w.nic, w.stats, w.emit)
    return Parts(evset, sender, BaselineReceiver(w.ident, cfg, evset, w.stats, w.emit), keepalive=False)


TRANSPORTS: dict[str, Callable[[Wiring], Parts]] = {"mrc": build_mrc, "roce": build_baseline}
BUILT_IN = tuple(TRANSPORTS)


def builder(mode: str) -> Callable[[Wiring], Parts]:
    """The builder of the transport kind `mode`; a ValueError naming the registered kinds otherwise."""
    found = TRANSPORTS.get(mode)
    if found is None:
        raise ValueError(f"transport mode {mode!r} is not one of {tuple(TRANSPORTS)}")
    return found


def register_transport(name: str, builder: Callable[[Wiring], Parts]) -> None:
    """Make `TransportConfig(mode=name)` build connections with `builder`."""
    if name in BUILT_IN:
        raise ValueError(f"register_transport: {name!r} is a built-in transport kind and cannot be replaced")
    if not callable(builder):
        raise ValueError(f"register_transport: the builder of {name!r} is not callable")
    TRANSPORTS[name] = builder
