"""The transport's done-when criteria, each an assertion on the in-process network (netsim).

Fabric: leaf-spine with 2 planes x 2 leaves x 2 spines, 10 Gbit/s links of 1 us; h1 sits under
leaf s1 and h2 under leaf s2 (spines s3, s4; plane 1 is s5..s8), so h1 -> h2 has two uSID paths
per plane. Each test runs in well under a few seconds of CPU.
"""
from __future__ import annotations

import pytest

from tests.netsim import netsim_transfers
from host_agent.transport import TransportConfig
from tests.netsim.netsim_transfers import Transfer, run_transfers

FAST = dict(qp_timeout=6, initial_rtt=10e-6, ack_delay=5e-6, probe_interval=50e-6, line_rate_bps=10e9)
MB = 1_000_000


def fabric(seed=1, hosts_per_leaf=1, planes=2):
    return netsim_transfers.fabric(seed, planes=planes, leaves=2, spines=2, hosts_per_leaf=hosts_per_leaf)


def ev_events(result, host, **match):
    return [e for e in result.events if e["host"] == host and e["kind"] == "ev_state"
            and all(e.get(k) == v for k, v in match.items())]


def on_path(net, event, switch):
    return switch in net.path_of_address(event["plane"], bytes.fromhex(event["dst"]))


@pytest.mark.parametrize("loss", [0.0, 0.01, 0.2])
def test_random_loss_on_one_path_delivers_everything_exactly_once(loss):
    net = fabric(seed=7)
    net.switches["s1"].set_fault(net.port("s1", "s3"), drop_prob=loss)
    res = run_transfers(net, [Transfer("h1", "h2", MB, message_size=100_000)], TransportConfig(**FAST), until=0.05)
    tr = res.transfers[0]
    assert tr.complete, tr
    assert tr.receiver_stats["payload_bytes_received"] == MB          # each byte placed once
    dropped = net.switches["s1"].counters["fault_drops_data"]
    if loss == 0:
        assert dropped == 0 and tr.sender_stats.get("retransmitted", 0) == 0
    else:
        assert dropped > 0
        stats = tr.sender_stats                                          # every loss was repaired
        assert sum(stats.get(f"retx_{c}", 0) for c in ("timeout", "sack", "tail_probe")) >= dropped
        assert tr.receiver_stats.get("duplicates", 0) <= tr.sender_stats["retransmitted"]


def test_killed_path_evs_retired_within_3_rto_unused_then_reinstated_by_probes():
    net = fabric(seed=3)
    cable = net.cable("s1", "s3")
    cable.ab.trace_data = True
    kill, repair = 100e-6, 600e-6
    rto_at_kill = {}
    net.at(kill, cable.set_up, False)
    net.at(kill, lambda: rto_at_kill.update(rto=net.hosts["h1"].endpoint.connections[0x100].rtt.rto))
    net.at(repair, cable.set_up, True)
    res = run_transfers(net, [Transfer("h1", "h2", 3 * MB, message_size=100_000)], TransportConfig(**FAST), until=0.05)
    tr = res.transfers[0]
    assert tr.complete and tr.finish > repair                           # the kill hit mid-transfer
    conn = net.hosts["h1"].endpoint.connections[0x100]
    doomed = {ev.value for ev in conn.evset.home_evs() if "s3" in net.path_of_address(
        ev.plane, conn.evset.path_of(ev).dst)}
    assert len(doomed) >= 8
    retired = {e["ev"]: e["t"] for e in ev_events(res, "h1", new="ASSUMED_BAD") if e["t"] >= kill}
    assert doomed <= set(retired)                                       # every EV of the path retired
    deadline = kill + 3 * rto_at_kill["rto"]
    assert max(retired[v] for v in doomed) <= deadline
    assert not any(not on_path(net, e, "s3") for e in ev_events(res, "h1", new="ASSUMED_BAD"))
    sent_while_dead = [t for t in cable.ab.data_offered_at if deadline < t < repair]
    assert sent_while_dead == []                                        # no data on them afterwards
    back = {e["ev"]: e["t"] for e in ev_events(res, "h1", new="GOOD", cause="probe")}
    assert doomed <= set(back) and min(back.values()) > repair          # probes reinstated them
    assert any(t > max(back.values()) for t in cable.ab.data_offered_at)   # and data uses them again


