"""Calibration: the rate search (with fake measurements, no Mininet), the rate model fitted to a few
topology sizes, the record's file (and its old version), and `rate_bps: auto` resolving from it per
topology."""
from __future__ import annotations

import io
import json
import math

import pytest

from experiments import calibration, rate_caps, rate_search, runner, workloads
from experiments.calibration import Calibration, CalibrationError, LinkRate, Machine, RateModel
from experiments.rate_search import RateTrial, calibrate, find_rate
from experiments.scenario import ScenarioError, parse_scenario


def fake_target(fastest_good_bps: float, calls: list | None = None):
    """A target that stays faithful up to `fastest_good_bps`: a measure function for the search."""
    def measure(rate: int) -> RateTrial:
        if calls is not None:
            calls.append(rate)
        good = rate <= fastest_good_bps
        return RateTrial(rate, faithful=good, completed=True, goodput_share=0.9 if good else 0.3,
                         completion_s=1.0, reasons=[] if good else ["s1: CPU 99% of a core"])
    return measure


def one_size(measure):
    """A measure_on for a calibration on one topology."""
    return lambda topology: measure


def test_calibration_chooses_a_lower_rate_for_a_slower_target():
    fast = calibrate("model", one_size(fake_target(45e6)), ("leafspine:4x2x2",), start_bps=5_000_000)
    slow = calibrate("bmv2", one_size(fake_target(12e6)), ("leafspine:4x2x2",), start_bps=5_000_000)
    assert [s.faithful_rate_bps for s in fast.sizes] == [40_000_000]
    assert [s.faithful_rate_bps for s in slow.sizes] == [10_000_000]
    assert slow.rate_bps(14) < fast.rate_bps(14)
    assert fast.rate_bps(14) == int(40_000_000 * calibration.MARGIN)
    assert [m["rate_bps"] for m in fast.sizes[0].measurements] == [5e6, 10e6, 20e6, 40e6, 80e6, 56.57e6]
    assert {"date", "load_1min_start", "load_1min_end", "cores", "build"} <= set(fast.sizes[0].conditions)


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
    poor = RateTrial(10_000_000, faithful=True, completed=True, goodput_share=rate_search.GOOD_SHARE / 2)
    assert not poor.good
    assert RateTrial(10_000_000, True, True, rate_search.GOOD_SHARE).good


def test_no_good_rate_is_an_error_naming_the_target_and_the_reason():
    with pytest.raises(CalibrationError, match=r"bmv2.*s1: CPU 99%"):
        calibrate("bmv2", one_size(fake_target(0)), ("leafspine:4x2x2",), start_bps=2_000_000, floor_bps=1_000_000)


def test_the_search_stops_at_the_ceiling():
    result = find_rate(fake_target(1e12), start_bps=5_000_000, ceiling_bps=20_000_000)
    assert [m.rate_bps for m in result.tried] == [5_000_000, 10_000_000, 20_000_000]


def record(target: str, rate: int, machine: Machine | None = None) -> Calibration:
    """A record whose `auto` rate is `rate` for every size (a flat model)."""
    size = calibration.SizeMeasurement("leafspine:4x2x2", 14, int(rate / 0.8), [{"rate_bps": rate, "faithful": True}],
                                       {"load_1min_start": 1.5})
    return Calibration(machine or Machine.this(), target, RateModel(7.0, rate / 0.8, 0.0), 0.8, "", [size])


def test_records_round_trip_through_the_file_and_replace_their_own_machine_and_target(tmp_path):
    path = tmp_path / "sub" / "calibration.json"
    other = Machine("elsewhere", "Some CPU", 64)
    calibration.save(record("model", 30_000_000), path)
    calibration.save(record("model", 90_000_000, other), path)
    calibration.save(record("bmv2", 4_000_000), path)
    calibration.save(record("model", 32_000_000), path)          # replaces this machine's model record
    assert calibration.find("model", path=path).rate_bps(14) == 32_000_000
    assert calibration.find("model", machine=other, path=path).rate_bps(14) == 90_000_000
    back = calibration.find("bmv2", path=path)
    assert back.rate_bps(14) == 4_000_000 and back.machine == Machine.this() and back.date
    assert back.sizes[0].measurements == [{"rate_bps": 4_000_000, "faithful": True}]
    assert back.sizes[0].conditions == {"load_1min_start": 1.5} and back.note is None
    assert json.loads(path.read_text())["version"] == calibration.FORMAT_VERSION
    assert len(calibration.read_records(path)) == 3


