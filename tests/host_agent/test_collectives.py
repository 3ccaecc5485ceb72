"""Collective state machines over an in-memory message exchange that reorders deliveries.

These check the collectives' own logic (ordering, pipelining, checking); the tests on the
in-process network (test_collectives_netsim.py) run them over the real transport.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

from host_agent.collectives import (AllToAll, BulkTransfer, CollectiveError, RingAllReduce,
                                    make_collective)
from host_agent.collectives.base import TAG


class ShuffledExchange:
    """Delivers queued messages one at a time in random order; acknowledges each on delivery."""

    def __init__(self, world: int, seed: int = 0, tamper=None):
        self.rng = random.Random(seed)
        self.queue: list[tuple[int, int, bytes]] = []
        self.ranks: dict[int, object] = {}
        self.tamper = tamper            # function(src, dst, data) -> list of datas to deliver
        self.now = 0.0

    def messenger(self, rank: int):
        exchange = self

        class _Messenger:
            def send(self, peer: int, data: bytes) -> None:
                exchange.queue.append((rank, peer, bytes(data)))
        return _Messenger()

    def run(self, collectives: list) -> None:
        for c in collectives:
            self.ranks[c.rank] = c
        for c in collectives:
            c.start(self.now)
        while self.queue:
            src, dst, data = self.queue.pop(self.rng.randrange(len(self.queue)))
            self.now += 1e-6
            deliveries = self.tamper(src, dst, data) if self.tamper else [data]
            for d in deliveries:
                self.ranks[dst].on_message(src, d, self.now)
            self.ranks[src].on_send_complete(dst, self.now)


def run_allreduce(world, elements, dtype="float32", chunk_bytes=64, seed=3, tamper=None):
    ex = ShuffledExchange(world, seed=seed, tamper=tamper)
    ranks = [RingAllReduce(r, world, ex.messenger(r), elements=elements, dtype=dtype,
                           chunk_bytes=chunk_bytes, seed=seed) for r in range(world)]
    ex.run(ranks)
    return ranks


@pytest.mark.parametrize("world", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_ring_allreduce_is_bit_exact_under_reordering(world, dtype):
    ranks = run_allreduce(world, elements=1000, dtype=dtype)
    expected = ranks[0].expected()
    for r in ranks:
        res = r.result()
        assert res.ok, res
        assert res.mismatches == 0 and res.bytes == 1000 * np.dtype(dtype).itemsize
        assert r.buffer.tobytes() == expected.tobytes()


def test_allreduce_expected_is_the_sum_of_all_inputs():
    ranks = run_allreduce(4, elements=4096, dtype="int64")
    from host_agent.collectives.data import rank_array
    total = sum(rank_array(3, r, 4096, "int64") for r in range(4))
    assert np.array_equal(ranks[2].buffer, total)
    floats = run_allreduce(4, elements=4096, dtype="float64")
    naive = sum(rank_array(3, r, 4096, "float64") for r in range(4))
    assert np.allclose(floats[1].buffer, naive, rtol=1e-12)


def test_allreduce_with_fewer_elements_than_ranks_and_odd_chunks():
    for elements, chunk in ((3, 4), (7, 12), (1, 1)):
        for r in run_allreduce(5, elements=elements, chunk_bytes=chunk):
            assert r.result().ok


def test_allreduce_sub_chunks_are_pipelined_message_counts():
    ranks = run_allreduce(4, elements=1024, dtype="float32", chunk_bytes=256)
    # each chunk: 256 elements = 1024 bytes = 4 sub-chunks; 2(N-1) = 6 steps.
    assert all(r.messages_sent == 6 * 4 and r.messages_received == 6 * 4 for r in ranks)


def test_corrupted_payload_is_counted_as_mismatch():
    def corrupt(src, dst, data):
        if src == 1 and TAG.unpack_from(data)[2] == 0:     # step 0 from rank 1
            data = bytearray(data)
            data[-1] ^= 0x40
        return [bytes(data)]
    ranks = run_allreduce(4, elements=256, dtype="float32", chunk_bytes=1024, tamper=corrupt)
    results = [r.result() for r in ranks]
    assert not all(res.ok for res in results)
    assert sum(res.mismatches for res in results) > 0


def test_duplicated_and_lost_messages_are_reported():
    dup = run_allreduce(3, elements=90, tamper=lambda s, d, data: [data, data] if s == 0 else [data])
    assert not dup[1].result().ok and "twice" in dup[1].result().detail
    dropped = []

    def drop_one(src, dst, data):
        if not dropped:
            dropped.append(data)
            return []
        return [data]
    lost = run_allreduce(3, elements=90, tamper=drop_one)
    assert not all(r.result().ok for r in lost)
    assert any("not finished" in r.result().detail for r in lost)


@pytest.mark.parametrize("world", [2, 4])
def test_alltoall_is_bit_exact(world):
    ex = ShuffledExchange(world, seed=9)
    ranks = [AllToAll(r, world, ex.messenger(r), block_bytes=1000, chunk_bytes=300, seed=9)
             for r in range(world)]
    ex.run(ranks)
    for r in ranks:
        res = r.result()
        assert res.ok and res.bytes == 1000 * (world - 1), res
    assert ranks[0].received[1] != ranks[0].received[world - 1] or world == 2


def test_alltoall_detects_a_swapped_block():
    def swap(src, dst, data):
        return [data[:-1] + bytes([data[-1] ^ 1])] if (src, dst) == (2, 0) else [data]
    ex = ShuffledExchange(4, tamper=swap)
    ranks = [AllToAll(r, 4, ex.messenger(r), block_bytes=100, chunk_bytes=100) for r in range(4)]
    ex.run(ranks)
    assert ranks[0].result().mismatches == 1 and not ranks[0].result().ok
    assert ranks[1].result().ok


def test_transfer_between_two_of_three_ranks():
    ex = ShuffledExchange(3)
    ranks = [make_collective("transfer", r, 3, ex.messenger(r), src=2, dst=0, nbytes=5000,
                             chunk_bytes=1024, seed=4) for r in range(3)]
    ex.run(ranks)
    assert [r.result().ok for r in ranks] == [True, True, True]
    assert ranks[0].messages_received == 5 and ranks[1].messages_sent == 0
    assert isinstance(ranks[0], BulkTransfer)


def test_bad_parameters_name_the_problem():
    ex = ShuffledExchange(2)
    with pytest.raises(CollectiveError, match="rank 4"):
        RingAllReduce(4, 2, ex.messenger(4), elements=10)
    with pytest.raises(CollectiveError, match="dtype"):
        RingAllReduce(0, 2, ex.messenger(0), elements=10, dtype="float16")
    with pytest.raises(CollectiveError, match="unknown collective"):
        make_collective("broadcast", 0, 2, ex.messenger(0))
    with pytest.raises(CollectiveError, match="src and dst"):
        BulkTransfer(0, 2, ex.messenger(0), src=1, dst=1, nbytes=10)


def test_a_block_is_a_view_of_its_pairs_own_stream():
    from host_agent.collectives.data import block_bytes, block_view
    views = [block_view(3, 0, 1, 5000), block_view(3, 1, 0, 5000), block_view(3, 2, 7, 100)]
    assert [bytes(v) for v in views] == [block_bytes(3, 0, 1, 5000), block_bytes(3, 1, 0, 5000),
                                         block_bytes(3, 2, 7, 100)]
    assert views[0].readonly and len(views[2]) == 100
    assert bytes(views[0]) != bytes(views[1]) and block_bytes(4, 0, 1, 5000) != bytes(views[0])
    assert block_bytes(3, 0, 1, 100) == bytes(views[0][:100])             # a shorter block is a prefix
    # no pair's bytes are another pair's shifted (a packet one place over in another flow is seen)
    one, other = block_bytes(3, 0, 1, 4096), block_bytes(3, 1, 0, 4096)
    assert all(one[shift:shift + 64] not in other for shift in range(0, 4096 - 64, 8))
    with pytest.raises(CollectiveError, match="ranks are >= 0"):
        block_view(3, -1, 0, 10)


def test_a_blocks_bytes_stay_the_same():
    """The bytes every backend and check sees, pinned: a change of how they are drawn that changes
    them fails here (records would no longer compare with earlier ones)."""
    import hashlib
    from host_agent.collectives.data import block_bytes
    assert hashlib.sha256(block_bytes(3, 0, 1, 5001)).hexdigest() == \
        "040a302e2db183bb52fed35fadf8baab44fe633fa59464d4050f14f48792be27"
    assert hashlib.sha256(block_bytes(1, 127, 5, 1 << 20)).hexdigest() == \
        "2baf2085da3db8f85c4e949dfb5143d73a27d2f01fd42d9ae38656a62bf9fc98"


def _packets(payloads, flows, packet_payload):
    """(flow, offset in flow, bytes) of every packet the transport cuts the flows' messages into."""
    out = []
    for i, (view, messages) in enumerate(zip(payloads, flows)):
        offset = 0
        for n in messages:
            for a in range(offset, offset + max(n, 1), packet_payload):
                out.append((i, a, bytes(view[a:min(a + packet_payload, offset + n)])))
            offset += n
    return out


