"""The transport's first-in first-out list (`fifo.FifoList`) read as the deque it stands for, and the
memory it keeps bounded."""
from __future__ import annotations

import random
from collections import deque

import pytest

from host_agent.transport.fifo import DROP_AT, FifoList


def assert_same(fifo: FifoList, reference: deque) -> None:
    assert len(fifo) == len(reference) and bool(fifo) == bool(reference) and list(fifo) == list(reference)
    assert fifo.first() == (reference[0] if reference else None)
    assert fifo.last() == (reference[-1] if reference else None)
    assert [fifo.get(i) for i in range(len(reference))] == list(reference)
    for i in (-1, len(reference)):
        with pytest.raises(IndexError):
            fifo.get(i)


def test_an_empty_fifo_has_no_entries_to_read_or_take():
    fifo = FifoList()
    assert_same(fifo, deque())
    assert fifo.first() is None and fifo.last() is None
    with pytest.raises(IndexError):
        fifo.pop_first()


def test_a_fifo_takes_entries_oldest_first_as_a_deque_does_and_drops_what_it_took():
    rng = random.Random(3)
    fifo = FifoList()
    reference: deque[int] = deque()
    emptied = 0
    for step in range(5000):
        if rng.random() < (0.55 if step % 1000 < 700 else 0.2) or not reference:   # grow, then drain
            fifo.append(step)
            reference.append(step)
        else:
            assert fifo.pop_first() == reference.popleft()
            emptied += not reference
        if step % 50 == 0:
            assert_same(fifo, reference)
        assert len(fifo) == len(reference)
        # taken entries are kept only while fewer than DROP_AT or fewer than those held
        assert fifo.backing_size - len(reference) <= max(DROP_AT - 1, len(reference))
        if not reference:
            assert fifo.backing_size == 0              # emptied when its last entry is taken
    assert emptied > 10
    assert_same(fifo, reference)


def test_a_fifo_drops_a_long_taken_prefix_while_it_still_holds_entries():
    fifo = FifoList()
    for i in range(300):
        fifo.append(i)
    for i in range(DROP_AT - 1):
        assert fifo.pop_first() == i
    assert fifo.backing_size == 300                     # too few taken to drop yet
    for i in range(DROP_AT - 1, 150):
        assert fifo.pop_first() == i
    assert fifo.backing_size == 150 and fifo.first() == 150 and fifo.get(149) == 299


def test_a_fifo_cleared_after_use_is_empty_and_fills_again_from_the_start():
    fifo = FifoList()
    for word in "abcdef":
        fifo.append(word)
    assert fifo.pop_first() == "a" and fifo.pop_first() == "b"     # the head is past 0
    fifo.clear()
    assert_same(fifo, deque())
    assert fifo.backing_size == 0
    fifo.append("x")
    fifo.append("y")
    assert_same(fifo, deque("xy"))
    assert fifo.pop_first() == "x" and fifo.pop_first() == "y" and not fifo
