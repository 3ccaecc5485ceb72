"""The names and numbers the P4 program, the controller and both switch models share.

Each is written once here, as `p4/mrc.p4` spells it (its P4Info name); the tests compare them with
the compiled P4Info.
"""
from __future__ import annotations

# --- tables ----------------------------------------------------------------------------------
USID_LOCAL = "MrcIngress.usid_local"        # this switch's own uSID: shift the address
ROUTING = "MrcIngress.routing"              # LPM on the (shifted) destination
ECMP_MEMBER = "MrcIngress.ecmp_member"      # group id + member index -> port
PORT_CONFIG = "MrcIngress.port_config"      # per egress port: trim and ECN thresholds, host-facing
PORT_FAULT = "MrcIngress.port_fault"        # emulated faults: drop all, or a share, on a port
ROUTE_TABLES = (ROUTING, ECMP_MEMBER)       # what a reroute rewrites

# --- actions -------------------------------------------------------------------------------
USID_SHIFT = "MrcIngress.usid_shift"
FORWARD = "MrcIngress.forward"
ECMP_SELECT = "MrcIngress.ecmp_select"
SET_PORT_CONFIG = "MrcIngress.set_port_config"
FAULT_DROP = "MrcIngress.fault_drop"
FAULT_DROP_RANDOM = "MrcIngress.fault_drop_random"

# --- counters (indexed by port, packets and bytes) ------------------------------------------
RX = "MrcIngress.rx"
MALFORMED_DROPS = "MrcIngress.malformed_drops"
NO_ROUTE_DROPS = "MrcIngress.no_route_drops"
FAULT_DROPS = "MrcIngress.fault_drops"
TRIMMED = "MrcIngress.trimmed"
ECN_MARKED = "MrcIngress.ecn_marked"
TX = "MrcEgress.tx"                          # a trimmed packet counts its length before the cut (v1model)
COUNTERS = (RX, MALFORMED_DROPS, NO_ROUTE_DROPS, FAULT_DROPS, TRIMMED, ECN_MARKED, TX)
COUNTER_SIZE = 512

# --- the queue depth each low-priority packet saw (a histogram per port) --------------------
QUEUE_DEPTH_SEEN = "MrcIngress.queue_depth_seen"
DEPTH_BUCKETS = 32                          # cells per port: depth 0..30, then 31 or more
QUEUE_DEPTH_SEEN_SIZE = COUNTER_SIZE * DEPTH_BUCKETS
ALL_COUNTERS = COUNTERS + (QUEUE_DEPTH_SEEN,)
COUNTER_SIZES = {**{name: COUNTER_SIZE for name in COUNTERS}, QUEUE_DEPTH_SEEN: QUEUE_DEPTH_SEEN_SIZE}


def depth_cell(port: int, depth: int) -> int:
    """The queue_depth_seen cell of a packet to `port` that saw `depth` packets queued."""
    return port * DEPTH_BUCKETS + min(depth, DEPTH_BUCKETS - 1)


def depth_of_cell(cell: int) -> tuple[int, int]:
    """(port, depth bucket) of a queue_depth_seen cell; the last bucket means that depth or more."""
    return divmod(cell, DEPTH_BUCKETS)

# --- thresholds ------------------------------------------------------------------------------
THRESHOLD_BITS = 19                         # bit<19> trim_threshold, ecn_threshold, ecn_max_threshold
TRIM_NEVER = (1 << THRESHOLD_BITS) - 1      # the largest trim threshold: no queue reaches it, trimming off