def test_flow_payloads_are_views_of_one_stream_with_no_packet_in_anothers_place():
    from host_agent.collectives.data import FIRST_FLOW_STRIDE, flow_payloads
    flows = [[3000, 3000, 1000]] * 6 + [[7000], [0], [5]]
    views = flow_payloads(7, flows, 1024)
    assert [len(v) for v in views] == [sum(m) for m in flows] and all(v.readonly for v in views)
    assert [bytes(v) for v in views] == [bytes(v) for v in flow_payloads(7, flows, 1024)]   # the seed's alone
    assert bytes(views[0]) != bytes(flow_payloads(8, flows, 1024)[0])
    # one stream: flow 1 starts FIRST_FLOW_STRIDE bytes into flow 0 (they overlap)
    assert bytes(views[0][FIRST_FLOW_STRIDE:FIRST_FLOW_STRIDE + 100]) == bytes(views[1][:100])
    # every packet's bytes (at least 64 of them) are nobody else's: a packet delivered to another flow,
    # or to another place of its own, is seen
    packets = [p for p in _packets(views, flows, 1024) if len(p[2]) >= 64]
    assert len({p[2][:64] for p in packets}) == len(packets)


def test_flow_payloads_move_the_stride_when_packets_would_start_at_the_same_place():
    from host_agent.collectives.data import FIRST_FLOW_STRIDE, flow_payloads
    # packets of FIRST_FLOW_STRIDE bytes: at that stride flow 1's first packet is flow 0's second
    flows = [[4 * FIRST_FLOW_STRIDE]] * 3
    views = flow_payloads(1, flows, FIRST_FLOW_STRIDE)
    packets = _packets(views, flows, FIRST_FLOW_STRIDE)
    assert len({p[2] for p in packets}) == len(packets)
    assert bytes(views[1][:64]) != bytes(views[0][FIRST_FLOW_STRIDE:FIRST_FLOW_STRIDE + 64])
    # a packet at every byte: every stride within the longest flow puts a flow's start on one of
    # another's packets, so the flows end up apart, not overlapping at all
    dense = flow_payloads(2, [[10_000]] * 2, 1)
    assert bytes(dense[1][:64]) not in bytes(dense[0])


