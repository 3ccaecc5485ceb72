"""Deterministic inputs: every rank can compute any rank's data from the seed alone."""
from __future__ import annotations

import numpy as np
import numpy.random  # noqa: F401  (numpy loads it lazily, at first use: here with the module, not inside a case)

from host_agent.collectives.base import CollectiveError
from host_agent.transport.message import segment_count

DTYPES = ("float32", "float64", "int32", "int64")


def check_dtype(dtype: str) -> np.dtype:
    """The numpy dtype named `dtype`, one of DTYPES."""
    if dtype not in DTYPES:
        raise CollectiveError(f"dtype {dtype!r} is not one of {DTYPES}")
    return np.dtype(dtype)


def rank_array(seed: int, rank: int, elements: int, dtype: str) -> np.ndarray:
    """The all-reduce input of `rank`: `elements` values (normal floats or small integers)."""
    dt = check_dtype(dtype)
    rng = np.random.default_rng([seed, rank])
    if dt.kind == "f":
        return rng.standard_normal(elements, dtype=dt)
    return rng.integers(-1000, 1000, size=elements, dtype=dt)


def block_bytes(seed: int, src: int, dst: int, nbytes: int) -> bytes:
    """The bytes rank `src` sends to rank `dst` (all-to-all block, point-to-point transfer)."""
    return bytes(block_view(seed, src, dst, nbytes))


def block_view(seed: int, src: int, dst: int, nbytes: int) -> memoryview:
    """`block_bytes(seed, src, dst, nbytes)` as a read-only view, not copied: the first `nbytes` of
    the raw 64-bit outputs, little-endian, of numpy's PCG64 seeded with (seed, src, dst). Each pair
    has a stream of its own, so a piece delivered to another flow or another offset is seen, and a
    block costs its own size to make, whatever the number of ranks."""
    if src < 0 or dst < 0:
        raise CollectiveError(f"block of ranks {src} -> {dst}: ranks are >= 0")
    words = np.random.default_rng([seed, src, dst]).bit_generator.random_raw(-(-nbytes // 8))
    return memoryview(words.astype("<u8", copy=False)).cast("B")[:nbytes].toreadonly()


FIRST_FLOW_STRIDE = 4099     # bytes between two flows' starts in their shared stream, at first (a prime)


def flow_payloads(seed: int, flows: list[list[int]], packet_payload: int) -> list[memoryview]:
    """The bytes of many flows made in one process, each flow given as its message sizes, which the
    transport cuts into packets of `packet_payload` bytes from each message's start
    (`host_agent.transport.message`): read-only views of one stream (numpy's PCG64 seeded with
    (seed,), raw 64-bit outputs, little-endian), flow i's from byte i * stride on.

    Not a stream per flow (`block_view`): the flows' bytes overlap, and their memory is the longest
    flow plus a stride per flow, not the sum of the flows (a fat-tree k=16 permutation of 1 MB
    flows: a few MiB, not 1 GiB, and none of the time a fresh gigabyte's first touch costs). What
    the receivers' byte-for-byte check sees is kept: `stride` (odd) is the first of FIRST_FLOW_STRIDE,
    2 * that + 1, ... at which no two packets of any flows start at the same place of the stream, so
    a packet delivered to another flow, or to another packet's place in its own, has bytes other
    than those expected there (a short last packet could match only a prefix of them). At a stride
    past the longest flow no two flows' bytes overlap at all."""
    if packet_payload < 1:
        raise CollectiveError(f"flow payloads: a packet carries at least 1 byte, got {packet_payload}")
    if any(n < 0 for messages in flows for n in messages):
        raise CollectiveError("flow payloads: a message size is negative")
    runs = [_packet_runs(messages, packet_payload) for messages in flows]
    sizes = [sum(messages) for messages in flows]
    longest = max(sizes, default=0)
    stride = FIRST_FLOW_STRIDE
    while stride <= longest and not _apart(runs, stride, packet_payload):
        stride = 2 * stride + 1
    length = (len(flows) - 1) * stride + longest if flows else 0
    words = np.random.default_rng([seed]).bit_generator.random_raw(-(-length // 8))
    stream = memoryview(words.astype("<u8", copy=False)).cast("B").toreadonly()
    return [stream[i * stride:i * stride + n] for i, n in enumerate(sizes)]


def _packet_runs(messages: list[int], packet_payload: int) -> list[tuple[int, int]]:
    """(offset in the flow, packets) of each message: its packets start every `packet_payload` bytes
    from its offset, as many as the transport cuts it into (`segment_count`)."""
    runs, offset = [], 0
    for n in messages:
        runs.append((offset, segment_count(n, packet_payload)))
        offset += n
    return runs


def _apart(runs: list[list[tuple[int, int]]], stride: int, packet_payload: int) -> bool:
    """True when no two packets of `runs` (each flow's) start at the same place of a stream whose
    flow i begins at i * stride. A message's packets are a run of places `packet_payload` apart; two
    runs share a place only when they start at the same distance from a multiple of it and overlap,
    so the runs are compared, not the packets (a message at a time: fast for any packet size)."""
    spans = sorted(((i * stride + offset) % packet_payload, i * stride + offset,
                    i * stride + offset + (count - 1) * packet_payload)
                   for i, flow in enumerate(runs) for offset, count in flow)
    phase, reach = -1, -1                   # the phase of the runs compared, and their furthest place
    for span_phase, first, last in spans:
        if span_phase != phase:
            phase, reach = span_phase, last
        elif first <= reach:
            return False
        elif last > reach:
            reach = last
    return True


def count_mismatches(got: np.ndarray, expected: np.ndarray) -> int:
    """Number of elements whose bits differ (NaN-safe: compares the raw representation)."""
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return max(got.size, expected.size)
    unsigned = np.dtype(f"u{got.dtype.itemsize}")
    return int(np.count_nonzero(got.view(unsigned) != expected.view(unsigned)))


def split_bounds(total: int, parts: int) -> list[int]:
    """Boundaries of `parts` near-equal consecutive pieces of `total` items (len parts + 1)."""
    base, extra = divmod(total, parts)
    bounds = [0]
    for i in range(parts):
        bounds.append(bounds[-1] + base + (1 if i < extra else 0))
    return bounds


def sub_ranges(start: int, stop: int, piece: int) -> list[tuple[int, int]]:
    """[start, stop) cut into consecutive ranges of at most `piece` items."""
    return [(a, min(stop, a + piece)) for a in range(start, stop, piece)]
