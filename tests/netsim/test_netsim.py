"""The in-process network: links, the switch pipeline contract, the network built from a topology."""
from __future__ import annotations

import random

import pytest

from simulation import Flow, Simulation, leaf_spine_config, leaf_spine_fabric, run_flows
from wire import constants
from wire.packets import DataPacket, Probe
from netsim import SimLink as Link, SimSwitch as Switch, Simulator
from netsim.sim import MAX_LANES, Call, EventLane, FifoLane, HeapLane
from netsim.switch import PortConfig, usid_shift
from topologies.addressing import node_address, usid_path_address
from wire.packets import wire_size


def usid_address(plane, usids):
    """fc00:<plane>:<usid>:...:: as 16 bytes (the last uSID is the destination host's)."""
    return usid_path_address(plane, usids[:-1], usids[-1]).packed


def prefix48(plane, usid):
    """The 128-bit value of the /48 prefix fc00:<plane>:<usid>::."""
    return int(node_address(plane, usid))


class Sink:
    """Records what arrives."""

    def __init__(self, sim):
        self.sim, self.got = sim, []

    def receive(self, pkt, port):
        self.got.append((self.sim.now, port, pkt))


class Recorder:
    """An endpoint that records the (NIC, packet) pairs it is handed and sends nothing."""

    def __init__(self):
        self.got = []

    def receive(self, now, nic, pkt):
        self.got.append((nic, pkt))

    def poll(self, now):
        return []

    def next_wakeup(self):
        return None

    def drain_events(self):
        return []


def data_pkt(dst, ev=1, payload=b"x" * 1000, dscp=constants.DSCP_TRIMMABLE, src=bytes(16)):
    return DataPacket(src=src, dst=dst, ev=ev, qp=1, psn=0, va=0, rkey=0, length=len(payload), msg_id=0,
                      msg_len=len(payload), tsval=0, payload=payload, dscp=dscp)


def test_usid_shift_consumes_the_first_usid():
    assert usid_shift(usid_address(1, [0x0101, 0x0102, 0x1003])) == usid_address(1, [0x0102, 0x1003])


def test_stop_ends_the_run_after_the_event_that_asked_and_the_next_run_goes_on():
    sim, ran = Simulator(), []
    sim.at(1.0, ran.append, 1)
    sim.at(2.0, lambda: (ran.append(2), sim.stop()))
    sim.at(2.0, ran.append, 3)                  # same time, scheduled after: not run by this run
    sim.at(3.0, ran.append, 4)
    sim.run(until=10.0)
    assert ran == [1, 2] and sim.now == 2.0
    sim.run(until=10.0)
    assert ran == [1, 2, 3, 4] and sim.now == 10.0


def test_a_run_until_a_time_already_past_leaves_the_clock_and_the_order_as_they_were():
    """`run(until)` with `until` earlier than now runs nothing and does not turn the clock back: an
    event then scheduled through a lane is due after those already waiting there, not before them
    (a lane is first-in first-out: it assumes the clock never goes back)."""
    sim, ran = Simulator(), []
    lane = sim.lane(1.0)
    sim.at(2.5, lambda: lane.schedule(Call(lambda: ran.append(("B", sim.now)), ())))   # due 3.5
    sim.at(3.0, ran.append, ("keep", 3.0))
    sim.run(until=2.6)
    sim.run(until=1.0)
    assert sim.now == 2.6 and ran == []
    lane.schedule(Call(lambda: ran.append(("C", sim.now)), ()))                         # due 3.6
    sim.run()
    assert ran == [("keep", 3.0), ("B", 3.5), ("C", 3.6)]


def test_an_event_before_now_or_a_lane_of_a_negative_delay_is_refused_naming_it():
    """Scheduling before now (or at NaN), or a lane of a negative or NaN delay, would run an event
    before the clock; refused with the time or delay named. `at` still clamps a past time to now."""
    sim, ran = Simulator(), []
    sim.at(1.0, lambda: None)
    sim.run()
    with pytest.raises(ValueError, match="earlier than now"):
        sim.schedule(0.5, Call(ran.append, (1,)))
    with pytest.raises(ValueError, match="earlier than now"):
        sim.schedule(float("nan"), Call(ran.append, (1,)))
    for delay in (-1e-9, float("nan")):
        with pytest.raises(ValueError, match="delay must be"):
            sim.lane(delay)
    sim.at(0.5, lambda: ran.append(sim.now))
    sim.run()
    assert ran == [1.0]


