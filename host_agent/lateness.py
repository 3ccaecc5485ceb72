"""How late an agent's timer wake-ups come: the time the transport asked to be woken at against the
time the agent's loop got the CPU back, as a log-scale histogram (cheap enough for every sleep)."""
from __future__ import annotations

import math

FIRST_BUCKET_S = 1e-6            # bucket k holds lateness in [2^((k-1)/STEPS), 2^(k/STEPS)) us; bucket 0 below 1 us
STEPS = 4                        # buckets per doubling: a percentile is at most 19 % above the true value
BUCKETS = 24 * STEPS + 1         # up to about 16 s


class WakeupLateness:
    """Lateness of timer wake-ups: count, percentiles (bucket upper edges) and the exact maximum."""

    def __init__(self) -> None:
        self.counts = [0] * BUCKETS
        self.n = 0
        self.max_s = 0.0

    def record(self, late_s: float) -> None:
        """One wake-up `late_s` seconds after the time asked for (early ones count as 0)."""
        late_s = max(0.0, late_s)
        bucket = 0 if late_s < FIRST_BUCKET_S else min(
            BUCKETS - 1, int(math.log2(late_s / FIRST_BUCKET_S) * STEPS) + 1)
        self.counts[bucket] += 1
        self.n += 1
        if late_s > self.max_s:
            self.max_s = late_s

    def percentile(self, fraction: float) -> float:
        """The upper edge (s) of the bucket holding the `fraction` quantile; 0 with no wake-ups."""
        if not self.n:
            return 0.0
        rank = math.ceil(fraction * self.n)
        seen = 0
        for bucket, count in enumerate(self.counts):
            seen += count
            if seen >= rank:
                return min(FIRST_BUCKET_S * 2 ** (bucket / STEPS), self.max_s)
        return self.max_s

    def summary(self) -> dict:
        """JSON-ready: wake-ups measured, p50, p99 and max in milliseconds."""
        return {"n": self.n, "p50_ms": round(self.percentile(0.5) * 1e3, 3),
                "p99_ms": round(self.percentile(0.99) * 1e3, 3), "max_ms": round(self.max_s * 1e3, 3)}
