"""Transport parameters that follow the network's speed: timers from its base RTT, windows from its BDP.

`TransportConfig`'s defaults suit a Mininet testbed (RTTs of about a millisecond). At data-center
speed (100 Gbit/s, RTTs of about 10 µs) its absolute values (a 2 ms RTO floor, a 1 ms initial RTT,
a 50 µs ACK delay, a 64-packet window) are wrong by orders of magnitude; `for_network` gives
values that scale with the base RTT and the bandwidth-delay product instead. At the other end,
links slower than the 20 Mbit/s the defaults were tuned at (a calibrated Mininet rate of a few
Mbit/s) make one packet's time on the wire as long as the 2 ms RTO floor; `for_line_rate` keeps
the timers a few packet times long there. Whoever knows the network (an experiment backend) passes
them to TransportConfig; explicit overrides win.
"""
from __future__ import annotations

import math

from host_agent.transport.config import TransportConfig
from host_agent.transport.timers import MAX_QP_TIMEOUT, QP_TIMEOUT_UNIT
from wire.packets import DATA_OVERHEAD

RTO_MIN_BASE_RTTS = 10.0      # the RTO floor, in base RTTs, at least (rounded up to a QP timeout 1.024 us x 2^t)
ACK_DELAY_BASE_RTT = 0.25     # longest a coalesced SACK waits, in base RTTs (never above ACK_DELAY_MAX_S)
ACK_DELAY_MAX_S = 50e-6
REORDER_BASE_RTTS = 1.0       # reorder window of loss detection from SACKs, in base RTTs (lossdetect; unsized: 2)
PROBE_RTO_MINS = 2.0          # probes of retired EVs every this many RTO floors
WINDOW_BDPS = 2.0             # largest congestion window, in BDPs
OOO_WINDOW_CWNDS = 4.0        # out-of-order window, in largest windows (sprayed packets arrive out of order; slow paths late)
MPR_PSNS = 128                # the API sizes the out-of-order window in units of this many PSNs (`mpr`)
BITMAP_PSNS = 64              # a window of at most this many PSNs fits one SACK bitmap: no `mpr` needed
MIN_WINDOW_PKTS = 4
RTO_MIN_PACKETS = 4           # the RTO floor spans at least this many full packets at the line rate
INITIAL_RTT_PACKETS = 2       # the RTT assumed before any sample: at least this many packet times
PACING_LAG_PACKETS = 2        # sending time a late poll may catch up on: at least this many packet times
TARGET_DELAY_BASE_RTTS = 0.75 # NSCC's target queueing delay, in base RTTs (NSCC's typical; unsized: 0.3)
MAX_MD_JUMP = 0.2             # NSCC's largest single decrease (unsized: 0.5)
PATH_CAP_PKTS = 4             # a path's packets in flight until acknowledged at a normal RTT (pathcap; unsized: no cap)
PATH_CAP_RTTS = 1.5           # an acknowledgement within this many base RTTs opens its path's cap (pathcap)
FAIR_INCREASE_PKTS = 4.0      # NSCC's fair increase, packets per RTT (unsized: 1): a window cut by a trim comes back within a flow's life


def base_rtt(hops: int, delay_s: float, rate_bps: float, mtu_payload: int, ack_bytes: int = 0) -> float:
    """The round trip of a full data packet over `hops` links each way, `delay_s` per cable, every
    link at `rate_bps`: propagation both ways, store-and-forward of the packet at every hop and
    of its acknowledgement (`ack_bytes`) on the way back."""
    if hops < 1 or delay_s < 0 or rate_bps <= 0 or mtu_payload <= 0:
        raise ValueError(f"base_rtt: need hops >= 1, delay_s >= 0, rate_bps > 0, mtu_payload > 0 "
                         f"(got {hops}, {delay_s}, {rate_bps}, {mtu_payload})")
    packet_s = (mtu_payload + DATA_OVERHEAD) * 8 / rate_bps
    ack_s = ack_bytes * 8 / rate_bps
    return 2 * hops * delay_s + hops * (packet_s + ack_s)


def bdp_packets(rate_bps: float, rtt_s: float, mtu_payload: int) -> int:
    """Full data packets that fill `rate_bps` for `rtt_s` (at least 1)."""
    return max(1, math.ceil(rate_bps / 8 * rtt_s / (mtu_payload + DATA_OVERHEAD)))


def ooo_window_for(window_pkts: int) -> int:
    """The out-of-order window for a congestion window of `window_pkts`: one SACK bitmap while that
    covers it, else a whole number of MPR_PSNS units (the API's `mpr`)."""
    want = math.ceil(OOO_WINDOW_CWNDS * window_pkts)
    if want <= BITMAP_PSNS:
        return BITMAP_PSNS
    return MPR_PSNS * math.ceil(want / MPR_PSNS)


def qp_timeout_for(seconds: float) -> int:
    """The smallest QP timeout t whose 1.024 us x 2^t is at least `seconds` (at most MAX_QP_TIMEOUT)."""
    if seconds <= QP_TIMEOUT_UNIT:
        return 0
    return min(MAX_QP_TIMEOUT, math.ceil(math.log2(seconds / QP_TIMEOUT_UNIT) - 1e-12))