def test_events_of_one_time_run_in_scheduling_order_also_when_a_run_stops_among_them():
    """Equal times run in the order scheduled, those scheduled while that time runs last; a run cut
    among them (max_events) leaves the rest ahead of what is scheduled there later; the collector's
    threshold is the caller's again after a run."""
    import gc
    sim, ran = Simulator(), []
    sim.at(1.0, lambda: (ran.append("a"), sim.at(1.0, ran.append, "d")))
    sim.at(1.0, ran.append, "b")
    sim.at(0.5, ran.append, "first")
    sim.at(1.0, ran.append, "c")
    before = gc.get_threshold()
    sim.run(max_events=3)
    assert ran == ["first", "a", "b"] and sim.now == 1.0 and gc.get_threshold() == before
    sim.at(1.0, ran.append, "e")                # scheduled after the cut: after c and d
    sim.run()
    assert ran == ["first", "a", "b", "c", "d", "e"] and sim.events_run == 6


class _ReferenceQueue:
    """The order events must run in, kept the plain way: (time, scheduling number) pairs, the least first."""

    def __init__(self):
        self.now, self.pending, self.scheduled = 0.0, [], 0

    def schedule(self, t, fire):
        self.pending.append((t, self.scheduled, fire))
        self.scheduled += 1

    def run(self, max_events):
        for _ in range(max_events):
            if not self.pending:
                return
            entry = min(self.pending, key=lambda e: e[:2])
            self.pending.remove(entry)
            self.now = entry[0]
            entry[2]()


def _branching_program(queue, schedule_in, schedule_at, ran):
    """Events that schedule more events, the same ones whatever runs them: each event, named by where
    it comes from, picks its children by a random stream of its own; a child is due after one of
    MAX_LANES + 4 delays (lanes, some past the limit: the heap) or at a time of its own (the heap),
    all multiples of 1/8 so that many fall at equal times."""
    delays = [k / 8 for k in range(MAX_LANES + 4)]

    def event(name):
        def fire():
            ran.append((queue.now, name))
            rng = random.Random(name)
            for child in range(rng.choice((0, 1, 1, 2, 3)) if len(ran) < 3000 else 0):
                label = f"{name}.{child}"
                if rng.random() < 0.8:
                    schedule_in(rng.choice(delays), event(label))
                else:
                    schedule_at(queue.now + rng.randrange(0, 24) / 8, event(label))
        return fire
    return event


def test_the_lanes_and_the_heap_run_events_in_time_then_scheduling_order():
    """Events due a fixed delay after they are scheduled (lanes, as links schedule theirs) and events
    at times of their own (the heap) run in the order of (time, scheduling number), also across runs
    cut by max_events with events scheduled in between: against a plain reference queue."""
    sim, ran = Simulator(), []
    event = _branching_program(sim, lambda d, fire: sim.lane(d).schedule(Call(fire, ())),
                               lambda t, fire: sim.at(t, fire), ran)
    ref, expected = _ReferenceQueue(), []
    ref_event = _branching_program(ref, lambda d, fire: ref.schedule(ref.now + d, fire), ref.schedule, expected)
    for start in range(40):                     # 40 roots, many at equal times, in both
        sim.lane(start % 5 / 8).schedule(Call(event(f"root{start}"), ()))
        ref.schedule(start % 5 / 8, ref_event(f"root{start}"))
    for cut, extra in ((7, "a"), (500, "b"), (10_000, "c")):
        sim.run(max_events=cut)
        ref.run(cut)
        sim.at(sim.now, event(extra))           # scheduled after the cut, at the time it stopped at
        ref.schedule(ref.now, ref_event(extra))
    sim.run()
    ref.run(10 ** 9)
    assert len(ran) > 3000 and ran == expected and sim.events_run == len(expected)
    kinds = [type(sim.lane(k / 8)) for k in range(MAX_LANES + 4)]     # past MAX_LANES: on the heap
    assert set(kinds) == {FifoLane, HeapLane} and kinds.count(FifoLane) == MAX_LANES


