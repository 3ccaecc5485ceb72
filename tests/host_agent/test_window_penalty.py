"""The receiver window penalty: a receiver shared by several senders asks each, in its SACKs, for
its share of its links (host_agent.transport.shares), and the sender's window keeps to it
(NsccWindow.on_window_penalty)."""
from __future__ import annotations

import pytest

from controller.routes import compute_programs
from host_agent.transport import Endpoint, PathInfo, TransportConfig, sizing
from host_agent.transport.policies import Policies
from host_agent.transport.congestion import NsccWindow, RttEstimator
from host_agent.transport.shares import PENALTY_UNITS, SenderShares
from netsim import Simulator, from_topology
from simulation import Flow, run_flows
from topologies.builders import multi_plane
from wire import constants
from wire.packets import DATA_OVERHEAD, DataPacket, Nack, Sack

PAYLOAD = 4096
PACKET = PAYLOAD + DATA_OVERHEAD
RATE = 100e9
RTT = 10e-6


def sized(**override) -> TransportConfig:
    return TransportConfig(**{"line_rate_bps": RATE, **sizing.for_network(RATE, RTT, PAYLOAD), **override})


class FakeFlow:
    """A connection's receiving half, sending while `active`."""

    def __init__(self, active: bool = True) -> None:
        self.active = active

    def sending(self, now: float, within: float) -> bool:
        return self.active


def test_sizing_turns_the_penalty_on_for_sprayed_connections_only():
    assert TransportConfig().window_penalty is False
    assert sizing.for_network(RATE, RTT, PAYLOAD)["window_penalty"] is True
    assert "window_penalty" not in sizing.for_network(RATE, RTT, PAYLOAD, spraying=False)


def test_each_of_n_senders_is_left_at_least_its_share_of_the_budget_and_little_more():
    cfg = sized()
    shares = SenderShares(cfg)
    budget = RATE / 8 * (cfg.initial_rtt + cfg.target_delay)
    largest = cfg.max_cwnd * PACKET
    for n in (2, 3, 7, 15, 100):
        kept = (PENALTY_UNITS - shares.penalty_for(1 / n)) / PENALTY_UNITS * largest
        assert budget / n <= kept <= budget / n + largest / PENALTY_UNITS
    assert shares.penalty_for(1e-4) == PENALTY_UNITS - 1                # at most 255: one byte
    assert SenderShares(sized(line_rate_bps=0.0)).penalty_for(1 / 7) == 0   # no rate, no budget


def test_a_receiver_on_two_nics_has_twice_the_budget():
    one, two = SenderShares(sized()), SenderShares(sized())
    one.join(FakeFlow(), 1)
    two.join(FakeFlow(), 2)
    kept = [PENALTY_UNITS - shares.penalty_for(1 / 7) for shares in (one, two)]
    assert kept[1] == pytest.approx(2 * kept[0], abs=1)


def test_a_lone_sender_is_asked_nothing_unless_others_shared_the_links_just_before():
    shares = SenderShares(sized())
    flows = [FakeFlow(), FakeFlow(False), FakeFlow(False)]
    for flow in flows:
        shares.join(flow, 1)
    assert shares.penalty(0.0) == 0 and shares.senders == 1
    for flow in flows:
        flow.active = True
    assert shares.penalty(0.0) == 0                   # counted at most every quarter RTT: not yet
    assert shares.penalty(RTT) == shares.penalty_for(1 / 3) > 0 and shares.senders == 3
    flows[1].active = flows[2].active = False
    alone = shares.penalty(2 * RTT)                   # others sent just before: the whole budget's share
    assert alone == shares.penalty_for(1.0) and 0 < alone < shares.penalty_for(1 / 3)
    assert shares.penalty(4 * RTT) == 0               # ACTIVE_BASE_RTTS later: nothing asked


def window(cfg: TransportConfig) -> NsccWindow:
    rtt = RttEstimator(cfg)
    rtt.sample(RTT)                                   # the base RTT and srtt are known
    return NsccWindow(cfg, rtt, PACKET)


