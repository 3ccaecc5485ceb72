"""MRC's QP timer model: the timeout exponent t and the linear-then-exponential retry budget;
and `Deadlines`, the timers of a sender's transmissions, earliest first.

The OCP MRC 1.0 API sets a queue pair's ACK timeout as 1.024 us x 2^t (t <= 24, about 17 s),
`retry.linear_cnt` (<= 7) retries at that timeout, then `retry.exp_cnt` (<= 25) retries whose
timeout doubles each time; `exp_cnt` = 25 means without end. Past the last retry the
connection fails. Here the timeout of a packet's first transmission is the transport's adaptive
RTO, which the QP timeout floors (docs/transport.md, "Timers").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mypy_extensions import i64

from host_agent.transport.fifo import FifoList
from host_agent.transport.message import Segment

QP_TIMEOUT_UNIT = 1.024e-6        # seconds: the QP timeout is this x 2^t
MAX_QP_TIMEOUT = 24               # largest t (1.024 us x 2^24 = 17.18 s)
MAX_LINEAR_RETRIES = 7
MAX_EXP_RETRIES = 25
EXP_RETRIES_WITHOUT_END = 25      # retry.exp_cnt = 25: doubling retries never run out


def qp_timeout_seconds(t: Any) -> float:
    """The QP timeout of exponent `t`: 1.024 us x 2^t, in seconds."""
    if not isinstance(t, int) or isinstance(t, bool) or not 0 <= t <= MAX_QP_TIMEOUT:
        raise ValueError(f"qp_timeout: {t!r} is outside 0..{MAX_QP_TIMEOUT}")
    return QP_TIMEOUT_UNIT * (1 << t)


@dataclass(frozen=True)
class RetryBudget:
    """How long each transmission of a packet waits, and when the retries run out.

    `timeouts` counts the times the packet has timed out already (0 for its first transmission).
    Transmissions 0..linear_cnt wait the base timeout; retry linear_cnt + k waits base x 2^k
    (at most `ceiling`); after retry linear_cnt + exp_cnt has timed out the budget is spent,
    unless exp_cnt is EXP_RETRIES_WITHOUT_END."""

    linear_cnt: int
    exp_cnt: int
    ceiling: float = float("inf")

    def __post_init__(self) -> None:
        if not 0 <= self.linear_cnt <= MAX_LINEAR_RETRIES:
            raise ValueError(f"retry_linear_cnt: {self.linear_cnt} is outside 0..{MAX_LINEAR_RETRIES}")
        if not 0 <= self.exp_cnt <= MAX_EXP_RETRIES:
            raise ValueError(f"retry_exp_cnt: {self.exp_cnt} is outside 0..{MAX_EXP_RETRIES}")

    @property
    def without_end(self) -> bool:
        """True when the retries never run out (exp_cnt = 25)."""
        return self.exp_cnt == EXP_RETRIES_WITHOUT_END

    @property
    def retries(self) -> int | None:
        """Retransmissions after timeouts a packet may have, or None (without end)."""
        return None if self.without_end else self.linear_cnt + self.exp_cnt

    def exhausted(self, timeouts: int) -> bool:
        """True when a packet that has timed out `timeouts` times may not be sent again."""
        return not self.without_end and timeouts > self.linear_cnt + self.exp_cnt

    def timeout(self, base: float, timeouts: int) -> float:
        """The wait of the transmission that follows `timeouts` timeouts, for base timeout `base`."""
        doublings = timeouts - self.linear_cnt
        if doublings <= 0:
            return base
        return min(self.ceiling, base * (1 << min(doublings, 62)))

    def sequence(self, base: float, limit: int = 64) -> list[float]:
        """The waits of a packet's transmissions that all time out (first transmission first), up
        to the last retry or `limit` entries."""
        count = limit if self.without_end else min(limit, self.linear_cnt + self.exp_cnt + 1)
        return [self.timeout(base, k) for k in range(count)]


class Deadline:
    """One transmission's timer: transmission number `tx` of `segment` times out at `at`."""

    __slots__ = ("at", "segment", "tx")

    def __init__(self, at: float, segment: Segment, tx: int) -> None:
        self.at = at
        self.segment = segment
        self.tx = tx

    def before(self, other: Deadline) -> bool:
        """True when this one comes first: earlier, or as early and of a lower (packet's seq, tx)."""
        if self.at != other.at:
            return self.at < other.at
        seq, other_seq = self.segment.seq, other.segment.seq
        if seq != other_seq:
            return seq < other_seq
        return self.tx < other.tx


class Deadlines:
    """The timers of a sender's transmissions, earliest first (ties by packet, then transmission).

    Timers mostly come in order (each an RTO after its transmission, the RTO moving slowly): one
    no earlier than the latest timer of the run waits in that first-in first-out run, any other in
    a binary heap; the earliest timer is the earlier of the run's oldest and the heap's top. Both
    are compared natively by the compiled build (a heap of tuples is compared through Python's
    generic comparison)."""

    __slots__ = ("_heap", "_run")

    def __init__(self) -> None:
        self._heap: list[Deadline] = []
        self._run = FifoList()                       # of Deadline, in order, the oldest first

    def __len__(self) -> int:
        return len(self._heap) + len(self._run)

    def push(self, at: float, segment: Segment) -> None:
        """Add the timer of the latest transmission of `segment`, due at `at`."""
        entry = Deadline(at, segment, segment.transmissions)
        run = self._run
        last: Deadline | None = run.last()
        if last is None or not entry.before(last):    # the run is empty, or it is in order
            run.append(entry)
            return
        heap = self._heap
        heap.append(entry)
        i: i64 = len(heap) - 1
        while i > 0:
            parent = (i - 1) >> 1
            above = heap[parent]
            if not entry.before(above):
                break
            heap[i] = above
            i = parent
        heap[i] = entry

    def _run_first(self) -> bool:
        """True when the earliest timer is the run's oldest (there must be one timer)."""
        oldest: Deadline | None = self._run.first()
        if oldest is None:
            return False
        heap = self._heap
        return not heap or not heap[0].before(oldest)

    def first(self) -> Deadline | None:
        """The earliest timer, or None when there is none."""
        oldest: Deadline | None = self._run.first()
        heap = self._heap
        if oldest is not None:
            if heap:
                top = heap[0]
                if top.before(oldest):
                    return top
            return oldest
        return heap[0] if heap else None

    def pop(self) -> Deadline:
        """Take the earliest timer off (there must be one)."""
        if self._run_first():
            first: Deadline = self._run.pop_first()
            return first
        heap = self._heap
        first = heap[0]
        last = heap.pop()
        n: i64 = len(heap)
        if n:
            i: i64 = 0
            child: i64 = 1
            while child < n:                    # the hole down along the earlier child ...
                low = heap[child]
                right = child + 1
                if right < n and heap[right].before(low):
                    low = heap[right]
                    child = right
                heap[i] = low
                i = child
                child = 2 * i + 1
            while i > 0:                        # ... and the last entry up from where it ends
                parent = (i - 1) >> 1
                above = heap[parent]
                if above.before(last):
                    break
                heap[i] = above
                i = parent
            heap[i] = last
        return first

    def clear(self) -> None:
        """Drop every timer."""
        self._heap.clear()
        self._run.clear()
