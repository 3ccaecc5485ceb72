"""The controller against the reference model's real P4Runtime server (in-process, unix socket):
the computed programs of a whole topology install and verify, counters read back, and the
converging control plane's diffs apply cleanly. No root needed: no ports are opened."""
from __future__ import annotations

import pytest

from controller.convergence import ConvergingControlPlane, program_changes
from controller.installer import CompiledProgram, install, verify
from pipeline_contract.client import P4RuntimeClient
from controller.routes import compute_programs, rerouted_programs
from refswitch.p4runtime_server import P4RuntimeServer
from refswitch.switch import SwitchCore
from topologies.builders import leaf_spine


@pytest.fixture
def model_switches(tmp_path):
    """One reference-model core + P4Runtime server per switch of leafspine:2x2x2."""
    topo = leaf_spine(2, 2, 2)
    programs = compute_programs(topo)
    servers, clients, cores = [], {}, {}
    try:
        for name, program in programs.items():
            core = SwitchCore(lambda port, frame, priority=0: True)
            server = P4RuntimeServer(core, program.device_id, f"unix:{tmp_path}/{name}.sock")
            server.start()
            servers.append(server)
            cores[name] = core
            clients[name] = P4RuntimeClient(server.address, program.device_id, name=name).connect()
        yield topo, programs, clients, cores
    finally:
        for client in clients.values():
            client.close()
        for server in servers:
            server.stop(grace=0)


def test_computed_programs_install_and_verify_on_the_model(model_switches):
    topo, programs, clients, cores = model_switches
    pipeline = CompiledProgram.load()
    for name, program in programs.items():
        report = install(clients[name], program, pipeline)
        assert report.ok and report.installed == len(program.entries)
        assert cores[name].tables is not None
    counters = clients["s1"].read_counter("MrcIngress.rx")
    assert all(v.packets == 0 for v in counters.values())


def test_rerouted_diffs_apply_and_baseline_comes_back(model_switches):
    topo, programs, clients, _ = model_switches
    pipeline = CompiledProgram.load()
    for name, program in programs.items():
        install(clients[name], program, pipeline)
    link = topo.link_between("s1", "s3")
    rerouted = rerouted_programs(topo, [link])
    assert any(program_changes(programs[n], rerouted[n]) for n in programs)
    plane = ConvergingControlPlane(topo, clients, programs, delay=0)
    plane.apply(rerouted)
    assert all(verify(clients[n], p).ok for n, p in rerouted.items())
    plane.apply(compute_programs(topo))
    assert all(verify(clients[n], p).ok for n, p in programs.items())
