"""The steering rule (host_agent.transport.steering): an EV marked again and again stays out of use
longer, and comes back after clean acknowledgements; EVs acknowledged clean are reused."""
from __future__ import annotations

import random

from host_agent.transport import PathInfo, TransportConfig
from host_agent.transport.evset import EvSet
from host_agent.transport.policies import MrcPathMonitor, RotationSelector
from host_agent.transport.steering import Steering

CFG = TransportConfig(num_evs=32, ev_min_active=4)


def setup(seed=1):
    paths = [PathInfo(0, 0, bytes(16), bytes([0xFC, 0, 0, 0, 1, i]) + bytes(10)) for i in range(4)]
    evset = EvSet(paths, CFG.num_evs, CFG.ev_floor, random.Random(seed), True)
    return evset, RotationSelector(CFG), MrcPathMonitor(CFG)


def gap_after(evset, selector, ev, limit=20_000) -> int:
    """Data packets sent before `ev` is chosen again."""
    for n in range(limit):
        if selector.next_ev(evset, 0.0, None) is ev:
            return n
    raise AssertionError(f"EV {ev.value:#x} never came back within {limit} packets")


def test_an_ev_marked_again_and_again_stays_out_longer_and_clean_acks_bring_it_back():
    evset, selector, monitor = setup()
    ev = selector.next_ev(evset, 0.0, None)
    monitor.on_ecn(evset, ev, 0.0)
    once = gap_after(evset, selector, ev)
    for _ in range(3):                                  # three more marks: 8x the first hold
        monitor.on_ecn(evset, ev, 0.0)
    often = gap_after(evset, selector, ev)
    assert often > 4 * once, (once, often)
    assert evset.steering.strikes[ev.path_key] == 4
    for _ in range(4):                                  # clean acknowledgements take the strikes off
        monitor.on_ack(evset, ev, False, 10e-6, 0.0)
    assert ev.path_key not in evset.steering.strikes
    monitor.on_ecn(evset, ev, 0.0)
    again = gap_after(evset, selector, ev)
    assert again < often / 4, (once, often, again)


def test_a_hold_grows_geometrically_up_to_its_cap():
    steer = Steering(by_path=False)
    evset, selector, _ = setup()
    ev = selector.next_ev(evset, 0.0, None)
    holds = [steer.strike(ev, 32) for _ in range(8)]
    assert holds[:4] == [32, 64, 128, 256]
    assert holds[-1] == steer.params.max_hold_rotations * 32


def test_a_repeated_mark_is_the_paths_own_and_spares_the_window():
    evset, selector, monitor = setup()
    ev = selector.next_ev(evset, 0.0, None)
    assert not monitor.on_ecn(evset, ev, 0.0)           # a first mark: the window hears of it
    assert monitor.on_ecn(evset, ev, 0.0)               # marked again: steering's business


def test_evs_acknowledged_clean_replace_a_struck_paths_evs():
    evset, selector, monitor = setup()
    chosen = [selector.next_ev(evset, 0.0, None) for _ in range(8)]
    bad, good = chosen[0], next(e for e in chosen if e.path_key != chosen[0].path_key)
    for _ in range(3):
        monitor.on_ecn(evset, bad, 0.0)
    monitor.on_ack(evset, good, False, 10e-6, 0.0)
    picks = [selector.next_ev(evset, 0.0, None) for _ in range(64)]
    assert good in picks
    on_bad_path = sum(e.path_key == bad.path_key for e in picks)
    assert on_bad_path < 64 / 4                          # below the path's even share


def test_a_slow_acknowledgement_is_a_strike_a_normal_one_is_clean():
    evset, selector, monitor = setup()
    ev = selector.next_ev(evset, 0.0, None)
    for _ in range(10):
        monitor.on_ack(evset, ev, False, 10e-6, 0.0)
    assert ev.path_key not in evset.steering.strikes
    monitor.on_ack(evset, ev, False, 100e-6, 0.0)
    assert evset.steering.strikes[ev.path_key] == 1
