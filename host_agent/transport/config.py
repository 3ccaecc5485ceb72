"""Connection paths and transport parameters."""
from __future__ import annotations

from dataclasses import dataclass, field

MODES = ("mrc", "roce")               # the built-in transports (host_agent.transport.kinds registers them)
MAX_QPS = 64                          # queue pairs per peer at most (baseline)
MPR_PSNS = 128                        # an out-of-order window past one SACK bitmap comes in units of this (`mpr`)
MAX_MPR = 1024                        # at most this many units (131072 PSNs, well inside half the 24-bit space)


@dataclass(frozen=True)
class PathInfo:
    """One path from this host to a peer.

    For MRC, `dst` is the uSID path address (``fc00:<plane>:<switch uSIDs>:<host uSID>::``);
    for the baseline it is the peer NIC address, which switches route by ECMP.
    """

    plane: int
    nic: int          # local NIC index the packets leave by
    src: bytes        # 16-byte address of that local NIC
    dst: bytes        # 16-byte destination address


@dataclass(frozen=True, slots=True)
class ConnectionId:
    """Who a connection is: the endpoint it belongs to, its peer and its queue pair numbers.

    Events carry it (`event.conn`); packets of the connection carry `remote_qp` (the peer's QP,
    also the R_Key of RETH)."""

    endpoint: str
    peer: str
    local_qp: int
    remote_qp: int
    name: str = field(init=False, compare=False)     # "<endpoint>-><peer>:<local qp>"

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", f"{self.endpoint}->{self.peer}:{self.local_qp:#x}")


@dataclass
class TransportConfig:
    """Parameters of one endpoint's connections (times in seconds, sizes in bytes).

    docs/transport.md explains each group. Defaults suit a Mininet testbed (RTTs of about a
    millisecond); the in-process network uses microsecond values.
    """

    mode: str = "mrc"                 # "mrc" | "roce" (or a kind registered in host_agent.transport.kinds)
    # --- EV set ---------------------------------------------------------------
    num_evs: int = 128                # EVs per connection, split evenly across planes (16..256)
    min_active_evs: int = 16          # floor: never spray over fewer EVs than this
    share_fate_by_path: bool = True   # EVs mapping to the same uSID path are retired/reinstated together
    # --- packets and reliability ---------------------------------------------------
    mtu_payload: int = 1024           # payload bytes per data packet
    max_message_bytes: int = 64 << 20  # largest message either end sends or accepts (receiver buffers it whole)
    initial_psn: int = 0              # first PSN of every connection (both ends agree)
    ooo_window: int = 64              # max PSNs in flight beyond the cumulative ack: <= 64 (one SACK bitmap),
                                      # or a multiple of 128 (the API's `mpr` units; SACKs carry a base offset)
    rto_min: float = 2e-3
    rto_max: float = 1.0
    rto_linear_retries: int = 2       # retransmissions of one packet at the base RTO before doubling
    rto_srtt_factor: float = 3.0      # the RTO is never below this many smoothed RTTs
    initial_rtt: float = 1e-3         # RTT estimate before the first sample
    # --- receiver ------------------------------------------------------------------
    ack_coalesce: int = 4             # one SACK every this many in-order data packets
    ack_delay: float = 50e-6          # longest a pending SACK waits
    ack_fanout: int = 2               # copies (on distinct paths) of a SACK for a tail, a retransmission or a duplicate
    # --- probes ----------------------------------------------------------------------
    probe_interval: float = 2e-3      # period of background probes on ASSUMED_BAD EVs
    probe_successes: int = 3          # consecutive clean probe replies that reinstate an EV
    keepalive_probes: bool = True     # a connection that only acknowledges probes its own paths
    keepalive_misses: int = 2         # consecutive unanswered keepalive probes that retire a path
    keepalive_data_pkts: int = 16     # at most one keepalive per this many data packets received
    probe_reply_fanout: int = 2       # a probe is answered on up to this many distinct paths
    # --- congestion control (NSCC-like, docs/transport.md) ----------------------------
    cc: bool = True                   # False: fixed window = cwnd_max_pkts
    init_cwnd_pkts: int = 16
    cwnd_min_pkts: float = 1.0
    cwnd_max_pkts: int = 64
    base_rtt: float = 0.0             # 0: the smallest RTT sample seen
    target_qdelay_frac: float = 0.3   # target queueing delay, as a fraction of the base RTT (docs: why not 0.75)
    pi_gain: float = 1.0              # proportional increase gain
    fi_gain: float = 1.0              # fair increase: packets per RTT
    md_gain: float = 1.0              # multiplicative decrease gain
    md_max: float = 0.5               # largest single decrease (fraction of cwnd)
    pacing_gain: float = 1.25         # pace at this times cwnd / srtt
    pacing_burst_pkts: int = 1        # packets an idle sender may emit back to back
    pacing_max_lag: float = 1e-3      # sending time a sender held back only by pacing may catch up after a late poll
    line_rate_bps: float = 0.0        # per-NIC line rate; 0: unknown (no cap on the pacing rate, no NIC clock)
    qps: int = 1                      # baseline only: queue pairs per peer (each its own EV, so its own ECMP path)
    nic_backlog_pkts: int = 16         # data may be handed to a NIC while it has at most this many packets queued
    seed: int = 0

    def __post_init__(self) -> None:
        from host_agent.transport.kinds import TRANSPORTS      # the registry imports this module
        if self.mode not in TRANSPORTS:
            raise ValueError(f"TransportConfig.mode: {self.mode!r} is not one of {tuple(TRANSPORTS)}")
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
        if self.min_active_evs < 1:
            raise ValueError(f"TransportConfig.min_active_evs: {self.min_active_evs} must be >= 1")
        if self.keepalive_data_pkts < 0:
            raise ValueError(f"TransportConfig.keepalive_data_pkts: {self.keepalive_data_pkts} must be >= 0")
        if self.pacing_burst_pkts < 1:
            raise ValueError(f"TransportConfig.pacing_burst_pkts: {self.pacing_burst_pkts} must be >= 1")
        if self.pacing_max_lag < 0:
            raise ValueError(f"TransportConfig.pacing_max_lag: {self.pacing_max_lag} must be >= 0")
        if not isinstance(self.qps, int) or isinstance(self.qps, bool) or not 1 <= self.qps <= MAX_QPS:
            raise ValueError(f"TransportConfig.qps: {self.qps!r} is outside 1..{MAX_QPS}")
        if self.qps > 1 and self.mode != "roce":
            raise ValueError(f"TransportConfig.qps: {self.qps} queue pairs is for mode 'roce' (MRC sprays "
                             f"one QP over every path)")
        if self.rto_min <= 0 or self.rto_max < self.rto_min:
            raise ValueError("TransportConfig.rto_min/rto_max: need 0 < rto_min <= rto_max")

    @property
    def mpr(self) -> int:
        """The out-of-order window in units of MPR_PSNS PSNs, as the API's `mpr` (rounded up)."""
        return -(-self.ooo_window // MPR_PSNS)
