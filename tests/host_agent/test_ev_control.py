"""The EV control surface of the transport: DENIED and UNKNOWN states, the floor, replace, probes
on request, drop counts; two endpoints wired back to back by hand (sans-IO)."""
from __future__ import annotations

import random

import pytest

from wire.packets import DataPacket, Probe
from host_agent.transport import Endpoint, EvState, PathInfo, TransportConfig
from host_agent.transport import events
from host_agent.transport.evset import EvSet, FloorError

FAST = dict(qp_timeout=6, initial_rtt=10e-6, ack_delay=5e-6, probe_interval=50e-6, num_evs=16)
DELAY = 5e-6


def paths(per_plane=4, planes=1):
    return [PathInfo(p, p, bytes([0xFC, 0, 0, p]) + bytes(12), bytes([0xFC, 0, 0, p, 1, i]) + bytes(10))
            for p in range(planes) for i in range(per_plane)]


class Pair:
    """Endpoints a and b, back to back: every packet arrives DELAY later unless `lose` says so."""

    def __init__(self, **config):
        cfg = TransportConfig(**{**FAST, **config})
        self.a, self.b = Endpoint("a", cfg), Endpoint("b", cfg, rng_seed=1)
        self.ca = self.a.connect("b", 1, 2, paths())
        self.cb = self.b.connect("a", 2, 1, paths())
        self.now = 0.0
        self.sent: list = []                 # (sender name, packet) of every packet put on the wire
        self.lose = lambda pkt: False
        self.events: list = []
        self.flight: list = []               # (arrival time, endpoint, nic, packet) on the wire

    def run(self, until: float, step: float = 1e-6) -> None:
        flight = self.flight
        while self.now < until:
            for src, dst in ((self.a, self.b), (self.b, self.a)):
                for nic, pkt in src.poll(self.now):
                    self.sent.append((src.name, pkt))
                    if not self.lose(pkt):
                        flight.append((self.now + DELAY, dst, nic, pkt))
            due = [f for f in flight if f[0] <= self.now]
            flight[:] = [f for f in flight if f[0] > self.now]
            for _, dst, nic, pkt in due:
                dst.receive(self.now, nic, pkt)
            self.events += self.a.drain_events() + self.b.drain_events()
            self.now += step

    def evs_used_by(self, name: str) -> set[int]:
        return {pkt.ev for who, pkt in self.sent if who == name}


def test_floor_defaults_to_a_quarter_of_the_evs_and_is_checked():
    assert TransportConfig().ev_floor == 32 and TransportConfig(num_evs=16).ev_floor == 4
    assert TransportConfig(num_evs=16, ev_min_active=7).ev_floor == 7
    with pytest.raises(ValueError, match="ev_min_active"):
        TransportConfig(num_evs=16, ev_min_active=17)


def test_a_denied_ev_carries_no_packet_until_allowed_then_is_probed_before_use():
    p = Pair()
    denied = p.ca.evset.home_evs()[0].value
    back = p.cb.evset.home_evs()[0].value                     # b's acks and probe replies avoid it
    assert p.a.modify_ev_state(p.ca, hex(denied), "denied", 0.0)["state"] == "DENIED"
    p.b.modify_ev_state(p.cb, back, "DENIED", 0.0)
    p.a.send_message(p.ca, bytes(64 * 1024))
    p.run(0.002)
    assert any(isinstance(e, events.MessageSent) for e in p.events)
    assert len(p.evs_used_by("a")) == 15 and denied not in p.evs_used_by("a")
    assert back not in p.evs_used_by("b")
    change = next(e for e in p.events if isinstance(e, events.EvStateChanged) and e.ev == denied)
    assert (change.old, change.new, change.cause) == ("GOOD", "DENIED", "operator")

    p.sent.clear()
    row = p.ca.control.allow(denied, p.now)
    assert row["state"] == "UNKNOWN"
    assert p.ca.evset.get(denied) not in p.ca.evset.active_evs()     # not used before a probe reply
    p.run(p.now + 200e-6)
    assert any(isinstance(pkt, Probe) and pkt.ev == denied for _, pkt in p.sent)
    assert p.a.query_ev(p.ca, denied)["state"] == "GOOD"
    assert [(e.old, e.new, e.cause) for e in p.events if isinstance(e, events.EvStateChanged) and e.ev == denied][-2:] \
        == [("DENIED", "UNKNOWN", "operator"), ("UNKNOWN", "GOOD", "probe")]


