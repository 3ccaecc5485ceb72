"""The one record of the conditions a figure was measured in (`experiments.conditions`)."""
from __future__ import annotations

import os

import speedups
from experiments import conditions


def test_a_measurement_keeps_when_where_how_long_under_what_load_and_which_build(monkeypatch):
    loads = iter([(0.5, 0.4, 0.3), (2.25, 1.0, 0.5)])
    monkeypatch.setattr(conditions.os, "getloadavg", lambda: next(loads))
    measuring = conditions.Measuring()
    measured = measuring.done()
    assert measured["load_1min_start"] == 0.5 and measured["load_1min_end"] == 2.25
    assert measured["cores"] == os.cpu_count() and measured["build"] == str(speedups.build_in_use())
    assert measured["date"].endswith(" UTC") and measured["wall_s"] >= 0 and measured["host"]
    assert conditions.text(measured).startswith(f"{os.cpu_count()} cores, 1-min load 0.50 at the start, 2.25 at the end")
    assert conditions.busiest_load(measured) == 2.25


def test_the_busiest_load_is_none_when_a_record_kept_no_load():
    assert conditions.busiest_load({}) is None
    assert conditions.busiest_load({"load_1min_start": 3.0}) == 3.0
    assert conditions.busiest_load({"load_1min_start": "high"}) is None
