"""`FifoList`: a first-in first-out list, the transport's one way of keeping entries taken from the oldest."""
from __future__ import annotations

from typing import Any, Final, Iterator

from mypy_extensions import i64

DROP_AT: Final = 64         # taken entries kept in the list before it drops them (once they are also half)


class FifoList:
    """Entries (never None) in the order appended, taken from the oldest (`first`, `pop_first`), read
    by position from the oldest (`get`).

    A list read from a head index, not a deque: the compiled build indexes a list natively, where a
    deque's methods are called by name. The list is emptied when its last entry is taken, and the
    entries taken before the head are deleted once they are at least DROP_AT and at least half of it
    (never one removal from the front per entry: a long queue would be quadratic).

    Entries are typed Any, not by a type variable: compiled, a generic class keeps a `__dict__` and
    checks its fields on every read. A caller reads them into a typed local (`seg: Segment = ...`)."""

    __slots__ = ("_items", "_head")

    def __init__(self) -> None:
        self._items: list[Any] = []     # entries from _head on are held; those before it were taken
        self._head: i64 = 0

    # Written for the compiled build: lengths as i64(len(...)), compared with the i64 head natively (a
    # plain len() is a tagged int, and the head would be converted to compare them); the list read as
    # self._items in each expression, which borrows it (a local holding it is counted in and out)
    def __len__(self) -> int:
        return i64(len(self._items)) - self._head

    def __bool__(self) -> bool:
        return i64(len(self._items)) > self._head

    def __iter__(self) -> Iterator[Any]:
        """The entries, oldest first (a copy: taking entries while iterating is safe)."""
        return iter(self._items[self._head:])

    def append(self, item: Any) -> None:
        """Add `item` after the others."""
        self._items.append(item)

    def first(self) -> Any:
        """The oldest entry, or None when there is none."""
        if i64(len(self._items)) > self._head:
            return self._items[self._head]
        return None

    def last(self) -> Any:
        """The newest entry, or None when there is none."""
        if i64(len(self._items)) > self._head:
            return self._items[-1]
        return None

    def get(self, i: i64) -> Any:
        """The entry `i` places after the oldest (0: the oldest; IndexError outside 0..len - 1)."""
        if i < 0 or i >= i64(len(self._items)) - self._head:
            raise IndexError(f"FifoList index {i} is outside 0..{len(self) - 1}")
        return self._items[self._head + i]

    def pop_first(self) -> Any:
        """Take the oldest entry off (IndexError when there is none)."""
        head = self._head
        item = self._items[head]
        head += 1
        n = i64(len(self._items))
        if head == n:                                           # the last one: empty the list
            self._items.clear()
            head = 0
        elif head >= DROP_AT and 2 * head >= n:                 # drop those taken, now and then
            del self._items[:head]
            head = 0
        self._head = head
        return item

    def clear(self) -> None:
        """Drop every entry."""
        self._items.clear()
        self._head = 0

    @property
    def backing_size(self) -> int:
        """Entries the backing list holds, those taken but not yet dropped included (its memory)."""
        return len(self._items)
