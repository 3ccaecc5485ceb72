"""All-to-all: every rank sends a distinct block of bytes to every other rank.

Block src -> dst is `data.block_bytes(seed, src, dst, block_bytes)`, so the receiver knows what
it must get. Blocks go out in messages of at most `chunk_bytes`, interleaved across destinations
(rank r sends to r+1, r+2, ... in turn) so that no destination is hit by everyone at once.
"""
from __future__ import annotations

import numpy as np

from host_agent.collectives.base import Collective, CollectiveError, Messenger
from host_agent.collectives.data import block_bytes as block_bytes_of, sub_ranges


class AllToAll(Collective):
    """Personalised exchange of `block_bytes` bytes between every pair of ranks."""

    kind = "alltoall"

    def __init__(self, rank: int, world: int, messenger: Messenger, block_bytes: int,
                 chunk_bytes: int = 65536, seed: int = 0) -> None:
        super().__init__(rank, world, messenger)
        if block_bytes < 1:
            raise CollectiveError(f"alltoall: block_bytes {block_bytes} must be at least 1")
        if chunk_bytes < 1:
            raise CollectiveError(f"alltoall: chunk_bytes {chunk_bytes} must be at least 1")
        self.block_bytes = block_bytes
        self.seed = seed
        self.pieces = sub_ranges(0, block_bytes, chunk_bytes)
        self.received = {p: bytearray(block_bytes) for p in self.peers()}
        self._seen: set[tuple[int, int]] = set()
        self._order = [(rank + k) % world for k in range(1, world)]
        self.blocks = {dst: block_bytes_of(seed, rank, dst, block_bytes) for dst in self._order}   # the input

    def peers(self) -> list[int]:
        return [p for p in range(self.world) if p != self.rank]

    def _begin(self) -> None:
        for index, (a, b) in enumerate(self.pieces):
            for dst in self._order:
                self._send(dst, 0, index, self.blocks[dst][a:b])

    def _deliver(self, peer: int, step: int, index: int, body: memoryview) -> None:
        if peer not in self.received:
            self._error(f"alltoall message from rank {peer}, which is not a peer")
            return
        if step != 0 or index >= len(self.pieces):
            self._error(f"alltoall message from rank {peer} with step {step} index {index} out of range")
            return
        if (peer, index) in self._seen:
            self._error(f"alltoall piece {index} from rank {peer} arrived twice")
            return
        a, b = self.pieces[index]
        if len(body) != b - a:
            self._error(f"alltoall piece {index} from rank {peer}: {len(body)} bytes, expected {b - a}")
            return
        self._seen.add((peer, index))
        self.received[peer][a:b] = body

    def _all_received(self) -> bool:
        return len(self._seen) == len(self.pieces) * (self.world - 1)

    def _check(self) -> tuple[int, int]:
        mismatches = 0
        for src, got in self.received.items():
            want = np.frombuffer(block_bytes_of(self.seed, src, self.rank, self.block_bytes), dtype=np.uint8)
            mismatches += int(np.count_nonzero(np.frombuffer(got, dtype=np.uint8) != want))
        return mismatches, self.block_bytes * (self.world - 1)