def test_event_lanes_count_with_the_lanes_and_take_only_timed_events():
    """A lane of TimedEvents (a link's end of serialisation waits in one) is a lane of its own while
    fewer than MAX_LANES were made, counted with the item lanes; past that its events wait in the
    heap. It takes a TimedEvent without an item, nothing else."""
    sim = Simulator()
    half = MAX_LANES // 2
    kinds = [type(sim.event_lane(k / 8)) for k in range(half)] + [type(sim.lane(k / 8)) for k in range(MAX_LANES)]
    assert (kinds.count(EventLane), kinds.count(FifoLane), kinds.count(HeapLane)) == (half, MAX_LANES - half, half)
    with pytest.raises(TypeError, match="TimedEvent"):
        sim.event_lane(0.0).schedule(Call(print, ()))


def test_link_serialises_then_propagates_and_serves_high_priority_first():
    sim = Simulator()
    sink = Sink(sim)
    link = Link(sim, "l", rate_bps=8e9, delay=1e-6, depth=10)
    link.connect(sink, 7)
    low = [data_pkt(bytes(16), payload=bytes(894)) for _ in range(3)]        # 1000 bytes: 1 us each
    for p in low:
        link.send(p, constants.PRIORITY_LOW)
    high = Probe(src=bytes(16), dst=bytes(16), ev=0, qp=1, probe_id=9, tsval=0)
    link.send(high, constants.PRIORITY_HIGH)
    sim.run()
    assert wire_size(low[0]) == 1000
    order = [p for _, _, p in sink.got]
    assert order == [low[0], high, low[1], low[2]]                   # the probe overtakes the queue
    assert sink.got[0][0] == pytest.approx(2e-6) and sink.got[0][1] == 7


def test_a_links_delay_and_far_end_are_fixed_once_made():
    sim = Simulator()
    sink = Sink(sim)
    link = Link(sim, "l", rate_bps=8e9, delay=1e-6, depth=10)
    link.connect(sink, 7)
    assert link.delay == 1e-6 and link.dest == (sink, 7)
    with pytest.raises(AttributeError):
        link.delay = 2e-6                       # packets on it would overtake one another
    with pytest.raises(AttributeError):
        link.dest = (sink, 8)
    assert link.delay == 1e-6 and link.dest == (sink, 7)


def test_link_tail_drops_and_down_link_loses_everything():
    sim = Simulator()
    sink = Sink(sim)
    link = Link(sim, "l", 1e9, 1e-6, depth=2)
    link.connect(sink, 1)
    sent = [link.send(data_pkt(bytes(16)), constants.PRIORITY_LOW) for _ in range(5)]
    assert sent == [True, True, True, False, False]                  # one on the wire, two queued
    sim.at(1e-6, link.set_up, False)
    sim.run()
    assert sink.got == [] and link.counters["dropped_down"] == 3
    link.set_up(True)
    link.send(data_pkt(bytes(16)), constants.PRIORITY_LOW)
    sim.run()
    assert len(sink.got) == 1


def one_switch(trim=2, ecn=1, host_facing=False, ecn_max=0):
    sim = Simulator(3)
    sw = Switch(sim, "s", 0x0100)
    sw.add_local(prefix48(0, 0x0100) >> 80)
    sink = Sink(sim)
    link = Link(sim, "s->x", 1e9, 1e-6, depth=100)
    link.connect(sink, 1)
    sw.plug(1, link)
    sw.configure_port(1, PortConfig(trim, ecn, host_facing, ecn_max))
    sw.add_route(prefix48(0, 0x1001), 48, ("forward", 1))
    return sim, sw, sink


