"""Window-based congestion control: UEC NSCC ("uet-1.0-nscc") with its parameter names, and pacing.

Each acknowledgement brings the bytes it newly acknowledges, whether the acknowledged packet
was ECN-marked, and an RTT sample (from the echoed timestamp). With q = RTT - base_rtt and the
target queueing delay t = target_delay (0: 0.3 x the base RTT):

| ECN | q < t                        | q >= t                                          |
|-----|------------------------------|-------------------------------------------------|
| no  | proportional increase (eta)  | fair increase (about fi x fi_scale MTU per RTT) |
| yes | hold                         | multiplicative decrease (gamma, at most max_md_jump; once per RTT) |

Trims, timeouts and (with qa_threshold) a queueing delay above qa_threshold trigger "quick
adapt" (once per RTT, unless disable_qa): the window drops to what was actually acknowledged
over the last RTT, at most by a factor 2^qa_gate. Increases are applied at once, or gathered
until adjust_bytes_threshold bytes or adjust_period_threshold seconds. The sender paces packets
at pacing_gain x cwnd / srtt (with pace_at_target, srtt at most the base RTT plus the target delay). docs/transport.md gives the formulas and the parameters' table.
"""
from __future__ import annotations

from collections import deque
from typing import Final

from host_agent.transport.config import TransportConfig
from wire.constants import WINDOW_PENALTY_UNITS

TARGET_DELAY_BASE_FRACTION: Final = 0.3   # target_delay = 0: this fraction of the base RTT (docs: why not 0.75)
SHORT_SENT_KEPT: Final = 256              # timestamps of short data packets remembered (the newest)
_INF: Final = float("inf")


class RttEstimator:
    """Smoothed RTT, its variation, the smallest sample, and the retransmission timeout."""

    def __init__(self, config: TransportConfig) -> None:
        # the parameters read per sample: its own copies (a compiled build reads a TransportConfig,
        # which is not compiled, through Python's generic attribute lookup)
        self._qp_timeout = config.base_timeout      # the RTO's floor (a property of the config: read once)
        self._rto_srtt_factor = config.rto_srtt_factor
        self._rto_max = config.rto_max
        self._initial_rtt = config.initial_rtt
        self._base_rtt_configured = bool(config.base_rtt)
        self.srtt = config.initial_rtt
        self.rttvar = config.initial_rtt / 2
        self.min_rtt = config.base_rtt or _INF
        self.samples = 0
        self.rto_scale = 1.0          # > 1 after spurious timeouts, decays back with samples
        self.rto = self._compute_rto()
        self._short_sent: deque[int] = deque(maxlen=SHORT_SENT_KEPT)   # timestamps of short data packets

    def sent_short(self, tsval: int) -> None:
        """Note a data packet shorter than full size sent with timestamp `tsval` (a small message,
        a message's last piece): the SACK that echoes it gives no base RTT sample."""
        self._short_sent.append(tsval)

    def sample_echo(self, rtt: float, ts_echo: int) -> None:
        """Fold in the RTT of the data packet a SACK echoes (its timestamp `ts_echo`): a base RTT
        sample only when that packet was full size. An all-reduce's 8-byte messages crossed a
        2 Mbit/s fabric in 7.4 ms where a full packet needs 9.8: taken as the base, the queueing
        delay of every full packet looked 2.4 ms longer than it was."""
        short = self._short_sent
        self.sample(rtt, full_size=not short or ts_echo not in short)

    def sample(self, rtt: float, full_size: bool = True) -> None:
        """Fold in one RTT sample (seconds).

        Only samples of full-size data packets (`full_size`) may lower the base RTT: a probe or a
        trimmed header is small and rides the high-priority queue, so its round trip skips the
        serialisation and queueing a data packet meets (at 20 Mbit/s through three switches,
        0.4 ms against 2 ms). Taken as the base, it made every data RTT look like queueing
        delay: no proportional increase, and a halving of the window on every ECN mark."""
        if rtt <= 0:
            return
        if self.samples == 0:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt
        self.samples += 1
        if full_size and not self._base_rtt_configured and rtt < self.min_rtt:
            self.min_rtt = rtt
        if self.rto_scale > 1.0:
            self.rto_scale = max(1.0, self.rto_scale * 0.99)
        self.rto = self._compute_rto()

    def spurious(self) -> None:
        """A timeout fired for a packet that had arrived: double the RTO's scale (at most 8)."""
        self.rto_scale = min(8.0, self.rto_scale * 2)
        self.rto = self._compute_rto()

    @property
    def base_rtt(self) -> float:
        """Configured base RTT, else the smallest sample, else the initial estimate."""
        return self.min_rtt if self.min_rtt != _INF else self._initial_rtt

    def _compute_rto(self) -> float:
        """max(srtt + 4 rttvar, rto_srtt_factor x srtt) x rto_scale, clamped to [QP timeout, rto_max]."""
        base = max(self.srtt + 4 * self.rttvar, self._rto_srtt_factor * self.srtt)
        return min(self._rto_max, max(self._qp_timeout, base * self.rto_scale))


