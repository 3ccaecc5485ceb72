"""An endpoint passes over the connections with nothing due (Connection.quiet_until): the polls it
skips must be exactly those that would change nothing. Each run here is made twice on netsim, once
as the endpoint runs and once polling every connection every time, and must be the same to the
last event and link counter. Host h4 sends to three hosts at once, more than its NIC carries: its
connections wait for the NIC clock as well as for their own pacing."""
from __future__ import annotations

import pytest

from host_agent.transport import Endpoint, PathInfo, TransportConfig
from host_agent.transport import endpoint as endpoint_module
from netsim import SimHost
from simulation import LEAF_SPINE_TIMERS, Flow, leaf_spine_fabric, run_flows

FAST = LEAF_SPINE_TIMERS              # the transport's timers for the leaf-spine of 1 us cables
KB = 1000


def _run(kill_at: float | None, deny_at: float | None, config: TransportConfig):
    net = leaf_spine_fabric(4, planes=2, leaves=2, spines=2, hosts_per_leaf=3)
    if kill_at is not None:
        cable = net.cable("s1", "s3")
        net.at(kill_at, cable.set_up, False)
        net.at(kill_at + 300e-6, cable.set_up, True)
    if deny_at is not None:
        def deny() -> None:             # an operator's EV change, straight on the connection's control
            conn = next(iter(net.hosts["h1"].endpoint.connections.values()))
            conn.control.deny(conn.evset.slots[0].current.value, net.sim.now)
        net.at(deny_at, deny)
    flows = [Flow(f"h{i}", "h4", 300 * KB, message_size=50 * KB) for i in (1, 2, 3)]
    flows += [Flow("h4", "h1", 200 * KB, start=50e-6), Flow("h5", "h2", 100 * KB, start=120e-6),
              Flow("h4", "h5", 200 * KB, start=60e-6), Flow("h4", "h6", 200 * KB, start=70e-6)]
    res = run_flows(net, flows, config, until=0.05)
    links = [(link.name, tuple(sorted(link.counters.items())))
             for cable in net.cables for link in (cable.ab, cable.ba)]
    return res, links


class _EagerEndpoint:
    """An endpoint that polls every connection every time, as before the endpoint passed any over:
    a Python object in front of the host's Endpoint (a compiled host calls an Endpoint natively, so
    patching Endpoint.poll would not reach it), counting the connections it would have passed over."""

    def __init__(self, inner: Endpoint, skipped: list) -> None:
        self.inner = inner
        self.skipped = skipped

    def receive(self, now: float, nic: int, pkt) -> None:
        self.inner.receive(now, nic, pkt)

    def poll(self, now: float) -> list:
        connections = self.inner.connections.values()
        self.skipped.append(sum(now < c.quiet_until for c in connections))
        for conn in connections:
            conn.quiet_until = endpoint_module._NEVER
        return self.inner.poll(now)

    def next_wakeup(self):
        return self.inner.next_wakeup()

    def drain_events(self) -> list:
        return self.inner.drain_events()

    def __getattr__(self, name: str):
        return getattr(self.inner, name)       # connections, config, ... as the Endpoint's


@pytest.mark.slow
@pytest.mark.parametrize("kill_at, deny_at, mode", [(None, None, "mrc"), (150e-6, 80e-6, "mrc"),
                                                     (None, None, "roce")])
def test_passing_over_quiet_connections_changes_nothing(monkeypatch, kill_at, deny_at, mode):
    config = TransportConfig(mode=mode, **FAST)
    lazy, lazy_links = _run(kill_at, deny_at, config)
    skipped: list = []
    original = SimHost.attach

    def eager_attach(self, endpoint, on_event=None):     # every host drives its endpoint eagerly
        original(self, _EagerEndpoint(endpoint, skipped), on_event)

    monkeypatch.setattr(SimHost, "attach", eager_attach)
    eager, eager_links = _run(kill_at, deny_at, config)
    assert sum(skipped) > 0                                   # the lazy run did pass polls over
    assert lazy.all_exactly_once and eager.all_exactly_once
    assert [t.finish for t in lazy.flows] == [t.finish for t in eager.flows]
    assert [t.sender.stats for t in lazy.flows] == [t.sender.stats for t in eager.flows]
    assert lazy.events == eager.events
    assert lazy_links == eager_links


def _quiet_endpoint():
    """An endpoint with two connections (one alone is always polled), polled once with nothing to
    do: the first is passed over after."""
    ep = Endpoint("h0", TransportConfig(keepalive_probes=False, **FAST))
    paths = [PathInfo(0, 0, bytes(15) + b"\x01", bytes(15) + b"\x02"),
             PathInfo(0, 0, bytes(15) + b"\x01", bytes(15) + b"\x03")]
    conn = ep.connect("h1", 5, 6, paths)
    ep.connect("h2", 7, 8, [PathInfo(0, 0, bytes(15) + b"\x01", bytes(15) + b"\x04")])
    assert ep.poll(0.0) == []
    ep.next_wakeup()
    assert conn.quiet_until > 1e-3                 # nothing due: the next poll passes it over
    return ep, conn


def test_an_ev_operation_or_a_message_on_a_quiet_connection_makes_it_poll_at_once():
    from wire.packets import DataPacket, Probe
    ep, conn = _quiet_endpoint()
    ep.probe_ev(conn, conn.evset.slots[0].current.value, 1e-3)          # through EvControl
    assert [type(pkt) for _, pkt in ep.poll(1e-3)] == [Probe]
    ep.next_wakeup()
    ep, conn = _quiet_endpoint()
    conn.control.deny(conn.evset.slots[0].current.value, 1e-3)         # straight on the control
    assert conn.quiet_until == endpoint_module._NEVER
    ep, conn = _quiet_endpoint()
    ep.send_message(conn, b"x" * 100)
    assert [type(pkt) for _, pkt in ep.poll(1e-3)] == [DataPacket]