def test_receiver_retires_its_dead_reverse_paths_by_keepalive_probes():
    net = fabric(seed=4)
    net.at(50e-6, net.cable("s2", "s4").set_up, False)
    res = run_transfers(net, [Transfer("h1", "h2", 2 * MB, message_size=200_000)], TransportConfig(**FAST), until=0.05)
    assert res.all_complete
    h2_bad = ev_events(res, "h2", new="ASSUMED_BAD")
    assert h2_bad and all(on_path(net, e, "s4") for e in h2_bad)
    assert {e["cause"] for e in h2_bad} == {"probe_timeout"}


def test_trim_nack_triggers_retransmission_within_one_rtt_and_incast_loses_nothing():
    net = fabric(seed=5, hosts_per_leaf=3, planes=1)          # h1, h2, h3 under s1; h4, h5 under s2
    transfers = [Transfer(f"h{i}", "h1", 400_000, message_size=100_000) for i in (4, 2, 5, 3)]
    res = run_transfers(net, transfers, TransportConfig(**FAST), until=0.05)
    assert res.all_complete
    assert net.switches["s1"].counters["trimmed"] > 20            # the 4->1 incast did trim
    assert sum(s.counters["queue_drops"] for s in net.switches.values()) == 0
    pending, delays = {}, []
    for e in sorted(res.events, key=lambda e: e["t"]):
        key = (e["host"], e.get("psn"))
        if e["kind"] == "trim_nack":
            pending[key] = e
        elif e["kind"] == "retransmit" and e["cause"] == "trim":
            nack = pending.pop(key)
            delays.append((e["t"] - nack["t"], nack["srtt"]))
    assert len(delays) == sum(t.sender_stats.get("trims", 0) for t in res.transfers) > 20
    assert not pending                                                  # every trim NACK was answered
    assert all(d <= srtt for d, srtt in delays)
    for tr in res.transfers:
        assert tr.receiver_stats["payload_bytes_received"] == 400_000


def test_baseline_stalls_on_a_killed_path_and_recovers_only_when_it_returns():
    cfg = TransportConfig(mode="roce", **FAST)
    outcome = {}
    for repair in (1e-3, None):
        net = fabric(seed=3)
        uplinks = [net.cable("s1", s) for s in ("s3", "s4")]
        state = {}

        def kill():
            state["cable"] = max(uplinks, key=lambda c: c.ab.counters["data_offered"])   # the ECMP choice
            state["cable"].set_up(False)

        net.at(100e-6, kill)
        if repair:
            net.at(repair, lambda: state["cable"].set_up(True))
        res = run_transfers(net, [Transfer("h1", "h2", MB, message_size=100_000)], cfg, until=4e-3)
        outcome[repair] = res
        tr = res.transfers[0]
        stalled = [sum(g) for t, g in res.goodput if 300e-6 <= t <= (repair or res.end)]
        assert stalled and max(stalled) == 0                          # nothing moves while the path is dead
        assert tr.sender_stats["retx_timeout"] > 0
        assert not ev_events(res, "h1")                               # no EV state machine, no failover
    assert outcome[1e-3].transfers[0].complete
    assert outcome[1e-3].transfers[0].finish > 1e-3
    assert not outcome[None].transfers[0].complete


def test_mrc_survives_what_stalls_the_baseline():
    net = fabric(seed=3)
    net.at(100e-6, net.cable("s1", "s3").set_up, False)
    net.at(100e-6, net.cable("s1", "s4").set_up, False)   # all of h1's plane-0 uplinks
    res = run_transfers(net, [Transfer("h1", "h2", MB, message_size=100_000)], TransportConfig(**FAST), until=4e-3)
    assert res.all_complete and res.transfers[0].finish < 1e-3


@pytest.mark.parametrize("mode", ["mrc", "roce"])
def test_psn_wraps_around_24_bits(mode):
    net = fabric(seed=9)
    net.switches["s1"].set_fault(net.port("s1", "s3"), drop_prob=0.05)
    cfg = TransportConfig(mode=mode, initial_psn=(1 << 24) - 150, **FAST)
    res = run_transfers(net, [Transfer("h1", "h2", 400_000, message_size=50_000)], cfg, until=0.05)
    assert res.all_complete


def test_same_seed_same_run():
    def run():
        net = fabric(seed=11)
        net.switches["s1"].set_fault(net.port("s1", "s3"), drop_prob=0.1)
        res = run_transfers(net, [Transfer("h1", "h2", 300_000, message_size=30_000)], TransportConfig(**FAST),
                            until=0.05, seed=2)
        return res.events, res.goodput, res.end
    assert run() == run()