MACHINE = '"machine": {"hostname": "a", "cpu_model": "b", "cores": 2}'


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"records": {}}',
                                  '{"records": [{"target": "model"}]}',
                                  '{"records": [{%s, "target": "model", "rate_bps": 0, "faithful_rate_bps": 1}]}' % MACHINE,
                                  '{"version": 2, "records": [{%s, "target": "model", "rate_bps": 5}]}' % MACHINE,
                                  '{"version": 2, "records": [{%s, "target": "model", "model": {"processes_per_core": 7, '
                                  '"faithful_rate_bps": 5e6, "exponent": -1}}]}' % MACHINE,
                                  '{"version": 3, "records": []}'])
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
    assert rate_caps.asks_auto(case)
    model, notes = rate_caps.target_topology(case, "model")
    assert {l.rate_bps for l in model.links} == {12_345_000} and notes == []
    bmv2, _ = rate_caps.target_topology(case, "bmv2")
    assert {l.rate_bps for l in bmv2.links} == {3_000_000}


def test_a_given_rate_is_capped_at_the_calibrated_one(own_file):
    calibration.save(record("model", 12_000_000), own_file)
    case = scenario({"rate_bps": 100_000_000}).cases()[0]
    assert not rate_caps.asks_auto(case)
    topo, notes = rate_caps.target_topology(case, "model")
    assert {l.rate_bps for l in topo.links} == {12_000_000}
    assert "capped at 12 Mbit/s" in notes[0]
    slower = scenario({"rate_bps": 5_000_000}).cases()[0]
    assert {l.rate_bps for l in rate_caps.target_topology(slower, "model")[0].links} == {5_000_000}


def test_without_a_record_auto_falls_back_to_the_fixed_cap_with_a_note(own_file):
    topo, notes = rate_caps.target_topology(scenario().cases()[0], "model")
    assert {l.rate_bps for l in topo.links} == {rate_caps.MAX_RATE_BPS["model"]}
    assert any("fixed fallback" in n and str(own_file) in n for n in notes)


def test_auto_is_the_only_word_a_rate_may_be():
    with pytest.raises(ScenarioError, match="link.rate_bps: 'fast' is neither bit/s .* nor 'auto'"):
        scenario({"rate_bps": "fast"})


def crowded_target(bps_per_process_share: float, calls: list | None = None):
    """A measure_on for a machine whose fastest good rate falls as 1 / processes^1.5: a topology of n
    processes stays faithful up to bps_per_process_share / n^1.5 (and records the rates tried)."""
    def measure_on(topology: str):
        fastest = bps_per_process_share / rate_search.processes(topology) ** 1.5
        return fake_target(fastest, None if calls is None else calls.setdefault(topology, []))
    return measure_on


def test_a_run_calibrates_first_when_no_record_exists_and_says_so(own_file, monkeypatch):
    monkeypatch.setattr(rate_search, "measure_allreduce", lambda target, topology: crowded_target(1.3e9)(topology))
    cases = scenario().cases()
    out = io.StringIO()
    source = runner.choose_link_rate(cases, "mininet", "model", calibrate=True, stream=out)
    assert isinstance(source, Calibration)
    assert "calibrating first on leafspine:4x2x2, fattree:4" in out.getvalue()
    saved = calibration.find("model", path=own_file)
    assert [s.topology for s in saved.sizes] == list(rate_search.TOPOLOGIES)
    assert json.loads(own_file.read_text())["records"][0]["sizes"][1]["measurements"]
    assert "leafspine:2x2x1 (6 processes)" in out.getvalue()        # the rate of the run's topology
    again = io.StringIO()
    assert runner.choose_link_rate(cases, "mininet", "model", stream=again).model == saved.model
    assert "calibrating" not in again.getvalue() and "leafspine:2x2x1 (6 processes)" in again.getvalue()


