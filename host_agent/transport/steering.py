"""Steering around congested paths: how long an EV stays out of use after congestion signals, and
which EVs were last acknowledged clean.

MRC's rule is "an ECN echo means: avoid that EV for a while". Here "a while" grows with repeated
signals and shrinks with clean acknowledgements (docs/transport.md, "Steering"):

- A strike (an ECN echo, a trim NACK before the last hop, or an acknowledgement whose RTT exceeds
  `delay_factor` x the connection's average RTT, so a slow path, not a queue every path shares at
  the last hop) adds one to the EV's strike count `k` and holds the EV
  out of the rotation for `hold_rotations` x `growth` ** (k - 1) rotations (at most
  `max_hold_rotations`); a rotation is as many data packets as the connection sprays over.
- A mark on a path already struck `local_strikes` times is that path's own congestion: the
  steering avoids it and the congestion window is not cut for it (MRC treats ECN as a
  load-balancing signal; marks spread over every path still reach the window).
- A clean acknowledgement (no mark, RTT below that bound) takes `clean_decay` strikes off, and
  queues the EV for reuse: when the rotation's next EV is held out or its path has strikes, the
  packet takes an EV acknowledged clean instead, oldest first (in the spirit of REPS), else the
  next EV not held out. Without congestion signals the rotation is MRC's.

Time is counted in data packets sent, so the rule is the same at every link speed. When the EV set
shares fates by path (`share_fate_by_path`: the sender knows which uSID path each EV takes), strikes
and holds belong to the path, so every EV on a congested path is held out together; else to the
EV alone. Each EV set holds its connection's state (`EvSet.steering`); the default EV selector and
path monitor (`policies`) share it through it.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:                       # the EV set holds a Steering: types only, no import cycle
    from host_agent.transport.evset import Ev, EvSet

HOLD_ROTATIONS = 1.0        # rotations a first strike holds an EV out (MRC's "skip once")
GROWTH = 2.0                # each further strike multiplies the hold by this
MAX_HOLD_ROTATIONS = 32.0   # longest hold
CLEAN_DECAY = 1.0           # strikes a clean acknowledgement takes off
DELAY_FACTOR = 2.0          # an RTT above this many times the connection's average RTT is a strike
RTT_GAIN = 1.0 / 16         # weight of a sample in that average
CLEAN_CACHE = 256           # EVs acknowledged clean remembered for reuse, at most
LOCAL_STRIKES = 1.0         # a mark on a path with this many strikes is that path's own congestion


@dataclass(frozen=True)
class SteeringParams:
    """The steering rule's parameters (module constants by default)."""

    hold_rotations: float = HOLD_ROTATIONS
    growth: float = GROWTH
    max_hold_rotations: float = MAX_HOLD_ROTATIONS
    clean_decay: float = CLEAN_DECAY
    delay_factor: float = DELAY_FACTOR
    rtt_gain: float = RTT_GAIN
    clean_cache: int = CLEAN_CACHE
    local_strikes: float = LOCAL_STRIKES


class Steering:
    """Strikes and holds of the EVs of one connection, and its EVs acknowledged clean."""

    def __init__(self, params: SteeringParams = SteeringParams(), by_path: bool = True) -> None:
        self.params = params
        self.by_path = by_path
        self.sent = 0                          # data packets sent: the clock holds are counted in
        self.strikes: dict[int, float] = {}    # key (path or EV value, `key`) -> strike count
        self.held_until: dict[int, float] = {}  # EV value -> `sent` count at which its hold ends
        self.clean: deque[Ev] = deque()        # EVs acknowledged clean, oldest first
        self._queued: set[int] = set()         # values in `clean`
        self.avg_rtt = 0.0                     # smoothed RTT of every acknowledgement (0: none yet)

    def key(self, ev: Ev) -> int:
        """What strikes are counted by: `ev`'s path, or `ev` itself (holds are always per EV)."""
        return ev.path_key if self.by_path else ev.value

    # --- signals ---------------------------------------------------------------------------
    def strike(self, ev: Ev, rotation: int) -> float:
        """A congestion signal about `ev`; hold it (its path) out. Returns the hold, in data packets."""
        p, key = self.params, self.key(ev)
        k = self.strikes.get(key, 0.0) + 1.0
        self.strikes[key] = k
        hold = min(p.max_hold_rotations, p.hold_rotations * p.growth ** (k - 1.0)) * max(1, rotation)
        self.held_until[ev.value] = max(self.held_until.get(ev.value, 0.0), self.sent + hold)
        return hold

    def on_mark(self, ev: Ev, rotation: int) -> bool:
        """An ECN echo about `ev`: a strike. Returns True when its path had been struck
        `local_strikes` times or more (its own congestion, for the steering rather than the window)."""
        local = self.strikes.get(self.key(ev), 0.0) >= self.params.local_strikes
        self.strike(ev, rotation)
        return local

    def clean_ack(self, ev: Ev) -> None:
        """A clean acknowledgement of a packet sent on `ev`: fewer strikes, and queued for reuse."""
        key = self.key(ev)
        k = self.strikes.get(key)
        if k is not None:
            k -= self.params.clean_decay
            if k > 0:
                self.strikes[key] = k
            else:
                del self.strikes[key]
        if ev.value not in self._queued and len(self.clean) < self.params.clean_cache:
            self.clean.append(ev)
            self._queued.add(ev.value)

    def on_ack(self, ev: Ev, ecn: bool, rtt: float | None) -> bool:
        """Judge one acknowledgement of `ev`. Clean (no mark, RTT within `delay_factor` x the
        connection's average): one strike off, and False. Marked or slow: True, and the caller
        strikes (`strike`, with the rotation's size: computed only then)."""
        delayed = False
        if rtt is not None and rtt > 0:
            if self.avg_rtt:
                delayed = rtt > self.params.delay_factor * self.avg_rtt
                self.avg_rtt += self.params.rtt_gain * (rtt - self.avg_rtt)
            else:
                self.avg_rtt = rtt
        if ecn or delayed:
            return True
        self.clean_ack(ev)
        return False

    # --- choice -------------------------------------------------------------------------------
    def suspect(self, ev: Ev) -> bool:
        """True when `ev` is held out or its strikes (its path's) are not all decayed."""
        return self.key(ev) in self.strikes or self.held(ev)

    def held(self, ev: Ev) -> bool:
        """True while `ev` is held out."""
        until = self.held_until.get(ev.value)
        if until is None:
            return False
        if self.sent >= until:
            del self.held_until[ev.value]
            return False
        return True

    def take_clean(self, evset: EvSet, exclude: Ev | None) -> Ev | None:
        """The oldest EV acknowledged clean that is still ours, usable and not held (dropping
        those that are not), or None."""
        while self.clean:
            ev = self.clean[0]
            if ev is not exclude and ev.usable and evset.get(ev.value) is ev and not self.held(ev):
                self.clean.popleft()
                self._queued.discard(ev.value)
                return ev
            if ev is exclude:
                return None
            self.clean.popleft()
            self._queued.discard(ev.value)
        return None

    def peek_clean(self, evset: EvSet) -> Ev | None:
        """The EV `take_clean` would return, without taking it."""
        for ev in self.clean:
            if ev.usable and evset.get(ev.value) is ev and not self.held(ev):
                return ev
        return None
