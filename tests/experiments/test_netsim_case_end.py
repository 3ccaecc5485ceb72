"""The end of a netsim case (`NetsimBackend.run_case`): the collector does not run during it, and
owes nothing after it: every object of the case is freed by reference counting when it ends, also
when it raises, and the collector is as the case found it."""
from __future__ import annotations

import gc
from collections import Counter
from pathlib import Path

import pytest

from experiments.backends.netsim_backend import NetsimBackend
from experiments.backends.netsim_traffic import Traffic
from experiments.scenario import load_scenario
from host_agent.collectives.driver import EndpointMessenger
from host_agent.transport.endpoint import Connection, Endpoint
from host_agent.transport.tally import Tally
from netsim import Network, SimHost, SimLink, SimSwitch, Simulator
from simulation import Simulation

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
CASE_CLASSES = (Simulator, Network, SimHost, SimLink, SimSwitch, Endpoint, Connection, Tally, Simulation, Traffic,
                EndpointMessenger)


def alive() -> Counter:
    """How many objects of CASE_CLASSES the collector knows of, by class."""
    return Counter(type(o).__name__ for o in gc.get_objects() if isinstance(o, CASE_CLASSES))


def small_cases() -> list:
    """(label, case): point-to-point flows with trimming (incast), a collective under gray loss (its
    fault's targets drawn by endpoints of their own), a failover with rerouting (RoCE)."""
    chosen = []
    for name, index in (("incast.yaml", 0), ("gray.yaml", 0), ("failover.yaml", 1)):
        case = load_scenario(EXPERIMENTS / name, quick=True).cases()[index]
        chosen.append((f"{name}: {case.label}", case))
    return chosen


def test_no_object_of_a_case_outlives_it_with_the_collector_off():
    cases = small_cases()
    enabled = gc.isenabled()
    gc.collect()
    before = alive()
    gc.disable()
    try:
        for label, case in cases:
            record = NetsimBackend().run_case(case)
            assert record.flows and record.end > 0, label
            assert alive() == before, label
            assert gc.collect() == 0, label   # no cycle of any other class either
    finally:
        if enabled:
            gc.enable()


def test_a_case_gives_the_collector_back_as_it_found_it_and_frees_its_objects_also_when_it_raises():
    [(_, case)] = small_cases()[:1]
    threshold, enabled = gc.get_threshold(), gc.isenabled()

    def stop_at_the_second_sample(share: float) -> None:
        assert not gc.isenabled()             # off while the case runs
        if share > 0:
            raise RuntimeError("stopped by the test")

    try:
        gc.enable()
        gc.set_threshold(555, 7, 3)
        NetsimBackend().run_case(case)
        assert gc.isenabled() and gc.get_threshold() == (555, 7, 3)
        gc.collect()
        before = alive()
        with pytest.raises(RuntimeError, match="stopped by the test"):
            NetsimBackend().run_case(case, stop_at_the_second_sample)
        assert gc.isenabled() and gc.get_threshold() == (555, 7, 3)
        gc.disable()
        with pytest.raises(RuntimeError):
            NetsimBackend().run_case(case, stop_at_the_second_sample)
        assert not gc.isenabled()
        assert alive() == before              # the raising case's network and traffic were closed too
    finally:
        gc.set_threshold(*threshold)
        if enabled:
            gc.enable()