def test_an_unknown_ev_stays_unknown_while_its_probes_go_unanswered():
    p = Pair()
    ev = p.ca.evset.home_evs()[1].value
    p.a.modify_ev_state(p.ca, ev, "UNKNOWN", 0.0)
    p.lose = lambda pkt: isinstance(pkt, Probe) and pkt.ev == ev
    p.run(400e-6)
    probes = [pkt for _, pkt in p.sent if isinstance(pkt, Probe) and pkt.ev == ev]
    assert len(probes) >= 2                                     # probed again, round after round
    assert p.a.query_ev(p.ca, ev)["state"] == "UNKNOWN"
    assert not any(isinstance(pkt, DataPacket) and pkt.ev == ev for _, pkt in p.sent)


def test_denials_stop_at_the_floor():
    p = Pair(ev_min_active=6)
    homes = [e.value for e in p.ca.evset.home_evs()]
    for ev in homes[:10]:
        p.a.modify_ev_state(p.ca, ev, "DENIED", 0.0)
    with pytest.raises(FloorError, match="ev_min_active 6"):
        p.a.modify_ev_state(p.ca, homes[10], "DENIED", 0.0)
    assert p.a.query_ev(p.ca, homes[10])["state"] == "GOOD"
    assert len(p.ca.evset.active_evs()) == 6


def test_the_rotation_floor_takes_unknown_then_bad_evs_never_denied_ones():
    evs = EvSet(paths(), 16, 8, random.Random(3), share_fate_by_path=False)
    homes = evs.home_evs()
    for ev in homes[:8]:
        evs.deny(ev, 0.0)
    for ev in homes[8:10]:
        evs.set_state(ev, EvState.UNKNOWN, 0.0)
    for ev in homes[10:16]:
        evs.mark_bad(ev, 0.0, "timeout")                        # their backups stand in, usable
    for slot in evs.slots[10:16]:
        evs.mark_bad(slot.current, 0.0, "timeout")              # and fail too (no paths left for more)
    active = evs.active_evs()
    assert len(active) == 8
    assert not any(e.state is EvState.DENIED for e in active)
    assert set(map(id, homes[8:10])) <= set(map(id, active))     # UNKNOWN first


def test_replace_puts_an_unknown_ev_in_the_slot_and_a_probe_makes_it_good():
    p = Pair()
    old = p.ca.evset.home_evs()[2].value
    with pytest.raises(ValueError, match="new_ev: .* already an EV"):
        p.a.replace_ev(p.ca, old, 0.0, new_ev=p.ca.evset.home_evs()[3].value)
    row = p.a.replace_ev(p.ca, old, 0.0, new_ev="0x12345678")
    assert (row["ev"], row["state"], row["slot"]) == (0x12345678, "UNKNOWN", 2)
    assert p.ca.evset.get(old) is None
    with pytest.raises(ValueError, match="ev: .* is not an EV of a->b"):
        p.a.query_ev(p.ca, old)
    (replaced,) = [e for e in p.a.drain_events() if isinstance(e, events.EvReplaced)]
    assert (replaced.ev, replaced.replaces) == (0x12345678, old)
    p.run(200e-6)
    assert p.a.query_ev(p.ca, 0x12345678)["state"] == "GOOD"
    assert p.a.query_ev_array(p.ca)[2]["ev"] == 0x12345678
    random_row = p.a.replace_ev(p.ca, 0x12345678, p.now)
    assert random_row["ev"] != 0x12345678 and random_row["state"] == "UNKNOWN"


def test_modify_to_assumed_bad_gives_a_backup_and_good_takes_the_slot_back():
    p = Pair()
    ev = p.ca.evset.home_evs()[0].value
    p.a.modify_ev_state(p.ca, ev, "ASSUMED_BAD", 0.0)
    row = p.a.query_ev_array(p.ca)[0]
    assert row["state"] == "ASSUMED_BAD" and row["in_use"]["backup"] and row["in_use"]["state"] == "GOOD"
    p.a.modify_ev_state(p.ca, ev, "GOOD", 0.0)
    row = p.a.query_ev_array(p.ca)[0]
    assert row["state"] == "GOOD" and "in_use" not in row


def test_a_probe_on_request_reports_port_and_rtt_in_ns_or_no_answer():
    p = Pair()
    ev = p.ca.evset.home_evs()[1]
    req = p.a.probe_ev(p.ca, ev.value, 0.0)
    p.run(100e-6)
    (result,) = [e for e in p.events if isinstance(e, events.ProbeResult)]
    assert (result.req_id, result.ev, result.port) == (req, ev.value, p.ca.evset.path_of(ev).nic)
    assert 2 * DELAY * 1e9 <= result.rtt_ns <= 2 * DELAY * 1e9 + 3000
    p.lose = lambda pkt: isinstance(pkt, Probe)
    req2 = p.a.probe_ev(p.ca, ev.value, p.now, timeout=30e-6)
    p.run(p.now + 100e-6)
    lost = [e for e in p.events if isinstance(e, events.ProbeResult) and e.req_id == req2]
    assert len(lost) == 1 and lost[0].rtt_ns is None