class NsccWindow:
    """The congestion window (bytes) and the pacing clock of one sender.

    The window never exceeds the share a receiver asks for with its window penalty
    (`on_window_penalty`): NSCC's increases stop there, its decreases work from there."""

    def __init__(self, config: TransportConfig, rtt: RttEstimator, packet_bytes: int) -> None:
        self._cfg = config
        self._rtt = rtt
        # the pacing's parameters, read per packet: its own copies (a compiled build reads a
        # TransportConfig, which is not compiled, through Python's generic attribute lookup)
        self._pacing_gain = config.pacing_gain
        self._line_rate_bps = config.line_rate_bps
        self._pace_at_target = config.pace_at_target
        self._target_delay = config.target_delay
        self._burst_pkts = config.pacing_burst_pkts
        self._max_lag = config.pacing_max_lag
        # ... and NSCC's, read per acknowledgement
        self._eta = config.eta
        self._fair_increase = config.fi * config.fi_scale
        self._qa_threshold = config.qa_threshold
        self._gathers_increases = bool(config.adjust_bytes_threshold or config.adjust_period_threshold)
        self.mss = packet_bytes
        self.cwnd_min = config.cwnd_min_pkts * packet_bytes
        self.cwnd_max = config.max_cwnd * packet_bytes
        # a float (the largest window an int), so that the compiled build keeps it unboxed
        self.cwnd: float = (float(min(self.cwnd_max, config.init_cwnd_pkts * packet_bytes)) if config.cc
                            else self.cwnd_max)
        self._cap = _INF                 # the receiver's share of the largest window (_INF: none asked)
        self._penalty = 0                # the window penalty that set it
        self.next_send = 0.0
        self.backlogged = False        # the sender's last poll ended held back by the pacing clock alone
        self._last_md = -1.0
        self._last_qa = -1.0
        self._acked_since = 0          # bytes acknowledged since _window_start
        self._window_start = 0.0
        self._acked_last_rtt: int | None = None    # bytes acknowledged over the last full RTT window
        self.decreases = 0
        self.quick_adapts = 0
        self._gathered = 0.0           # increase not yet applied (adjust_*_threshold)
        self._gathered_bytes = 0
        self._last_adjust = 0.0

    # --- signals ---------------------------------------------------------------------------
    def on_ack(self, now: float, acked_bytes: int, ecn: bool, rtt: float | None) -> None:
        """React to an acknowledgement of `acked_bytes` new bytes."""
        self._count_acked(now, acked_bytes)
        cfg = self._cfg
        if not cfg.cc:
            return
        base = self._rtt.base_rtt
        target = self._target_delay or TARGET_DELAY_BASE_FRACTION * base
        qdelay = max(0.0, (rtt if rtt is not None else self._rtt.srtt) - base)
        if not ecn:
            if qdelay < target:
                self._increase(now, self._eta * acked_bytes * (target - qdelay) / target if target > 0 else 0,
                               acked_bytes)
            else:
                self._increase(now, self._fair_increase * self.mss * acked_bytes / self.cwnd, acked_bytes)
        elif qdelay >= target and now - self._last_md >= self._rtt.srtt:
            cut = min(cfg.max_md_jump, cfg.gamma * (qdelay - target) / max(qdelay, 1e-12))
            self.cwnd *= 1.0 - cut
            self._last_md = now
            self.decreases += 1
            self._gathered = 0.0
        if self._qa_threshold and qdelay > self._qa_threshold:
            self.on_trim_or_loss(now)
        self._clamp()

    def _increase(self, now: float, amount: float, acked_bytes: int) -> None:
        """Add `amount` bytes to the window, at once or once the adjust thresholds are reached."""
        if not self._gathers_increases:
            self.cwnd += amount
            return
        cfg = self._cfg
        self._gathered += amount
        self._gathered_bytes += acked_bytes
        if ((cfg.adjust_bytes_threshold and self._gathered_bytes >= cfg.adjust_bytes_threshold)
                or (cfg.adjust_period_threshold and now - self._last_adjust >= cfg.adjust_period_threshold)):
            self.cwnd += self._gathered
            self._gathered = 0.0
            self._gathered_bytes = 0
            self._last_adjust = now

    def on_trim_or_loss(self, now: float) -> None:
        """Quick adapt: shrink to what the path delivered over the last RTT, by at most a factor
        2^qa_gate (once per RTT; never with disable_qa)."""
        cfg = self._cfg
        if not cfg.cc or cfg.disable_qa or now - self._last_qa < self._rtt.srtt:
            return
        achieved = self._acked_last_rtt if self._acked_last_rtt is not None else self._acked_since
        self.cwnd = min(self.cwnd, max(achieved, self.cwnd / (1 << cfg.qa_gate)))
        self._last_qa = now
        self.quick_adapts += 1
        self._gathered = 0.0
        self._clamp()

    def _count_acked(self, now: float, acked_bytes: int) -> None:
        if now - self._window_start >= self._rtt.srtt:
            self._acked_last_rtt = self._acked_since
            self._acked_since = 0
            self._window_start = now
        self._acked_since += acked_bytes

    def on_window_penalty(self, now: float, penalty: int) -> None:
        """A SACK's window penalty: keep at most (256 - penalty)/256 of the largest window in flight
        (0: no limit). When the penalty falls, a sender that shared the receiver has stopped and
        the receiver's links have that much free: the window is raised to the new share at once
        (to the largest window when the penalty falls to 0: nothing is asked). A fixed window
        (`cc` off) is not changed (docs/transport.md, "Receiver window penalty")."""
        old = self._penalty
        if penalty == old or not self._cfg.cc:
            return
        self._penalty = penalty
        if penalty:
            cap = self.cwnd_max * (WINDOW_PENALTY_UNITS - penalty) / WINDOW_PENALTY_UNITS
            self._cap = cap if cap > self.cwnd_min else self.cwnd_min
        else:
            self._cap = _INF
        if penalty < old:
            self.cwnd = self._cap if self._cap < self.cwnd_max else self.cwnd_max
        self._clamp()

    def _clamp(self) -> None:
        cwnd = min(self.cwnd_max, max(self.cwnd_min, self.cwnd))
        cap = self._cap
        self.cwnd = cwnd if cwnd < cap else cap

    # --- pacing ------------------------------------------------------------------------------
    def pacing_rtt(self) -> float:
        """The RTT the pacing spreads the window over: srtt; with `pace_at_target`, at most the
        base RTT plus the target delay (the RTT the window aims at).

        With spraying, srtt follows the slowest path: every CE-marked packet gets a SACK of its
        own, so a slow path's samples come far more often than its share of the packets. With one
        spine at a quarter of its rate, srtt reached 71 us against a base RTT of 9.4 us, and
        pacing at cwnd / srtt held a sender with 28 packets of window to 13 Gbit/s. Above the
        target delay the window, not the pacing, limits what is in flight."""
        rtt = self._rtt
        srtt = rtt.srtt
        if not self._pace_at_target:
            return srtt
        base = rtt.base_rtt
        cap = base + (self._target_delay or TARGET_DELAY_BASE_FRACTION * base)
        return srtt if srtt < cap else cap

    def pacing_rate(self, nics: int) -> float:
        """Bytes per second the sender may emit: pacing_gain x cwnd / `pacing_rtt()`."""
        rate = self._pacing_gain * self.cwnd / max(self.pacing_rtt(), 1e-9)
        if self._line_rate_bps:
            rate = min(rate, self._line_rate_bps * nics / 8)
        return rate

    def may_send(self, now: float) -> bool:
        """True when the pacing clock allows a packet now."""
        return now >= self.next_send

    def sent(self, now: float, nbytes: int, nics: int, rate: float | None = None) -> None:
        """Advance the pacing clock after sending `nbytes`.

        The clock may lag `now` by up to pacing_burst_pkts - 1 packet times, so that an idle
        sender can emit a short burst (a token bucket of that depth). A sender that was held back
        by the pacing clock alone (`backlogged`) and is polled late keeps its schedule: it may
        catch up on up to `pacing_max_lag` of sending time it missed (the driver's timers and
        scheduler wake it late; without this every late poll would lower the rate for good).
        `rate` is `pacing_rate(nics)` when the caller has it already."""
        if rate is None:
            rate = self.pacing_rate(nics)
        slack = (self._burst_pkts - 1) * self.mss / rate
        if self.backlogged and self._max_lag > slack:
            slack = self._max_lag
        self.next_send = max(self.next_send, now - slack) + nbytes / rate