def test_a_declined_calibration_runs_at_the_fallback_and_netsim_keeps_its_rates(own_file, monkeypatch):
    monkeypatch.setattr(rate_search, "measure_allreduce", lambda *a: pytest.fail("calibrated"))
    out = io.StringIO()
    rate = runner.choose_link_rate(scenario().cases(), "mininet", "bmv2", calibrate=False, stream=out)
    assert rate.rate_bps == rate_caps.MAX_RATE_BPS["bmv2"] and "fixed fallback" in out.getvalue()
    assert runner.choose_link_rate(scenario().cases(), "netsim", "model", stream=out) is None
    assert not own_file.exists()


def test_a_calibration_that_finds_no_faithful_rate_runs_at_the_fallback_and_records_nothing(own_file, monkeypatch):
    monkeypatch.setattr(rate_search, "measure_allreduce", lambda target, topology: fake_target(0))
    out = io.StringIO()
    rate = runner.choose_link_rate(scenario().cases(), "mininet", "model", calibrate=True, stream=out)
    assert rate.rate_bps == rate_caps.MAX_RATE_BPS["model"]
    assert "found no faithful rate" in rate.note and "s1: CPU 99%" in rate.note
    assert not own_file.exists()


# --- the rate model: fitted to sizes, resolved per topology ------------------------------------------

def test_two_sizes_fit_a_power_law_through_both():
    model = RateModel.fit([(7.0, 5.7e6), (18.0, 1.8e6)])
    assert model.exponent == pytest.approx(math.log(5.7 / 1.8) / math.log(18 / 7), abs=1e-3)
    assert model.faithful_rate(7.0) == pytest.approx(5.7e6, rel=1e-3)
    assert model.faithful_rate(18.0) == pytest.approx(1.8e6, rel=1e-3)
    assert 1.8e6 < model.faithful_rate(12.0) < 5.7e6


@pytest.mark.parametrize("points", [[(7.0, 5e6), (18.0, 4e6)],                     # slope below 1
                                    [(4.0, 9e6), (7.0, 4e6), (18.0, 1.9e6)],       # noisy
                                    [(7.0, 3e6), (18.0, 3.5e6)]])                  # larger measured faster
def test_the_model_falls_at_least_as_one_over_processes_and_promises_no_rate_above_a_measured_one(points):
    model = RateModel.fit(points)
    assert model.exponent >= calibration.EXPONENT_MIN
    for n, measured in points:
        assert model.faithful_rate(n) <= measured * (1 + 1e-9)
    assert model.faithful_rate(36.0) <= model.faithful_rate(18.0) * 18 / 36 * (1 + 1e-9)


def test_the_model_is_flat_below_the_smallest_size_and_one_size_scales_as_one_over_processes():
    model = RateModel.fit([(7.0, 5.7e6)])
    assert model.exponent == calibration.EXPONENT_MIN
    assert model.faithful_rate(3.0) == model.faithful_rate(7.0) == pytest.approx(5.7e6)
    assert model.faithful_rate(14.0) == pytest.approx(5.7e6 / 2)
    with pytest.raises(ValueError, match="at least one"):
        RateModel.fit([])


def test_calibrate_measures_each_size_smallest_first_and_starts_the_next_where_the_model_predicts():
    calls: dict = {}
    progress = []
    record = calibrate("model", crowded_target(1.3e9, calls), ("fattree:4", "leafspine:4x2x2"),
                       progress=progress.append)
    assert list(calls) == ["leafspine:4x2x2", "fattree:4"]
    small = record.sizes[0].faithful_rate_bps
    predicted = RateModel.fit([(14 / record.machine.cores, small)]).faithful_rate(36 / record.machine.cores)
    assert calls["fattree:4"][0] == pytest.approx(predicted, abs=rate_search.RATE_GRAIN_BPS)
    assert record.sizes[1].faithful_rate_bps < small
    assert record.model.exponent > 1                      # the fake machine falls as n^-1.5
    assert any(line.startswith("size 2/2: fattree:4 (36 processes") for line in progress)
    assert any("fattree:4: fastest faithful rate" in line for line in progress)


