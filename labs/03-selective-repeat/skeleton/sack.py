"""Lab 3: selective repeat from MRC's SACK.

Your class plugs into the transport as its SACK processor (host_agent.transport.policies.SackProcessor):
the checker builds every endpoint with `Policies(sack=SelectiveRepeat)`. The sender calls `lost`
after it has applied each SACK, and retransmits (cause "sack") the sequence numbers you return.

What a SACK says (the sender has already unwrapped the 24-bit PSNs into sequence numbers):
- every sequence number below `cum` has arrived;
- bit i of the 64-bit `bitmap` set: sequence number `base + i` has arrived.

What you can ask the sender (`window`, a policies.SendWindow):
- `window.cum_acked`, `window.next_seq`: everything below cum_acked is acknowledged; next_seq is one
  past the highest sequence number sent;
- `window.segment(seq)`: the packet numbered seq (or None once acknowledged below the cumulative
  point), with `.sent_at` (its latest transmission), `.transmissions`, `.in_flight`, `.acked`.

Read the lab's README.md before you start. Do not edit anything under host_agent/.
"""
from __future__ import annotations

from host_agent.transport.config import TransportConfig


class SelectiveRepeat:
    """A SackProcessor: which packets a SACK shows lost."""

    def __init__(self, config: TransportConfig) -> None:
        self.config = config
        # TODO (optional): keep any state you need between SACKs here.

    def lost(self, cum, base, bitmap, window, now):
        """The sequence numbers to retransmit now (a list of ints; [] for none)."""
        # TODO 1: find the holes: numbers in flight that neither `cum` nor the bitmap covers.
        # TODO 2: keep only the holes the SACK gives evidence for (spraying reorders packets!).
        # TODO 3: return them. A number you return twice while it is in flight costs nothing extra,
        #         but a packet you resend that was only late arrives twice.
        raise NotImplementedError("TODO: SelectiveRepeat.lost in sack.py")
