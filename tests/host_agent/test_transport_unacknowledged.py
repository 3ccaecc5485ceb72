"""A sender's segments by sequence number (`message.Unacknowledged`) read as the dict they replace."""
from __future__ import annotations

import pytest

from host_agent.transport.fifo import DROP_AT
from host_agent.transport.message import Segment, Unacknowledged, new_message


def test_segments_are_held_from_the_oldest_unacknowledged_and_found_by_sequence_number():
    message = new_message(0, bytes(400 * 16), 16)
    held, reference = Unacknowledged(), {}
    next_seq = base = emptied = 0
    for step in range(3000):
        # two sent for every one acknowledged in order, then, every 1000 steps, all of them acknowledged
        if step % 1000 < 600 and step % 3 != 2:
            seg = Segment(next_seq, message, 16 * next_seq, 16)
            held.append(seg)
            reference[next_seq] = seg
            next_seq += 1
        elif reference:
            assert held.oldest() is reference[base] and held.pop_oldest() is reference.pop(base)
            base += 1
            emptied += not reference
        assert held.base == base and len(held) == len(reference) and list(held) == list(reference.values())
        for seq in (base - 1, base, next_seq - 1, next_seq, -5):
            assert held.get(seq) is reference.get(seq)
        # the segments acknowledged are forgotten: when none is left, or once they are many and half
        assert held._segments.backing_size - len(held) <= max(DROP_AT - 1, len(held))
        if not reference:
            assert held._segments.backing_size == 0
    assert emptied >= 3 and next_seq > 1000
    seg = Segment(next_seq, message, 0, 16)                 # held again after emptying
    held.append(seg)
    assert held[next_seq] is seg and held.base == next_seq and len(held) == 1
    with pytest.raises(KeyError):
        held[next_seq + 1]
    with pytest.raises(ValueError, match=f"segment {next_seq + 2} does not follow"):
        held.append(Segment(next_seq + 2, message, 0, 16))
