"""Probes: reinstate ASSUMED_BAD EVs, verify UNKNOWN ones, check the paths of a connection that only
acknowledges, and answer an operator's probe requests with the port and the RTT."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Final

from wire.packets import Probe, ProbeReply
from host_agent.transport.events import ProbeResult
from host_agent.transport.peers import ConnectionId
from host_agent.transport.config import TransportConfig
from host_agent.transport.congestion import RttEstimator
from host_agent.transport.evset import Ev, EvSet
from host_agent.transport.message import ts_age, ts_now
from host_agent.transport.policies import PathMonitor
from host_agent.transport.tally import Tally

REINSTATE: Final = "reinstate"     # probe on an ASSUMED_BAD EV: enough clean replies make it GOOD
KEEPALIVE: Final = "keepalive"     # probe on a GOOD EV of a connection sending no data: misses retire it
VERIFY: Final = "verify"           # probe on an UNKNOWN EV: one clean reply makes it GOOD
REQUEST: Final = "request"         # probe an operator asked for: its outcome is reported as a ProbeResult
MAX_SUSPECTS: Final = 64           # unanswered keepalives kept for judgement
_NOW: Final = float("-inf")        # Prober's quiet time when its next `busy` must look
_INF: Final = float("inf")


@dataclass
class Outstanding:
    """A probe waiting for its reply."""

    ev: Ev
    sent_at: float
    purpose: str
    req_id: int = 0                  # REQUEST: the operator's request id
    timeout: float | None = None     # REQUEST: how long to wait for the reply (None: the RTO)


class Prober:
    """Sends probes once per `probe_interval` and hands their outcomes to the path monitor.

    `sending_idle()` says whether the connection has nothing to send, `last_data_at()` when data
    last arrived (-1: never); keepalives are sent only when `keepalive` (MRC) and the
    configuration allow them.

    `busy`, asked at every poll of its connection, reads one field of the prober while nothing
    changed since it last looked: its quiet time (and `next_wakeup` then knows that nothing is
    outstanding). Its own verbs end that quiet time when they
    change what it has to do, and its connection does (`wake`) when an EV becomes ASSUMED_BAD or
    UNKNOWN or an operator changes the EV set.
    """

    def __init__(self, ident: ConnectionId, config: TransportConfig, evset: EvSet, rtt: RttEstimator,
                 stats: Tally, monitor: PathMonitor, sending_idle: Callable[[], bool],
                 last_data_at: Callable[[], float], keepalive: bool, emit: Callable | None = None) -> None:
        # first: the field `busy` reads (in the object's first cache line when compiled)
        self._quiet_until = _NOW       # before this time `busy` is False, unless something changed since
        self.ident = ident
        self.cfg = config
        self.evset = evset
        self.rtt = rtt
        self.stats = stats
        self.monitor = monitor
        self._sending_idle = sending_idle
        self._last_data_at = last_data_at
        self._keepalive = keepalive and config.keepalive_probes
        self.outstanding: dict[int, Outstanding] = {}
        self._next_id = 1
        self._next_round: float | None = None
        self._keepalive_path = 0
        self._keepalive_misses: dict[int, int] = {}    # path -> consecutive unanswered keepalives
        self._data_at_keepalive = 0                     # data packets received when the last keepalive left
        self._retry: list = []                          # EVs to probe again at once
        self._answered_sent_at = float("-inf")          # send time of the latest probe answered
        self._suspects: dict[int, Outstanding] = {}     # unanswered keepalives not yet judged (by id)
        self._expired: dict[int, Outstanding] = {}      # timed-out probes whose late reply still times the path
        self._emit = emit or (lambda event: None)
        self._requests: list[tuple[object, int, float | None]] = []   # (EV, request id, timeout) not yet sent
        self._requested_at = 0.0                        # when the first of them was asked for

    def _keepalive_due(self, now: float) -> bool:
        """A keepalive is due on a connection that only acknowledges, while data arrives, once
        `keepalive_data_pkts` data packets came in since the last one (so that keepalives cost at
        most one probe per that many data packets, however slow the link)."""
        if (not self._keepalive
                or self.stats["data_received"] - self._data_at_keepalive < self.cfg.keepalive_data_pkts
                or not self._sending_idle()):
            return False
        last = self._last_data_at()
        return last >= 0 and now - last <= 2 * self.cfg.probe_interval

    def next_wakeup(self) -> float | None:
        """Next probe round (when there is something to probe) or the earliest probe timeout."""
        if self._quiet_until != _NOW or (not self.outstanding and not self._requests):
            return self._next_round             # a quiet time: nothing outstanding or asked for since
        times = []
        if self._next_round is not None:
            times.append(self._next_round)
        if self.outstanding:
            rto = self.rtt.rto
            times.append(min(o.sent_at + (rto if o.timeout is None else o.timeout)
                             for o in self.outstanding.values()))
        if self._requests:
            times.append(self._requested_at)
        return min(times) if times else None

    def schedule(self, now: float) -> None:
        """Arm the probe round timer when something needs probing."""
        if self._next_round is None:
            evset = self.evset
            if evset.any_bad or evset.any_unknown or self._keepalive_due(now):     # something to probe
                self._next_round = now + self.cfg.probe_interval
                self._quiet_until = _NOW

    def wake(self) -> None:
        """Something outside the prober may have given it work (an EV became ASSUMED_BAD or
        UNKNOWN, an operator changed the EV set): the next `busy` looks."""
        self._quiet_until = _NOW

    def busy(self, now: float) -> bool:
        """True when `poll` has something to do at `now` (cheap: called on every endpoint poll).
        While nothing changed since it last found nothing to do, it reads only the quiet time it
        worked out then."""
        if now < self._quiet_until:
            return False
        if self.outstanding or self._retry or self._requests:
            return True
        next_round = self._next_round
        if next_round is not None:
            if now >= next_round:
                return True
            self._quiet_until = next_round
            return False
        evset = self.evset
        if evset.any_bad or evset.any_unknown:
            return True
        self._quiet_until = _INF
        return False

    def poll(self, now: float, out: list) -> None:
        """Expire unanswered probes; send a round of probes when it is due."""
        self._quiet_until = _NOW
        rto = self.rtt.rto
        for pid, o in list(self.outstanding.items()):
            if now >= o.sent_at + (rto if o.timeout is None else o.timeout):
                del self.outstanding[pid]
                self.stats.add("probe_timeouts")
                self._remember_expired(pid, o)
                if o.purpose == REQUEST:
                    self._report(o, now, None)
                elif o.purpose == VERIFY:
                    pass                     # stays UNKNOWN: probed again next round
                elif o.purpose == REINSTATE:
                    self.monitor.on_probe(self.evset, o.ev, False, now)
                elif self._answered_sent_at > o.sent_at:
                    self._miss(o, now)
                else:
                    self._suspect(pid, o)
        while self._requests:
            ev, req_id, timeout = self._requests.pop(0)
            out.append(self._probe(now, ev, REQUEST, req_id, timeout))
        while self._retry:
            ev = self._retry.pop(0)
            if ev.usable:
                out.append(self._probe(now, ev, KEEPALIVE))
        if self._next_round is not None and now >= self._next_round:
            self._next_round = None
            self._round(now, out)
        self.schedule(now)

    def _miss(self, o: Outstanding, now: float) -> None:
        """A keepalive went unanswered while a probe sent after it was answered: its path may be
        dead. The path monitor decides (by default `keepalive_misses` in a row retire it); until
        then it is asked again at once."""
        if not (o.ev.usable and self.evset.get(o.ev.value) is o.ev):
            return
        misses = self._keepalive_misses.get(o.ev.path_key, 0) + 1
        if self.monitor.on_keepalive_miss(self.evset, o.ev, misses, now):
            self._keepalive_misses.pop(o.ev.path_key, None)
        else:                        # the reply may have been lost on the peer's path: ask again
            self._keepalive_misses[o.ev.path_key] = misses
            self._retry.append(o.ev)

    def _remember_expired(self, pid: int, o: Outstanding) -> None:
        """Keep a timed-out probe (a bounded number) so that its late reply can still be timed."""
        self._expired[pid] = o
        if len(self._expired) > MAX_SUSPECTS:
            del self._expired[next(iter(self._expired))]

    def _suspect(self, pid: int, o: Outstanding) -> None:
        """A keepalive timed out before any probe sent after it was answered: nothing says yet
        whether its path or everything (a stalled peer or fabric) is at fault. It becomes a miss
        when a later probe is answered first, and is forgotten when its own reply comes late."""
        self._suspects[pid] = o
        if len(self._suspects) > MAX_SUSPECTS:
            del self._suspects[next(iter(self._suspects))]

    def _round(self, now: float, out: list) -> None:
        evset = self.evset
        busy = {id(o.ev) for o in self.outstanding.values()}
        seen_paths = set()
        for ev in evset.bad_home_evs():
            if self.cfg.share_fate_by_path:
                if ev.path_key in seen_paths:
                    continue
                seen_paths.add(ev.path_key)
            if id(ev) not in busy:
                out.append(self._probe(now, ev, REINSTATE))
        for ev in evset.unknown_evs():
            if id(ev) not in busy:
                out.append(self._probe(now, ev, VERIFY))
        if self._keepalive_due(now):
            first: dict = {}                           # path -> its first usable active EV
            for e in evset.active_evs():
                if e.path_key not in first and e.usable:
                    first[e.path_key] = e
            keys = sorted(first)
            if keys:
                key = keys[self._keepalive_path % len(keys)]
                self._keepalive_path += 1
                ev = first[key]
                if id(ev) not in busy:
                    out.append(self._probe(now, ev, KEEPALIVE))
                    self._data_at_keepalive = self.stats["data_received"]

    def request(self, ev, req_id: int, timeout: float | None, now: float) -> None:
        """Send a probe on `ev` at the next poll, and report its reply (or its absence after
        `timeout` seconds, default the RTO) as a `ProbeResult` event with `req_id`."""
        if not self._requests:
            self._requested_at = now
        self._requests.append((ev, req_id, timeout))
        self._quiet_until = _NOW

    def _report(self, o: Outstanding, now: float, rtt: float | None) -> None:
        self._emit(ProbeResult(now, self.ident, o.req_id, o.ev.value, self.evset.path_of(o.ev).nic,
                               None if rtt is None else round(rtt * 1e9)))

    def _probe(self, now: float, ev, purpose: str, req_id: int = 0, timeout: float | None = None):
        pid = self._next_id
        self._next_id = (self._next_id + 1) & 0xFFFFFFFF or 1
        self.outstanding[pid] = Outstanding(ev, now, purpose, req_id, timeout)
        path = self.evset.path_of(ev)
        self.stats.add("probes_sent")
        return path.nic, Probe(src=path.src, dst=path.dst, ev=ev.value, qp=self.ident.remote_qp,
                               probe_id=pid, tsval=ts_now(now))

    def on_reply(self, now: float, reply: ProbeReply) -> None:
        """A reply to one of our probes: count a success for its EV."""
        self._quiet_until = _NOW          # a missed keepalive may be asked again (`_miss`)
        o = self.outstanding.pop(reply.probe_id, None)
        if o is None:
            expired = self._expired.pop(reply.probe_id, None)
            if expired is not None and expired.ev.value == reply.ev_echo:
                # Too late to count as a success, but a true round trip: without it a connection
                # that only probes would keep an RTO guessed below the path's delay, and every
                # later probe would time out too (seen on BMv2, whose delay is several ms).
                self.stats.add("probe_replies_late")
                self.rtt.sample(ts_age(now, reply.ts_echo), full_size=False)
            late = self._suspects.pop(reply.probe_id, None)
            if late is not None and late.ev.value == reply.ev_echo:
                self._keepalive_misses.pop(late.ev.path_key, None)     # slow, not dead
            return
        if o.ev.value != reply.ev_echo:
            return
        if o.sent_at > self._answered_sent_at:
            self._answered_sent_at = o.sent_at
            for pid, suspect in list(self._suspects.items()):
                if suspect.sent_at < o.sent_at:
                    del self._suspects[pid]
                    self._miss(suspect, now)
        self.stats.add("probe_replies")
        self.rtt.sample(ts_age(now, reply.ts_echo), full_size=False)
        if o.purpose == REQUEST:
            self._report(o, now, now - o.sent_at)
        elif o.purpose == VERIFY:
            self.evset.confirm(o.ev, "probe", now)
        if o.purpose == KEEPALIVE:
            self._keepalive_misses.pop(o.ev.path_key, None)
        if o.purpose == REINSTATE and not o.ev.usable and self.evset.get(o.ev.value) is o.ev:
            self.monitor.on_probe(self.evset, o.ev, True, now)

    def answer(self, plane: int | None, probe: Probe) -> list:
        """Replies to a peer's probe, on our own EVs: the next control EV (preferring the probe's
        plane), then one EV on each other distinct path, up to `probe_reply_fanout` replies.

        One reply that gets through is enough (the prober ignores copies); sending several keeps
        a dead path of ours from making the peer's good path look dead."""
        evset = self.evset
        first = evset.next_control_ev(plane)
        chosen = [first]
        if self.cfg.probe_reply_fanout > 1:
            seen = {first.path_key}
            for ev in evset.one_ev_per_path():
                if len(chosen) >= self.cfg.probe_reply_fanout:
                    break
                if ev.path_key not in seen:
                    seen.add(ev.path_key)
                    chosen.append(ev)
        out = []
        for ev in chosen:
            path = evset.path_of(ev)
            self.stats.add("probe_replies_sent")
            out.append((path.nic, ProbeReply(src=path.src, dst=path.dst, ev=ev.value, qp=self.ident.remote_qp,
                                             probe_id=probe.probe_id, ev_echo=probe.ev, ts_echo=probe.tsval)))
        return out
