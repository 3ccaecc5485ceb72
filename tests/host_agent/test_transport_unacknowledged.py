"""A sender's segments by sequence number (`message.Unacknowledged`) read as the dict they replace."""
from __future__ import annotations

import pytest

from host_agent.transport.message import Segment, Unacknowledged, new_message


def test_segments_are_held_from_the_oldest_unacknowledged_and_found_by_sequence_number():
    message = new_message(0, bytes(400 * 16), 16)
    held, reference = Unacknowledged(), {}
    next_seq = base = 0
    for step in range(1000):
        if step % 3 != 2:                                # two sent for every one acknowledged in order
            seg = Segment(next_seq, message, 16 * next_seq, 16)
            held.append(seg)
            reference[next_seq] = seg
            next_seq += 1
        elif reference:
            assert held.oldest() is reference[base] and held.pop_oldest() is reference.pop(base)
            base += 1
        assert len(held) == len(reference) and list(held) == list(reference.values())
        for seq in (base - 1, base, next_seq - 1, next_seq, -5):
            assert held.get(seq) is reference.get(seq)
    assert held[base] is reference[base] and len(held) > 100
    with pytest.raises(KeyError):
        held[next_seq]
    with pytest.raises(ValueError, match=f"segment {next_seq + 1} does not follow"):
        held.append(Segment(next_seq + 1, message, 0, 16))
