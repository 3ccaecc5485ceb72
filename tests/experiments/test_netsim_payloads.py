"""The bytes netsim's flows carry (`host_agent.collectives.data.flow_payloads`), cut into packets as
the transport cuts them (`host_agent.transport.message.SendQueue`): no two packets of a case carry
the same bytes, so the receivers' byte-for-byte check sees a packet delivered to another flow or to
another packet's place."""
from __future__ import annotations

import pytest

from experiments.backends import netsim_traffic
from experiments.backends.netsim_backend import NetsimBackend
from experiments.scenario import parse_scenario
from host_agent.transport.message import SendQueue


@pytest.mark.parametrize("mtu", [1000, 4096])
def test_every_packet_of_a_case_carries_bytes_of_its_own(monkeypatch, mtu):
    """A permutation whose messages are not whole packets (1000 bytes: not a power of two either)."""
    case = parse_scenario({"name": "payloads", "topology": "leafspine:2x2x2", "seed": 3,
                           "link": {"rate_bps": 10_000_000_000, "delay_s": 1e-6, "mtu_payload": mtu},
                           "workload": {"kind": "permutation", "bytes": 30_000, "chunk_bytes": 7_777},
                           "transports": [{"name": "MRC", "mode": "mrc"}]}).cases()[0]
    made = []
    make = netsim_traffic.flow_payloads

    def kept(seed, flows, packet_payload):
        views = make(seed, flows, packet_payload)
        made.append((flows, packet_payload, views))
        return views

    monkeypatch.setattr(netsim_traffic, "flow_payloads", kept)
    record = NetsimBackend().run_case(case)
    assert record.completed and record.bit_exact
    [(flows, packet_payload, views)] = made
    assert packet_payload == mtu                          # the packet size the endpoints use
    packets = []
    for messages, view in zip(flows, views):
        queue, offset = SendQueue(packet_payload), 0
        for n in messages:
            queue.add(view[offset:offset + n])
            offset += n
        seq = 0
        while queue:
            seg = queue.cut(seq)
            packets.append(bytes(seg.msg.data[seg.offset:seg.offset + seg.length]))
            seq += 1
    assert len(flows) == 4 and len(packets) > 4 * 30_000 // mtu
    heads = [p[:64] for p in packets if len(p) >= 64]
    assert len(set(heads)) == len(heads) > 0.9 * len(packets)