def test_flow_payloads_refuse_what_has_no_packets():
    from host_agent.collectives.data import flow_payloads
    with pytest.raises(CollectiveError, match="at least 1 byte"):
        flow_payloads(1, [[10]], 0)
    with pytest.raises(CollectiveError, match="negative"):
        flow_payloads(1, [[10, -1]], 4)
    assert flow_payloads(1, [], 1024) == []


def test_flow_payloads_judge_strides_as_the_packets_themselves_would():
    """`_apart` compares each message's run of packets, not the packets: against every packet's place
    listed and compared, on random flows, message sizes, packet sizes and strides."""
    from host_agent.collectives.data import _apart, _packet_runs
    rng = random.Random(5)
    verdicts = set()
    for _ in range(400):
        packet = rng.choice([1, 3, 7, 64, 100, 1000, 4096])
        flows = [[rng.choice([0, 1, packet - 1, packet, 2 * packet + 1, rng.randrange(1, 5000)])
                  for _ in range(rng.randrange(1, 4))] for _ in range(rng.randrange(1, 6))]
        stride = rng.choice([1, 2, 5, packet, packet + 1, 4099, rng.randrange(1, 9000)])
        places = [i * stride + offset + k * packet for i, messages in enumerate(flows)
                  for offset, count in _packet_runs(messages, packet) for k in range(count)]
        apart = len(set(places)) == len(places)
        assert _apart([_packet_runs(m, packet) for m in flows], stride, packet) == apart, (flows, packet, stride)
        verdicts.add(apart)
    assert verdicts == {True, False}                     # both answers were put to the test


def test_flow_payloads_with_a_packet_at_every_byte_end_up_apart():
    """64 flows of 100 KB in 25,000-byte messages cut into 1-byte packets: no stride within a flow
    fits, and the flows end up not overlapping (the runs compared are 256, not 6.4 million packets)."""
    from host_agent.collectives.data import flow_payloads
    views = flow_payloads(3, [[25_000] * 4] * 64, 1)
    assert len(views) == 64 and all(len(v) == 100_000 for v in views)
    assert bytes(views[1][:64]) not in bytes(views[0])
