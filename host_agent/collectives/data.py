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
    """The bytes rank `src` sends to rank `dst` (all-to-all block, point-to-point transfer): the
    `nbytes` of the seed's random stream from the pair's offset (`block_offset`)."""
    return bytes(blocks(seed, [(src, dst, nbytes)])[0])


def block_offset(src: int, dst: int) -> int:
    """Where the bytes of the pair (`src`, `dst`) start in the seed's random stream: 8 bytes times
    the pair's number in a one-to-one numbering of pairs of ranks (Szudzik's), so that no two
    pairs start at the same byte and ranks below n use the first 8 n^2 bytes of offsets."""
    if src < 0 or dst < 0:
        raise CollectiveError(f"block of ranks {src} -> {dst}: ranks are >= 0")
    return 8 * (src * src + src + dst if src >= dst else dst * dst + src)


def blocks(seed: int, wanted: list[tuple[int, int, int]]) -> list[memoryview]:
    """`block_bytes(seed, src, dst, nbytes)` of each (src, dst, nbytes) of `wanted`, as read-only
    views of one buffer (the seed's random stream, made once: no copy per block).

    The stream is the raw 64-bit outputs of numpy's PCG64 seeded with `seed`, little-endian; each
    pair reads it from its own offset, so every block of a run holds other bytes than any other
    block at the same place (a message delivered to the wrong flow or offset is seen)."""
    if not wanted:
        return []
    spans = [(block_offset(src, dst), nbytes) for src, dst, nbytes in wanted]
    size = max(start + nbytes for start, nbytes in spans)
    words = np.random.default_rng(seed).bit_generator.random_raw(-(-size // 8)).astype("<u8", copy=False)
    stream = memoryview(words).cast("B").toreadonly()
    return [stream[start:start + nbytes] for start, nbytes in spans]


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
