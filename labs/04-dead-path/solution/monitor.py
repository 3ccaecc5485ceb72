"""Lab 4 (solution): dead-path detection, path retirement and probing back.

A timeout without trim is MRC's sign of a failed path, but only when something shows the path,
not the whole connection, is at fault: a packet sent well after the timed-out one has arrived
(on another path), and the connection had an RTT sample before the packet left (so its RTO was
measured, not guessed). Congestion signals (trim NACK, ECN echo) only steer traffic away for a
rotation; they never retire a path.
"""
from __future__ import annotations

from host_agent.transport.config import TransportConfig

LATER_BY_SRTT = 0.25        # a packet sent this many srtt after the lost one must have arrived


class DeadPathMonitor:
    """A PathMonitor (host_agent.transport.policies)."""

    def __init__(self, config: TransportConfig) -> None:
        self.probe_successes = config.probe_successes
        self.keepalive_misses = config.keepalive_misses

    def on_timeout(self, evset, timeout, now):
        """Retire the EV (its whole path: mark_bad shares fate and installs backups of the same
        plane) when a packet sent after the timed-out one got through."""
        overtaken = timeout.delivered_sent_at > timeout.sent_at + LATER_BY_SRTT * timeout.srtt
        measured = timeout.sent_at >= timeout.first_rtt_at
        if overtaken and measured:
            return evset.mark_bad(timeout.ev, now, "timeout")
        return []

    def on_trim(self, evset, ev, last_hop, now):
        """A trim in the fabric: pass the EV over once. At the last hop every path is equally
        congested, so no EV is to blame."""
        if not last_hop:
            evset.skip(ev, "trim", now)

    def on_ecn(self, evset, ev, now):
        """ECN: this path is busier than others; pass it over once."""
        evset.skip(ev, "ecn", now)

    def on_spurious(self, evset, ev, now):
        """The timeout that retired `ev` was wrong: the packet had arrived. Take the EV back
        (unless it was a backup that has been forgotten since)."""
        if not ev.usable and (ev.home or evset.get(ev.value) is ev):
            evset.reinstate(ev, "spurious_timeout", now)

    def on_probe(self, evset, ev, answered, now):
        """Count clean probe replies of a retired EV; enough of them in a row bring it back."""
        evset.note_probe(ev, answered)
        if answered and ev.probe_successes >= self.probe_successes:
            evset.reinstate(ev, "probe", now)

    def on_keepalive_miss(self, evset, ev, misses, now):
        """Keepalives on this path go unanswered while others are answered: retire it."""
        if misses >= self.keepalive_misses:
            evset.mark_bad(ev, now, "probe_timeout")
            return True
        return False