def test_the_window_keeps_to_the_share_and_nscc_decreases_from_there():
    cfg = sized()
    cc = window(cfg)
    start = cc.cwnd
    penalty = 224                                     # keep 32/256 of the largest window
    share = cc.cwnd_max * (PENALTY_UNITS - penalty) / PENALTY_UNITS
    cc.on_window_penalty(1e-6, penalty)
    assert cc.cwnd == pytest.approx(share) and share < start
    for i in range(200):                              # no queueing delay: NSCC would grow ...
        cc.on_ack(2e-6 + i * 1e-7, PACKET, False, RTT)
    assert cc.cwnd == pytest.approx(share)            # ... but not past the share
    assert cc.pacing_rate(1) == pytest.approx(cfg.pacing_gain * share / cc.pacing_rtt())
    cc.on_ack(1e-4, PACKET, True, 3 * RTT)            # ECN and a long delay: a decrease, from the share
    assert cc.cwnd < share
    cc.on_window_penalty(2e-4, 0)                     # nothing asked any more: the largest window
    assert cc.cwnd == cc.cwnd_max


def test_a_fixed_window_is_not_changed_by_a_penalty():
    cc = window(sized(cc=False))
    cc.on_window_penalty(0.0, 224)
    assert cc.cwnd == cc.cwnd_max


def test_a_smaller_penalty_raises_a_held_window_to_the_new_share_at_once():
    cfg = sized()
    cc = window(cfg)
    cc.on_window_penalty(0.0, 224)
    cc.on_trim_or_loss(1e-6)                          # cut below the share
    low = cc.cwnd
    cc.on_window_penalty(2e-6, 200)                   # a sender left: the share grew
    share = cc.cwnd_max * (PENALTY_UNITS - 200) / PENALTY_UNITS
    assert low < share and cc.cwnd == pytest.approx(share)
    cc.on_window_penalty(3e-6, 230)                   # a larger penalty only lowers the cap
    assert cc.cwnd == pytest.approx(cc.cwnd_max * (PENALTY_UNITS - 230) / PENALTY_UNITS)


PATH = PathInfo(0, 0, bytes(16), bytes([0xFC]) + bytes(15))


def data_packet(qp: int, psn: int, tail: bool = False) -> DataPacket:
    return DataPacket(bytes(16), bytes(16), 7, qp, psn, psn * PAYLOAD, qp, PAYLOAD, 1, 64 * PAYLOAD, 0,
                      bytes(PAYLOAD), ack_req=tail)


def sacks_after(ep: Endpoint, now: float, pkt: DataPacket) -> list[Sack]:
    """The SACKs `ep` sends at once for `pkt`."""
    ep.receive(now, 0, pkt)
    return [out for _, out in ep.poll(now) if isinstance(out, Sack)]


def test_sacks_of_a_receiver_with_two_senders_carry_the_penalty_and_one_alone_none():
    rx = Endpoint("rx", sized(ack_coalesce=1))
    for qp in (1, 2):
        rx.connect(f"tx{qp}", local_qp=qp, remote_qp=10 + qp, paths=[PATH])
    alone = sacks_after(rx, 0.0, data_packet(1, 0))
    assert alone and all(s.window_penalty == 0 for s in alone)
    sacks_after(rx, 1e-6, data_packet(2, 0))
    shared = sacks_after(rx, 5e-6, data_packet(1, 1))
    assert shared and all(s.window_penalty == rx.shares.penalty_for(1 / 2) > 0 for s in shared)


def test_while_it_asks_a_penalty_the_receiver_sacks_every_packet():
    rx = Endpoint("rx", sized())                     # SACKs coalesced over 4 packets otherwise
    for qp in (1, 2):
        rx.connect(f"tx{qp}", local_qp=qp, remote_qp=10 + qp, paths=[PATH])
    alone = [sacks_after(rx, 1e-7 * psn, data_packet(1, psn)) for psn in range(3)]
    assert alone == [[], [], []]                     # a lone sender: coalesced
    assert len(rx.poll(4e-6)) == 1                   # ... until the ACK delay ran out
    rx.receive(5e-6, 0, data_packet(2, 0))
    shared = [sacks_after(rx, 8e-6 + 1e-7 * psn, data_packet(1, psn)) for psn in range(3, 6)]  # counted again
    mine = [[sack for sack in sacks if sack.qp == 11] for sacks in shared]    # tx1's (tx2's pending one aside)
    assert all(len(sacks) == 1 and sacks[0].window_penalty > 0 for sacks in mine)


