"""Ring all-reduce (sum): reduce-scatter then all-gather, pipelined in sub-chunks.

The array is cut into `world` chunks and each chunk into sub-chunks of at most `chunk_bytes`.
Ring step g = 0 .. 2(world-1)-1: rank r receives from its left neighbour chunk (r - g - 1) mod
world; during reduce-scatter (g < world-1) it adds its own values, during all-gather it copies.
The chunk received at step g is exactly the one sent at step g + 1, so each sub-chunk is
forwarded to the right neighbour as soon as it is taken in: the ring runs as a pipeline with
no barrier between steps. Rank r starts by sending its own chunk r.

Chunk c is summed in ring order starting at rank c: ((x_c + x_c+1) + x_c+2) + ...; the expected
result is computed locally in that same order, so a correct run matches it bit for bit.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from host_agent.collectives.base import Collective, CollectiveError, Messenger
from host_agent.collectives.data import (check_dtype, count_mismatches, rank_array, split_bounds,
                                         sub_ranges)


class RingAllReduce(Collective):
    """Sum of every rank's array, left on every rank."""

    kind = "allreduce"

    def __init__(self, rank: int, world: int, messenger: Messenger, elements: int,
                 dtype: str = "float32", chunk_bytes: int = 65536, seed: int = 0) -> None:
        super().__init__(rank, world, messenger)
        if elements < 1:
            raise CollectiveError(f"allreduce: elements {elements} must be at least 1")
        if chunk_bytes < 1:
            raise CollectiveError(f"allreduce: chunk_bytes {chunk_bytes} must be at least 1")
        self.dtype = check_dtype(dtype)
        self.elements = elements
        self.seed = seed
        self.left = (rank - 1) % world
        self.right = (rank + 1) % world
        self.steps = 2 * (world - 1)
        bounds = split_bounds(elements, world)
        piece = max(1, chunk_bytes // self.dtype.itemsize)
        self.subs = [sub_ranges(bounds[c], bounds[c + 1], piece) for c in range(world)]
        self.buffer = rank_array(seed, rank, elements, dtype)
        self._seen: set[tuple[int, int]] = set()
        self._expected_messages = sum(len(self.subs[self._chunk_at(g)]) for g in range(self.steps))

    def peers(self) -> list[int]:
        return sorted({self.left, self.right} - {self.rank})

    def _chunk_at(self, step: int) -> int:
        """Chunk this rank receives at ring step `step`."""
        return (self.rank - step - 1) % self.world

    def _begin(self) -> None:
        if self.steps == 0:
            return
        for index, (a, b) in enumerate(self.subs[self.rank]):
            self._send(self.right, 0, index, self.buffer[a:b].tobytes())

    def _deliver(self, peer: int, step: int, index: int, body: memoryview) -> None:
        if peer != self.left:
            self._error(f"allreduce message from rank {peer}, expected only the left neighbour {self.left}")
            return
        if step >= self.steps:
            self._error(f"allreduce step {step} from rank {peer} is beyond the last step {self.steps - 1}")
            return
        subs = self.subs[self._chunk_at(step)]
        if index >= len(subs):
            self._error(f"allreduce step {step}: sub-chunk {index} does not exist")
            return
        if (step, index) in self._seen:
            self._error(f"allreduce step {step} sub-chunk {index} arrived twice")
            return
        a, b = subs[index]
        if len(body) != (b - a) * self.dtype.itemsize:
            self._error(f"allreduce step {step} sub-chunk {index}: {len(body)} bytes, expected "
                        f"{(b - a) * self.dtype.itemsize}")
            return
        self._seen.add((step, index))
        incoming = np.frombuffer(body, dtype=self.dtype)
        if step < self.world - 1:
            with np.errstate(all="ignore"):         # corrupted data is reported, not warned about
                self.buffer[a:b] = incoming + self.buffer[a:b]
        else:
            self.buffer[a:b] = incoming
        if step + 1 < self.steps:
            self._send(self.right, step + 1, index, self.buffer[a:b].tobytes())

    def _all_received(self) -> bool:
        return len(self._seen) == self._expected_messages

    def expected(self) -> np.ndarray:
        """The sum, computed locally in the ring's order of additions."""
        return ring_sum(self.seed, self.world, self.elements, self.dtype.name).copy()

    def _check(self) -> tuple[int, int]:
        return count_mismatches(self.buffer, self.expected()), self.buffer.nbytes


@lru_cache(maxsize=4)
def ring_sum(seed: int, world: int, elements: int, dtype: str) -> np.ndarray:
    """The sum of every rank's input, chunk c added in ring order from rank c (what a correct ring
    all-reduce leaves on every rank). Kept for the last few shapes: in one process (netsim) every
    rank checks against the same sum."""
    inputs = [rank_array(seed, r, elements, dtype) for r in range(world)]
    bounds = split_bounds(elements, world)
    out = np.empty(elements, dtype=np.dtype(dtype))
    for c in range(world):
        a, b = bounds[c], bounds[c + 1]
        acc = inputs[c][a:b].copy()
        for j in range(1, world):
            acc = acc + inputs[(c + j) % world][a:b]
        out[a:b] = acc
    out.setflags(write=False)
    return out