def for_network(rate_bps: float, rtt_s: float, mtu_payload: int, spraying: bool = True) -> dict:
    """TransportConfig fields for a network whose hosts send at `rate_bps` and whose base RTT is
    `rtt_s`: the RTO floor, initial RTT, ACK delay, reorder window and probe period in base RTTs,
    the window in BDPs and the out-of-order window to hold it. For a connection that sprays
    (`spraying`: MRC), also NSCC's target delay in base RTTs, a gentler largest decrease and pacing
    over the target RTT (`nscc_for_network`)."""
    if rate_bps <= 0 or rtt_s <= 0 or mtu_payload <= 0:
        raise ValueError(f"for_network: need rate_bps, rtt_s and mtu_payload > 0 (got {rate_bps}, {rtt_s}, "
                         f"{mtu_payload})")
    bdp = bdp_packets(rate_bps, rtt_s, mtu_payload)
    window = max(MIN_WINDOW_PKTS, math.ceil(WINDOW_BDPS * bdp))
    qp_timeout = qp_timeout_for(RTO_MIN_BASE_RTTS * rtt_s)
    nscc = nscc_for_network(rtt_s) if spraying else {}
    return {
        "mtu_payload": mtu_payload,
        "initial_rtt": rtt_s,
        "qp_timeout": qp_timeout,
        "ack_delay": min(ACK_DELAY_MAX_S, ACK_DELAY_BASE_RTT * rtt_s),
        "sack_reorder_window": REORDER_BASE_RTTS * rtt_s,
        "probe_interval": PROBE_RTO_MINS * QP_TIMEOUT_UNIT * (1 << qp_timeout),
        "init_cwnd_pkts": max(1, min(window, bdp)),
        "max_cwnd": window,
        "ooo_window": ooo_window_for(window),
        **nscc,
    }


def packet_time(rate_bps: float, mtu_payload: int) -> float:
    """Seconds a full data packet takes on a link of `rate_bps`."""
    return (mtu_payload + DATA_OVERHEAD) * 8 / rate_bps


def for_line_rate(rate_bps: float, mtu_payload: int) -> dict:
    """TransportConfig timer fields no shorter than a few full packets' time at `rate_bps`: the RTO
    floor (qp_timeout), the initial RTT and the pacing catch-up, with the probe period scaled as the
    RTO floor is. Where packets are short against the defaults (20 Mbit/s and faster) they are the
    defaults. Without it, at 4 Mbit/s (2.3 ms a 1 KB packet), the 2.1 ms floor timed out packets
    still queued, and a coalesced SACK, which may wait at most half the floor, went for nearly
    every data packet: about 7 % of each link's bytes."""
    if rate_bps <= 0 or mtu_payload <= 0:
        raise ValueError(f"for_line_rate: need rate_bps and mtu_payload > 0 (got {rate_bps}, {mtu_payload})")
    defaults = TransportConfig()
    packet_s = packet_time(rate_bps, mtu_payload)
    qp_timeout = max(defaults.qp_timeout, qp_timeout_for(RTO_MIN_PACKETS * packet_s))
    return {
        "qp_timeout": qp_timeout,
        "initial_rtt": max(defaults.initial_rtt, INITIAL_RTT_PACKETS * packet_s),
        "probe_interval": defaults.probe_interval * (1 << (qp_timeout - defaults.qp_timeout)),
        "pacing_max_lag": max(defaults.pacing_max_lag, PACING_LAG_PACKETS * packet_s),
    }


def nscc_for_network(rtt_s: float) -> dict:
    """NSCC's fields for a sprayed connection on a network of base RTT `rtt_s` whose switches mark
    ECN from about half a BDP and trim past one (datacenter.yaml: a ramp 16..48 packets, trimming
    at 48, BDP 28): the target delay in base RTTs, a largest decrease of MAX_MD_JUMP, and pacing
    over at most the target RTT (docs/transport.md, "NSCC at data-center speed"), the steering's
    share for struck paths, a cap on each path's packets in flight that acknowledgements at a
    normal RTT open (`pathcap`; docs/transport.md, "Path cap"); and, for switches that are not
    tuned for it (docs/transport.md, "Without tuned switches"), a rotation that visits the paths
    in turn (`evset.striped`), trim resends that leave the pacing clock alone, a fair increase
    of FAIR_INCREASE_PKTS per RTT, and the receiver window penalty (a receiver shared by several
    senders gives each its share: docs/transport.md, "Receiver window penalty"); and losses found
    by a path's own order (`lossdetect.overtaken`; docs/transport.md, "Whose loss"). A single-path
    baseline keeps the unsized values: its drop-tail queues on ECMP collisions overflowed with
    either the target or the pacing rule (loss-sweep --quick: RoCE's loss-free all-to-all took
    twice as long)."""
    return {"target_delay": TARGET_DELAY_BASE_RTTS * rtt_s, "max_md_jump": MAX_MD_JUMP, "pace_at_target": True,
            "steer_share_struck": True, "path_cap_pkts": PATH_CAP_PKTS, "path_cap_rtts": PATH_CAP_RTTS,
            "stripe_paths": True, "pace_trim_resends": False, "fi": FAIR_INCREASE_PKTS, "window_penalty": True,
            "path_order_losses": True}
