"""The counters of a connection and of an endpoint."""
from __future__ import annotations

from collections import Counter


class Tally(Counter):
    """A Counter whose item assignment is dict's own. Counter's forgiving `__delitem__` shares its
    slot with `__setitem__`, so every `tally[k] += 1` of a plain Counter is dispatched through
    Python (about twice as slow, per packet); taking dict's `__delitem__` back restores the C slot.
    Deleting a missing key raises KeyError, as for a dict."""

    __delitem__ = dict.__delitem__
