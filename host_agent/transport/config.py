"""The paths a connection is given, the QP numbering of a run, and the transport parameters."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from host_agent.transport.peers import PathInfo
from host_agent.transport.timers import QP_TIMEOUT_UNIT, RetryBudget, qp_timeout_seconds

MAX_QPS = 64                          # queue pairs per peer at most (baseline)
QP_BASE = 0x100                       # the first QP number a run's numbering gives out (`QpNumbers`)
MPR_PSNS = 128                        # an out-of-order window past one SACK bitmap comes in units of this (`mpr`)
MAX_MPR = 1024                        # at most this many units (131072 PSNs, well inside half the 24-bit space)


def uses_usid_paths(mode: str) -> bool:
    """True when a connection in `mode` steers its packets along uSID paths (MRC); any other mode
    (the RoCE-style baseline) sends to the peer's NIC address and lets the switches route it by ECMP."""
    return mode == "mrc"


def connection_paths(mode: str, nics: Iterable[tuple[int, int, bytes]], peer_nics: Mapping[int, bytes],
                     usid_paths: Mapping[int, Sequence[bytes]]) -> list[PathInfo]:
    """The paths a connection in `mode` is given: the one rule for the agent (from its job) and for a
    simulated host (`simulation`, from the topology).

    `nics` are this host's NICs as (NIC index, plane, 16-byte address), `peer_nics` the peer's NIC
    address by plane, `usid_paths` the uSID path addresses to the peer by plane
    (`topologies.paths.host_paths`). Only the planes both hosts are on count, in the order of `nics`.
    MRC gets every uSID path of each; any other mode (the RoCE-style baseline) the peer's NIC address
    on each, which the switches route by ECMP: the baseline sends on the first of them.
    """
    paths = []
    for nic, plane, src in nics:
        peer = peer_nics.get(plane)
        if peer is None:
            continue
        dsts = usid_paths.get(plane, ()) if uses_usid_paths(mode) else (peer,)
        paths.extend(PathInfo(plane, nic, src, dst) for dst in dsts)
    return paths


class QpNumbers:
    """The one QP numbering of a run (a simulation's connections, an experiment's agent jobs): each
    new pair of connections takes the next two numbers from QP_BASE, the first for the end that
    opens it. With several queue pairs, QP k of a pair adds k * QP_STRIDE to both (`connect_qps`)."""

    def __init__(self) -> None:
        self._next = QP_BASE

    def pair(self) -> tuple[int, int]:
        """The QP numbers of a new pair of connections: (the opening end's, the other end's)."""
        first = self._next
        self._next += 2
        return first, first + 1


