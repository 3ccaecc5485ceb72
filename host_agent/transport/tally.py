"""The counters of a connection and of an endpoint."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Iterator


class _Count:
    """One counter's value: changed in place, so that counting looks its name up once."""

    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        self.value = value


class Tally:
    """Named counters, read as a mapping of name -> count (a `collections.abc.Mapping`: `Counter`'s
    `update`, `dict()` and `==` take it) holding only the names ever counted, in the order they were
    first counted, as a `Counter` would after `tally[name] += n` (also with n = 0); a name never
    counted reads 0. `add` counts (the transport's one way: one lookup of the name, called natively
    by the compiled build); setting `tally[name]` is there for code that treats it as a Counter."""

    def __init__(self) -> None:
        self._counts: dict[str, _Count] = {}

    def add(self, name: str, n: int = 1) -> None:
        """Count `n` more of `name`."""
        count = self._counts.get(name)
        if count is None:
            self._counts[name] = _Count(n)
        else:
            count.value += n

    def __getitem__(self, name: str) -> int:
        count = self._counts.get(name)
        return 0 if count is None else count.value

    def __setitem__(self, name: str, value: int) -> None:
        count = self._counts.get(name)
        if count is None:
            self._counts[name] = _Count(value)
        else:
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
