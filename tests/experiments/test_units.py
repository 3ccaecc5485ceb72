"""One convention for sizes and rates wherever results print them (experiments/units.py): the
run's 'ran:' line, crosscheck's titles, the paper page and the goodput axes say the same."""
from __future__ import annotations

import pytest

from experiments import paper, plots, runner
from experiments.crosscheck import CrosscheckRow, run_title
from experiments.scenario import parse_scenario
from experiments.units import format_bytes, format_rate, rate_unit

SCENARIO = {"name": "sizes", "title": "Sizes", "topology": "leafspine:2x2x1", "horizon_s": 1.0,
            "workload": {"kind": "permutation", "bytes": 2000000},
            "transports": [{"name": "MRC", "mode": "mrc"}], "variants": [{"label": "v", "faults": []}]}


@pytest.mark.parametrize("nbytes, text", [(262144, "256 KiB"), (2097152, "2 MiB"), (1572864, "1.5 MiB"),
                                          (1 << 30, "1 GiB"), (2000000, "2 MB"), (4000, "4 kB"),
                                          (1500, "1500 B"), (0, "0 B")])
def test_a_size_reads_in_binary_units_else_decimal_else_bytes(nbytes, text):
    assert format_bytes(nbytes) == text


def test_a_negative_size_is_refused_naming_it():
    with pytest.raises(ValueError, match="size -1"):
        format_bytes(-1)


@pytest.mark.parametrize("bps, text", [(5.66e6, "5.66 Mbit/s"), (2.92e11, "292 Gbit/s"), (1.06e12, "1.06 Tbit/s"),
                                       (2e3, "0.002 Mbit/s")])
def test_a_rate_reads_in_the_largest_unit_it_reaches(bps, text):
    assert format_rate(bps) == text


@pytest.mark.parametrize("nbytes", [2000000, 2097152, 262144])
def test_the_run_line_and_the_crosscheck_title_say_the_same_size(nbytes):
    spec = {**SCENARIO, "workload": {**SCENARIO["workload"], "bytes": nbytes}}
    scenario = parse_scenario(spec)
    ran = runner.what_ran(scenario.cases())
    title = run_title(scenario, [CrosscheckRow("v", "MRC", nbytes)], [1], quick=False)
    assert ran == f"permutation {format_bytes(nbytes)}"
    assert f"({format_bytes(nbytes)} flows)" in title


def test_the_paper_page_and_the_goodput_axes_choose_the_same_rate_unit(monkeypatch):
    from experiments import metrics
    for peak in (3e6, 4e10, 1.6e12):
        monkeypatch.setattr(metrics, "goodput_series", lambda record, peak=peak: ([0.1], [peak]))
        divisor, unit = plots._rate_unit([object()])
        assert (divisor, unit) == rate_unit(peak) and paper._rate(peak).endswith(unit)
    assert paper._rate(None) == "—"
