"""Named switch settings: the queue, trim and ECN thresholds of every link, worked out from the fabric.

A scenario's `link:` names one with `switch_profile: NAME`; the profile's thresholds then replace
the link's `queue_depth`, `trim_threshold`, `ecn_threshold` and `ecn_max_threshold`. A profile
needs the data-center keys it sizes from: `rate_bps` (bit/s, not `auto`), `delay_s` and
`mtu_payload`.

- `htsim-defaults`: what uet-htsim's `htsim_uec` sets when given no `-q` and no `-ecn`: every
  queue and the trim point one BDP, ECN marking on a ramp from 0.2 to 0.8 BDP (rounded up, in
  packets). Its BDP is htsim's own (`calculate_bdp_pkt`): the unloaded round trip over the
  fabric's diameter (the cable delay both ways, a data packet and an acknowledgement stored and
  forwarded at every hop) times the line rate, in data packets, rounded up. htsim's packets are
  those crosscheck gives it: the payload plus htsim_uec's 64-byte data header (`-mtu` 4,160 for
  4 KiB), and its acknowledgements 64 bytes.
  On datacenter.yaml (4x4x4 leaf-spine, 100 Gbit/s, 1 us cables, 4 KiB): 29 packets, ECN 6..24.
  Differences kept: htsim also marks ECN on the ports facing hosts, netsim never does (MRC's
  fabric: the last hop trims, it does not mark).
"""
from __future__ import annotations

import math

HTSIM_DEFAULTS = "htsim-defaults"
PROFILES = (HTSIM_DEFAULTS,)
PROFILE_FIELDS = ("queue_depth", "trim_threshold", "ecn_threshold", "ecn_max_threshold")
HTSIM_HEADER_BYTES = 64          # UecSrc::_hdr_size: htsim_uec's -mtu is the payload plus this
HTSIM_ACK_BYTES = 64
HTSIM_ECN_LOW_BDP = 0.2
HTSIM_ECN_HIGH_BDP = 0.8


def htsim_bdp_packets(hops: int, delay_s: float, rate_bps: float, mtu_payload: int) -> int:
    """uet-htsim's BDP in packets for a fabric whose longest path crosses `hops` links: its unloaded
    RTT (propagation both ways, packet and ACK serialised at every hop) over its packet time, rounded up."""
    if hops < 1 or delay_s < 0 or rate_bps <= 0 or mtu_payload <= 0:
        raise ValueError(f"htsim_bdp_packets: need hops >= 1, delay_s >= 0, rate_bps > 0, mtu_payload > 0 "
                         f"(got {hops}, {delay_s}, {rate_bps}, {mtu_payload})")
    packet = mtu_payload + HTSIM_HEADER_BYTES
    rtt = 2 * hops * delay_s + hops * (packet + HTSIM_ACK_BYTES) * 8 / rate_bps
    return math.ceil(rtt * rate_bps / 8 / packet - 1e-9)


def profile_fields(name: str, hops: int, delay_s: float, rate_bps: float, mtu_payload: int) -> dict:
    """The link fields of profile `name` on a fabric of `hops` links host to host, `delay_s` per
    cable, `rate_bps`, `mtu_payload` bytes of payload per packet."""
    if name != HTSIM_DEFAULTS:
        raise ValueError(f"switch profile {name!r} is not known; known: {', '.join(PROFILES)}")
    bdp = htsim_bdp_packets(hops, delay_s, rate_bps, mtu_payload)
    return {"queue_depth": bdp, "trim_threshold": bdp,
            "ecn_threshold": math.ceil(HTSIM_ECN_LOW_BDP * bdp - 1e-9),
            "ecn_max_threshold": math.ceil(HTSIM_ECN_HIGH_BDP * bdp - 1e-9)}
