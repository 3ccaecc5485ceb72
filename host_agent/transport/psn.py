"""24-bit packet sequence numbers: the transport counts with unbounded integers and wraps on the wire."""
from __future__ import annotations

from typing import Final

PSN_BITS: Final = 24
PSN_MOD: Final = 1 << PSN_BITS
PSN_MASK: Final = PSN_MOD - 1
_HALF: Final = PSN_MOD >> 1


def to_wire(seq: int, initial_psn: int) -> int:
    """The 24-bit PSN carried for sequence number `seq` (0 = first packet)."""
    return (initial_psn + seq) & PSN_MASK


def from_wire(psn: int, initial_psn: int, near: int) -> int:
    """The sequence number nearest to `near` whose wire PSN is `psn` (wrap-safe)."""
    diff = (psn - ((initial_psn + near) & PSN_MASK)) & PSN_MASK       # psn - to_wire(near)
    if diff >= _HALF:
        diff -= PSN_MOD
    return near + diff


def psn_lt(a: int, b: int) -> bool:
    """True when 24-bit PSN `a` comes before `b` (serial-number arithmetic)."""
    return a != b and ((b - a) & PSN_MASK) < _HALF