def test_senders_do_not_overrun_their_own_nic():
    """Data plus the SACKs a host sends for incoming data never queue up in its NIC (NIC clock)."""
    net = fabric(seed=6, planes=1)
    cfg = TransportConfig(**FAST)
    res = run_transfers(net, [Transfer("h1", "h2", MB, message_size=100_000),
                              Transfer("h2", "h1", MB, message_size=100_000)], cfg, until=0.05)
    assert res.all_complete
    for host in ("h1", "h2"):
        nic = net.hosts[host].nics[0]
        assert nic.peak_queue <= cfg.nic_backlog_pkts + 4
    assert all(t.sender_stats.get("retx_timeout", 0) == 0 for t in res.transfers)


def test_a_stalled_receiver_costs_retransmissions_but_retires_no_ev():
    """Regression (Mininet failover: thousands of EVs retired spuriously): when the peer stops for
    many RTOs, every packet in flight times out, but nothing sent after them arrived either, so the
    timeouts are no evidence against their paths. Nothing is lost, no EV is retired, and the RTO is
    not stretched (it would delay the detection of a real failure)."""
    net = fabric(seed=8)
    held = net.hosts["h2"].pause(300e-6, 1.3e-3)                 # 20 x the QP timeout (65.5 us)
    res = run_transfers(net, [Transfer("h1", "h2", MB, message_size=100_000)], TransportConfig(**FAST), until=0.05)
    tr = res.transfers[0]
    assert held and tr.complete and tr.finish > 1.3e-3
    assert tr.receiver_stats["payload_bytes_received"] == MB
    assert tr.sender_stats["timeouts"] > 0                       # the stall did fire the timers
    assert not ev_events(res, "h1", new="ASSUMED_BAD") and not ev_events(res, "h2", new="ASSUMED_BAD")
    assert tr.sender_stats["timeouts_unattributed"] == tr.sender_stats["timeouts"]
    assert net.hosts["h1"].endpoint.connections[0x100].rtt.rto_scale == 1.0


def test_packets_in_flight_on_a_retired_path_are_resent_at_once():
    """Regression (failover at 20 Mbit/s took two RTOs): when a timeout retires a path, the packets
    sent on it after the timed-out one are resent at once, not each after its own RTO with their
    bytes holding the window shut. The dead link costs the few timeouts, close together, that show its
    loss is its own (host_agent/transport/pathloss.py). (Loss detection from SACKs off: it would find
    the first loss before the timer, and every stranded packet within its window.)"""
    net = fabric(seed=3)
    kill = 100e-6
    net.at(kill, net.cable("s1", "s3").set_up, False)
    res = run_transfers(net, [Transfer("h1", "h2", 3 * MB, message_size=100_000)],
                        TransportConfig(**FAST, sack_loss_detection=False), until=0.05)
    tr = res.transfers[0]
    assert tr.complete and tr.receiver_stats["payload_bytes_received"] == 3 * MB
    timeouts = tr.sender_stats["timeouts"]
    assert 1 < timeouts <= 6 and tr.sender_stats["stranded_resent"] > 0
    retired_at = min(e["t"] for e in ev_events(res, "h1", new="ASSUMED_BAD"))
    resent = [e for e in res.events if e["host"] == "h1" and e["kind"] == "retransmit"]
    assert len(resent) == tr.sender_stats["retransmitted"] == timeouts + tr.sender_stats["stranded_resent"]
    rto = net.hosts["h1"].endpoint.connections[0x100].rtt.rto
    assert all(retired_at - rto / 4 <= e["t"] <= retired_at + rto / 2 for e in resent)


def test_a_stalled_sender_costs_its_receiver_no_keepalive_retirement():
    """The receiver's keepalive probes go unanswered while the sender's process is stopped; they
    are suspects, not misses (no probe sent after them was answered), and their late replies
    clear them: the receiver retires none of its paths."""
    net = fabric(seed=8)
    net.hosts["h1"].pause(300e-6, 1.3e-3)
    res = run_transfers(net, [Transfer("h1", "h2", MB, message_size=100_000)], TransportConfig(**FAST), until=0.05)
    assert res.all_complete and res.transfers[0].finish > 1.3e-3
    assert net.hosts["h2"].endpoint.connections[0x101].stats["probe_timeouts"] > 0   # keepalives did time out
    assert not ev_events(res, "h2", new="ASSUMED_BAD") and not ev_events(res, "h1", new="ASSUMED_BAD")
