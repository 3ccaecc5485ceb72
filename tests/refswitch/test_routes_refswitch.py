"""Cross-check: the computed programs, installed into the reference model's tables (checked
against the P4Info), forward real MRC frames hop by hop to the destination host on every path.

Uses refswitch and wire.codec; skips with the reason if they cannot be imported.
"""
import ipaddress

import pytest

from controller.routes import compute_programs, rerouted_programs
from topologies.builders import fat_tree, multi_plane
from topologies.paths import all_pairs_paths

try:
    from wire import codec
    from wire.packets import Probe
    from pipeline_contract.p4info import P4InfoIndex, load_p4info
    from refswitch.pipeline import Pipeline
    from refswitch.tables import TableStore
except ImportError as error:        # the model or codec is not there yet
    pytest.skip(f"reference model or codec unavailable: {error}", allow_module_level=True)

MAX_HOPS = 8


def model_network(programs):
    """One reference-model pipeline per switch, programmed with its entries."""
    index = P4InfoIndex(load_p4info())
    pipelines = {}
    for name, program in programs.items():
        tables = TableStore(index)
        tables.install(program.entries)          # rejects unknown names, widths, params
        pipelines[name] = Pipeline(tables)
    return pipelines


def send(topo, pipelines, src_nic, dst, ev):
    """Forward a probe from `src_nic` to address `dst`; (switches visited, (host, port) or None)."""
    mac = lambda text: bytes.fromhex(text.replace(":", ""))
    probe = Probe(src=src_nic.address.packed, dst=ipaddress.IPv6Address(dst).packed, ev=ev, qp=1,
                  probe_id=ev, tsval=0)
    frame = codec.encode(probe, mac(src_nic.mac), bytes(6))
    switch, port, visited = src_nic.switch, src_nic.switch_port, []
    queued = [0] * 512
    while len(visited) < MAX_HOPS:
        visited.append(switch)
        result = pipelines[switch].process(frame, port, queued)
        if result is None:
            return tuple(visited), None
        out_port, frame, _ = result
        far = topo.neighbor(switch, out_port)
        if topo.is_host(far.node):
            return tuple(visited), tuple(far)
        switch, port = far
    return tuple(visited), None


@pytest.mark.parametrize("make", [lambda: fat_tree(4), lambda: multi_plane(2, 3, 2, 1)], ids=["fattree4", "multiplane"])
def test_model_delivers_every_usid_path_and_baseline_packet(make):
    topo = make()
    pipelines = model_network(compute_programs(topo))
    for (src, dst), paths in all_pairs_paths(topo).items():
        for n, path in enumerate(paths):
            visited, reached = send(topo, pipelines, path.src_nic, path.address, ev=n + 1)
            assert (visited, reached) == (path.switches, (dst, path.plane)), (src, dst, str(path.address))
        for nic in topo.host_nics(src):
            shortest = {p.switches for p in paths if p.plane == nic.plane}
            for ev in (1, 2, 3):
                visited, reached = send(topo, pipelines, nic, topo.host_nic(dst, nic.plane).address, ev)
                assert reached == (dst, nic.plane) and visited in shortest


def test_model_after_rerouting_drops_exactly_the_paths_through_the_dead_link():
    topo = fat_tree(4)
    cut = ("s9", "s17")
    pipelines = model_network(rerouted_programs(topo, [cut]))
    for (src, dst), paths in all_pairs_paths(topo).items():
        for path in paths:
            crosses = any({a, b} == set(cut) for a, b in zip(path.switches, path.switches[1:]))
            _, reached = send(topo, pipelines, path.src_nic, path.address, ev=1)
            assert (reached is None) == crosses, (src, dst, path.switches)