@pytest.mark.parametrize("host_facing,dscp", [(False, constants.DSCP_TRIMMED), (True, constants.DSCP_TRIMMED_LASTHOP)])
def test_switch_trims_at_the_threshold_and_marks_ecn_only_in_the_fabric(host_facing, dscp):
    sim, sw, sink = one_switch(trim=3, ecn=1, host_facing=host_facing)
    dst = usid_address(0, [0x0100, 0x1001])
    pkts = [data_pkt(dst) for _ in range(6)]
    for p in pkts:
        sw.receive(p, 2)
    sim.run()
    # 1st on the wire, then queue 0,1,2 -> 2nd..4th queued (ECN from queue 1 on), 5th and 6th trimmed
    trimmed = [p for p in pkts if p.trimmed]
    assert trimmed == pkts[4:]
    assert all(p.payload == b"" and p.dscp == dscp and p.length == 1000 for p in trimmed)
    assert wire_size(trimmed[0]) == constants.DATA_HEADERS_LEN
    marked = [p.ecn == constants.ECN_CE for p in pkts[:4]]
    assert marked == ([False] * 4 if host_facing else [False, False, True, True])
    arrival = [p for _, _, p in sink.got]
    assert arrival[:3] == [pkts[0], pkts[4], pkts[5]]                # trimmed headers jump the queue
    assert all(p.dst == usid_address(0, [0x1001]) for p in pkts)     # the switch consumed its uSID


def test_switch_ecn_ramp_marks_half_the_packets_halfway_up_and_none_at_its_foot():
    sim, sw, sink = one_switch(trim=100, ecn=2, ecn_max=10)
    dst = usid_address(0, [0x0100, 0x1001])
    at_foot, halfway = [], []
    for _ in range(400):                     # bursts of 8: the k-th packet (k >= 2) sees k - 2 queued
        burst = [data_pkt(dst) for _ in range(8)]
        for p in burst:
            sw.receive(p, 2)
        sim.run()                            # the queue drains between bursts
        at_foot.append(burst[3].ecn == constants.ECN_CE)       # saw 2 queued: probability 0
        halfway.append(burst[7].ecn == constants.ECN_CE)       # saw 6 queued: (6 - 2) / (10 - 2)
    assert not any(at_foot)
    assert 0.4 < sum(halfway) / len(halfway) < 0.6


def test_switch_never_trims_no_trim_or_control_and_drops_unroutable():
    sim, sw, sink = one_switch(trim=0, ecn=100)
    dst = usid_address(0, [0x0100, 0x1001])
    keep = data_pkt(dst, dscp=constants.DSCP_NO_TRIM)
    sw.receive(keep, 2)
    sw.receive(data_pkt(usid_address(0, [0x0100, 0x1999])), 2)
    sim.run()
    assert not keep.trimmed and [p for _, _, p in sink.got] == [keep]
    assert sw.counters["no_route_drops"] == 1


def test_switch_faults_drop_all_or_a_fraction():
    sim, sw, sink = one_switch(trim=10_000, ecn=10_000)
    dst = usid_address(0, [0x1001])
    sw.set_fault(1, drop_all=True)
    sw.receive(data_pkt(dst), 2)
    sw.set_fault(1, drop_prob=0.25)
    for _ in range(2000):
        sw.receive(data_pkt(dst, payload=b""), 2)
    sim.run()
    assert 400 < sw.counters["fault_drops"] - 1 < 600
    sw.set_fault(1)
    sw.receive(data_pkt(dst), 2)
    assert 1 not in sw.faults


def test_leaf_spine_usid_paths_cross_exactly_their_switches():
    net = leaf_spine_fabric(planes=2, leaves=2, spines=3)                # h1, h2 on leaves s1 / s6; h3, h4 on s2 / s7
    paths = Simulation(net).paths("h1", "h3", "mrc")
    assert len(paths) == 6 and {p.plane for p in paths} == {0, 1}
    h3 = net.hosts["h3"]
    h3.attach(Recorder())
    for path in paths:
        before = {n: s.counters["rx"] for n, s in net.switches.items()}
        net.hosts["h1"].nics[path.nic].send(data_pkt(path.dst, src=path.src), constants.PRIORITY_LOW)
        net.sim.run()
        crossed = [n for n, s in net.switches.items() if s.counters["rx"] != before[n]]
        assert sorted(crossed) == sorted(net.path_of_address(path.plane, path.dst))
        nic, pkt = h3.endpoint.got[-1]
        assert nic == path.plane and pkt.dst == h3.nic_addr[path.plane]
    same_leaf = Simulation(net).paths("h1", "h2", "mrc")
    assert [net.path_of_address(p.plane, p.dst) for p in same_leaf] == [["s1"], ["s6"]]


