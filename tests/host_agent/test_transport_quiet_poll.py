"""An endpoint passes over the connections with nothing due (Connection.quiet_until): the polls it
skips must be exactly those that would change nothing. Each run here is made twice on netsim, once
as the endpoint runs and once polling every connection every time, and must be the same to the
last event and link counter. Host h4 sends to three hosts at once, more than its NIC carries: its
connections wait for the NIC clock as well as for their own pacing."""
from __future__ import annotations

import pytest

from tests.netsim import netsim_transfers
from host_agent.transport import Endpoint, PathInfo, TransportConfig
from host_agent.transport import endpoint as endpoint_module
from tests.netsim.netsim_transfers import Transfer, run_transfers

FAST = dict(qp_timeout=6, initial_rtt=10e-6, ack_delay=5e-6, probe_interval=50e-6, line_rate_bps=10e9)
KB = 1000


def _run(kill_at: float | None, deny_at: float | None, config: TransportConfig):
    net = netsim_transfers.fabric(4, planes=2, leaves=2, spines=2, hosts_per_leaf=3)
    if kill_at is not None:
        cable = net.cable("s1", "s3")
        net.at(kill_at, cable.set_up, False)
        net.at(kill_at + 300e-6, cable.set_up, True)
    if deny_at is not None:
        def deny() -> None:             # an operator's EV change, straight on the connection's control
            conn = next(iter(net.hosts["h1"].endpoint.connections.values()))
            conn.control.deny(conn.evset.slots[0].current.value, net.sim.now)
        net.at(deny_at, deny)
    transfers = [Transfer(f"h{i}", "h4", 300 * KB, message_size=50 * KB) for i in (1, 2, 3)]
    transfers += [Transfer("h4", "h1", 200 * KB, start=50e-6), Transfer("h5", "h2", 100 * KB, start=120e-6),
                  Transfer("h4", "h5", 200 * KB, start=60e-6), Transfer("h4", "h6", 200 * KB, start=70e-6)]
    res = run_transfers(net, transfers, config, until=0.05)
    links = [(link.name, tuple(sorted(link.counters.items())))
             for cable in net.cables for link in (cable.ab, cable.ba)]
    return res, links


@pytest.mark.slow
@pytest.mark.parametrize("kill_at, deny_at, mode", [(None, None, "mrc"), (150e-6, 80e-6, "mrc"),
                                                     (None, None, "roce")])
def test_passing_over_quiet_connections_changes_nothing(monkeypatch, kill_at, deny_at, mode):
    config = TransportConfig(mode=mode, **FAST)
    lazy, lazy_links = _run(kill_at, deny_at, config)
    skipped = []
    original = Endpoint.poll

    def eager_poll(self, now):            # every connection polled, as before the endpoint passed any over
        skipped.append(sum(now < c.quiet_until for c in self.connections.values()))
        for conn in self.connections.values():
            conn.quiet_until = endpoint_module._NEVER
        return original(self, now)

    monkeypatch.setattr(Endpoint, "poll", eager_poll)
    eager, eager_links = _run(kill_at, deny_at, config)
    assert sum(skipped) > 0                                   # the lazy run did pass polls over
    assert lazy.all_complete and eager.all_complete
    assert [t.finish for t in lazy.transfers] == [t.finish for t in eager.transfers]
    assert [t.sender_stats for t in lazy.transfers] == [t.sender_stats for t in eager.transfers]
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
