"""A whole fabric of reference switches programmed by controller/routes.py, in-process.

Every switch is a SwitchCore holding the program the controller computes; links deliver frames
to the neighbour's port. Packets sent on every uSID path of topologies.paths must arrive at the
destination NIC through exactly the path's switches, and baseline (ECMP) packets must arrive too.
This ties the addressing plan, the route computation and the pipeline contract together.
"""
from __future__ import annotations

from collections import deque

import pytest

from controller.routes import compute_programs
from wire import codec, constants
from wire.packets import DataPacket
from pipeline_contract.p4info import load_p4info
from topologies import builders
from topologies.paths import all_pairs_paths


class Fabric:
    """Reference switches wired as a topology; frames travel hop by hop until a host takes them."""

    def __init__(self, topo):
        self.topo = topo
        self.p4info = load_p4info()
        self.cores = {}
        self.in_flight: deque = deque()
        self.delivered: list[tuple[str, int, bytes]] = []      # (host, plane, frame)
        self.visits: list[str] = []
        from refswitch.switch import SwitchCore
        for name, program in compute_programs(topo).items():
            core = SwitchCore(self._transmitter(name), self.p4info)
            core.tables.install(program.entries)
            self.cores[name] = core

    def _transmitter(self, switch: str):
        def transmit(port: int, frame: bytes, priority: int) -> bool:
            far = self.topo.neighbor(switch, port)
            if self.topo.is_host(far.node):
                self.delivered.append((far.node, far.port, frame))
            else:
                self.in_flight.append((far.node, far.port, frame))
            return True
        return transmit

    def send(self, switch: str, port: int, frame: bytes) -> None:
        """Inject a frame at a switch port and run the fabric until nothing is in flight."""
        self.in_flight.append((switch, port, frame))
        hops = 0
        while self.in_flight:
            name, in_port, f = self.in_flight.popleft()
            self.visits.append(name)
            self.cores[name].receive(f, in_port)
            hops += 1
            assert hops < 64, "forwarding loop"


def frame(src, dst, ev: int, dscp: int = constants.DSCP_TRIMMABLE) -> bytes:
    pkt = DataPacket(src=src.packed, dst=dst.packed, ev=ev, qp=1, psn=0, va=0, rkey=1, length=64, msg_id=1,
                     msg_len=64, tsval=0, payload=bytes(64), dscp=dscp)
    return codec.encode(pkt, bytes(6), bytes(6))


@pytest.mark.parametrize("topo", [builders.fat_tree(4), builders.multi_plane(planes=2, leaves=2, spines=2)],
                         ids=["fat_tree4", "multi_plane2"])
def test_every_usid_path_delivers_through_its_switches(topo):
    fabric = Fabric(topo)
    checked = 0
    for (src, dst), paths in all_pairs_paths(topo).items():
        dst_nics = {nic.plane: nic for nic in topo.host_nics(dst)}
        for path in paths:
            fabric.delivered.clear()
            fabric.visits.clear()
            fabric.send(path.src_nic.switch, path.src_nic.switch_port,
                        frame(path.src_nic.address, path.address, ev=checked))
            assert len(fabric.delivered) == 1, f"{src}->{dst} via {path.switches}: {fabric.delivered}"
            host, plane, out = fabric.delivered[0]
            assert (host, plane) == (dst, path.plane)
            assert fabric.visits == list(path.switches)
            assert out[38:54] == dst_nics[path.plane].address.packed       # every uSID consumed
            checked += 1
    assert checked > 0


def test_baseline_ecmp_packets_reach_their_nic_over_shortest_paths():
    topo = builders.fat_tree(4)
    fabric = Fabric(topo)
    hosts = [h.name for h in topo.hosts]
    src, dst = hosts[0], hosts[-1]
    src_nic, dst_nic = topo.host_nics(src)[0], topo.host_nics(dst)[0]
    shortest = {len(p.switches) for p in all_pairs_paths(topo)[(src, dst)]}
    routes_used = set()
    for ev in range(0, 64 * 0x9E37, 0x9E37):
        fabric.delivered.clear()
        fabric.visits.clear()
        fabric.send(src_nic.switch, src_nic.switch_port,
                    frame(src_nic.address, dst_nic.address, ev=ev, dscp=constants.DSCP_NO_TRIM))
        assert [(h, p) for h, p, _ in fabric.delivered] == [(dst, dst_nic.plane)]
        assert len(fabric.visits) in shortest
        routes_used.add(tuple(fabric.visits))
    assert len(routes_used) > 1                                   # ECMP spreads flows over paths


class TimedFabric(Fabric):
    """A Fabric whose switches pace their egress queues at the links' rates on one virtual clock."""

    def __init__(self, topo):
        self.now = 0.0
        super().__init__(topo)
        for name, program in compute_programs(topo).items():
            core = self.cores[name]
            core.clock = lambda: self.now
            for q in program.queues:
                core.queues.configure(q.port, depth=q.depth_pkts, rate_bps=q.rate_bps)

    def run(self) -> None:
        """Deliver everything in flight, then advance the clock to each next departure until all is sent."""
        while True:
            while self.in_flight:
                name, in_port, f = self.in_flight.popleft()
                self.cores[name].receive(f, in_port)
            dues = [d for d in (core.drain() for core in self.cores.values()) if d is not None]
            if self.in_flight:
                continue
            if not dues:
                return
            self.now = max(self.now, min(dues))


def test_incast_is_trimmed_at_the_last_hop_not_dropped():
    topo = builders.leaf_spine(leaves=2, spines=2, hosts_per_leaf=3)
    fabric = TimedFabric(topo)
    hosts = [h.name for h in topo.hosts]
    receiver, senders = hosts[0], hosts[3:]                 # three senders on the other leaf
    dst_nic = topo.host_nics(receiver)[0]
    sent = 0
    for i, sender in enumerate(senders):
        paths = all_pairs_paths(topo)[(sender, receiver)]
        for k in range(40):                                 # a burst of 40 packets from each sender
            path = paths[k % len(paths)]
            fabric.in_flight.append((path.src_nic.switch, path.src_nic.switch_port,
                                     frame(path.src_nic.address, path.address, ev=i * 1000 + k)))
            sent += 1
    fabric.run()
    arrived = [codec.decode(f) for h, _, f in fabric.delivered if h == receiver]
    assert len(arrived) == sent                            # nothing lost: the overflow is trimmed
    lasthop = [p for p in arrived if p.trimmed and p.dscp == constants.DSCP_TRIMMED_LASTHOP]
    whole = [p for p in arrived if not p.trimmed]
    assert lasthop and whole
    assert all(len(p.payload) == 64 for p in whole) and all(p.length == 64 for p in lasthop)
    leaf = dst_nic.switch
    counters = fabric.cores[leaf].pipeline.counters
    assert counters.read("MrcIngress.trimmed", dst_nic.switch_port)[0] == len(lasthop)
    assert counters.read("MrcIngress.ecn_marked", dst_nic.switch_port)[0] == 0     # no ECN on the last hop
    assert all(core.pipeline.counters.read("queue_drops", p)[0] == 0
               for core in fabric.cores.values() for p in range(1, 8))
