"""A connection's counters (`Tally`) read as the Counter they replace: names in the order first
counted, only those counted, 0 for the others."""
from __future__ import annotations

from collections import Counter

from host_agent.transport.tally import Tally


def test_a_tally_lists_what_was_counted_in_the_order_first_counted_as_a_counter_does():
    tally, counter = Tally(), Counter()
    for name, n in [("sent", 1), ("bytes", 4096), ("acked", 0), ("sent", 1), ("bytes", 100)]:
        tally.add(name, n)
        counter[name] += n
    tally["resent"] += 1                      # the mapping's get-then-set counts too
    counter["resent"] += 1
    assert list(tally.items()) == list(counter.items()) == [("sent", 2), ("bytes", 4196), ("acked", 0), ("resent", 1)]
    assert list(tally) == list(tally.keys()) == ["sent", "bytes", "acked", "resent"] and len(tally) == 4
    assert tally["never"] == 0 and "never" not in tally and "acked" in tally
    assert tally.get("never") is None and tally.get("never", 0) == 0 and tally.get("sent") == 2
    assert "never" not in tally.keys()      # reading a name does not count it


def test_a_tally_is_read_by_counter_update_dict_and_equality():
    one, two = Tally(), Tally()
    one.add("sent", 3)
    two.add("acked")
    two.add("sent", 2)
    total: Counter = Counter()
    total.update(one)                         # a Mapping: its counts added, not its names counted
    total.update(two)
    assert list(total.items()) == [("sent", 5), ("acked", 1)] and dict(two) == {"acked": 1, "sent": 2}
    other = Tally()
    other.add("sent", 2)
    other.add("acked")
    assert two == other and two == {"sent": 2, "acked": 1} and one != two
    assert repr(one) == "Tally({'sent': 3})"


def test_a_counter_handed_out_lists_its_name_only_when_first_counted_and_shares_the_count_by_name():
    tally = Tally()
    sent = tally.counter("sent")
    assert "sent" not in tally and tally["sent"] == 0 and list(tally) == []
    tally.add("acked")
    sent.add(2)                               # listed now: after "acked", as if counted by name
    assert "sent" in tally and list(tally) == ["acked", "sent"] and tally["sent"] == 2
    tally.add("sent")                         # the same count, whichever way
    assert tally.counter("sent") is sent and list(tally.items()) == [("acked", 1), ("sent", 3)]
    bytes_ = tally.counter("bytes")
    tally.add("bytes", 5)                     # counted by name first: the counter handed out is the one listed
    bytes_.add(1)
    tally["resent"] = 4
    assert list(tally.items()) == [("acked", 1), ("sent", 3), ("bytes", 6), ("resent", 4)]
    assert tally.counter("resent").value == 4 and tally.counter("never").value == 0 and "never" not in tally


def test_a_counter_handed_out_and_never_counted_leaves_no_reference_cycle():
    import gc
    def tallies() -> int:
        return sum(isinstance(o, Tally) for o in gc.get_objects())

    enabled = gc.isenabled()
    gc.collect()
    before = tallies()
    gc.disable()                              # a cycle would outlive the tally: nothing would collect it
    try:
        tally = Tally()
        tally.counter("never")
        tally.counter("once").add()
        assert tallies() == before + 1
        del tally
        assert tallies() == before
    finally:
        if enabled:
            gc.enable()
