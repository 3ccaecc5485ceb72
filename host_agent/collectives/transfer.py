"""Point-to-point transfer: rank `src` sends `nbytes` to rank `dst` in messages of `chunk_bytes`.

Every rank of the job may run it; ranks other than src and dst finish at once. The receiver
checks the bytes against `data.block_bytes(seed, src, dst, nbytes)`.
"""
from __future__ import annotations

import numpy as np

from host_agent.collectives.base import Collective, CollectiveError, Messenger
from host_agent.collectives.data import block_bytes, sub_ranges


class BulkTransfer(Collective):
    """One-way bulk transfer between two ranks."""

    kind = "transfer"

    def __init__(self, rank: int, world: int, messenger: Messenger, src: int, dst: int, nbytes: int,
                 chunk_bytes: int = 65536, seed: int = 0) -> None:
        super().__init__(rank, world, messenger)
        for name, value in (("src", src), ("dst", dst)):
            if not 0 <= value < world:
                raise CollectiveError(f"transfer: {name} rank {value} is outside 0..{world - 1}")
        if src == dst:
            raise CollectiveError(f"transfer: src and dst are both rank {src}")
        if nbytes < 1 or chunk_bytes < 1:
            raise CollectiveError(f"transfer: bytes ({nbytes}) and chunk_bytes ({chunk_bytes}) must be positive")
        self.src, self.dst, self.nbytes, self.seed = src, dst, nbytes, seed
        self.pieces = sub_ranges(0, nbytes, chunk_bytes)
        self.buffer = bytearray(nbytes) if rank == dst else None
        self.data = block_bytes(seed, src, dst, nbytes) if rank == src else None     # the input
        self._seen: set[int] = set()

    def peers(self) -> list[int]:
        if self.rank == self.src:
            return [self.dst]
        if self.rank == self.dst:
            return [self.src]
        return []

    def _begin(self) -> None:
        if self.rank != self.src:
            return
        for index, (a, b) in enumerate(self.pieces):
            self._send(self.dst, 0, index, self.data[a:b])

    def _deliver(self, peer: int, step: int, index: int, body: memoryview) -> None:
        if self.rank != self.dst or peer != self.src:
            self._error(f"transfer message from rank {peer} to rank {self.rank}, expected {self.src} -> {self.dst}")
            return
        if step != 0 or index >= len(self.pieces) or index in self._seen:
            self._error(f"transfer piece {index} (step {step}) out of range or duplicated")
            return
        a, b = self.pieces[index]
        if len(body) != b - a:
            self._error(f"transfer piece {index}: {len(body)} bytes, expected {b - a}")
            return
        self._seen.add(index)
        self.buffer[a:b] = body

    def _all_received(self) -> bool:
        return self.rank != self.dst or len(self._seen) == len(self.pieces)

    def _check(self) -> tuple[int, int]:
        if self.rank != self.dst:
            return 0, self.nbytes if self.rank == self.src else 0
        want = np.frombuffer(block_bytes(self.seed, self.src, self.dst, self.nbytes), dtype=np.uint8)
        return int(np.count_nonzero(np.frombuffer(self.buffer, dtype=np.uint8) != want)), self.nbytes