@dataclass
class TransportConfig:
    """Parameters of one endpoint's connections (times in seconds, sizes in bytes).

    docs/transport.md explains each group. Defaults suit a Mininet testbed (RTTs of about a
    millisecond); the in-process network uses microsecond values.

    A connection reads some of these once, when it is built (the ones its per-packet path uses:
    `mtu_payload`, `ooo_window`, `initial_psn`, `ack_coalesce`, `ack_delay`, `ack_fanout`, the
    pacing parameters, the RTO's `rto_srtt_factor`, `rto_max`, `initial_rtt` and whether
    `base_rtt` is set, NSCC's `target_delay`, `eta`, `fi` x `fi_scale`, `qa_threshold` and whether
    either adjust threshold is set), and others on every use: a configuration changed later is
    seen in part by connections already made. Make a new one (`dataclasses.replace`) instead.
    """

    mode: str = "mrc"                 # "mrc" | "roce" (or a kind registered in host_agent.transport.kinds)
    # --- EV set ---------------------------------------------------------------
    num_evs: int = 128                # EVs per connection, split evenly across planes (16..256)
    ev_min_active: int | None = None  # floor: never spray over fewer EVs than this (None: num_evs // 4)
    share_fate_by_path: bool = True   # EVs mapping to the same uSID path are retired/reinstated together
    steer_share_struck: bool = False  # steering: strikes grow once per rotation, a struck path keeps 1/2^k of its slots (sizing: on)
    path_cap_pkts: int = 0            # a path's packets in flight until acknowledged at a normal RTT (0: no cap; sizing: 4)
    path_cap_rtts: float = 1.5        # an acknowledgement within this many base RTTs opens its path's cap by one
    stripe_paths: bool = False        # the rotation visits a plane's paths in turn (evset.striped; sizing: on)
    # --- packets and reliability ---------------------------------------------------
    mtu_payload: int = 1024           # payload bytes per data packet
    max_message_bytes: int = 64 << 20  # largest message either end sends or accepts (receiver buffers it whole)
    initial_psn: int = 0              # first PSN of every connection (both ends agree)
    ooo_window: int = 64              # max PSNs in flight beyond the cumulative ack: <= 64 (one SACK bitmap),
                                      # or a multiple of 128 (the API's `mpr` units; SACKs carry a base offset)
    # --- timers: MRC's QP timer model (host_agent.transport.timers, docs/transport.md "Timers") ---
    qp_timeout: int = 11              # t: the QP timeout 1.024 us x 2^t (0..24; 11: 2.1 ms) floors the RTO
    retry_linear_cnt: int = 2         # retries of one packet at the base timeout (0..7)
    retry_exp_cnt: int = 25           # then retries that double the timeout (0..25; 25: without end)
    rto_max: float = 1.0              # ceiling on any one timeout (seconds)
    rto_srtt_factor: float = 3.0      # the RTO is never below this many smoothed RTTs
    initial_rtt: float = 1e-3         # RTT estimate before the first sample
    # --- loss detection from SACKs (host_agent.transport.lossdetect, docs/transport.md "Random loss") ---
    sack_loss_detection: bool = True  # a packet overtaken by one SACKed and older than RTT + window is lost
    sack_reorder_window: float = 0.0  # that reorder window, seconds; 0: two base RTTs (base_rtt or the smallest sample)
    path_order_losses: bool = False   # ... and one overtaken on its own path by one SACKed is lost at once (sizing: on)
    # --- receiver ------------------------------------------------------------------
    ack_coalesce: int = 4             # one SACK every this many in-order data packets
    ack_delay: float = 50e-6          # longest a pending SACK waits
    ack_fanout: int = 2               # copies (distinct paths) of a SACK for a tail or a packet it overtook, a retx, a duplicate
    window_penalty: bool = False      # SACKs ask the senders sharing this receiver for their share of its links, and
                                      # the sender keeps to what SACKs ask (sizing: on; needs line_rate_bps, initial_rtt)
    # --- probes ----------------------------------------------------------------------
    probe_interval: float = 2e-3      # period of background probes on ASSUMED_BAD EVs
    probe_successes: int = 3          # consecutive clean probe replies that reinstate an EV
    keepalive_probes: bool = True     # a connection that only acknowledges probes its own paths
    keepalive_misses: int = 2         # consecutive unanswered keepalive probes that retire a path
    keepalive_data_pkts: int = 16     # at most one keepalive per this many data packets received
    probe_reply_fanout: int = 2       # a probe is answered on up to this many distinct paths
    # --- congestion control: UEC NSCC's parameters ("uet-1.0-nscc"; docs/transport.md) ---------
    cc: bool = True                   # False: fixed window = max_cwnd (no window penalty changes it)
    init_cwnd_pkts: int = 16
    cwnd_min_pkts: float = 1.0
    max_cwnd: int = 64                # largest window, in packets (of mtu_payload + headers)
    base_rtt: float = 0.0             # seconds; 0: the smallest RTT sample of a data packet
    target_delay: float = 0.0         # target queueing delay, seconds; 0: 0.3 x the base RTT (docs: why not 0.75)
    eta: float = 1.0                  # proportional increase gain (queueing delay below the target)
    fi: float = 1.0                   # fair increase: packets per RTT (delay at or above the target)
    fi_scale: float = 1.0             # factor on fi
    gamma: float = 1.0                # multiplicative decrease gain
    max_md_jump: float = 0.5          # largest single decrease (fraction of cwnd)
    disable_qa: bool = False          # True: no quick adapt
    qa_threshold: float = 0.0         # seconds of queueing delay that also trigger quick adapt; 0: only trims and losses
    qa_gate: int = 1                  # quick adapt shrinks the window to at least cwnd / 2^qa_gate
    adjust_bytes_threshold: int = 0   # increases are applied once this many bytes were acknowledged ...
    adjust_period_threshold: float = 0.0  # ... or this many seconds passed (0, 0: at every acknowledgement)
    pacing_gain: float = 1.25         # pace at this times cwnd / srtt
    pace_at_target: bool = False      # pace over at most base RTT + target delay, not a larger srtt (sizing: on)
    pace_trim_resends: bool = True    # a trim retransmission advances the pacing clock (sizing: off: it was paced as the packet it replaces)
    pacing_burst_pkts: int = 1        # packets an idle sender may emit back to back
    pacing_max_lag: float = 1e-3      # sending time a sender held back only by pacing may catch up after a late poll
    line_rate_bps: float = 0.0        # per-NIC line rate; 0: unknown (no cap on the pacing rate, no NIC clock)
    qps: int = 1                      # baseline only: queue pairs per peer (each its own EV, so its own ECMP path)
    nic_backlog_pkts: int = 16         # data may be handed to a NIC while it has at most this many packets queued
    seed: int = 0

    def __post_init__(self) -> None:
        if not 16 <= self.num_evs <= 256:
            raise ValueError(f"TransportConfig.num_evs: {self.num_evs} is outside 16..256")
        if not (1 <= self.ooo_window <= 64 or (self.ooo_window % MPR_PSNS == 0
                                                and self.ooo_window <= MAX_MPR * MPR_PSNS)):
            raise ValueError(f"TransportConfig.ooo_window: {self.ooo_window} is neither in 1..64 nor a multiple "
                             f"of {MPR_PSNS} up to {MAX_MPR * MPR_PSNS}")
        if self.mtu_payload <= 0:
            raise ValueError(f"TransportConfig.mtu_payload: {self.mtu_payload} must be positive")
        if self.max_message_bytes <= 0:
            raise ValueError(f"TransportConfig.max_message_bytes: {self.max_message_bytes} must be positive")
        if self.ack_coalesce < 1:
            raise ValueError(f"TransportConfig.ack_coalesce: {self.ack_coalesce} must be >= 1")
        if self.ev_min_active is not None and (
                not isinstance(self.ev_min_active, int) or isinstance(self.ev_min_active, bool)
                or not 1 <= self.ev_min_active <= self.num_evs):
            raise ValueError(f"TransportConfig.ev_min_active: {self.ev_min_active!r} is outside 1..num_evs "
                             f"({self.num_evs})")
        if not isinstance(self.path_cap_pkts, int) or isinstance(self.path_cap_pkts, bool) or self.path_cap_pkts < 0:
            raise ValueError(f"TransportConfig.path_cap_pkts: {self.path_cap_pkts!r} must be an int >= 0")
        if not self.path_cap_rtts > 0:
            raise ValueError(f"TransportConfig.path_cap_rtts: {self.path_cap_rtts} must be > 0")
        if self.keepalive_data_pkts < 0:
            raise ValueError(f"TransportConfig.keepalive_data_pkts: {self.keepalive_data_pkts} must be >= 0")
        for name in ("target_delay", "qa_threshold", "adjust_period_threshold", "fi_scale", "sack_reorder_window"):
            if getattr(self, name) < 0:
                raise ValueError(f"TransportConfig.{name}: {getattr(self, name)} must be >= 0")
        if not 0 < self.max_md_jump <= 1:
            raise ValueError(f"TransportConfig.max_md_jump: {self.max_md_jump} is outside (0, 1]")
        if not isinstance(self.qa_gate, int) or not 0 <= self.qa_gate <= 16:
            raise ValueError(f"TransportConfig.qa_gate: {self.qa_gate!r} is outside 0..16")
        if self.adjust_bytes_threshold < 0:
            raise ValueError(f"TransportConfig.adjust_bytes_threshold: {self.adjust_bytes_threshold} must be >= 0")
        if self.pacing_burst_pkts < 1:
            raise ValueError(f"TransportConfig.pacing_burst_pkts: {self.pacing_burst_pkts} must be >= 1")
        if self.pacing_max_lag < 0:
            raise ValueError(f"TransportConfig.pacing_max_lag: {self.pacing_max_lag} must be >= 0")
        if not isinstance(self.qps, int) or isinstance(self.qps, bool) or not 1 <= self.qps <= MAX_QPS:
            raise ValueError(f"TransportConfig.qps: {self.qps!r} is outside 1..{MAX_QPS}")
        if self.qps > 1 and self.mode != "roce":
            raise ValueError(f"TransportConfig.qps: {self.qps} queue pairs is for mode 'roce' (MRC sprays "
                             f"one QP over every path)")
        try:
            self.retry_budget()
        except ValueError as bad:
            raise ValueError(f"TransportConfig.{bad}") from None
        if self.rto_max < self.base_timeout:
            raise ValueError(f"TransportConfig.rto_max: {self.rto_max} is below the QP timeout "
                             f"{self.base_timeout:.6g} s (qp_timeout {self.qp_timeout})")

    @property
    def base_timeout(self) -> float:
        """The QP timeout in seconds (1.024 us x 2^qp_timeout): the floor of the RTO."""
        return QP_TIMEOUT_UNIT * (1 << self.qp_timeout)

    def retry_budget(self) -> RetryBudget:
        """The linear-then-exponential retries of one packet (host_agent.transport.timers)."""
        qp_timeout_seconds(self.qp_timeout)
        return RetryBudget(self.retry_linear_cnt, self.retry_exp_cnt, self.rto_max)

    @property
    def ev_floor(self) -> int:
        """The minimum-active floor of the EV set: `ev_min_active`, or `num_evs // 4` when unset."""
        return self.ev_min_active if self.ev_min_active is not None else max(1, self.num_evs // 4)

    @property
    def mpr(self) -> int:
        """The out-of-order window in units of MPR_PSNS PSNs, as the API's `mpr` (rounded up)."""
        return -(-self.ooo_window // MPR_PSNS)
