"""The transport's extension points: the policies a researcher or a student plugs in.

Four decisions of an MRC connection are taken by small objects, one of each per connection,
made by the factories of a `Policies` given to the endpoint (`Endpoint(name, config,
policies=Policies(sack=MySack))`); the defaults are the MRC rules docs/transport.md describes.

- `EvSelector`: which EV the next data packet (or retransmission) takes.
- `SackProcessor`: which sequence numbers a SACK (cumulative sequence number + 64-bit bitmap)
  shows lost (selective repeat). The default retransmits nothing on a SACK: spraying reorders
  packets, so MRC leaves losses to trim NACKs and timeouts.
- `PathMonitor`: dead-path detection and path retirement: what a per-packet timeout, a trim
  NACK, an ECN echo, a spurious timeout and probe outcomes do to an EV (skip it once, retire it
  and give its slot a backup EV, reinstate it).
- `CongestionControl`: the window and the pacing clock (`congestion.NsccWindow`).

The baseline ("roce") uses only the congestion control: it has one EV and goes back N.
A policy sees the EV set (`evset.EvSet`: its EVs, their paths and states, and the mechanisms
`skip`, `mark_bad` (retire, with fate sharing and backup EVs), `reinstate`, `note_probe`) and
what the sender knows; it never sees packets or the endpoint.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Final, Protocol, Sequence

from mypy_extensions import mypyc_attr          # marks what the compiled build (speedups) lets Python extend

from host_agent.transport.config import TransportConfig
from host_agent.transport.congestion import NsccWindow, RttEstimator
from host_agent.transport.evset import Ev, EvSet
from host_agent.transport.pathloss import OwnLossJudge

REORDER_SRTT_FRACTION: Final = 0.25   # a later packet counts as evidence of a loss when sent this many srtt later


# --- EV selection -------------------------------------------------------------------------------
class EvSelector(Protocol):
    """Chooses the EV of every data packet."""

    def next_ev(self, evset: EvSet, now: float, resend_of: Ev | None) -> Ev:
        """The EV the next data packet goes out on (moving any rotation on). `resend_of` is the
        EV the packet last went on when this is a retransmission, else None."""

    def peek_ev(self, evset: EvSet) -> Ev:
        """The EV `next_ev` would return now for new data, without choosing it (the sender asks
        whether that EV's NIC is free before sending)."""


@mypyc_attr(allow_interpreted_subclasses=True)     # a researcher's policy may extend it
class RotationSelector:
    """MRC's choice with steering (`steering`, docs/transport.md "Steering"): the next slot of the
    EV set's rotation, passing over SKIP EVs once; when that EV is held out or its path has
    strikes, an EV acknowledged clean instead (oldest first, REPS-like; on a path with fewer
    strikes unless that EV is held out), else the next EV not held out; with the steering's
    `share_struck`, a struck path not held keeps one in 2^k of its slots. A retransmission does not take the EV it was lost on while another is active."""

    def __init__(self, config: TransportConfig) -> None:
        pass

    def next_ev(self, evset: EvSet, now: float, resend_of: Ev | None) -> Ev:
        steer = evset.steering
        steer.sent += 1
        ev = evset.next_data_ev(now)
        if not steer.strikes and not steer.held_until and (resend_of is None or ev is not resend_of):
            return ev                                    # no congestion signal: the rotation's choice
        if steer.params.share_struck and ev is not resend_of and not steer.held(ev) and steer.admit(ev):
            return ev                                    # a struck path's share of its slots
        if steer.suspect(ev) or ev is resend_of:
            clean = steer.take_clean(evset, resend_of, ev)    # REPS-like: an EV acknowledged clean
            if clean is not None:
                return clean
        active = evset.active_count()
        for _turn in range(active - 1):  # `_turn`, not `_`: mypyc boxes every value of `_`
            if not steer.held(ev) and ev is not resend_of:
                return ev
            ev = evset.next_data_ev(now)
        if ev is resend_of and active > 1:
            ev = evset.next_data_ev(now)
        return ev

    def peek_ev(self, evset: EvSet) -> Ev:
        ev = evset.peek_data_ev()
        steer = evset.steering
        if steer.strikes and steer.suspect(ev):
            return steer.peek_clean(evset) or ev
        return ev


# --- SACK processing (selective repeat) ------------------------------------------------------------
class SentPacket(Protocol):
    """What the sender knows of one sequence number (`message.Segment`)."""

    seq: int
    sent_at: float            # time of its latest transmission
    transmissions: int
    in_flight: bool           # sent and neither acknowledged, trimmed nor timed out since
    acked: bool


class SendWindow(Protocol):
    """The sender's sequence space, as a SACK processor sees it."""

    next_seq: int             # one past the highest sequence number sent

    @property
    def cum_acked(self) -> int:
        """Every sequence number below this is acknowledged."""

    def segment(self, seq: int) -> SentPacket | None:
        """The packet numbered `seq` (cum_acked <= seq < next_seq), or None once acknowledged
        below the cumulative point."""


class SackProcessor(Protocol):
    """Finds the packets a SACK shows lost (selective repeat)."""

    def lost(self, cum: int, base: int, bitmap: int, window: SendWindow, now: float) -> Sequence[int]:
        """The sequence numbers to retransmit now (cause "sack"), after the sender has applied
        the SACK: every sequence number below `cum` has arrived (unwrapped from the 24-bit PSN and
        checked: window.cum_acked <= cum <= window.next_seq before the SACK), and bit i of the
        64-bit `bitmap` set says sequence number `base + i` has arrived. Numbers not in flight
        are ignored."""


@mypyc_attr(allow_interpreted_subclasses=True)     # a researcher's policy may extend it
class MrcSackProcessor:
    """MRC's reading: a SACK declares nothing lost. Spraying over paths of unequal delay
    reorders packets, so a hole in the bitmap is no evidence; trim NACKs and per-packet timeouts
    find the losses."""

    def __init__(self, config: TransportConfig) -> None:
        pass

    def lost(self, cum: int, base: int, bitmap: int, window: SendWindow, now: float) -> Sequence[int]:
        return ()


# --- dead-path detection and path retirement ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Timeout:
    """A packet's retransmission timer fired."""

    ev: Ev                         # the EV it last went out on (still ours and usable)
    sent_at: float                 # when it went out
    delivered_sent_at: float       # send time of the latest packet known to have arrived (any EV)
    first_rtt_at: float            # when the connection's first RTT sample came (inf: none yet)
    srtt: float
    path_sent: int = 0             # its number among the packets sent on its path (`PathLoad.sent`)
    overtaken: bool = False        # a packet sent after it on its own path arrived (`lossdetect`)


class PathMonitor(Protocol):
    """Decides what loss and congestion signals and probe outcomes do to EVs."""

    def on_timeout(self, evset: EvSet, timeout: Timeout, now: float) -> list[Ev]:
        """A packet timed out (it is retransmitted whatever this does). Return the EVs retired
        (`evset.mark_bad`), or [] to blame no path; packets still in flight on retired EVs are
        resent at once."""

    def on_trim(self, evset: EvSet, ev: Ev, last_hop: bool, now: float) -> None:
        """A packet sent on `ev` was trimmed (at the last hop when `last_hop`)."""

    def on_ecn(self, evset: EvSet, ev: Ev, now: float) -> bool | None:
        """A SACK echoed an ECN mark of a packet sent on `ev`. Return True when the mark is that
        path's own congestion, which steering avoids, so the window need not shrink for it
        (None or False: the congestion control sees the mark)."""

    def on_spurious(self, evset: EvSet, ev: Ev, now: float) -> None:
        """A timeout that retired `ev` was spurious: the packet had arrived."""

    def on_probe(self, evset: EvSet, ev: Ev, answered: bool, now: float) -> None:
        """A probe of ASSUMED_BAD EV `ev` was answered, or timed out."""

    def on_keepalive_miss(self, evset: EvSet, ev: Ev, misses: int, now: float) -> bool:
        """`misses` keepalive probes in a row on `ev`'s path went unanswered while later probes
        were answered. Return True when the path was retired (else it is asked again at once)."""

    # Optional (the sender calls them when a monitor has them):
    # def on_ack(self, evset: EvSet, ev: Ev, ecn: bool, rtt: float, now: float) -> None:
    #     """A SACK answered a packet sent on `ev` (after `on_ecn` when it echoed a mark), with
    #     that packet's RTT."""
    # def on_acked(self, evset: EvSet, ev: Ev, within: float, now: float) -> None:
    #     """A SACK acknowledged for the first time, without echoing it, a packet sent on `ev`
    #     `within` seconds ago (not CE-marked; `within` bounds its RTT from above). Called only
    #     while the EV set's steering has a signal standing (`evset.steering.signalled`), not
    #     for retransmissions."""


@mypyc_attr(allow_interpreted_subclasses=True)     # a researcher's policy may extend it
class MrcPathMonitor:
    """MRC's rules (docs/transport.md, "EV states" and "Loss recovery").

    A loss without trim (a timeout, or a loss the SACKs show) retires the EV (and its path's EVs
    when fates are shared) only with evidence: a packet sent a quarter srtt after it has arrived (or
    one sent after it on its own path, which keeps order: `Timeout.overtaken`),
    and an RTT sample had been taken before it left; and only for loss that is its path's own,
    not every path's (`pathloss.OwnLossJudge`: well above what the connection's other paths lose,
    and close together). With fates not shared (`share_fate_by_path` off) each EV is judged alone
    by MRC's own rule: a loss with evidence retires it at once. A trim NACK (not at the last hop) and an ECN echo skip the EV once and are strikes of
    the steering rule (`steering`: the EV is held out for longer at each strike); so is an
    acknowledgement much slower than the connection's average, and a clean one takes a strike
    off and offers the EV for reuse, as does a packet a SACK acknowledged without echoing it,
    when it came back within the delay bound (`on_acked`). A mark on a path struck repeatedly is
    that path's own congestion: the window is not cut for it (`on_ecn` returns True). A
    spurious timeout reinstates what it retired; `probe_successes` clean probe replies in a row reinstate an EV;
    `keepalive_misses` unanswered keepalives retire a path.
    """

    def __init__(self, config: TransportConfig) -> None:
        self.probe_successes = config.probe_successes
        self.keepalive_misses = config.keepalive_misses
        self.judge = OwnLossJudge()            # whose loss: the path's own or every path's (`pathloss`)

    def on_timeout(self, evset: EvSet, timeout: Timeout, now: float) -> list[Ev]:
        if ((timeout.overtaken or timeout.delivered_sent_at > timeout.sent_at + REORDER_SRTT_FRACTION * timeout.srtt)
                and timeout.sent_at >= timeout.first_rtt_at
                and (not evset.share_fate or self.judge.lost(evset.loads, timeout.ev.path_key, timeout.path_sent))):
            return evset.mark_bad(timeout.ev, now, "timeout")
        return []

    def on_trim(self, evset: EvSet, ev: Ev, last_hop: bool, now: float) -> None:
        if not last_hop:                       # fabric congestion: avoid that path for a while
            evset.skip(ev, "trim", now)
            evset.steering.strike(ev, evset.active_count())

    def on_ecn(self, evset: EvSet, ev: Ev, now: float) -> bool:
        evset.skip(ev, "ecn", now)
        return evset.steering.on_mark(ev, evset.active_count())

    def on_ack(self, evset: EvSet, ev: Ev, ecn: bool, rtt: float, now: float) -> None:
        """A SACK answered a packet sent on `ev`: a slow one is a strike, a clean one takes one off
        (an ECN-echoed one was judged by `on_ecn`)."""
        if not ecn and evset.steering.on_ack(ev, False, rtt):
            evset.steering.strike(ev, evset.active_count())

    def on_acked(self, evset: EvSet, ev: Ev, within: float, now: float) -> None:
        """A SACK acknowledged, without echoing it, a packet sent on `ev` `within` seconds ago:
        clean when that is within the steering's delay bound (else nothing is known)."""
        evset.steering.acked_within(ev, within)

    def on_spurious(self, evset: EvSet, ev: Ev, now: float) -> None:
        if not ev.usable and (ev.home or evset.get(ev.value) is ev):
            evset.reinstate(ev, "spurious_timeout", now)
            self.judge.forget(evset.loads, ev.path_key)

    def on_probe(self, evset: EvSet, ev: Ev, answered: bool, now: float) -> None:
        evset.note_probe(ev, answered)
        if answered and ev.probe_successes >= self.probe_successes:
            evset.reinstate(ev, "probe", now)
            self.judge.forget(evset.loads, ev.path_key, probation=True)

    def on_keepalive_miss(self, evset: EvSet, ev: Ev, misses: int, now: float) -> bool:
        if misses >= self.keepalive_misses:
            evset.mark_bad(ev, now, "probe_timeout")
            return True
        return False


# --- congestion control ----------------------------------------------------------------------------
class CongestionControl(Protocol):
    """The window (bytes in flight) and the pacing clock of one sender (`congestion.NsccWindow`)."""

    cwnd: float                    # bytes the sender may have in flight
    # the pacing clock: no packet (but a trim retransmission) before this. Always finite: the sender
    # reads a ready time of inf as "the window refuses" (MrcSender._ready_at), so a paused sender's
    # clock at inf would read as a full window (`backlogged` False, no wake-up); pause with a far time.
    next_send: float
    backlogged: bool               # set by the sender: its last poll was held back by pacing alone

    def on_ack(self, now: float, acked_bytes: int, ecn: bool, rtt: float | None) -> None:
        """An acknowledgement of `acked_bytes` new bytes, ECN-echoed or not, with its RTT sample."""

    def on_trim_or_loss(self, now: float) -> None:
        """A trim NACK or a timeout."""

    def pacing_rate(self, nics: int) -> float:
        """Bytes per second the sender may emit over `nics` NICs."""

    def sent(self, now: float, nbytes: int, nics: int, rate: float | None = None) -> None:
        """`nbytes` went out at `now`: advance the pacing clock (`rate`: pacing_rate(nics) if known)."""

    def on_window_penalty(self, now: float, penalty: int) -> None:
        """A SACK's window penalty (0..255; with `window_penalty` only): the receiver asks for
        penalty/256 of the largest window back (0: nothing)."""


# --- the set given to an endpoint ----------------------------------------------------------------------
@dataclass(frozen=True)
class Policies:
    """Factories of the policies of each connection (a class taking these arguments will do).

    `ev_selector`, `sack`, `path_monitor`: called with the TransportConfig. `congestion`: with
    the TransportConfig, the connection's RttEstimator and the bytes of a full data packet.
    """

    ev_selector: Callable[[TransportConfig], EvSelector] = RotationSelector
    sack: Callable[[TransportConfig], SackProcessor] = MrcSackProcessor
    path_monitor: Callable[[TransportConfig], PathMonitor] = MrcPathMonitor
    congestion: Callable[[TransportConfig, RttEstimator, int], CongestionControl] = NsccWindow


DEFAULT_POLICIES = Policies()
