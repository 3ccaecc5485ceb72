"""What netsim's shortcuts must not change: a switch that remembers its forwarding decisions forwards
as one that looks every packet up afresh, and every packet a fabric carries is accounted for."""
from __future__ import annotations

import json

import pytest

from experiments.backends.netsim_backend import NetsimBackend
from experiments.scenario import parse_scenario
from netsim import SimSwitch

SCENARIO = {
    "name": "fidelity", "seed": 3, "horizon_s": 3.0, "sample_interval_s": 0.005,
    "topology": "leafspine:2x2x2", "link": {"rate_bps": 20_000_000},
    "workload": {"kind": "allreduce", "bytes": 131072, "chunk_bytes": 16384},
    "faults": [{"kind": "link_kill", "link": "auto", "at": "30%"}],
    "transports": [{"name": "MRC", "mode": "mrc"},
                   {"name": "RoCE + reroute", "mode": "roce", "reroute_delay_s": 0.2}],
}


class Quiet:
    """An endpoint that takes packets in and sends nothing."""

    def receive(self, now, nic, pkt):
        pass

    def poll(self, now):
        return []

    def next_wakeup(self):
        return None

    def drain_events(self):
        return []


def run(case) -> str:
    return json.dumps(NetsimBackend().run_case(case).as_dict(), sort_keys=True)


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["MRC", "RoCE + reroute"])
def test_remembered_forwarding_decisions_change_nothing(transport, monkeypatch):
    """The same case, once as it runs and once with every switch forgetting its decisions before each
    packet, gives the same record to the last byte: through a link kill and, for the baseline, a
    control plane that rewrites the routes mid-run."""
    [case] = [c for c in parse_scenario(SCENARIO).cases() if c.transport.name == transport]
    remembered = run(case)
    receive = SimSwitch.receive

    def forgetful(self, pkt, in_port):
        self._forget()
        receive(self, pkt, in_port)

    monkeypatch.setattr(SimSwitch, "receive", forgetful)
    assert run(case) == remembered
    assert json.loads(remembered)["completed"]


@pytest.mark.parametrize("trimming", [True, False])
def test_every_packet_is_accounted_for(trimming):
    """Without faults, each packet a link delivered to a switch was received there, each packet a
    switch received left by an egress queue or was dropped for a reason it counts, and each packet
    offered to a link was sent, dropped, or is still queued (an incast: trimmed, or tail-dropped)."""
    from controller.routes import compute_programs
    from netsim import Simulator, from_topology
    from tests.netsim.netsim_transfers import Transfer, run_transfers
    from topologies.builders import multi_plane
    from host_agent.transport import TransportConfig

    topo = multi_plane(1, 2, 2, 3, rate_bps=10_000_000_000, queue_depth=24, trim_threshold=8, ecn_threshold=4)
    net = from_topology(topo, compute_programs(topo), Simulator(5), trimming=trimming)
    cfg = TransportConfig(qp_timeout=6, initial_rtt=10e-6, ack_delay=5e-6, probe_interval=50e-6,
                          line_rate_bps=10e9)
    res = run_transfers(net, [Transfer(f"h{i}", "h1", 200_000, message_size=50_000) for i in (2, 3, 4, 5, 6)],
                        cfg, until=0.05)
    assert res.all_complete
    for host in net.hosts.values():                     # let what is still on the wire arrive
        host.endpoint = Quiet()
    net.sim.run()
    links = [link for cable in net.cables for link in (cable.ab, cable.ba)]
    into = {name: 0 for name in net.switches}
    for link in links:
        node = link.dest[0]
        if isinstance(node, SimSwitch):
            into[node.name] += link.counters["tx"] - link.counters["dropped_down"]
    trimmed = queue_drops = 0
    for name, sw in net.switches.items():
        c = sw.counters
        assert c["rx"] == into[name] > 0, name
        offered = sum(link.counters["offered"] for link in sw.links.values())
        assert c["rx"] == offered + c["no_route_drops"] + c["fault_drops"], name
        assert c["queue_drops"] == sum(link.counters["dropped_queue"] for link in sw.links.values())
        trimmed += c["trimmed"]
        queue_drops += c["queue_drops"]
    assert (trimmed > 0) == trimming and (queue_drops > 0) == (not trimming)   # the incast did congest
    for link in links:
        c = link.counters
        assert c["offered"] == c["tx"] + c["dropped_queue"] + c["dropped_down"]
        assert not link.busy and not link.queues[0] and not link.queues[1]