def test_a_sender_takes_the_penalty_only_when_configured_to():
    for honours in (True, False):
        tx, sent = sent_packets(honours)
        conn = tx.connections[11]
        before = conn.cc.cwnd
        first = sent[0]
        tx.receive(3e-6, 0, Sack(bytes(16), bytes(16), 5, 11, first.psn + 1, first.psn + 1, 0, first.ev,
                                 first.tsval, window_penalty=250))
        assert (conn.cc.cwnd < before) is honours


def test_a_sender_whose_tail_is_all_in_no_longer_counts():
    rx = Endpoint("rx", sized(ack_coalesce=1))
    for qp in (1, 2):
        rx.connect(f"tx{qp}", local_qp=qp, remote_qp=10 + qp, paths=[PATH])
    rx.receive(0.0, 0, data_packet(1, 0))
    rx.receive(0.0, 0, data_packet(2, 0, tail=True))  # tx2 sent one packet, its tail: it is done
    rx.receive(5e-6, 0, data_packet(1, 1))
    assert rx.shares.senders == 1


def incast(window_penalty: bool):
    topo = multi_plane(1, 2, 2, 4, rate_bps=int(RATE), queue_depth=29, trim_threshold=29, ecn_threshold=6)
    net = from_topology(topo, compute_programs(topo), Simulator(0), delay=1e-6)
    rtt = sizing.base_rtt(4, 1e-6, RATE, PAYLOAD, 100)
    cfg = TransportConfig(line_rate_bps=RATE, **{**sizing.for_network(RATE, rtt, PAYLOAD),
                                                 "window_penalty": window_penalty})
    hosts = [host.name for host in topo.hosts]       # h1-h4 on the first leaf, h5-h8 on the second
    receiver, senders = hosts[0], hosts[4:]           # four senders on the other leaf
    result = run_flows(net, [Flow(s, receiver, 1 << 20, message_size=256 << 10) for s in senders], cfg,
                       until=0.01, sample_interval=None)
    assert result.all_exactly_once
    trims = sum(ep.stats().get("trimmed_received", 0) for ep in result.endpoints.values())
    return max(f.finish for f in result.flows), trims


def test_an_incast_with_the_penalty_trims_less_and_ends_no_later():
    finish_on, trims_on = incast(True)
    finish_off, trims_off = incast(False)
    assert trims_on < 0.8 * trims_off
    assert finish_on <= finish_off * 1.001


def sent_packets(penalty: bool) -> tuple[Endpoint, list[DataPacket]]:
    """A sender (window penalty on or off) that sent what its window allows of a 64-packet message."""
    tx = Endpoint("tx", sized(window_penalty=penalty))
    conn = tx.connect("rx", local_qp=11, remote_qp=1, paths=[PATH])
    tx.send_message(conn, bytes(64 * PAYLOAD))
    sent = []
    for step in range(4):                             # the pacing lets one packet go per packet time
        sent += [pkt for _, pkt in tx.poll(step * 0.4e-6) if isinstance(pkt, DataPacket)]
    return tx, sent


def resent_after_trim(penalty: bool, reason: int) -> list[DataPacket]:
    """What the sender sends at once after the NACK of its first packet, its window cut to the
    smallest share first (what a receiver shared by many asks)."""
    tx, sent = sent_packets(penalty)
    conn = tx.connections[11]
    conn.cc.on_window_penalty(1.5e-6, 255)
    first = sent[0]
    tx.receive(2e-6, 0, Nack(src=bytes(16), dst=bytes(16), ev=5, qp=11, psn=first.psn, cum_psn=0,
                             reason=reason, ev_echo=first.ev, ts_echo=first.tsval))
    return [pkt for _, pkt in tx.poll(2e-6) if isinstance(pkt, DataPacket)]


