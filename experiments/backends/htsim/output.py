"""What htsim_uec prints, read back: each flow's completion, its totals, the switch sizing it chose.

htsim_uec writes its results as text on standard output. The lines read here:

    Flow Uec_7_6 flowId 8 uecSrc 7 finished at 175.666 total messages 1 total packets 514 ...
    New: 8224 Rtx: 13 RTS: 0 Bounced: 0 ACKs: 2070 NACKs: 13 Pulls: 0 sleek_pkts: 0
    Tier 0 QueueSize Down 120350 bytes
    Setting ECN to parameters low 24900 high 99600 enable on tor downlink 1
    Packet size (MTU) is 4150

Times are microseconds. Anything else is ignored; output without the totals line (the run did
not reach its end) is an `HtsimOutputError`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

_FLOW = re.compile(r"^Flow (\S+) flowId (\d+) \S+ \S+ finished at ([0-9.eE+-]+)\b")
_TOTALS = re.compile(r"^New: (\d+) Rtx: (\d+) RTS: (\d+) Bounced: (\d+) ACKs: (\d+) NACKs: (\d+) Pulls: (\d+)")
_QUEUE = re.compile(r"^Tier 0 QueueSize Down (\d+) bytes")
_ECN = re.compile(r"^Setting ECN to parameters low (\d+) high (\d+)")
_MTU = re.compile(r"^Packet size \(MTU\) is (\d+)")
TOTAL_NAMES = ("new", "rtx", "rts", "bounced", "acks", "nacks", "pulls")


class HtsimOutputError(ValueError):
    """htsim_uec's output could not be read: says what is missing."""


@dataclass
class HtsimResult:
    """One htsim_uec run as read from its output."""

    finish_us: dict[int, float] = field(default_factory=dict)   # flow id -> completion (µs)
    names: dict[int, str] = field(default_factory=dict)         # flow id -> htsim's name (Uec_src_dst)
    totals: dict[str, int] = field(default_factory=dict)        # TOTAL_NAMES -> packets, all flows
    queue_bytes: Optional[int] = None        # the data queue (trim point) htsim sized, bytes
    ecn_bytes: Optional[tuple[int, int]] = None   # its ECN ramp, bytes
    packet_bytes: Optional[int] = None       # its packet size (MTU), bytes

    def switch_settings(self) -> dict:
        """The queue and ECN ramp htsim used, in whole packets (the scenario's link keys)."""
        if None in (self.queue_bytes, self.ecn_bytes, self.packet_bytes):
            raise HtsimOutputError("htsim_uec's output does not say its queue size, ECN ramp and packet size")
        size = self.packet_bytes
        queue = self.queue_bytes // size
        return {"queue_depth": queue, "trim_threshold": queue, "ecn_threshold": self.ecn_bytes[0] // size,
                "ecn_max_threshold": self.ecn_bytes[1] // size}


def parse_output(text: str) -> HtsimResult:
    """Read htsim_uec's standard output."""
    result = HtsimResult()
    seen_totals = False
    for line in text.splitlines():
        match = _FLOW.match(line)
        if match:
            flow_id = int(match.group(2))
            if flow_id in result.finish_us:
                raise HtsimOutputError(f"flow id {flow_id} finished twice in htsim_uec's output")
            result.names[flow_id] = match.group(1)
            result.finish_us[flow_id] = float(match.group(3))
            continue
        match = _TOTALS.match(line)
        if match:
            result.totals = dict(zip(TOTAL_NAMES, map(int, match.groups())))
            seen_totals = True
            continue
        match = _QUEUE.match(line)
        if match:
            result.queue_bytes = int(match.group(1))
            continue
        match = _ECN.match(line)
        if match:
            result.ecn_bytes = (int(match.group(1)), int(match.group(2)))
            continue
        match = _MTU.match(line)
        if match:
            result.packet_bytes = int(match.group(1))
    if not seen_totals:
        tail = "\n".join(text.splitlines()[-5:]) or "(no output)"
        raise HtsimOutputError("htsim_uec's output has no totals line ('New: ... Rtx: ...'): the run did not end "
                               f"normally. Its last lines:\n{tail}")
    return result
