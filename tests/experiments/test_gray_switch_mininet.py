"""The gray-switch fault (switch_slow) on the real testbed: the switch's egress queues, and its
neighbour switches' queues facing it, served at a share of their rate while it runs.

The model target changes its rates through its control socket (refswitch.control), BMv2 through
`set_queue_rate` (tests on BMv2 need `simple_switch_grpc` and the compiled program). Needs root,
mnexec and the mininet library; slow: networks brought up and torn down, a short MRC permutation.
"""
from __future__ import annotations

import pytest

from tests.conftest import requires_bmv2, requires_mininet
from controller.installer import DEFAULT_BMV2_JSON
from experiments import metrics
from experiments.backends.mininet_backend import MininetBackend
from experiments.scenario import parse_scenario
from testbed.network import TestbedNetwork
from topologies.builders import leaf_spine

pytestmark = [pytest.mark.integration, pytest.mark.slow, requires_mininet]

TARGETS = ["model", pytest.param("bmv2", marks=requires_bmv2)]
RATE = 20_000_000                       # the topology's links (leaf_spine's default)
SHARE = 0.05                            # the slowed spine's share of its rate in the traffic test
SLOW_RATE = 8_000_000                   # the traffic test's links: BMv2's debug build forwards 20 Mbit/s links
                                        # below their rate, and then barely feels a slowed spine
# Bytes the slowed spine may carry over what the other one did. BMv2's bound is looser: its debug
# build's forwarding speed on a shared machine also paces the fast spine, and set_queue_rate paces
# each priority queue on its own (bm_sim's QueueingLogicPriRL), so control packets and trimmed
# headers in the high-priority queue pass on top of the data queue's share.
MOST_CARRIED = {"model": 0.5, "bmv2": 0.8}


def skip_without_program(target: str) -> None:
    if target == "bmv2" and not DEFAULT_BMV2_JSON.exists():
        pytest.skip(f"BMv2 needs the compiled program {DEFAULT_BMV2_JSON} (make -C p4)")


def test_the_model_serves_a_slowed_switch_and_the_ports_facing_it_at_the_share(tmp_path):
    net = TestbedNetwork(leaf_spine(2, 2, 1), "model", run_dir=tmp_path, progress=lambda _: None)
    try:
        net.start()
        topo = net.topology
        facing = {(leaf, topo.port_towards(leaf, "s3")) for leaf in ("s1", "s2")}
        own = {("s3", port) for port in topo.ports_of("s3")}
        others = {(sw, port) for sw in ("s1", "s2", "s4") for port in topo.ports_of(sw)} - facing

        def rates(ports):
            return {net.switch(sw).queue_rate(port) for sw, port in ports}

        net.set_switch_rate("s3", 0.25)
        assert rates(own | facing) == {RATE // 4}
        assert rates(others) == {RATE}
        net.set_switch_rate("s3", 0.5)                  # a share of the programmed rate, not of the slowed one
        assert rates(own | facing) == {RATE // 2}
        net.set_switch_rate("s3", 1.0)
        assert rates(own | facing | others) == {RATE}
        with pytest.raises(KeyError, match="h1"):
            net.set_switch_rate("h1", 0.5)
        with pytest.raises(ValueError, match="share"):
            net.set_switch_rate("s3", 0.0)
    finally:
        assert net.stop() == []


def gray_spine(horizon_s: float, rate_bps: int = RATE):
    return parse_scenario({
        "name": "gray-spine-mininet", "topology": "leafspine:2x2x2", "seed": 1, "horizon_s": horizon_s,
        "sample_interval_s": 0.01, "link": {"rate_bps": rate_bps},
        "workload": {"kind": "permutation", "bytes": 524288, "chunk_bytes": 65536},
        "transports": [{"name": "MRC", "mode": "mrc"}],
        "variants": [{"label": "gray", "faults": [{"kind": "switch_slow", "switch": "s3", "share": SHARE, "at": 0}]}],
    }).cases()[0]


@pytest.mark.parametrize("target", TARGETS)
def test_a_gray_spine_on_mininet_carries_less_and_mrc_delivers_everything(target, tmp_path):
    skip_without_program(target)
    case = gray_spine(10.0, SLOW_RATE)
    record = MininetBackend(target, run_root=tmp_path).run_case(case)
    summary = metrics.summarise(record)
    assert summary["completed"] and summary["bit_exact"], (summary, record.notes)
    assert [(f.what, f.target) for f in record.faults] == [(f"links at {SHARE:.0%} rate", "s3")], record.notes
    carried = {link.name: link.tx_bytes for link in record.links}
    slow = sum(b for name, b in carried.items() if "s3" in name)
    fast = sum(b for name, b in carried.items() if "s4" in name)
    assert fast > 0 and slow < MOST_CARRIED[target] * fast, carried
    assert not [n for n in record.notes if n.startswith("left behind")], record.notes
