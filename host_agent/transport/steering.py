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
  packet takes an EV acknowledged clean instead, oldest first (in the spirit of REPS), provided
  its path has fewer strikes than that EV's (any, when that EV is held out), else the next EV not
  held out. Without congestion signals the rotation is MRC's.
- With `share_struck` (sizing turns it on at data-center speed), a path's strike count grows at
  most once per rotation (the other signals of that rotation are about packets sent before the
  steering could react; each still holds its EV), and a struck path that is not held keeps one of
  every 2^k of its rotation slots instead of giving each to an EV acknowledged clean: without
  it a slow path struck dozens of times in its first RTT was never used again, so never
  acknowledged clean again.
- A SACK echoes one packet, but acknowledges several (one per `ack_coalesce`). While a signal
  stands (`signalled`), every other packet it acknowledges for the first time is judged too:
  unmarked (a CE mark gets a SACK of its own), with the time since it was sent as a bound on its
  RTT. Within the delay bound, and when its path has no strikes, its EV is queued for reuse as
  well; strikes are left to exact (echoed) samples. An EV waits for reuse at most `clean_age` rotations of the EV set
  (`num_evs` data packets): older news of a path may be stale (a link that went down since).

Time is counted in data packets sent, so the rule is the same at every link speed. When the EV set
shares fates by path (`share_fate_by_path`: the sender knows which uSID path each EV takes), strikes
and holds belong to the path, so every EV on a congested path is held out together; else to the
EV alone. Each EV set holds its connection's state (`EvSet.steering`); the default EV selector and
path monitor (`policies`) share it through it.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:                       # the EV set holds a Steering: types only, no import cycle
    from host_agent.transport.evset import Ev, EvSet

HOLD_ROTATIONS: Final = 1.0        # rotations a first strike holds an EV out (MRC's "skip once")
GROWTH: Final = 2.0                # each further strike multiplies the hold by this
MAX_HOLD_ROTATIONS: Final = 32.0   # longest hold
CLEAN_DECAY: Final = 1.0           # strikes a clean acknowledgement takes off
DELAY_FACTOR: Final = 2.0          # an RTT above this many times the connection's average RTT is a strike
RTT_GAIN: Final = 1.0 / 16         # weight of a sample in that average
CLEAN_CACHE: Final = 256           # EVs acknowledged clean remembered for reuse, at most
CLEAN_AGE: Final = 1.0             # EV-set rotations (num_evs data packets) an EV acknowledged clean may wait for reuse
LOCAL_STRIKES: Final = 1.0         # a mark on a path with this many strikes is that path's own congestion


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
    clean_age: float = CLEAN_AGE
    local_strikes: float = LOCAL_STRIKES
    share_struck: bool = False          # strikes grow once per rotation; a struck path keeps 1 / 2^k of its slots


