"""The end of a run: a closed network, and the simulation on it, are freed by reference counting
alone (the cyclic garbage collector need not look for them), and `NoCollections` gives the collector
back as it found it."""
from __future__ import annotations

import gc
from collections import Counter

import pytest

from host_agent.transport.endpoint import Connection, Endpoint
from netsim import Network, NoCollections, SimHost, SimLink, SimSwitch, Simulator
from simulation import Flow, Simulation, leaf_spine_config, leaf_spine_fabric

RUN_CLASSES = (Simulator, Network, SimHost, SimLink, SimSwitch, Endpoint, Connection, Simulation)


def alive() -> Counter:
    """How many objects of RUN_CLASSES the collector knows of, by class."""
    return Counter(type(o).__name__ for o in gc.get_objects() if isinstance(o, RUN_CLASSES))


def test_a_network_closed_mid_run_is_freed_by_reference_counting_with_its_simulation():
    gc.collect()
    before = alive()
    with NoCollections():
        net = leaf_spine_fabric(planes=2)
        run = Simulation(net, leaf_spine_config())
        run.add_flow(Flow("h1", "h4", 200_000))
        run.add_flow(Flow("h2", "h3", 200_000))
        run.run(until=20e-6)                  # stopped with events in the heap and the lanes, packets on the wire
        assert not run.done() and alive()["SimLink"] == before["SimLink"] + 2 * len(net.cables)
        link = net.fabric_links()[0]
        sent = link.counters["tx"]
        run.close()
        net.close()
        run.close()                           # again: nothing more to do, in either build
        net.close()
        assert link.closed and all(host.closed for host in net.hosts.values())
        assert link.counters["tx"] == sent > 0     # what was counted can still be read
        net.sim.run()                         # and nothing is left to run
        assert net.sim.now == pytest.approx(20e-6)
        del run, net, link
        assert alive() == before
        assert gc.collect() == 0              # nothing left for the collector either


def test_no_collections_turns_the_collector_off_inside_and_gives_it_back_as_it_was_also_on_an_error():
    threshold, enabled = gc.get_threshold(), gc.isenabled()
    try:
        gc.enable()
        gc.set_threshold(700, 10, 10)
        with pytest.raises(KeyError):
            with NoCollections():
                assert not gc.isenabled()
                gc.set_threshold(123_456, 10, 10)     # as a run inside does (`FewerCollections`)
                raise KeyError("left by an error")
        assert gc.isenabled() and gc.get_threshold() == (700, 10, 10)
        gc.disable()
        with NoCollections():
            pass
        assert not gc.isenabled()             # off before it: off after it
    finally:
        gc.set_threshold(*threshold)
        if enabled:
            gc.enable()
