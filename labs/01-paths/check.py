"""Checks of lab 1: the student's paths.py against the testbed's own paths, switches and metrics."""
import ipaddress

from controller.routes import compute_programs
from experiments.backends.netsim_backend import NetsimBackend
from experiments.metrics import imbalance, link_utilisation
from experiments.scenario import load_scenario
from labs.catalog import LABS_DIR
from labs.checking import Check, CheckFailed
from labs.originality import ReferenceWatch, functions_of, require_own
from pipeline_contract.p4info import P4InfoIndex, load_p4info
from refswitch.pipeline import Pipeline
from refswitch.tables import TableStore
import experiments.metrics
import topologies.addressing
import topologies.paths
from topologies.paths import host_paths
from topologies.spec import topology_from_spec
from wire import codec
from wire import constants
from wire.packets import Probe

PAIRS = {"leafspine:2x4x4": [("h1", "h5"), ("h6", "h2"), ("h1", "h2")],
         "leafspine:4x2x2": [("h1", "h8"), ("h3", "h4")],
         "multiplane:2x2x2x2": [("h1", "h4"), ("h2", "h1")]}
PERMUTATION = LABS_DIR.parent / "experiments" / "permutation.yaml"
MAX_HOPS = 8


def _text(address) -> str:
    return str(ipaddress.IPv6Address(address))


# the project's own answers to this lab: a student's functions must not be them or call them
REFERENCES = (functions_of(topologies.paths, ("host_paths", "all_pairs_paths"))
              + functions_of(topologies.addressing, ("usid_path_address", "parse_usid_address"))
              + functions_of(experiments.metrics, ("imbalance", "link_utilisation")))


def _own(ws, name):
    """The student's function `name` of paths.py, checked not to be the project's."""
    fn = getattr(ws.module("paths.py"), name, None)
    if not callable(fn):
        raise CheckFailed(f"paths.py defines no function {name}")
    require_own(fn, [getattr(owner, n) for owner, n in REFERENCES], f"paths.py's {name}")
    return fn


def _groups(address: str) -> list[str]:
    return ipaddress.IPv6Address(address).exploded.split(":")


def _first_group_differing(mine: str, theirs: str) -> int:
    """1-based index of the first 16-bit group where two addresses differ."""
    return next(i for i, (a, b) in enumerate(zip(_groups(mine), _groups(theirs)), 1) if a != b)


def _path_difference(got: list, want: list) -> str:
    """The first path where the student's list and the testbed's differ, in the student's terms."""
    mine = {}
    for switches, address in got:
        mine.setdefault(switches, []).append(address)
    for switches, address in want:
        if (switches, address) in got:
            continue
        route = "-".join(switches)
        if switches in mine:
            group = _first_group_differing(mine[switches][0], address)
            return (f"via {route} your address {mine[switches][0]} differs from the testbed's from its "
                    f"16-bit group {group} on (group 1 is the first)")
        return f"you give no path via {route}, which the testbed has"
    extra = next((s, a) for s, a in got if (s, a) not in want)
    return f"you give a path via {'-'.join(extra[0])} ({extra[1]}) that the testbed does not have"


def check_paths(ws):
    usid_paths = _own(ws, "usid_paths")
    compared = 0
    with ReferenceWatch(REFERENCES) as watch:
        for spec, pairs in PAIRS.items():
            topo = topology_from_spec(spec)
            for src, dst in pairs:
                want = sorted((p.switches, _text(p.address)) for p in host_paths(topo, src, dst))
                got = watch.call(usid_paths, topo, src, dst)
                try:
                    got = sorted((tuple(s), _text(a)) for s, a in got)
                except (TypeError, ValueError) as exc:
                    raise CheckFailed(f"{spec} {src}->{dst}: expected (switches, address) pairs, got "
                                      f"{str(got)[:200]} ({exc})")
                if got != want:
                    raise CheckFailed(f"{spec} {src}->{dst}: {_path_difference(got, want)} "
                                      f"(you give {len(got)} path(s), the testbed has {len(want)})",
                                      expected=f"{spec} {src}->{dst}: {want}")
                compared += len(want)
        watch.verify("paths.py's usid_paths")
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
        seen.append(_text(frame[constants.IPV6_OFFSET + 24:constants.IPV6_OFFSET + 40]))   # destination it leaves with
        far = topo.neighbor(switch, out_port)
        if topo.is_host(far.node):
            return seen
        switch, port = far
    raise RuntimeError(f"probe to {address} still in the fabric after {MAX_HOPS} switches")


