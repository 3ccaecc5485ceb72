"""Deterministic inputs: every rank can compute any rank's data from the seed alone."""
from __future__ import annotations

import numpy as np

from host_agent.collectives.base import CollectiveError

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
