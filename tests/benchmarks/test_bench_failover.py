"""`bench failover`'s figures from its runs: a run whose goodput never fell below the mark recovered
within one sample (0), a dip is timed, a dip that never came back is a never; each share alike."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from benchmarks import bench_failover
from benchmarks.figures import Measurement
from tests.experiments.test_recovery_note import record


def _runs(*rates) -> list:
    """(case, record) of each run, goodput by `rates` (one function of time each)."""
    case = lambda i: SimpleNamespace(repetition=i, transport=SimpleNamespace(name="MRC", mode="mrc"))  # noqa: E731
    return [(case(i), record(rate)) for i, rate in enumerate(rates)]


def test_each_share_recovers_as_the_metrics_say_and_no_dip_is_within_one_sample():
    steady = lambda t: 1000                                       # noqa: E731
    dipped = lambda t: 0 if 0.11 <= t < 0.2 else 1000             # noqa: E731
    stuck = lambda t: 0 if t >= 0.11 else 1000                    # noqa: E731
    result = Measurement(details={"netsim": {"cases": {}}})
    bench_failover._case_figures(result, "netsim", "MRC", _runs(steady, dipped, stuck), unloaded=0.001)
    runs = result.details["netsim"]["cases"]["MRC"]["runs"]
    for share in ("90%", "50%"):
        assert runs[0][f"recover_to_{share}_s"] == 0.0                        # no dip: not a never
        assert runs[1][f"recover_to_{share}_s"] == pytest.approx(0.19 - 0.105)
        assert runs[2][f"recover_to_{share}_s"] is None                       # never came back
        assert runs[1][f"recover_to_{share}_rtts"] == pytest.approx((0.19 - 0.105) / 0.001)
    figures = {f.name: f for f in result.figures}
    median = figures["netsim MRC: recovery to 90%"]
    assert median.value == pytest.approx((0.19 - 0.105) * 1e3) and median.unit == "ms"
    assert median.note == "median 85 ms of 3 runs (0 s..never)"
    assert median.clock == ""                                     # netsim's times are simulated: no wall clock
    on_mininet = Measurement(details={"mininet": {"cases": {}}})
    bench_failover._case_figures(on_mininet, "mininet", "MRC", _runs(dipped), unloaded=0.001)
    assert {f.clock for f in on_mininet.figures} == {"wall"}      # timed by the wall clock: "busy" under load
