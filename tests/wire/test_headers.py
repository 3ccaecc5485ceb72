"""Scapy layers: pcap files of codec frames dissect into the MRC layers; tshark reads the RoCE part."""
from __future__ import annotations

import shutil
import subprocess

import pytest
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import rdpcap, wrpcap

from wire import codec
from wire import constants
from wire import headers
from wire.packets import Nack, Sack
from tests.wire.test_codec import DST_MAC, SRC_MAC, control_packets, data_packet, switch_trim


def sample_frames() -> list[bytes]:
    return ([codec.encode(data_packet(payload=bytes(range(256)) * 4, ack_req=True), SRC_MAC, DST_MAC),
             switch_trim(codec.encode(data_packet(), SRC_MAC, DST_MAC))]
            + [codec.encode(p, SRC_MAC, DST_MAC) for p in control_packets()])


def test_pcap_of_codec_frames_dissects_into_mrc_layers(tmp_path):
    pcap = tmp_path / "mrc.pcap"
    wrpcap(str(pcap), [Ether(f) for f in sample_frames()])
    data, trimmed, sack, nack, probe, reply = rdpcap(str(pcap))
    assert data[headers.BTH].opcode == constants.OP_RC_WRITE_ONLY and data[headers.BTH].ackreq == 1
    assert data[headers.RETH].dma_len == 1024 and len(data[Raw].load) == 1024
    assert headers.ICRC in data and data[headers.ICRC].icrc == 0
    assert trimmed[headers.MRCH].flags.TRIMMED and Raw not in trimmed and headers.ICRC not in trimmed
    assert sack[headers.SackHdr].flags.ECN_ECHO and sack[headers.SackHdr].bitmap == 0b1011
    assert nack[headers.NackHdr].sprintf("%reason%") == "TRIMMED_LASTHOP"
    assert headers.ProbeHdr in probe and headers.ProbeReplyHdr in reply
    for frame, original in zip((data, trimmed, sack, nack, probe, reply), sample_frames()):
        assert headers.from_scapy(frame) == codec.decode(original)


def test_binding_wins_over_well_known_source_ports():
    for sport in (53, 123, 4791, 2152):
        frame = codec.encode(data_packet(ev=sport), SRC_MAC, DST_MAC)
        assert Ether(frame)[UDP].sport == sport
        assert headers.MRCH in Ether(frame)


def test_scapy_built_nack_decodes_with_codec():
    pkt = Nack(src=b"\1" * 16, dst=b"\2" * 16, ev=5, qp=1, psn=10, cum_psn=8,
               reason=constants.NACK_TRIMMED, ev_echo=99, ts_echo=1)
    built = headers.to_scapy(pkt, SRC_MAC, DST_MAC)
    assert built[headers.NackHdr].reason == constants.NACK_TRIMMED
    assert codec.decode(bytes(built)) == pkt


def test_scapy_built_sack_carries_its_window_penalty_where_codec_reads_it():
    sack = next(p for p in control_packets() if isinstance(p, Sack))
    assert sack.window_penalty
    built = headers.to_scapy(sack, SRC_MAC, DST_MAC)
    assert built[headers.SackHdr].window_penalty == sack.window_penalty
    assert codec.decode(bytes(built)) == sack


def test_from_scapy_rejects_non_mrc_frames():
    with pytest.raises(ValueError):
        headers.from_scapy(Ether() / headers.IPv6() / UDP(dport=4791) / headers.BTH(opcode=0x04))


TSHARK = shutil.which("tshark")


def _tshark_fields(pcap, *fields, decode_as=True) -> list[list[str]]:
    cmd = [TSHARK, "-r", str(pcap), "-T", "fields", "-E", "separator=,"]
    if decode_as:
        cmd += ["-d", "udp.port==4791,infiniband"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout
    return [line.split(",") for line in out.splitlines()]


@pytest.mark.slow
@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed")
@pytest.mark.parametrize("decode_as", [True, False], ids=["decode-as", "heuristic"])
def test_tshark_infiniband_dissector_decodes_data_packets(tmp_path, decode_as):
    pkt = data_packet(payload=b"y" * 512, ack_req=True)
    pcap = tmp_path / "data.pcap"
    wrpcap(str(pcap), [Ether(codec.encode(pkt, SRC_MAC, DST_MAC))])
    rows = _tshark_fields(pcap, "infiniband.bth.opcode", "infiniband.bth.p_key", "infiniband.bth.destqp",
                          "infiniband.bth.a", "infiniband.bth.psn", "infiniband.reth.va",
                          "infiniband.reth.r_key", "infiniband.reth.dmalen", decode_as=decode_as)
    assert len(rows) == 1
    opcode, pkey, qp, ack, psn, va, rkey, dmalen = rows[0]
    assert int(opcode, 0) == constants.OP_RC_WRITE_ONLY
    assert int(pkey, 0) == constants.BTH_PKEY_DEFAULT
    assert int(qp, 0) == pkt.qp
    assert ack.lower() in ("1", "true")
    assert int(psn, 0) == pkt.psn
    assert int(va, 0) == pkt.va and int(rkey, 0) == pkt.rkey and int(dmalen, 0) == 512


def test_summaries_name_the_mrc_packet_kind():
    data, trimmed, sack, nack, probe, reply = (Ether(f).summary() for f in sample_frames())
    assert "MRC data" in data and "flags=TRIMMED" in trimmed
    assert "SACK cum=100" in sack and "ECN_ECHO" in sack
    assert "NACK psn=101 TRIMMED_LASTHOP" in nack
    assert "PROBE id=3" in probe and "PROBE_REPLY id=3" in reply