def _shift_difference(got: list, want: list, switches) -> str:
    for hop, (mine, theirs) in enumerate(zip(got, want)):
        if mine != theirs:
            try:
                group = f", from its 16-bit group {_first_group_differing(mine, theirs)} on"
            except (ValueError, StopIteration):
                group = ""
            return (f"after switch {hop + 1} ({switches[hop]}) you say the packet carries {mine}; the switch "
                    f"forwarded another address{group}")
    return (f"the path crosses {len(switches)} switch(es) and the packet left {len(want)} of them with a new "
            f"address; you give {len(got)} address(es)")


def check_shift(ws):
    after_each_switch = _own(ws, "after_each_switch")
    walked = 0
    with ReferenceWatch(REFERENCES) as watch:
        for spec, src, dst in (("leafspine:2x4x4", "h1", "h5"), ("leafspine:2x4x4", "h1", "h2"),
                               ("multiplane:2x2x2x2", "h1", "h4")):
            topo = topology_from_spec(spec)
            pipelines = _model_switches(topo)
            for path in host_paths(topo, src, dst):
                want = _walk(topo, pipelines, path.src_nic, path.address)
                got = watch.call(after_each_switch, str(path.address))
                try:
                    got = [_text(a) for a in got]
                except (TypeError, ValueError) as exc:
                    raise CheckFailed(f"{spec} {src}->{dst}: expected a list of addresses, got {str(got)[:200]} ({exc})")
                if got != want:
                    raise CheckFailed(f"{spec} {src}->{dst} via {'-'.join(path.switches)} ({path.address}): "
                                      f"{_shift_difference(got, want, path.switches)}",
                                      expected=f"the switches forwarded it as {want}")
                walked += 1
        watch.verify("paths.py's after_each_switch")
    return f"{walked} packets followed switch by switch through the reference switches"


def _permutation_runs():
    scenario = load_scenario(PERMUTATION, quick=True)
    return [(case.transport.name, NetsimBackend().run_case(case)) for case in scenario.cases()]


def _direction(got: float, want: float) -> str:
    return "too high" if got > want else "too low"


def check_imbalance(ws):
    link_imbalance = _own(ws, "link_imbalance")
    toy = {"s1->s3": 300, "s3->s2": 300, "s1->s4": 0, "s4->s2": 0}
    with ReferenceWatch(REFERENCES) as watch:
        mine = watch.call(link_imbalance, dict(toy))
        if not isinstance(mine, (int, float)) or abs(mine - 2.0) > 1e-9:
            raise CheckFailed(f"two links carrying 300 bytes each and two idle ones: you say {mine!r}"
                              + (f", {_direction(mine, 2.0)}" if isinstance(mine, (int, float)) else ""),
                              expected="2.0")
        figures = []
        for name, record in _permutation_runs():
            got = watch.call(link_imbalance, {link.name: link.tx_bytes for link in record.links})
            want = imbalance(link_utilisation(record))
            if not isinstance(got, (int, float)) or abs(got - want) > 1e-6 * want:
                raise CheckFailed(f"permutation run '{name}': you say {got!r}"
                                  + (f", {_direction(got, want)}" if isinstance(got, (int, float)) else ""),
                                  expected=f"{want:.3f}")
            figures.append(f"{name}: {got:.2f}")
        watch.verify("paths.py's link_imbalance")
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
