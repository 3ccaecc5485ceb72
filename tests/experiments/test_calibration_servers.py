"""Calibration per cluster server (experiments.calibration): records kept with the server's
address beside this machine's, and `auto` over servers at the slowest server's rate for its share."""
from __future__ import annotations

from experiments.calibration import (Calibration, Machine, RateModel, ServerRates, find, find_server,
                                     read_records, save, server_rates)

HERE = Machine("front", "cpu", 2)
SERVER = Machine("server", "cpu", 2)


def record(rate_bps: float, server: str | None = None, machine: Machine = SERVER) -> Calibration:
    return Calibration(machine, "model", RateModel(7.0, rate_bps, 2.0), 0.8, server=server)


def test_server_records_live_beside_this_machines_and_replace_only_their_own(tmp_path):
    path = tmp_path / "calibration.json"
    save(record(5e6, machine=HERE), path)
    save(record(7e6, "10.0.0.1"), path)
    save(record(6e6, "10.0.0.2"), path)       # the same machine behind two addresses: two records
    save(record(8e6, "10.0.0.1"), path)       # measured again: replaces that server's
    assert len(read_records(path)) == 3
    assert find_server("model", "10.0.0.1", path).model.faithful_rate_bps == 8e6
    assert find_server("bmv2", "10.0.0.1", path) is None
    assert find("model", HERE, path).server is None and find("model", SERVER, path) is None


def test_auto_over_servers_takes_the_slowest_for_its_share_of_the_processes():
    even = {"a": 0.5, "b": 0.5}
    same = ServerRates({"a": record(7e6, "a"), "b": record(7e6, "b")}, even)
    assert same.for_processes(28).rate_bps == record(7e6).rate_bps(14)          # each server holds half
    lopsided = ServerRates({"a": record(7e6, "a"), "b": record(7e6, "b")}, {"a": 0.25, "b": 0.75})
    rate = lopsided.for_processes(28)
    assert rate.rate_bps == record(7e6).rate_bps(21) < same.for_processes(28).rate_bps
    assert "slowest server, b" in rate.note and "a: 7 processes" in rate.note and "b: 21 processes" in rate.note
    slower = ServerRates({"a": record(3e6, "a"), "b": record(7e6, "b")}, even).for_processes(28)
    assert slower.rate_bps == record(3e6).rate_bps(14) and "slowest server, a" in slower.note


def test_a_server_without_a_record_takes_this_machines_and_says_so(tmp_path):
    path = tmp_path / "calibration.json"
    save(record(7e6, "a"), path)
    here = record(7e6, machine=HERE)
    rate = server_rates("model", {"a": 0.5, "b": 0.5}, here, path).for_processes(28)
    assert rate.rate_bps == here.rate_bps(28) < record(7e6).rate_bps(14)        # the whole network's, not b's share
    assert "server b has no calibration of target model: this machine's for the whole network stands in" in rate.note
    assert "b: 28 processes" in rate.note and "a: 14 processes" in rate.note