def test_a_size_with_no_good_rate_is_an_error_naming_it_and_what_was_measured_before():
    def measure_on(topology):
        return fake_target(8e6 if topology == "leafspine:4x2x2" else 0)
    with pytest.raises(CalibrationError, match=r"on fattree:4 \(36 processes\).*measured before: leafspine:4x2x2"):
        calibrate("model", measure_on, ("leafspine:4x2x2", "fattree:4"), floor_bps=1_000_000)


def case_on(topology: str):
    doc = {"name": "auto", "topology": topology, "horizon_s": 60.0, "link": {"rate_bps": "auto"},
           "workload": {"kind": "allreduce", "bytes": 65536, "chunk_bytes": 16384},
           "transports": [{"name": "MRC", "mode": "mrc"}]}
    return parse_scenario(doc).cases()[0]


def test_auto_gives_a_lower_rate_for_a_larger_topology(own_file):
    record = calibrate("model", crowded_target(1.3e9), rate_search.TOPOLOGIES)
    calibration.save(record, own_file)
    rates = {}
    for topology in ("leafspine:2x2x2", "leafspine:4x2x2", "leafspine:8x2x2", "fattree:4"):
        topo, notes = rate_caps.target_topology(case_on(topology), "model")
        assert len({link.rate_bps for link in topo.links}) == 1 and notes == []
        rates[topology] = topo.links[0].rate_bps
    assert rates["leafspine:2x2x2"] >= rates["leafspine:4x2x2"] > rates["leafspine:8x2x2"] > rates["fattree:4"]
    assert rates["fattree:4"] == record.rate_bps(36) <= calibration.MARGIN * record.sizes[1].faithful_rate_bps
    assert rates["leafspine:4x2x2"] == record.rate_bps(14) <= calibration.MARGIN * record.sizes[0].faithful_rate_bps


def test_a_version_1_file_still_gives_its_rate_at_its_size_and_a_note_to_measure_the_sizes(own_file):
    here = Machine.this()
    own_file.write_text(json.dumps({"version": 1, "records": [
        {"machine": {"hostname": here.hostname, "cpu_model": here.cpu_model, "cores": here.cores},
         "target": "model", "rate_bps": 4_560_000, "faithful_rate_bps": 5_700_000, "margin": 0.8,
         "date": "2026-12-03 14:10:00 UTC", "measurements": [{"rate_bps": 5_700_000}], "conditions": {}}]}))
    old = calibration.find("model", path=own_file)
    assert old.rate_bps(14) == 4_560_000 and old.rate_bps(36) == int(4_560_000 * 14 / 36)
    topo, notes = rate_caps.target_topology(case_on("fattree:4"), "model")
    assert {link.rate_bps for link in topo.links} == {old.rate_bps(36)}
    assert len(notes) == 1 and "version 1" in notes[0] and "mrc-testbed calibrate --target model" in notes[0]
    calibration.save(record("bmv2", 2_000_000), own_file)                  # rewritten as version 2
    assert json.loads(own_file.read_text())["version"] == calibration.FORMAT_VERSION
    assert "version 1" in calibration.find("model", path=own_file).note   # ... still saying what it is


def test_a_fixed_record_gives_its_rate_to_every_size():
    fixed = Calibration.fixed(Machine.this(), "model", 20_000_000)
    assert fixed.rate_bps(6) == fixed.rate_bps(36) == 20_000_000
    assert LinkRate(3_000_000).for_processes(36) == LinkRate(3_000_000)


