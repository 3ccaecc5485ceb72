"""Windows past one SACK bitmap: SACKs with a base offset, the out-of-order window in units of
128 PSNs (`mpr`), and a single flow at data-center speed keeping a BDP in flight."""
from __future__ import annotations

import random

import pytest

from controller.routes import compute_programs
from host_agent.transport import PathInfo, TransportConfig, sizing
from host_agent.transport.peers import ConnectionId
from host_agent.transport.evset import EvSet
from host_agent.transport.receiver import MrcReceiver
from host_agent.transport.tally import Tally
from netsim import Simulator, from_topology
from topologies.builders import multi_plane
from wire.packets import DataPacket

from simulation import Flow, run_flows

PAYLOAD = 4096


def test_ooo_window_is_one_bitmap_or_whole_mpr_units():
    assert TransportConfig(ooo_window=64).mpr == 1
    assert TransportConfig(ooo_window=1024).mpr == 8
    for bad in (65, 100, 200):
        with pytest.raises(ValueError, match="ooo_window"):
            TransportConfig(ooo_window=bad)


def test_sizing_gives_a_window_of_two_bdps_and_an_ooo_window_to_hold_it():
    params = sizing.for_network(400e9, 10e-6, PAYLOAD)
    bdp = sizing.bdp_packets(400e9, 10e-6, PAYLOAD)
    assert 100 < bdp < 130
    assert params["max_cwnd"] == 2 * bdp and params["ooo_window"] % 128 == 0
    assert params["ooo_window"] >= params["max_cwnd"]
    assert params["qp_timeout"] == 7                 # 131 us: the first QP timeout of at least 10 base RTTs
    assert sizing.qp_timeout_for(100e-6) == 7 and sizing.qp_timeout_for(131.072e-6) == 7
    assert sizing.qp_timeout_for(131.1e-6) == 8 and sizing.qp_timeout_for(1e-9) == 0
    TransportConfig(**params)                      # a valid configuration


def test_sizing_tunes_nscc_for_spraying_only():
    """A sprayed connection gets NSCC's target delay in base RTTs, a largest decrease of 0.2,
    pacing over the target RTT and the steering's share for struck paths; a single-path baseline
    keeps the unsized values."""
    sprayed = sizing.for_network(100e9, 10e-6, PAYLOAD)
    assert sprayed["target_delay"] == pytest.approx(sizing.TARGET_DELAY_BASE_RTTS * 10e-6)
    assert sprayed["max_md_jump"] == sizing.MAX_MD_JUMP and sprayed["pace_at_target"] is True
    assert sprayed["steer_share_struck"] is True
    single = sizing.for_network(100e9, 10e-6, PAYLOAD, spraying=False)
    assert not {"target_delay", "max_md_jump", "pace_at_target", "steer_share_struck"} & set(single)
    assert {k: v for k, v in sprayed.items() if k in single} == single
    TransportConfig(**sprayed)


def _receiver(window: int, ack_coalesce: int = 1) -> MrcReceiver:
    path = PathInfo(0, 0, bytes(16), bytes([0xFC]) + bytes(15))
    evset = EvSet([path], 16, 1, random.Random(1), True)
    cfg = TransportConfig(ooo_window=window, ack_coalesce=ack_coalesce)
    return MrcReceiver(ConnectionId("b", "a", 2, 1), cfg, evset, Tally(), lambda e: None)


def _data(psn: int) -> DataPacket:
    return DataPacket(bytes(16), bytes(16), 7, 2, psn, psn * 8, 2, 8, 1, 1 << 20, 0, bytes(8))


def test_a_sack_past_the_first_64_psns_carries_the_block_holding_the_packet():
    rx = _receiver(256)
    out: list = []
    rx.on_data(0.0, 0, _data(1), out)              # PSN 0 missing: nothing in order
    rx.on_data(0.0, 0, _data(130), out)
    sack = out[-1][1]
    assert sack.cum_psn == 0 and sack.sack_base == 128
    assert sack.bitmap == 1 << 2
    rx.on_data(0.0, 0, _data(5), out)
    sack = out[-1][1]
    assert sack.sack_base == 0 and sack.bitmap == (1 << 1) | (1 << 5)


def test_coalesced_packets_are_sacked_before_the_next_packet_moves_the_bitmap_to_another_block():
    rx = _receiver(256, ack_coalesce=4)
    out: list = []
    for psn in (61, 62, 63):                       # PSN 0 missing; three packets wait for a SACK
        rx.on_data(0.0, 0, _data(psn), out)
    assert out == []
    rx.on_data(0.0, 0, _data(64), out)             # the next SACK shows the block 64..127 only
    (_, first), = out
    assert first.sack_base == 0 and first.bitmap == 0b111 << 61
    rx.poll(rx.next_wakeup(), out)
    second = out[-1][1]
    assert second.sack_base == 64 and second.bitmap == 1


def test_a_packet_beyond_the_window_is_refused():
    rx = _receiver(128)
    out: list = []
    rx.on_data(0.0, 0, _data(127), out)
    assert rx.stats["out_of_window"] == 0
    rx.on_data(0.0, 0, _data(128), out)
    assert rx.stats["out_of_window"] == 1


def single_flow_goodput(rate_bps: float, rtt_s: float, **override) -> float:
    """Payload bit/s of one 8 MB flow across a leaf-spine (4 hops each way) whose cables are set
    for a base RTT of `rtt_s`, in the middle half of the transfer."""
    packet_s = 4 * (PAYLOAD + 100) * 8 / rate_bps
    delay = (rtt_s - packet_s) / 8
    topo = multi_plane(1, 2, 2, 1, rate_bps=int(rate_bps), queue_depth=128, trim_threshold=64, ecn_threshold=32)
    net = from_topology(topo, compute_programs(topo), Simulator(0), delay=delay)
    rtt = sizing.base_rtt(4, delay, rate_bps, PAYLOAD, 100)
    cfg = TransportConfig(line_rate_bps=rate_bps, **{**sizing.for_network(rate_bps, rtt, PAYLOAD), **override})
    size = 8 << 20
    res = run_flows(net, [Flow("h1", "h2", size, message_size=1 << 20)], cfg, until=0.01,
                        sample_interval=rtt_s * 2)
    flow = res.flows[0]
    assert flow.exactly_once
    mid = [rates[0] for t, rates in res.goodput if 0.25 * flow.duration < t < 0.75 * flow.duration]
    return sum(mid) / len(mid)


def test_a_single_flow_at_100g_and_10us_rtt_reaches_95_percent_of_line_rate():
    assert single_flow_goodput(100e9, 10e-6) >= 0.95 * 100e9


def test_a_window_past_64_packets_fills_a_400g_link_that_64_cannot():
    wide = single_flow_goodput(400e9, 10e-6)
    narrow = single_flow_goodput(400e9, 10e-6, ooo_window=64)
    assert wide >= 0.95 * 400e9
    assert narrow < 0.7 * 400e9               # 64 packets of 4 KB in 10 us: about 210 Gbit/s