def test_baseline_is_routed_by_ecmp_on_the_five_tuple():
    net = leaf_spine_fabric(leaves=2, spines=4, hosts_per_leaf=1)        # h1 on s1, h2 on s2, spines s3..s6
    (path,) = Simulation(net).paths("h1", "h2", "roce")
    net.hosts["h2"].endpoint = type("E", (), {"receive": lambda *a: None, "next_wakeup": lambda s: None,
                                               "poll": lambda s, now: []})()
    spines = [net.switches[f"s{i}"] for i in range(3, 7)]

    def spine_for(ev):
        before = [s.counters["rx"] for s in spines]
        net.hosts["h1"].nics[0].send(data_pkt(path.dst, ev=ev, src=path.src), constants.PRIORITY_LOW)
        net.sim.run()
        (i,) = [i for i, s in enumerate(spines) if s.counters["rx"] != before[i]]
        return i

    evs = random.Random(1).sample(range(1 << 16), 40)   # as senders pick them: over all 16 bits (docs/design.md)
    chosen = [spine_for(ev) for ev in evs]
    assert len(set(chosen)) >= 3                                        # different flows spread
    assert [spine_for(ev) for ev in evs] == chosen                      # the same flow stays put


@pytest.mark.parametrize("mode", ["mrc", "roce"])
def test_network_from_a_topology_runs_the_controllers_tables(mode):
    from controller.routes import compute_programs
    from netsim import from_topology
    from topologies.builders import fat_tree

    topo = fat_tree(4)
    net = from_topology(topo, compute_programs(topo), Simulator(2), rate_bps=10e9)
    first, last = topo.hosts[0].name, topo.hosts[-1].name
    paths = Simulation(net).paths(first, last, "mrc")
    assert len(paths) == 4 and all(len(net.path_of_address(p.plane, p.dst)) == 5 for p in paths)
    if mode == "mrc":
        net.at(30e-6, net.cable(*net.path_of_address(0, paths[0].dst)[1:3]).set_up, False)
    cfg = leaf_spine_config(mode)
    res = run_flows(net, [Flow(first, last, 200_000, message_size=50_000),
                              Flow(topo.hosts[1].name, topo.hosts[-2].name, 100_000)], cfg, until=0.01)
    assert res.all_exactly_once
    assert sum(s.counters["no_route_drops"] for s in net.switches.values()) == 0


def test_scenario_goodput_series_accounts_for_every_byte():
    net = leaf_spine_fabric(seed=4, planes=2)
    cfg = leaf_spine_config()
    res = run_flows(net, [Flow("h1", "h3", 300_000, message_size=100_000),
                              Flow("h2", "h4", 200_000, start=50e-6)], cfg, until=0.01, sample_interval=20e-6)
    assert res.all_exactly_once
    times = [0.0] + [t for t, _ in res.goodput]
    for i, size in enumerate((300_000, 200_000)):
        got = sum(g[i] * (t - prev) / 8 for (t, g), prev in zip(res.goodput, times))
        assert got == pytest.approx(size)
    assert all(g[1] == 0 for t, g in res.goodput if t <= 50e-6)        # the second starts later
    assert res.flows[1].finish > 50e-6 and res.end >= max(t.finish for t in res.flows)
    peak = max(max(g) for _, g in res.goodput)
    assert 5e9 < peak <= 2 * 10e9 * 1.01                               # two planes of 10 Gbit/s


def test_from_topology_needs_a_program_for_every_switch():
    from controller.routes import compute_programs
    from netsim import from_topology
    from topologies.builders import leaf_spine

    topo = leaf_spine(2, 1, 1)
    programs = compute_programs(topo)
    del programs["s3"]
    with pytest.raises(ValueError, match="no switch program for s3"):
        from_topology(topo, programs)


