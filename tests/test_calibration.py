"""Calibration: the rate search (with fake measurements, no Mininet), the record's file, and
`rate_bps: auto` resolving from it."""
from __future__ import annotations

import io
import json

import pytest

from experiments import budget, calibration, rate_search, runner
from experiments.calibration import Calibration, CalibrationError, LinkRate, Machine
from experiments.rate_search import Measurement, calibrate, find_rate
from experiments.scenario import ScenarioError, parse_scenario


def fake_target(fastest_good_bps: float, calls: list | None = None):
    """A target that stays faithful up to `fastest_good_bps`: a measure function for the search."""
    def measure(rate: int) -> Measurement:
        if calls is not None:
            calls.append(rate)
        good = rate <= fastest_good_bps
        return Measurement(rate, faithful=good, completed=True, goodput_share=0.9 if good else 0.3,
                           completion_s=1.0, reasons=[] if good else ["s1: CPU 99% of a core"])
    return measure


def test_calibration_chooses_a_lower_rate_for_a_slower_target():
    fast = calibrate("model", fake_target(45e6), start_bps=5_000_000)
    slow = calibrate("bmv2", fake_target(12e6), start_bps=5_000_000)
    assert fast.faithful_rate_bps == 40_000_000 and slow.faithful_rate_bps == 10_000_000
    assert slow.rate_bps < fast.rate_bps
    assert fast.rate_bps == int(40_000_000 * calibration.MARGIN)
    assert [m["rate_bps"] for m in fast.measurements] == [5e6, 10e6, 20e6, 40e6, 80e6, 56.57e6]
    assert set(fast.conditions) == {"load_1min_start", "load_1min_end"}


def test_the_search_tries_once_between_a_good_rate_and_its_double():
    result = find_rate(fake_target(7.5e6), start_bps=5_000_000)
    assert [m.rate_bps for m in result.tried] == [5_000_000, 10_000_000, 7_070_000]
    assert result.best.rate_bps == 7_070_000


def test_a_target_too_slow_for_the_start_rate_is_searched_downwards():
    calls = []
    result = find_rate(fake_target(1.5e6, calls), start_bps=8_000_000)
    assert calls == [8_000_000, 4_000_000, 2_000_000, 1_000_000, 1_410_000]
    assert result.best.rate_bps == 1_410_000


def test_a_rate_with_poor_goodput_is_not_good_even_when_faithful():
    poor = Measurement(10_000_000, faithful=True, completed=True, goodput_share=rate_search.GOOD_SHARE / 2)
    assert not poor.good
    assert Measurement(10_000_000, True, True, rate_search.GOOD_SHARE).good


def test_no_good_rate_is_an_error_naming_the_target_and_the_reason():
    with pytest.raises(CalibrationError, match=r"bmv2.*s1: CPU 99%"):
        calibrate("bmv2", fake_target(0), start_bps=2_000_000, floor_bps=1_000_000)


def test_the_search_stops_at_the_ceiling():
    result = find_rate(fake_target(1e12), start_bps=5_000_000, ceiling_bps=20_000_000)
    assert [m.rate_bps for m in result.tried] == [5_000_000, 10_000_000, 20_000_000]


def record(target: str, rate: int, machine: Machine | None = None) -> Calibration:
    return Calibration(machine or Machine.this(), target, rate, int(rate / 0.8), 0.8, "",
                       [{"rate_bps": rate, "faithful": True}], {"load_1min_start": 1.5})


def test_records_round_trip_through_the_file_and_replace_their_own_machine_and_target(tmp_path):
    path = tmp_path / "sub" / "calibration.json"
    other = Machine("elsewhere", "Some CPU", 64)
    calibration.save(record("model", 30_000_000), path)
    calibration.save(record("model", 90_000_000, other), path)
    calibration.save(record("bmv2", 4_000_000), path)
    calibration.save(record("model", 32_000_000), path)          # replaces this machine's model record
    assert calibration.find("model", path=path).rate_bps == 32_000_000
    assert calibration.find("model", machine=other, path=path).rate_bps == 90_000_000
    back = calibration.find("bmv2", path=path)
    assert back.rate_bps == 4_000_000 and back.machine == Machine.this() and back.date
    assert back.measurements == [{"rate_bps": 4_000_000, "faithful": True}]
    assert back.conditions == {"load_1min_start": 1.5}
    assert len(calibration.read_records(path)) == 3


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"records": {}}',
                                  '{"records": [{"target": "model"}]}',
                                  '{"records": [{"machine": {"hostname": "a", "cpu_model": "b", "cores": 2}, '
                                  '"target": "model", "rate_bps": 0, "faithful_rate_bps": 1}]}'])
def test_a_malformed_calibration_file_is_an_error_naming_the_file(tmp_path, text):
    path = tmp_path / "broken.json"
    path.write_text(text)
    with pytest.raises(CalibrationError, match="broken.json: not a calibration file"):
        calibration.find("model", path=path)


def test_the_file_is_found_through_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(calibration.ENV_FILE, str(tmp_path / "c.json"))
    assert calibration.calibration_file() == tmp_path / "c.json"
    monkeypatch.delenv(calibration.ENV_FILE)
    assert calibration.calibration_file() in (calibration.ROOT_FILE, calibration.USER_FILE.expanduser())


def scenario(link: dict | None = None):
    doc = {"name": "auto", "topology": "leafspine:2x2x1", "horizon_s": 60.0,
           "workload": {"kind": "allreduce", "bytes": 65536, "chunk_bytes": 16384},
           "transports": [{"name": "MRC", "mode": "mrc"}]}
    if link is not None:
        doc["link"] = link
    return parse_scenario(doc)


