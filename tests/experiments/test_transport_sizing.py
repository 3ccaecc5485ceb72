"""What a case's hosts' transport is told (experiments.transport_sizing): the payload of its packets
is decided in one place, and everything sized from it follows that decision."""
from __future__ import annotations

import pytest

from experiments.backends.mininet_limits import check_mininet
from experiments.scenario import ScenarioError, parse_scenario
from experiments.transport_sizing import mtu_payload, network_base_rtt, transport_params
from experiments.workloads import variant_topology
from host_agent.transport import sizing
from host_agent.transport.config import TransportConfig


def case(link: dict | None = None, params: dict | None = None):
    """The one case of a small scenario with these `link` keys and transport `params`."""
    return parse_scenario({
        "name": "sizing", "topology": "leafspine:2x1x1", "seed": 1, "horizon_s": 1.0,
        "link": {"rate_bps": 2_000_000, **(link or {})},
        "workload": {"kind": "permutation", "bytes": 65536},
        "transports": [{"name": "MRC", "mode": "mrc", "params": params or {}}]}).cases()[0]


def test_the_transport_params_payload_wins_over_the_links_which_wins_over_the_default():
    assert mtu_payload(case()) == TransportConfig.mtu_payload
    assert mtu_payload(case(link={"mtu_payload": 2048})) == 2048
    assert mtu_payload(case(link={"mtu_payload": 2048}, params={"mtu_payload": 512})) == 512


def test_timers_and_the_base_rtt_are_sized_for_the_payload_the_case_sends():
    small = case(params={"mtu_payload": 256})
    topo = variant_topology(small.variant)
    told = transport_params(small, topo)
    assert told["mtu_payload"] == 256 and told["line_rate_bps"] == 2e6
    assert sizing.for_line_rate(2e6, 256) != sizing.for_line_rate(2e6, TransportConfig.mtu_payload)
    for key, value in sizing.for_line_rate(2e6, 256).items():
        assert told[key] == value, key
    assert "mtu_payload" not in transport_params(case(), topo)          # the default is not written out
    assert network_base_rtt(small, topo, 1e-6) < network_base_rtt(case(), topo, 1e-6)


def test_mininet_refuses_a_payload_too_large_for_a_veth_from_either_key():
    for big in (case(link={"mtu_payload": 4096}), case(params={"mtu_payload": 4096})):
        with pytest.raises(ScenarioError, match=r"link\.mtu_payload.*4096 bytes"):
            check_mininet(big)
    check_mininet(case())