def test_with_the_penalty_a_packet_trimmed_at_the_last_hop_waits_for_the_window():
    assert len(sent_packets(True)[1]) > 1
    assert resent_after_trim(True, constants.NACK_TRIMMED_LASTHOP) == []        # the window is full
    assert len(resent_after_trim(True, constants.NACK_TRIMMED)) == 1            # a fabric trim: at once
    assert len(resent_after_trim(False, constants.NACK_TRIMMED_LASTHOP)) == 1   # without the penalty: at once



def test_a_sack_about_an_older_packet_still_sets_the_share():
    """Every SACK's penalty is taken, the latest to arrive last: spraying delivers SACKs out of
    the order their packets were sent, and keeping only the newest packet's delayed the falls."""
    tx, sent = sent_packets(True)
    conn = tx.connections[11]
    old, new = sent[0], sent[-1]
    assert old.tsval < new.tsval
    tx.receive(3e-6, 0, Sack(bytes(16), bytes(16), 5, 11, old.psn, new.psn, 1, new.ev, new.tsval, window_penalty=224))
    tx.receive(3.1e-6, 0, Sack(bytes(16), bytes(16), 5, 11, old.psn + 1, old.psn, 1, old.ev, old.tsval,
                               window_penalty=200))
    assert conn.cc.cwnd == pytest.approx(conn.cc.cwnd_max * (PENALTY_UNITS - 200) / PENALTY_UNITS)


def test_a_congestion_control_without_the_verb_is_refused_by_name_where_penalties_are_on():
    class OldWindow:
        def __init__(self, config, rtt, packet_bytes):
            self.cwnd, self.next_send, self.backlogged = 2 * packet_bytes, 0.0, False

    policies = Policies(congestion=OldWindow)
    with pytest.raises(TypeError, match="OldWindow has no on_window_penalty"):
        Endpoint("tx", sized(), policies=policies).connect("rx", local_qp=11, remote_qp=1, paths=[PATH])
    Endpoint("tx", sized(window_penalty=False), policies=policies).connect("rx", local_qp=11, remote_qp=1,
                                                                          paths=[PATH])


def held_back_incast(window_penalty: bool) -> dict[str, float]:
    """Six senders held to 10 Gbit/s by their own links and one that is not, 4 MiB each into one
    receiver at 100 Gbit/s (htsim's queue settings, 1 us cables): each sender's finish, seconds.
    docs/transport.md ("Receiver window penalty") quotes these figures."""
    topo = multi_plane(1, 2, 4, 8, rate_bps=int(RATE), queue_depth=29, trim_threshold=29, ecn_threshold=6)
    net = from_topology(topo, compute_programs(topo), Simulator(0), delay=1e-6)
    hosts = [host.name for host in topo.hosts]
    receiver, slow, fast = hosts[0], hosts[8:14], hosts[14]
    for host in slow:
        for cable in net.cables_of(host):
            cable.ab.rate_bps = cable.ba.rate_bps = 10e9
    rtt = sizing.base_rtt(4, 1e-6, RATE, PAYLOAD, 100)
    cfg = TransportConfig(line_rate_bps=RATE, **{**sizing.for_network(RATE, rtt, PAYLOAD),
                                                 "window_penalty": window_penalty})
    result = run_flows(net, [Flow(s, receiver, 4 << 20, message_size=256 << 10) for s in slow + [fast]], cfg,
                       until=0.05, sample_interval=None)
    assert result.all_exactly_once
    return {f.flow.src: f.finish for f in result.flows}


def test_senders_held_back_elsewhere_finish_no_later_with_the_penalty():
    """The shares are equal whatever a sender uses: the fast sender is held to its share (what
    remains to do, docs/transport.md), but the six held back elsewhere end no later for it."""
    on, off = held_back_incast(True), held_back_incast(False)
    fast = min(off, key=off.get)
    slow = [host for host in on if host != fast]
    assert max(on[host] for host in slow) <= max(off[host] for host in slow)
    assert on[fast] > off[fast]                       # the cost, which the docs give in figures