def test_calibrate_prints_each_size_and_the_fitted_model(own_file, capsys, monkeypatch):
    from cli import calibrate as cli_calibrate
    from cli.main import main
    from testbed import nodes
    monkeypatch.setattr(cli_calibrate, "mininet_unavailable", lambda: None)
    monkeypatch.setattr(nodes, "target_unavailable", lambda target: None)
    monkeypatch.setattr(rate_search, "measure_allreduce", lambda target, topology: crowded_target(1.3e9)(topology))
    assert main(["calibrate", "--target", "model"]) == 0
    out = capsys.readouterr().out
    assert "size 1/2: leafspine:4x2x2 (14 processes" in out and "size 2/2: fattree:4 (36 processes" in out
    assert "n processes per core" in out and "recorded in" in out
    assert "fattree:4 (36 processes): faithful up to" in out
    assert calibration.find("model", path=own_file).sizes[1].topology == "fattree:4"
    assert main(["calibrate", "--topology", "leafspine:0x2"]) == 2
    assert "--topology" in capsys.readouterr().err


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
    m = RateTrial(4_000_000, False, True, 0.6, 1.2, [f"h{i}: waited 1 ms for a CPU" for i in range(8)])
    line = m.describe()
    assert line.startswith("4 Mbit/s: distorted (h0: waited") and "h2:" in line and "h3:" not in line
    assert "5 more" in line and "too fast" in line


def test_a_point_to_point_case_counts_an_agent_pair_per_flow_and_a_collective_an_agent_per_host():
    collective = case_on("leafspine:2x4x4")
    doc = {"name": "perm", "topology": "leafspine:2x4x4", "horizon_s": 60.0,
           "workload": {"kind": "permutation", "bytes": 65536, "chunk_bytes": 16384},
           "transports": [{"name": "MRC", "mode": "mrc"}]}
    permutation = parse_scenario(doc).cases()[0]
    topo = workloads.variant_topology(collective.variant)
    assert rate_caps.emulated_processes(collective, topo) == 8 + 6
    assert rate_caps.emulated_processes(permutation, topo) == 2 * 8 + 6
    assert rate_search.processes("fattree:4") == 36


def test_calibrate_cluster_keeps_each_servers_record_with_its_address(own_file, tmp_path, capsys, monkeypatch):
    """`calibrate --cluster`: each server's own calibration (what it wrote there, brought back by
    testbed.cluster.run_testbed_command: tests/testbed/test_cluster_network.py runs that on servers) kept
    with the server's address; a server whose calibration fails stops the command, naming it."""
    import json
    from cli.main import main
    from testbed import cluster
    (tmp_path / "c.yaml").write_text("servers: [{address: 10.9.0.1}, {address: 10.9.0.2}]\n")
    asked = []

    def on_server(server, argv, files=(), env=None, progress=print):
        asked.append((server.address, argv, env[calibration.ENV_FILE]))
        progress("measuring ...")
        if server.address == "10.9.0.3":
            return 1, {"record": ""}
        remote = record("model", 3_000_000 if server.address == "10.9.0.1" else 5_000_000,
                        Machine(f"host-{server.address}", "cpu", 4))
        return 0, {"record": json.dumps({"version": 2, "records": [remote.as_dict()]})}

    monkeypatch.setattr(cluster, "run_testbed_command", on_server)
    assert main(["calibrate", "--target", "model", "--topology", "leafspine:2x2x1", "--cluster",
                 str(tmp_path / "c.yaml")]) == 0
    out = capsys.readouterr().out
    assert "  10.9.0.1: measuring ..." in out and "server 10.9.0.2 (host-10.9.0.2 (cpu, 4 cores))" in out
    assert [a for a, _, _ in asked] == ["10.9.0.1", "10.9.0.2"] and all(f == "{record}" for _, _, f in asked)
    assert asked[0][1][:3] == ["calibrate", "--target", "model"] and "leafspine:2x2x1" in asked[0][1]
    assert calibration.find_server("model", "10.9.0.2", own_file).rate_bps(14) == 5_000_000
    assert calibration.find_server("model", "10.9.0.1", own_file).machine.hostname == "host-10.9.0.1"
    assert main(["calibrate", "--show"]) == 0 and "(cluster server 10.9.0.1)" in capsys.readouterr().out
    (tmp_path / "c.yaml").write_text("servers: [{address: 10.9.0.3}]\n")
    assert main(["calibrate", "--cluster", str(tmp_path / "c.yaml")]) == 1
    assert "server 10.9.0.3: the calibration failed (exit status 1)" in capsys.readouterr().err
    assert main(["calibrate", "--cluster", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err
