"""Timers no shorter than a few packets at the line rate (`sizing.for_line_rate`): on links slower
than the 20 Mbit/s the defaults were tuned at, a packet's time on the wire is as long as the
default 2 ms RTO floor."""
from __future__ import annotations

import pytest

from host_agent.transport import TransportConfig, sizing

from tests.netsim.netsim_transfers import Transfer, fabric, run_transfers

PAYLOAD = 1024


def test_at_20_mbits_and_faster_the_timers_are_the_defaults():
    defaults = TransportConfig()
    for rate in (20e6, 100e6, 100e9):
        timers = sizing.for_line_rate(rate, PAYLOAD)
        assert {name: getattr(defaults, name) for name in timers} == timers


@pytest.mark.parametrize("rate", [10e6, 4e6, 1e6])
def test_on_slower_links_the_timers_span_packets(rate):
    packet = sizing.packet_time(rate, PAYLOAD)
    cfg = TransportConfig(line_rate_bps=rate, **sizing.for_line_rate(rate, PAYLOAD))
    assert sizing.RTO_MIN_PACKETS * packet <= cfg.base_timeout < 2 * sizing.RTO_MIN_PACKETS * packet
    assert cfg.initial_rtt >= sizing.INITIAL_RTT_PACKETS * packet
    assert cfg.pacing_max_lag >= sizing.PACING_LAG_PACKETS * packet
    assert cfg.probe_interval / cfg.base_timeout == pytest.approx(
        TransportConfig().probe_interval / TransportConfig().base_timeout)


def test_bad_rates_are_refused():
    with pytest.raises(ValueError, match="rate_bps"):
        sizing.for_line_rate(0, PAYLOAD)


def _flow_at(rate: float, config: TransportConfig) -> tuple[dict, dict]:
    net = fabric(rate_bps=int(rate))
    res = run_transfers(net, [Transfer("h1", "h3", 128 << 10, message_size=64 << 10)], config, until=5.0)
    flow = res.transfers[0]
    assert flow.complete
    return flow.sender_stats, flow.receiver_stats


def test_a_4_mbits_flow_coalesces_its_sacks_and_times_nothing_out():
    rate = 4e6
    sized, sized_rx = _flow_at(rate, TransportConfig(line_rate_bps=rate, **sizing.for_line_rate(rate, PAYLOAD)))
    plain, plain_rx = _flow_at(rate, TransportConfig(line_rate_bps=rate))
    assert sized_rx["sacks_sent"] <= sized_rx["data_received"] / 3       # ack_coalesce 4, tails apart
    assert sized.get("timeouts", 0) == 0
    assert plain_rx["sacks_sent"] > plain_rx["data_received"] / 2       # the defaults: nearly one each
