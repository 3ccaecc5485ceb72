"""Checks of lab 1: the student's paths.py against the testbed's own paths, switches and metrics."""
import ipaddress

from controller.routes import compute_programs
from experiments.backends.netsim_backend import NetsimBackend
from experiments.metrics import imbalance, link_utilisation
from experiments.scenario import load_scenario
from labs.catalog import LABS_DIR
from labs.checking import Check, CheckFailed
from pipeline_contract.p4info import P4InfoIndex, load_p4info
from refswitch.pipeline import Pipeline
from refswitch.tables import TableStore
from topologies.paths import host_paths
from topologies.spec import topology_from_spec
from wire import codec
from wire import constants as C
from wire.packets import Probe

PAIRS = {"leafspine:2x4x4": [("h1", "h5"), ("h6", "h2"), ("h1", "h2")],
         "leafspine:4x2x2": [("h1", "h8"), ("h3", "h4")],
         "multiplane:2x2x2x2": [("h1", "h4"), ("h2", "h1")]}
PERMUTATION = LABS_DIR.parent / "experiments" / "permutation.yaml"
MAX_HOPS = 8


def _text(address) -> str:
    return str(ipaddress.IPv6Address(address))


def check_paths(ws):
    usid_paths = ws.module("paths.py").usid_paths
    compared = 0
    for spec, pairs in PAIRS.items():
        topo = topology_from_spec(spec)
        for src, dst in pairs:
            want = sorted((p.switches, _text(p.address)) for p in host_paths(topo, src, dst))
            got = usid_paths(topo, src, dst)
            try:
                got = sorted((tuple(s), _text(a)) for s, a in got)
            except (TypeError, ValueError) as exc:
                raise CheckFailed(f"{spec} {src}->{dst}: expected (switches, address) pairs, got {got!r} ({exc})")
            if got != want:
                raise CheckFailed(f"{spec} {src}->{dst}: got {len(got)} path(s) {got[:2]}..., "
                                  f"the testbed has {len(want)}, e.g. {want[0]}")
            compared += len(want)
    return f"{compared} paths on {len(PAIRS)} topologies match, switches and addresses"


def _model_switches(topo):
    index = P4InfoIndex(load_p4info())
    pipelines = {}
    for name, program in compute_programs(topo).items():
        tables = TableStore(index)
        tables.install(program.entries)
        pipelines[name] = Pipeline(tables)
    return pipelines


def _walk(topo, pipelines, nic, address):
    """The destination address of a probe as each reference switch forwards it."""
    probe = Probe(src=nic.address.packed, dst=ipaddress.IPv6Address(address).packed, ev=7, qp=1,
                  probe_id=1, tsval=0)
    frame = codec.encode(probe, bytes.fromhex(nic.mac.replace(":", "")), bytes(6))
    switch, port, seen = nic.switch, nic.switch_port, []
    while len(seen) < MAX_HOPS:
        result = pipelines[switch].process(frame, port, [0] * 512)
        if result is None:
            raise RuntimeError(f"the reference switch {switch} dropped the probe to {address}")
        out_port, frame, _ = result
        seen.append(_text(frame[C.IPV6_OFFSET + 24:C.IPV6_OFFSET + 40]))   # destination it leaves with
        far = topo.neighbor(switch, out_port)
        if topo.is_host(far.node):
            return seen
        switch, port = far
    raise RuntimeError(f"probe to {address} still in the fabric after {MAX_HOPS} switches")


def check_shift(ws):
    after_each_switch = ws.module("paths.py").after_each_switch
    walked = 0
    for spec, src, dst in (("leafspine:2x4x4", "h1", "h5"), ("leafspine:2x4x4", "h1", "h2"),
                           ("multiplane:2x2x2x2", "h1", "h4")):
        topo = topology_from_spec(spec)
        pipelines = _model_switches(topo)
        for path in host_paths(topo, src, dst):
            want = _walk(topo, pipelines, path.src_nic, path.address)
            got = [_text(a) for a in after_each_switch(str(path.address))]
            if got != want:
                raise CheckFailed(f"{spec} {src}->{dst} via {'-'.join(path.switches)}: "
                                  f"you say the packet carries {got}, the switches forwarded it as {want}")
            walked += 1
    return f"{walked} packets followed switch by switch through the reference switches"


def _permutation_runs():
    scenario = load_scenario(PERMUTATION, quick=True)
    return [(case.transport.name, NetsimBackend().run_case(case)) for case in scenario.cases()]


def check_imbalance(ws):
    link_imbalance = ws.module("paths.py").link_imbalance
    toy = {"s1->s3": 300, "s3->s2": 300, "s1->s4": 0, "s4->s2": 0}
    if abs(link_imbalance(toy) - 2.0) > 1e-9:
        raise CheckFailed(f"two links carrying 300 bytes and two idle ones: you say {link_imbalance(toy)!r}, "
                          "the imbalance is 2.0")
    figures = []
    for name, record in _permutation_runs():
        got = link_imbalance({link.name: link.tx_bytes for link in record.links})
        want = imbalance(link_utilisation(record))
        if abs(got - want) > 1e-6 * want:
            raise CheckFailed(f"permutation run '{name}': you say {got:.3f}, the testbed measures {want:.3f}")
        figures.append(f"{name}: {got:.2f}")
    return "permutation on leafspine:2x4x4 (quick), max/mean link load: " + "; ".join(figures)


CHECKS = [
    Check("uSID paths of a host pair", "a path address is the plane's locator, then one uSID for each switch "
          "in the order the packet meets them, then the destination host's uSID; a NIC only reaches "
          "the other host's NIC on its own plane", check_paths),
    Check("the uSID shift, hop by hop", "each switch consumes exactly its own uSID: what moves, by how "
          "much, and what fills the space it leaves?", check_shift),
    Check("link imbalance", "imbalance compares the busiest link with the average link, and a link "
          "no flow was hashed onto is part of that average", check_imbalance),
]
