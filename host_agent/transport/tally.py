"""The counters of a connection and of an endpoint."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Iterator


class Count:
    """One name's counter in a `Tally` (`Tally.counter`), for a caller that counts it per packet:
    `add` counts without looking the name up. The name is listed in its tally when first counted,
    whichever way (`add` here or the tally's), as if counted by name. It refers to its tally's
    listing, not to the tally, which refers to it: no reference cycle for the collector to find."""

    __slots__ = ("value", "name", "_listing")

    def __init__(self, name: str, value: int, listing: dict[str, Count] | None) -> None:
        self.value = value
        self.name = name
        self._listing = listing                # its tally's listed counters while it is not among them, or None

    def add(self, n: int = 1) -> None:
        """Count `n` more."""
        if self._listing is not None:
            self.first_counted()
        self.value += n

    def first_counted(self) -> None:
        """It is counted for the first time: its tally lists it from now on (after the names
        counted before it)."""
        listing = self._listing
        if listing is not None:
            listing[self.name] = self
            self._listing = None


class Tally:
    """Named counters, read as a mapping of name -> count (a `collections.abc.Mapping`: `Counter`'s
    `update`, `dict()` and `==` take it) holding only the names ever counted, in the order they were
    first counted, as a `Counter` would after `tally[name] += n` (also with n = 0); a name never
    counted reads 0. `add` counts by name (one lookup of the name, called natively by the compiled
    build); `counter(name)` is the name's `Count`, for a caller that counts it per packet (no lookup);
    setting `tally[name]` is there for code that treats it as a Counter."""

    def __init__(self) -> None:
        self._counts: dict[str, Count] = {}
        # counters handed out (`counter`) before their name was counted; one counted by its own `add`
        # stays here too, but is found in `_counts` first
        self._handed: dict[str, Count] = {}

    def add(self, name: str, n: int = 1) -> None:
        """Count `n` more of `name`."""
        count = self._counts.get(name)
        if count is None:
            count = self._list(name)
        count.value += n

    def counter(self, name: str) -> Count:
        """The counter of `name`, to count it without a lookup by name (`Count.add`)."""
        count = self._counts.get(name)
        if count is None:
            count = self._handed.get(name)
            if count is None:
                count = self._handed[name] = Count(name, 0, self._counts)
        return count

    def _list(self, name: str) -> Count:
        """List `name`, first counted now: with its counter handed out before, or a new one."""
        count = self._handed.pop(name, None)
        if count is None:
            count = self._counts[name] = Count(name, 0, None)
        else:
            count.first_counted()
        return count

    def __getitem__(self, name: str) -> int:
        count = self._counts.get(name)
        return 0 if count is None else count.value

    def __setitem__(self, name: str, value: int) -> None:
        count = self._counts.get(name)
        if count is None:
            count = self._list(name)
        count.value = value

    def get(self, name: str, default: int | None = None) -> int | None:
        """The count of `name`, or `default` when it was never counted (as `dict.get`)."""
        count = self._counts.get(name)
        return default if count is None else count.value

    def __contains__(self, name: object) -> bool:
        return name in self._counts

    def __len__(self) -> int:
        return len(self._counts)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._counts))

    def keys(self) -> list[str]:
        """The names counted, in the order first counted."""
        return list(self._counts)

    def values(self) -> list[int]:
        """Their counts."""
        return [count.value for count in self._counts.values()]

    def items(self) -> list[tuple[str, int]]:
        """(name, count) of every name counted, in the order first counted."""
        return [(name, count.value) for name, count in self._counts.items()]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):             # another Tally too: the same counts, in any order
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"Tally({dict(self.items())!r})"


Mapping.register(Tally)
