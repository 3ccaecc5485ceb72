"""Lab 4: detecting a dead path.

Your class plugs into the transport as its path monitor (host_agent.transport.policies.PathMonitor):
the checker builds every endpoint with `Policies(path_monitor=DeadPathMonitor)`. The connection
calls the methods below when something happens to a packet sent on an EV; you decide what it does
to the EV set (host_agent/transport/evset.py):

- `evset.skip(ev, cause, now)`: pass the EV over once at its next turn (state SKIP);
- `evset.mark_bad(ev, now, cause)`: retire the EV (ASSUMED_BAD) and, fates shared, every EV on its
  path; each retired slot gets a backup EV of the same plane on a path not known bad; returns the
  EVs retired. Background probes then go out on the retired home EVs;
- `evset.note_probe(ev, answered)`: count a clean probe reply (`ev.probe_successes`) or reset it;
- `evset.reinstate(ev, cause, now)`: make the EV (and its path's home EVs) GOOD; backups step down.

`ev.usable` is False for a retired EV; `ev.home` is True for the EVs the connection started with.
Read the lab's README.md before you start. Do not edit anything under host_agent/.
"""
from __future__ import annotations

from host_agent.transport.config import TransportConfig


class DeadPathMonitor:
    """A PathMonitor: what timeouts, trims, ECN echoes and probe outcomes do to EVs."""

    def __init__(self, config: TransportConfig) -> None:
        self.probe_successes = config.probe_successes      # clean replies in a row that reinstate
        self.keepalive_misses = config.keepalive_misses    # unanswered keepalives that retire

    def on_timeout(self, evset, timeout, now):
        """A packet's timer fired (it is resent whatever you do). `timeout` has `.ev` (where it went),
        `.sent_at`, `.delivered_sent_at` (send time of the latest packet known to have arrived, on
        any EV), `.first_rtt_at` (when the first RTT sample came) and `.srtt`.
        Return the list of EVs you retired ([] to blame no path)."""
        # TODO 1: decide whether this timeout is evidence against the path, and if so retire it.
        raise NotImplementedError("TODO: DeadPathMonitor.on_timeout in monitor.py")

    def on_trim(self, evset, ev, last_hop, now):
        """A packet sent on `ev` was trimmed (at the receiver's last hop when `last_hop`)."""
        # TODO 2: what does a trim say about the path?
        raise NotImplementedError("TODO: DeadPathMonitor.on_trim in monitor.py")

    def on_ecn(self, evset, ev, now):
        """A SACK echoed an ECN mark of a packet sent on `ev`."""
        # TODO 3: and an ECN mark?
        raise NotImplementedError("TODO: DeadPathMonitor.on_ecn in monitor.py")

    def on_spurious(self, evset, ev, now):
        """A timeout that retired `ev` was spurious: the packet had arrived after all."""
        # TODO 4: undo what the timeout did (careful: a retired backup EV is forgotten by the set).
        raise NotImplementedError("TODO: DeadPathMonitor.on_spurious in monitor.py")

    def on_probe(self, evset, ev, answered, now):
        """A probe of retired EV `ev` was answered (`answered`), or timed out."""
        # TODO 5: bring the EV back after self.probe_successes clean replies in a row.
        raise NotImplementedError("TODO: DeadPathMonitor.on_probe in monitor.py")

    def on_keepalive_miss(self, evset, ev, misses, now):
        """`misses` keepalive probes in a row went unanswered on `ev`'s path while later ones were
        answered. Return True when you retired the path."""
        # TODO 6: retire the path after self.keepalive_misses misses.
        raise NotImplementedError("TODO: DeadPathMonitor.on_keepalive_miss in monitor.py")