def test_netsim_imports_only_the_layers_below_it():
    """netsim is given its switch programs and its endpoints: it imports wire/, pipeline_contract/,
    topologies/, speedups/ (which build runs) and itself, never the agent, the reference switch or
    the controller."""
    import ast
    import pathlib

    allowed = {"netsim", "wire", "pipeline_contract", "topologies", "speedups"}
    ours = {p.name for p in pathlib.Path(__file__).resolve().parents[2].iterdir() if p.is_dir()}
    for path in sorted(pathlib.Path(__file__).resolve().parents[2].joinpath("netsim").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            for name in names:
                top = name.split(".")[0]
                assert top not in ours or top in allowed, f"{path.name} imports {name}"


def test_a_paused_host_holds_arrivals_until_no_pause_is_left():
    """Overlapping pauses: what arrives while either holds is handed over, in order, at the later end."""
    from netsim import SimHost

    class Timed(Recorder):
        def __init__(self, sim):
            super().__init__()
            self.sim = sim

        def receive(self, now, nic, pkt):
            self.got.append((now, pkt))

    sim = Simulator()
    host = SimHost(sim, "h", 0)
    host.attach(Timed(sim))
    held = host.pause(1.0, 3.0)
    assert host.pause(2.0, 4.0) is held
    for t in (0.5, 1.5, 2.5, 3.5, 4.5):
        sim.at(t, host.receive, t, 0)
    sim.run()
    assert host.endpoint.got == [(0.5, 0.5), (4.0, 1.5), (4.0, 2.5), (4.0, 3.5), (4.5, 4.5)]
    assert [pkt for pkt, _ in held] == [1.5, 2.5, 3.5]


def test_fewer_collections_raises_the_first_threshold_inside_and_restores_all_after():
    import gc
    from netsim import FewerCollections
    from netsim.sim import RUN_GC_THRESHOLD
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        with pytest.raises(KeyError):
            with FewerCollections():
                assert gc.get_threshold() == (RUN_GC_THRESHOLD, 10, 10)
                raise KeyError("left by an error")
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(RUN_GC_THRESHOLD * 2, 5, 5)
        with FewerCollections():                      # already higher: left as it is
            assert gc.get_threshold() == (RUN_GC_THRESHOLD * 2, 5, 5)
    finally:
        gc.set_threshold(*before)


def test_install_makes_the_lookup_order_once_and_shares_equal_actions():
    """A switch's installed routes: the longest prefix wins whatever the order they came in, a
    remembered decision is forgotten, equal actions are one tuple, and a bad entry still leaves
    the entries before it usable."""
    from pipeline_contract import names
    from pipeline_contract.entries import TableEntry
    sim, sw, sink = one_switch()
    far = prefix48(0, 0x1002)
    assert sw.lookup(far) is None
    sw.install([TableEntry(names.ROUTING, {"dst_addr": (far, 32)}, names.FORWARD, {"port": 2}),
                TableEntry(names.ROUTING, {"dst_addr": (far, 48)}, names.FORWARD, {"port": 1}),
                TableEntry(names.ROUTING, {"dst_addr": (prefix48(0, 0x1003), 48)}, names.FORWARD, {"port": 1})])
    assert sw.lookup(far) == ("forward", 1) and sw.lookup(prefix48(0, 0x2000)) == ("forward", 2)
    assert sw.lookup(far) is sw.lookup(prefix48(0, 0x1003))
    with pytest.raises(ValueError, match="not in the contract"):
        sw.install([TableEntry(names.ROUTING, {"dst_addr": (prefix48(0, 0x1004), 64)}, names.FORWARD, {"port": 1}),
                    TableEntry("MrcIngress.nothing", {}, names.FORWARD)])
    assert sw.lookup(prefix48(0, 0x1004)) == ("forward", 1)       # its /64, looked up first


def test_prefixes_of_any_length_match_the_bits_they_cover_and_bad_ones_are_named():
    """The routing table reads an address's prefix from the bytes it spans: a /44 (half a byte
    spare) and a /0 match by their bits alone, the longest first; a prefix or usid_local entry
    that does not fit an address is refused, naming the switch."""
    sim, sw, sink = one_switch()
    base = prefix48(0, 0x1000)
    sw.add_route(0, 0, ("forward", 3))
    sw.add_route(base, 44, ("forward", 2))
    assert sw.lookup(base | 0xF << 80) == ("forward", 2)         # only bits past the /44 differ
    assert sw.lookup(base | 0x1 << 84) == ("forward", 3)         # the /44's last bit differs
    assert sw.lookup(base | (1 << 80) - 1) == ("forward", 2)
    with pytest.raises(ValueError, match=f"switch {sw.name}: route .* is not an IPv6 prefix"):
        sw.add_route(1 << 128, 48, ("forward", 1))
    from pipeline_contract import names
    from pipeline_contract.entries import TableEntry
    lengths = sorted(sw.routes)
    for length in (-1, 129):                                     # refused before a table is made for it
        with pytest.raises(ValueError, match=f"route 0x0/{length} is not an IPv6 prefix"):
            sw.add_route(0, length, ("forward", 1))
        with pytest.raises(ValueError, match=f"route 0x0/{length} is not an IPv6 prefix"):
            sw.install([TableEntry(names.ROUTING, {"dst_addr": (0, length)}, names.FORWARD, {"port": 1})])
    assert sorted(sw.routes) == lengths and sw.lookup(base) == ("forward", 2)
    with pytest.raises(ValueError, match=f"switch {sw.name}: 0x1{'0' * 32} is not an IPv6 address"):
        sw.lookup(1 << 128)
    with pytest.raises(ValueError, match=f"switch {sw.name}: usid_local prefix 0x1000000000000 is not 48 bits"):
        sw.add_local(1 << 48)
    sw.add_local(prefix48(0, 0x1000) >> 80)
    assert sw.usid_local == frozenset({prefix48(0, 0x0100) >> 80, prefix48(0, 0x1000) >> 80})


def test_fifo_keeps_order_through_wrap_and_growth():
    from netsim.link import Fifo
    q, expected = Fifo(), []
    rng = __import__("random").Random(7)
    n = 0
    for _ in range(2000):                   # pushes and pops interleaved: the ring wraps and doubles
        if expected and rng.random() < 0.45:
            assert q.pop() == expected.pop(0)
        else:
            q.push(n)
            expected.append(n)
            n += 1
        assert len(q) == len(expected)
    q.clear()
    assert len(q) == 0 and not q
    q.push("after clear")
    assert q.pop() == "after clear"


def test_switch_ports_are_set_through_its_verbs():
    sim, sw, sink = one_switch()
    with pytest.raises(TypeError):
        sw.links[2] = sw.links[1]               # read-only view: `attach` plugs a link in
    with pytest.raises(TypeError):
        sw.port_config[2] = sw.port_config[1]
    for bad in (0, -1, "2", 1.0):
        with pytest.raises(ValueError, match="port"):
            sw.plug(bad, sw.links[1])
        with pytest.raises(ValueError, match="port"):
            sw.configure_port(bad, sw.port_config[1])
    sw.add_route(prefix48(0, 0x1002), 48, ("forward", 7))   # a route to a port with no link
    with pytest.raises(KeyError, match="port 7 has no link"):
        sw.receive(data_pkt(usid_address(0, [0x0100, 0x1002])), 2)


def test_a_host_nic_is_plugged_through_its_verb():
    from netsim import SimHost
    sim = Simulator(1)
    host = SimHost(sim, "h", 1)
    link = Link(sim, "h->s", 1e9, 1e-6, depth=10)
    host.plug(0, link)
    assert dict(host.nics) == {0: link}
    with pytest.raises(TypeError):
        host.nics[1] = link                     # read-only view
    for bad in (-1, "0", 0.0, True):
        with pytest.raises(ValueError, match="NIC"):
            host.plug(bad, link)


def test_an_empty_fifo_refuses_to_pop_and_a_port_below_one_has_no_link():
    from netsim.link import Fifo
    with pytest.raises(IndexError, match="empty Fifo"):
        Fifo().pop()
    sim, sw, sink = one_switch()
    sw.add_route(prefix48(0, 0x1003), 48, ("forward", -1))   # not a port: no link, not the last port's
    with pytest.raises(KeyError, match="port -1 has no link"):
        sw.receive(data_pkt(usid_address(0, [0x0100, 0x1003])), 2)