def test_a_timeout_counts_a_drop_and_the_ev_event_carries_it():
    p = Pair(share_fate_by_path=False)
    victim = p.ca.evset.home_evs()[0].value
    p.lose = lambda pkt: isinstance(pkt, DataPacket) and pkt.ev == victim
    p.a.send_message(p.ca, bytes(64 * 1024))
    p.run(0.002)
    bad = [e for e in p.events if isinstance(e, events.EvStateChanged) and e.ev == victim and e.new == "ASSUMED_BAD"]
    assert bad and bad[0].drop_count >= 1 and bad[0].as_record()["drop_count"] == bad[0].drop_count
    assert p.a.query_ev(p.ca, victim)["drop_count"] >= bad[0].drop_count


@pytest.mark.parametrize("call,field", [
    (lambda p: p.a.query_ev(p.ca, "zz"), "ev"),
    (lambda p: p.a.query_ev(p.ca, 1 << 33), "ev"),
    (lambda p: p.a.modify_ev_state(p.ca, p.ca.evset.home_evs()[0].value, "SKIP", 0.0), "state"),
    (lambda p: p.a.modify_ev_state(p.ca, p.ca.evset.home_evs()[0].value, 3, 0.0), "state"),
    (lambda p: p.a.replace_ev(p.ca, p.ca.evset.home_evs()[0].value, 0.0, new_ev=-1), "new_ev"),
    (lambda p: p.a.probe_ev(p.ca, p.ca.evset.home_evs()[0].value, 0.0, timeout=-1), "timeout"),
    (lambda p: p.ca.control.allow(p.ca.evset.home_evs()[0].value, 0.0), "ev"),
])
def test_bad_requests_name_the_field(call, field):
    with pytest.raises(ValueError, match=f"^{field}: "):
        call(Pair())


def test_a_denied_ev_is_not_probed_on_request():
    p = Pair()
    ev = p.ca.evset.home_evs()[0].value
    p.a.modify_ev_state(p.ca, ev, "DENIED", 0.0)
    with pytest.raises(ValueError, match="DENIED"):
        p.a.probe_ev(p.ca, ev, 0.0)


def test_a_late_probe_reply_for_a_replaced_ev_changes_nothing():
    """A bad EV replaced while its reinstating probe is out: the reply, when it comes, reinstates
    neither the forgotten EV nor its slot's new (UNKNOWN) one."""
    p = Pair(share_fate_by_path=False, probe_successes=1)
    old = p.ca.evset.home_evs()[0]
    p.a.modify_ev_state(p.ca, old.value, "ASSUMED_BAD", 0.0)
    p.lose = lambda pkt: isinstance(pkt, Probe) and pkt.ev != old.value      # only old's probes pass
    while not any(isinstance(pkt, Probe) and pkt.ev == old.value for _, pkt in p.sent):
        p.run(p.now + 1e-6)                          # until the first reinstating probe is out
    new = p.a.replace_ev(p.ca, old.value, p.now)["ev"]
    p.run(p.now + 20e-6)
    assert old.state is EvState.ASSUMED_BAD
    assert p.a.query_ev(p.ca, new)["state"] == "UNKNOWN"


def test_the_transport_leaves_denied_and_unknown_evs_to_the_operator():
    """Fate sharing retires and reinstates a path's usable EVs only: a DENIED and an UNKNOWN EV on
    that path keep their states; no backup is drawn on a path with a DENIED EV."""
    evs = EvSet(paths(), 32, 4, random.Random(5), share_fate_by_path=True)
    key = evs.home_evs()[0].path_key
    on_path = [e for e in evs.home_evs() if e.path_key == key]
    denied, unknown, good = on_path[0], on_path[1], on_path[2]
    elsewhere = next(e for e in evs.home_evs() if e.path_key != key)     # under maintenance
    evs.deny(denied, 0.0)
    evs.deny(elsewhere, 0.0)
    evs.set_state(unknown, EvState.UNKNOWN, 0.0)
    retired = evs.mark_bad(good, 1.0, "timeout")
    assert denied not in retired and unknown not in retired and good in retired
    assert (denied.state, unknown.state) == (EvState.DENIED, EvState.UNKNOWN)
    backups = [s.current for s in evs.slots if not s.current.home]
    assert backups and not {b.path_key for b in backups} & {key, elsewhere.path_key}
    evs.reinstate(good, "probe", 2.0)
    assert good.state is EvState.GOOD
    assert (denied.state, unknown.state) == (EvState.DENIED, EvState.UNKNOWN)
    assert not evs.confirm(denied, "probe", 3.0) and evs.confirm(unknown, "probe", 3.0)
    assert unknown.state is EvState.GOOD
