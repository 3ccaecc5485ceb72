"""Whose loss is it: one path's own, or every path's? The judge of the default path monitor.

A loss without a trim is MRC's sign of a failed path. But a loss that every path suffers alike
(random loss on the hosts' own links, which every path of a connection crosses) says nothing
about the path the packet happened to take: retiring that path for it retires, loss after loss,
every path of the connection (loss-sweep --quick at 1 %: every EV ASSUMED_BAD within 0.06 ms).
So a path is retired only for losses that are its own: more than its connection's other paths
lose, and close together.

`OwnLossJudge` keeps, for every path of one connection, Page's cumulative sum (CUSUM) of the
log-likelihood ratio between two loss rates, over the path's packets in the order they were sent:

- p0, what the connection's *other* paths in use lose: their losses over their packets sent,
  within about the last `memory_pkts` packets of the connection, plus a prior of `prior_losses` in
  `prior_packets` (before much is known, a loss rate of 2 % is taken as nobody's in particular);
- p1 = max(`bad_loss`, `bad_factor` x p0) (at most `BAD_MAX`): a path losing 1 packet in 5, or
  ten times what the others lose.

Each lost packet adds log(p1 / p0); each packet sent on the path between two lost ones (delivered,
as far as is known) adds log((1 - p1) / (1 - p0)), which is negative; the sum never goes below 0,
and the path is judged to be losing on its own once it reaches `threshold` (14). Counting by send
order, not by when a loss is found, matters: losses are found in bursts (a stalled sender finds
four at once, a round trip late), and counted as found they look consecutive when dozens of the
path's packets got through between them. Where the others lose nothing (p0 about 1 in 1,000) three
losses in a row do it: a dead path is retired within a round trip of its first losses being
found. Where every path loses 1 % (p0 = 1 %, p1 = 20 %), a loss adds 3.0 and a packet takes 0.21
off: five losses within a few tens of the path's packets, which uniform 1 % loss gives about
once in 3,000 runs of 1,500 packets per path (simulated); a path losing 20 % among clean ones is
judged after a median 13 of its packets (33 at the 95th percentile).

Once judged, a path is out of the comparison (it carries nothing; its losses were its own), and
any further loss on it is its own, until `forget`. A path probes reinstated comes back on
probation: its sum restarts just below the threshold, so that a path still losing (a gray link
that answered three probes) is retired again at its next loss, while a repaired one's packets
bring the sum down within its first 60 or so. (Restarting from 0 cost gray.yaml --quick's 20 %
link, at 20 Mbit/s, a fifth more time: each return took several losses to undo.) A path with no other
path in use beside it has nothing to compare with and nowhere else to send: its losses are never
judged its own. The sender counts each path's transmissions (`PathLoad.sent`) and gives every
packet its number on its path (`Segment.path_sent`); the path monitor reports a loss with that
number (only losses with evidence: a later packet arrived; where sizing turns `path_order_losses` on,
most are found as a packet sent after them on their own path is acknowledged, a round trip after
they happen: `lossdetect`), and `Sampler` sends a suspect path more packets. Nothing here runs per packet: the
judge works when a loss is reported.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from host_agent.transport.evset import Ev, EvSet
from host_agent.transport.pathcap import PathLoad

BAD_MAX = 0.99             # p1 never above this (with p0 above 10 %, the factor would pass 1)
PROBATION = 0.99           # a path probes reinstated restarts at this share of the threshold
SAMPLE_EVERY = 2           # a suspect path takes one in this many of the new packets bound for the others


@dataclass(frozen=True)
class OwnLossParams:
    """The judge's parameters (module docstring)."""

    threshold: float = 14.0        # CUSUM level at which a path's losses are its own
    bad_loss: float = 0.2          # p1 at least: a path losing this share is bad whatever the others do
    bad_factor: float = 10.0       # p1 at least this many times what the other paths lose
    prior_losses: float = 2.0      # p0's prior: this many losses ...
    prior_packets: float = 100.0   # ... in this many packets
    memory_pkts: float = 2048.0    # the connection's packets sent that p0 is taken over, about