@pytest.fixture
def own_file(tmp_path, monkeypatch):
    path = tmp_path / "calibration.json"
    monkeypatch.setenv(calibration.ENV_FILE, str(path))
    return path


@pytest.mark.parametrize("link", [None, {"rate_bps": "auto"}])
def test_auto_rates_resolve_from_the_record_of_the_target(own_file, link):
    calibration.save(record("model", 12_345_000), own_file)
    calibration.save(record("bmv2", 3_000_000), own_file)
    case = scenario(link).cases()[0]
    assert budget.asks_auto(case)
    model, notes = budget.target_topology(case, "model")
    assert {l.rate_bps for l in model.links} == {12_345_000} and notes == []
    bmv2, _ = budget.target_topology(case, "bmv2")
    assert {l.rate_bps for l in bmv2.links} == {3_000_000}


def test_a_given_rate_is_capped_at_the_calibrated_one(own_file):
    calibration.save(record("model", 12_000_000), own_file)
    case = scenario({"rate_bps": 100_000_000}).cases()[0]
    assert not budget.asks_auto(case)
    topo, notes = budget.target_topology(case, "model")
    assert {l.rate_bps for l in topo.links} == {12_000_000}
    assert "capped at 12 Mbit/s" in notes[0]
    slower = scenario({"rate_bps": 5_000_000}).cases()[0]
    assert {l.rate_bps for l in budget.target_topology(slower, "model")[0].links} == {5_000_000}


def test_without_a_record_auto_falls_back_to_the_fixed_cap_with_a_note(own_file):
    topo, notes = budget.target_topology(scenario().cases()[0], "model")
    assert {l.rate_bps for l in topo.links} == {budget.MAX_RATE_BPS["model"]}
    assert any("fixed fallback" in n and str(own_file) in n for n in notes)


def test_auto_is_the_only_word_a_rate_may_be():
    with pytest.raises(ScenarioError, match="link.rate_bps: 'fast' is neither bit/s .* nor 'auto'"):
        scenario({"rate_bps": "fast"})


def test_a_run_calibrates_first_when_no_record_exists_and_says_so(own_file, monkeypatch):
    monkeypatch.setattr(rate_search, "measure_allreduce", lambda target: fake_target(25e6))
    cases = scenario().cases()
    out = io.StringIO()
    rate = runner.choose_link_rate(cases, "mininet", "model", calibrate=True, stream=out)
    assert rate == LinkRate(int(20_000_000 * calibration.MARGIN))
    assert "calibrating first" in out.getvalue()
    assert calibration.find("model", path=own_file).faithful_rate_bps == 20_000_000
    assert json.loads(own_file.read_text())["records"][0]["measurements"]
    again = io.StringIO()
    assert runner.choose_link_rate(cases, "mininet", "model", stream=again) == rate
    assert again.getvalue() == ""                                   # the record is used as it is


def test_a_declined_calibration_runs_at_the_fallback_and_netsim_keeps_its_rates(own_file, monkeypatch):
    monkeypatch.setattr(rate_search, "measure_allreduce", lambda target: pytest.fail("calibrated"))
    out = io.StringIO()
    rate = runner.choose_link_rate(scenario().cases(), "mininet", "bmv2", calibrate=False, stream=out)
    assert rate.rate_bps == budget.MAX_RATE_BPS["bmv2"] and "fixed fallback" in out.getvalue()
    assert runner.choose_link_rate(scenario().cases(), "netsim", "model", stream=out) is None
    assert not own_file.exists()


def test_a_calibration_that_finds_no_faithful_rate_runs_at_the_fallback_and_records_nothing(own_file, monkeypatch):
    monkeypatch.setattr(rate_search, "measure_allreduce", lambda target: fake_target(0))
    out = io.StringIO()
    rate = runner.choose_link_rate(scenario().cases(), "mininet", "model", calibrate=True, stream=out)
    assert rate.rate_bps == budget.MAX_RATE_BPS["model"]
    assert "found no faithful rate" in rate.note and "s1: CPU 99%" in rate.note
    assert not own_file.exists()


def test_calibrate_show_lists_the_records_and_names_a_malformed_file(own_file, capsys):
    from cli.main import main
    calibration.save(record("model", 8_000_000), own_file)
    assert main(["calibrate", "--show"]) == 0
    out = capsys.readouterr().out
    assert str(own_file) in out and "model" in out and "(this machine)" in out
    own_file.write_text("{")
    assert main(["calibrate", "--show"]) == 1
    assert f"{own_file}: not a calibration file" in capsys.readouterr().err


@pytest.mark.parametrize("option", [["--margin", "1.5"], ["--start-mbps", "0"]])
def test_calibrate_refuses_a_bad_option_before_measuring(own_file, option, capsys, monkeypatch):
    from cli.main import main
    monkeypatch.setattr(rate_search, "measure_allreduce", lambda *a: pytest.fail("measured"))
    assert main(["calibrate", *option]) == 2
    assert option[0] in capsys.readouterr().err


def test_a_measurement_names_its_first_reasons_and_counts_the_rest():
    m = Measurement(4_000_000, False, True, 0.6, 1.2, [f"h{i}: waited 1 ms for a CPU" for i in range(8)])
    line = m.describe()
    assert line.startswith("4 Mbit/s: distorted (h0: waited") and "h2:" in line and "h3:" not in line
    assert "5 more" in line and "too fast" in line