class Steering:
    """Strikes and holds of the EVs of one connection, and its EVs acknowledged clean."""

    def __init__(self, params: SteeringParams = SteeringParams(), by_path: bool = True) -> None:
        self.params = params
        self.by_path = by_path
        self.sent = 0                          # data packets sent: the clock holds are counted in
        self.strikes: dict[int, float] = {}    # key (path or EV value, `key`) -> strike count
        self.held_until: dict[int, float] = {}  # EV value -> `sent` count at which its hold ends
        self.clean: deque[Ev] = deque()        # EVs acknowledged clean, oldest first
        self._queued: dict[int, int] = {}      # value in `clean` -> `sent` when it was queued
        self.avg_rtt = 0.0                     # smoothed RTT of every acknowledgement (0: none yet)
        self._delay_factor = params.delay_factor   # read on every acknowledgement
        self._rtt_gain = params.rtt_gain
        self._clean_cache = params.clean_cache
        self._clean_age = params.clean_age
        self._struck_at: dict[int, int] = {}   # key -> `sent` at its latest strike count increase (share_struck)
        self._credit: dict[int, float] = {}    # key -> slots owed to a struck path (share_struck)

    def key(self, ev: Ev) -> int:
        """What strikes are counted by: `ev`'s path, or `ev` itself (holds are always per EV)."""
        return ev.path_key if self.by_path else ev.value

    # --- signals ---------------------------------------------------------------------------
    def strike(self, ev: Ev, rotation: int) -> float:
        """A congestion signal about `ev`; hold it (its path) out. Returns the hold, in data packets."""
        p, key = self.params, self.key(ev)
        k = self.strikes.get(key, 0.0)
        if not p.share_struck or k <= 0 or self.sent - self._struck_at.get(key, 0) >= max(1, rotation):
            k += 1.0
            self._struck_at[key] = self.sent
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
        strikes = self.strikes
        if strikes:
            key = ev.path_key if self.by_path else ev.value
            k = strikes.get(key)
            if k is not None:
                k -= self.params.clean_decay
                if k > 0:
                    strikes[key] = k
                else:
                    del strikes[key]
        self._offer(ev)

    def _offer(self, ev: Ev) -> None:
        """Queue `ev` for reuse (once; at most `clean_cache` EVs wait)."""
        if len(self.clean) < self._clean_cache and ev.value not in self._queued:
            self.clean.append(ev)
            self._queued[ev.value] = self.sent

    def on_ack(self, ev: Ev, ecn: bool, rtt: float | None) -> bool:
        """Judge one acknowledgement of `ev`. Clean (no mark, RTT within `delay_factor` x the
        connection's average): one strike off, and False. Marked or slow: True, and the caller
        strikes (`strike`, with the rotation's size: computed only then)."""
        delayed = False
        if rtt is not None and rtt > 0:
            avg = self.avg_rtt
            if avg:
                delayed = rtt > self._delay_factor * avg
                self.avg_rtt = avg + self._rtt_gain * (rtt - avg)
            else:
                self.avg_rtt = rtt
        if ecn or delayed:
            return True
        self.clean_ack(ev)
        return False

    @property
    def signalled(self) -> bool:
        """True while a congestion signal stands: some path (or EV) has strikes or is held out."""
        return bool(self.strikes or self.held_until)

    def acked_within(self, ev: Ev, within: float) -> None:
        """A SACK acknowledged, without echoing it, a packet sent on `ev` `within` seconds ago (so
        it was not CE-marked: a mark gets a SACK of its own). Within the delay bound, and when its
        path has no strikes, `ev` is offered for reuse. Strikes are neither taken off nor added
        (`within` only bounds its RTT from above: the receiver may have held the SACK)."""
        if within <= self._delay_factor * self.avg_rtt and self.key(ev) not in self.strikes:
            self._offer(ev)

    # --- choice -------------------------------------------------------------------------------
    def admit(self, ev: Ev) -> bool:
        """With `share_struck`: True when `ev`, not held, may take its rotation slot although its
        path has k strikes: one slot in 2^k (a credit per path), every slot without strikes."""
        key = self.key(ev)
        k = self.strikes.get(key)
        if k is None:
            return True
        credit = self._credit.get(key, 0.0) + 0.5 ** k
        if credit >= 1.0:
            self._credit[key] = credit - 1.0
            return True
        self._credit[key] = credit
        return False

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

    def take_clean(self, evset: EvSet, exclude: Ev | None, instead_of: Ev | None = None) -> Ev | None:
        """The oldest EV acknowledged clean within the last `clean_age` rotations that is still
        ours, usable and not held (dropping those that are not), or None. With `instead_of` (the
        rotation's suspect EV) not held out, only when that oldest one's path has fewer strikes."""
        oldest = self.sent - self._clean_age * len(evset.slots)
        queued = self._queued
        while self.clean:
            ev = self.clean[0]
            fresh = queued[ev.value] >= oldest
            if fresh and ev is not exclude and ev.usable and evset.get(ev.value) is ev and not self.held(ev):
                if instead_of is not None and not self.held(instead_of):
                    strikes = self.strikes
                    if strikes.get(self.key(ev), 0.0) >= strikes.get(self.key(instead_of), 0.0):
                        return None             # not on a path less suspect than the one it would replace
                self.clean.popleft()
                del queued[ev.value]
                return ev
            if fresh and ev is exclude:
                return None
            self.clean.popleft()
            del queued[ev.value]
        return None

    def peek_clean(self, evset: EvSet) -> Ev | None:
        """The EV `take_clean` would return, without taking it."""
        oldest = self.sent - self._clean_age * len(evset.slots)
        for ev in self.clean:
            if self._queued[ev.value] >= oldest and ev.usable and evset.get(ev.value) is ev and not self.held(ev):
                return ev
        return None