class OwnLossJudge:
    """Judges, loss by loss, whether one connection's paths lose packets of their own
    (`lost(loads, key, number)`); `forget(loads, key)` starts a path afresh once it is back in use."""

    __slots__ = ("params", "_seen", "_sent", "_lost", "_score", "_scored", "_out")

    def __init__(self, params: OwnLossParams | None = None) -> None:
        self.params = params or OwnLossParams()
        self._seen: list[int] = []          # per path: PathLoad.sent when last caught up
        self._sent: list[float] = []        # per path: packets sent within the memory (decayed)
        self._lost: list[float] = []        # per path: losses within the memory (decayed)
        self._score: list[float] = []       # per path: the CUSUM
        self._scored: list[int] = []        # per path: the number of the latest packet the CUSUM took in
        self._out: list[bool] = []          # per path: judged to lose on its own, not back in use since

    def _size(self, n: int) -> None:
        if len(self._seen) != n:
            self._seen = [0] * n
            self._sent = [0.0] * n
            self._lost = [0.0] * n
            self._score = [0.0] * n
            self._scored = [0] * n
            self._out = [False] * n

    def lost(self, loads: Sequence[PathLoad], key: int, number: int) -> bool:
        """A packet sent on path `key` (an index into `loads`, the connection's paths) was lost while
        packets sent after it arrived; it was the `number`th packet sent on that path
        (`PathLoad.sent` when it left). True when that path's losses are now its own (it then stays
        out of the comparison, and any further loss on it is its own, until `forget`)."""
        n = len(loads)
        self._size(n)
        p = self.params
        seen, sent, lost, out = self._seen, self._sent, self._lost, self._out
        total = 0.0
        for j in range(n):
            now_sent = loads[j].sent
            sent[j] += now_sent - seen[j]
            seen[j] = now_sent
            total += sent[j]
        lost[key] += 1.0
        if total > 2.0 * p.memory_pkts:       # keep about `memory_pkts`: scale the older counts down
            scale = p.memory_pkts / total
            for j in range(n):
                sent[j] *= scale
                lost[j] *= scale
        if out[key]:
            return True                        # judged before and not forgiven (EVs judged alone: the next one)
        others = 0.0
        others_lost = 0.0
        for j in range(n):
            if j != key and not out[j]:
                others += sent[j]
                others_lost += lost[j]
        if others <= 0.0:
            return False                       # no other path in use: nothing to compare with, nowhere to go
        p0 = (others_lost + p.prior_losses) / (others + p.prior_packets)
        p1 = min(max(p.bad_loss, p.bad_factor * p0), BAD_MAX)
        if p1 <= p0:
            return False                       # the others lose as much as a bad path would
        last = self._scored[key]
        between = 0
        if number > last:                      # the path's packets sent between its previous loss and this one
            between = number - last - 1
            self._scored[key] = number
        step = math.log((1.0 - p1) / (1.0 - p0))   # a packet of the path that got through (negative)
        score = self._score[key] + between * step
        score = (score if score > 0.0 else 0.0) + math.log(p1 / p0)
        self._score[key] = score
        if score < p.threshold:
            # suspect: more of its packets, until those getting through would have brought the sum
            # to 0; counted from the path's next packet, not from the lost one: the packets sent
            # since, in flight, are no sample yet (their fate is known a round trip later)
            loads[key].sample_until = loads[key].sent + int(score / -step) + 1
            return False
        out[key] = True                        # its own: out of what the other paths are compared with
        loads[key].sample_until = 0
        return True

    def forget(self, loads: Sequence[PathLoad], key: int, probation: bool = False) -> None:
        """Path `key` is back in use: judge it afresh, from its next loss on. On `probation` (probes
        reinstated it, a path judged bad), its CUSUM restarts just below the threshold: a loss soon
        after retires it again, while its packets getting through bring the sum down (a repaired
        path's first 60 or so); without (its retirement was a mistake), from 0."""
        loads[key].sample_until = 0
        if key < len(self._score):
            self._score[key] = PROBATION * self.params.threshold if probation else 0.0
            self._scored[key] = loads[key].sent
            self._sent[key] = self._lost[key] = 0.0
            self._seen[key] = loads[key].sent
            self._out[key] = False

    def score(self, key: int) -> float:
        """Path `key`'s CUSUM as of its latest loss (0 before any)."""
        return self._score[key] if key < len(self._score) else 0.0


class Sampler:
    """More samples of a suspect path: while a path's CUSUM (`OwnLossJudge`) is above 0, that is
    until the path's next packets getting through would bring it back to 0 if none of them were
    lost (`PathLoad.sample_until`, set at each of its losses), one in SAMPLE_EVERY of the new
    packets the EV selector sends to the connection's other paths goes on that path instead, so
    that its verdict, either way, comes in fewer round trips. A path losing 20 % among clean ones
    gets about 6 packets a base RTT (4 paths, path-loss.yaml), and an unlucky run of 20-40 of them
    getting through between its losses kept its verdict past 10 base RTTs; a path losing no more
    than the others is taken back to 0 by its own packets as surely, only sooner. A loss is found
    a round trip after it happens; the packets sent on the path meanwhile are still in flight and
    are not counted as samples taken (counted so, they used up most of what a loss asked for, and
    the sampling stopped within a round trip: docs/transport.md, "Samples counted from the next
    packet"). Only first transmissions of new
    data are moved (a retransmission would meet the loss again), never beyond the path's cap
    (`PathLoad.cap`), nor onto an EV the steering holds out, and only after a loss its path's
    order showed (`lossdetect.overtaken`: the path still delivers): sampling a dead path more
    only lost more packets (failover.yaml --quick, seed 4: recovery 78 ms, over the 75 ms
    tests/experiments/test_experiments.py allows). The sender tells `after_loss` of each loss
    judged (nothing changes between losses) and asks `choose` per new packet."""

    __slots__ = ("ev", "_turn")

    def __init__(self) -> None:
        self.ev: Ev | None = None          # a usable EV of the path sampled more, or None
        self._turn = 0

    def after_loss(self, ev: Ev, overtaken: bool) -> None:
        """A loss of a packet sent on `ev` was just judged; `overtaken`: a packet sent after it on
        its path arrived (the path still delivers). Such a path, suspect, is sampled more through
        `ev`; one whose loss was found otherwise (by time: nothing of it may get through, and a dead
        path needs no more samples to be judged) is not, and stops being sampled."""
        load = ev.load
        if overtaken and ev.usable and load.sent < load.sample_until:
            self.ev = ev
        elif self.ev is not None and self.ev.load is load:
            self.ev = None

    def choose(self, evset: EvSet, ev: Ev) -> Ev:
        """The EV a new data packet takes: `ev` (the selector's), or one of the path sampled more."""
        sample = self.ev
        if sample is None:
            return ev
        load = sample.load
        if not sample.usable or load.sent >= load.sample_until:
            self.ev = None                     # judged, or its packets got through: back to the rotation
            return ev
        if ev.load is load:
            return ev
        self._turn += 1
        if self._turn < SAMPLE_EVERY or load.inflight >= load.cap or evset.steering.held(sample):
            return ev
        self._turn = 0
        return sample
