"""wireshark/mrc.lua: tshark with the dissector decodes every MRC packet kind as wire.codec encodes it.

The pcaps are written here from codec frames (no network); tshark runs with `-X lua_script:` and a
private HOME, so a copy of the dissector installed in the user's plugin folder is not loaded twice.
The EVs of the main set put UDP source ports above 4791 in the frames, so that Wireshark tries
RoCE's port first; EVs that put a well-known port there have a test of their own.
"""
from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from tests.wire.test_codec import DST, DST_MAC, SRC, SRC_MAC, data_packet, switch_trim
from wire import codec
from wire import constants
from wire.packets import Nack, Probe, ProbeReply, Sack

DISSECTOR = Path(__file__).resolve().parents[2] / "wireshark" / "mrc.lua"
TSHARK = shutil.which("tshark")
requires_tshark = pytest.mark.skipif(TSHARK is None, reason="tshark is not installed "
                                                            "(scripts/setup.sh installs it)")

FIELDS = ("frame.number", "_ws.col.Protocol", "_ws.col.Info", "_ws.malformed", "_ws.expert.message",
          "infiniband.bth.psn",
          "mrc.opcode", "mrc.qp", "mrc.psn", "mrc.ev", "mrc.dscp",
          "mrc.mrch.flags", "mrc.mrch.trimmed", "mrc.mrch.retx", "mrc.mrch.reserved", "mrc.mrch.msg_id",
          "mrc.mrch.msg_len", "mrc.mrch.tsval", "mrc.payload_len",
          "mrc.sack.cum_psn", "mrc.sack.base", "mrc.sack.bitmap", "mrc.sack.received", "mrc.sack.ev_echo",
          "mrc.sack.ecn_echo", "mrc.sack.window_penalty", "mrc.sack.ts_echo",
          "mrc.nack.psn", "mrc.nack.cum_psn", "mrc.nack.ev_echo", "mrc.nack.reason", "mrc.nack.ts_echo",
          "mrc.probe.id", "mrc.probe.tsval", "mrc.reply.id", "mrc.reply.ev_echo", "mrc.reply.ts_echo")


# --- pcaps --------------------------------------------------------------------------------------

def write_pcap(path: Path, frames: list[bytes], snaplen: int = 65535) -> Path:
    """A classic pcap (Ethernet) of `frames`, each cut to `snaplen` bytes as tcpdump -s would."""
    records = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, 1)]
    for index, frame in enumerate(frames):
        kept = bytes(frame[:snaplen])
        records.append(struct.pack("<IIII", 1_700_000_000 + index, 0, len(kept), len(frame)) + kept)
    path.write_bytes(b"".join(records))
    return path


def _encode(pkt) -> bytes:
    return codec.encode(pkt, SRC_MAC, DST_MAC)


SACK = Sack(src=DST, dst=SRC, ev=0x0001BEEF, qp=0x00ABCD, cum_psn=0xFFFFF0, sack_base=0xFFFFF2,
            bitmap=0x8000_0000_0000_0005, ev_echo=0xABCD1234, ts_echo=123456, ecn_echo=True, window_penalty=219)
SACK_NO_ECN = Sack(src=DST, dst=SRC, ev=0x0002_F00D, qp=0x00ABCD, cum_psn=40, sack_base=40, bitmap=0,
                   ev_echo=0x99, ts_echo=7)
PROBE = Probe(src=SRC, dst=DST, ev=0x7777_E001, qp=0x00ABCD, probe_id=31, tsval=4_000_000_000)
REPLY = ProbeReply(src=DST, dst=SRC, ev=0x0102_F304, qp=0x00ABCD, probe_id=31, ev_echo=0x7777_E001,
                   ts_echo=4_000_000_000)
REASONS = (constants.NACK_TRIMMED, constants.NACK_TRIMMED_LASTHOP, constants.NACK_NO_BITMAP,
           constants.NACK_NO_PKT_BUFFER, constants.NACK_PSN_OUT_OF_WINDOW, constants.NACK_UNEXPECTED)
NACKS = [Nack(src=DST, dst=SRC, ev=0x0BAD_C000 + reason, qp=0x00ABCD, psn=1000 + reason, cum_psn=999,
              reason=reason, ev_echo=0xE0 + reason, ts_echo=555) for reason in REASONS]
DATA = data_packet(payload=bytes(range(256)) * 4, ack_req=True, ev=0xABCD_9234)
RETX = data_packet(payload=b"r" * 512, psn=0x000010, ev=0x0000FFFF, flags=constants.MRCH_FLAG_RETX,
                   dscp=constants.DSCP_TRIMMABLE_RETX)


def every_kind() -> list[tuple[str, object, bytes]]:
    """(label, packet object, frame) for every packet kind; the trimmed one is cut as a switch cuts."""
    trimmed = switch_trim(_encode(data_packet(psn=0x000777, ev=0x1234_ABCD)))
    return ([("data", DATA, _encode(DATA)),
             ("trimmed", codec.decode(trimmed), trimmed),
             ("retx", RETX, _encode(RETX)),
             ("sack", SACK, _encode(SACK)),
             ("sack-no-ecn", SACK_NO_ECN, _encode(SACK_NO_ECN))]
            + [(f"nack-{reason}", nack, _encode(nack)) for reason, nack in zip(REASONS, NACKS)]
            + [("probe", PROBE, _encode(PROBE)), ("reply", REPLY, _encode(REPLY))])


# --- tshark -------------------------------------------------------------------------------------

def _tshark(*args: str, home: Path) -> subprocess.CompletedProcess:
    """tshark with the dissector and a private HOME; fails on an exit status or a Lua error."""
    env = dict(os.environ, HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    done = subprocess.run([TSHARK, "-X", f"lua_script:{DISSECTOR}", *args], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "Lua" not in done.stderr and "rror" not in done.stderr, done.stderr
    return done


def decoded(pcap: Path, home: Path, *options: str) -> list[dict[str, str]]:
    """One dict per frame: field name -> tshark's text (empty when absent)."""
    out = _tshark(*options, "-r", str(pcap), "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a",
                  "-E", "aggregator=;", *[arg for f in FIELDS for arg in ("-e", f)], home=home).stdout
    rows = [dict(zip(FIELDS, line.split("\t"))) for line in out.splitlines()]
    for row in rows:
        assert len(row) == len(FIELDS), row
    return rows


def _int(text: str) -> int:
    return int(text, 0)


def _bool(text: str) -> bool:
    assert text in ("0", "1", "False", "True"), text
    return text in ("1", "True")


@pytest.fixture(scope="module")
def kinds() -> list[tuple[str, object, bytes]]:
    return every_kind()


@pytest.fixture(scope="module")
def rows(kinds, tmp_path_factory) -> dict[str, dict[str, str]]:
    folder = tmp_path_factory.mktemp("mrc-pcap")
    pcap = write_pcap(folder / "every-kind.pcap", [frame for _, _, frame in kinds])
    found = decoded(pcap, home=folder)
    assert len(found) == len(kinds)
    return {label: row for (label, _, _), row in zip(kinds, found)}


# --- the tests ----------------------------------------------------------------------------------

@requires_tshark
def test_every_packet_is_mrc_with_qp_psn_and_ev(kinds, rows):
    for label, pkt, _ in kinds:
        row = rows[label]
        assert row["_ws.col.Protocol"] == "MRC", label
        assert _int(row["mrc.qp"]) == pkt.qp, label
        assert _int(row["mrc.ev"]) == pkt.ev, label
        assert _int(row["mrc.dscp"]) == pkt.dscp, label
        expected_psn = {Sack: lambda p: p.cum_psn, Nack: lambda p: p.psn}.get(type(pkt), lambda p: 0)
        psn = pkt.psn if label in ("data", "trimmed", "retx") else expected_psn(pkt)
        assert _int(row["mrc.psn"]) == psn, label
        assert _int(row["infiniband.bth.psn"]) == psn, label      # Wireshark's own BTH still decoded
        assert row["_ws.malformed"] == "", label
        assert "Malformed" not in row["_ws.col.Info"], label


@requires_tshark
def test_data_packets_show_the_mrch(rows):
    for label, pkt, trimmed, retx in (("data", DATA, False, False), ("retx", RETX, False, True)):
        row = rows[label]
        assert _int(row["mrc.opcode"]) == constants.OP_RC_WRITE_ONLY
        assert _bool(row["mrc.mrch.trimmed"]) is trimmed and _bool(row["mrc.mrch.retx"]) is retx, label
        assert _int(row["mrc.mrch.flags"]) == pkt.flags
        assert _int(row["mrc.mrch.reserved"]) == 0
        assert _int(row["mrc.mrch.msg_id"]) == pkt.msg_id
        assert _int(row["mrc.mrch.msg_len"]) == pkt.msg_len
        assert _int(row["mrc.mrch.tsval"]) == pkt.tsval
        assert _int(row["mrc.payload_len"]) == len(pkt.payload)
        assert f"psn={pkt.psn}" in row["_ws.col.Info"] and ("RETX" in row["_ws.col.Info"]) is retx
        assert "TRIMMED" not in row["_ws.col.Info"]


@requires_tshark
def test_a_trimmed_packet_shows_the_flag_and_no_payload(rows, kinds):
    row = rows["trimmed"]
    pkt = dict((label, p) for label, p, _ in kinds)["trimmed"]
    assert _bool(row["mrc.mrch.trimmed"]) and not _bool(row["mrc.mrch.retx"])
    assert _int(row["mrc.dscp"]) == constants.DSCP_TRIMMED
    assert _int(row["mrc.mrch.tsval"]) == pkt.tsval and _int(row["mrc.mrch.msg_id"]) == pkt.msg_id
    assert _int(row["mrc.payload_len"]) == 0
    assert "TRIMMED" in row["_ws.col.Info"]
    assert "1024 payload bytes cut" in row["_ws.expert.message"]


@requires_tshark
def test_sacks_show_every_field(rows):
    for label, sack in (("sack", SACK), ("sack-no-ecn", SACK_NO_ECN)):
        row = rows[label]
        assert _int(row["mrc.opcode"]) == constants.OP_SACK
        assert _int(row["mrc.sack.cum_psn"]) == sack.cum_psn
        assert _int(row["mrc.sack.base"]) == sack.sack_base
        assert _int(row["mrc.sack.bitmap"]) == sack.bitmap
        assert _int(row["mrc.sack.ev_echo"]) == sack.ev_echo
        assert _bool(row["mrc.sack.ecn_echo"]) is sack.ecn_echo
        assert _int(row["mrc.sack.window_penalty"]) == sack.window_penalty
        assert _int(row["mrc.sack.ts_echo"]) == sack.ts_echo
    # bits 0, 2 and 63 of the bitmap, counted from the base PSN, wrapping at 2**24
    assert rows["sack"]["mrc.sack.received"] == "16777202, 16777204, 49"
    assert rows["sack-no-ecn"]["mrc.sack.received"] == "none"
    assert "ECN_ECHO" in rows["sack"]["_ws.col.Info"] and "ECN_ECHO" not in rows["sack-no-ecn"]["_ws.col.Info"]


@requires_tshark
def test_nacks_show_each_reason(rows):
    names = {constants.NACK_TRIMMED: "TRIMMED", constants.NACK_TRIMMED_LASTHOP: "TRIMMED_LASTHOP",
             constants.NACK_NO_BITMAP: "NO_BITMAP", constants.NACK_NO_PKT_BUFFER: "NO_PKT_BUFFER",
             constants.NACK_PSN_OUT_OF_WINDOW: "PSN_OUT_OF_WINDOW", constants.NACK_UNEXPECTED: "UNEXPECTED"}
    for nack in NACKS:
        row = rows[f"nack-{nack.reason}"]
        assert _int(row["mrc.opcode"]) == constants.OP_NACK
        assert _int(row["mrc.nack.reason"]) == nack.reason
        assert f"reason={names[nack.reason]} " in row["_ws.col.Info"]
        assert _int(row["mrc.nack.psn"]) == nack.psn and _int(row["mrc.nack.cum_psn"]) == nack.cum_psn
        assert _int(row["mrc.nack.ev_echo"]) == nack.ev_echo
        assert _int(row["mrc.nack.ts_echo"]) == nack.ts_echo


@requires_tshark
def test_probe_and_reply(rows):
    probe, reply = rows["probe"], rows["reply"]
    assert _int(probe["mrc.opcode"]) == constants.OP_PROBE and _int(reply["mrc.opcode"]) == constants.OP_PROBE_REPLY
    assert _int(probe["mrc.probe.id"]) == PROBE.probe_id and _int(probe["mrc.probe.tsval"]) == PROBE.tsval
    assert _int(reply["mrc.reply.id"]) == REPLY.probe_id
    assert _int(reply["mrc.reply.ev_echo"]) == REPLY.ev_echo == PROBE.ev
    assert _int(reply["mrc.reply.ts_echo"]) == REPLY.ts_echo


@requires_tshark
def test_no_packet_is_malformed_in_the_full_dissection(kinds, tmp_path):
    pcap = write_pcap(tmp_path / "all.pcap", [frame for _, _, frame in kinds])
    text = _tshark("-r", str(pcap), "-V", home=tmp_path).stdout
    assert text.count("MRC (Multipath Reliable Connection)") == len(kinds)
    assert "Malformed" not in text and "Lua Error" not in text


@requires_tshark
def test_a_capture_cut_at_256_bytes_still_decodes_the_headers(tmp_path):
    pcap = write_pcap(tmp_path / "cut.pcap", [_encode(DATA), _encode(RETX)], snaplen=256)
    first, second = decoded(pcap, home=tmp_path)
    for row, pkt in ((first, DATA), (second, RETX)):
        assert row["_ws.malformed"] == "" and "Malformed" not in row["_ws.col.Info"]
        assert _int(row["mrc.psn"]) == pkt.psn and _int(row["mrc.mrch.tsval"]) == pkt.tsval
        assert "bytes of UDP payload captured" in row["_ws.expert.message"]


def _shortened(frame: bytes, length: int) -> bytes:
    """The first `length` bytes of `frame` with IPv6 and UDP lengths that agree with them."""
    cut = bytearray(frame[:length])
    for offset in (constants.IPV6_OFFSET + 4, constants.UDP_OFFSET + 4):
        struct.pack_into("!H", cut, offset, length - constants.UDP_OFFSET)
    return bytes(cut)


@requires_tshark
def test_packets_of_the_wrong_length_are_flagged(tmp_path):
    sack = _shortened(_encode(SACK), constants.RETH_OFFSET + constants.SACK_LEN - 4)
    data = _shortened(_encode(DATA), constants.MRCH_OFFSET)         # BTH and RETH, no MRCH
    sack_row, data_row = decoded(write_pcap(tmp_path / "short.pcap", [sack, data]), home=tmp_path)
    assert "SACK header is 28 bytes, this packet carries 24" in sack_row["_ws.expert.message"]
    assert sack_row["mrc.sack.cum_psn"] == ""
    assert "this one carries 28" in data_row["_ws.expert.message"]
    assert data_row["mrc.mrch.flags"] == "" and "too short" in data_row["_ws.col.Info"]


@pytest.mark.slow
@requires_tshark
def test_an_ev_that_puts_a_well_known_port_in_the_udp_source_port(tmp_path):
    """Wireshark tries the lower UDP port first: with source port 53 the DNS dissector takes the
    packet. The MRC tree is there anyway; with udp.try_heuristic_first RoCE gets it first."""
    packets = [data_packet(ev=0x0042_0035), Nack(src=DST, dst=SRC, ev=0x0042_007B, qp=0x00ABCD, psn=77,
                                                  cum_psn=70, reason=constants.NACK_NO_BITMAP, ev_echo=1, ts_echo=2)]
    pcap = write_pcap(tmp_path / "low-ports.pcap", [_encode(p) for p in packets])
    for options in ((), ("-o", "udp.try_heuristic_first:TRUE")):
        data, nack = decoded(pcap, tmp_path, *options)
        assert _int(data["mrc.ev"]) == 0x0042_0035 and _int(data["mrc.psn"]) == packets[0].psn, options
        assert _int(data["mrc.mrch.tsval"]) == packets[0].tsval, options
        assert _int(nack["mrc.nack.reason"]) == constants.NACK_NO_BITMAP and _int(nack["mrc.ev"]) == 0x0042_007B
        assert data["_ws.col.Protocol"] == nack["_ws.col.Protocol"] == "MRC"
    for row, pkt in zip(decoded(pcap, tmp_path, "-o", "udp.try_heuristic_first:TRUE"), packets):
        assert row["_ws.malformed"] == "" and _int(row["infiniband.bth.psn"]) == pkt.psn


@pytest.mark.slow
@requires_tshark
def test_copied_to_the_personal_plugin_folder_it_loads_without_options(tmp_path):
    """The README's install: ~/.local/lib/wireshark/plugins/mrc.lua, then plain tshark."""
    plugins = tmp_path / ".local" / "lib" / "wireshark" / "plugins"
    plugins.mkdir(parents=True)
    shutil.copy(DISSECTOR, plugins / "mrc.lua")
    pcap = write_pcap(tmp_path / "one.pcap", [_encode(NACKS[0])])
    env = dict(os.environ, HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / ".config"))
    out = subprocess.run([TSHARK, "-r", str(pcap), "-T", "fields", "-e", "mrc.nack.reason",
                          "-e", "mrc.psn"], capture_output=True, text=True, timeout=120, env=env, check=True)
    assert out.stdout.split() == [str(constants.NACK_TRIMMED), str(NACKS[0].psn)]


def test_the_dissector_constants_are_wire_constants():
    block = re.search(r"^local C = \{\n(.*?)^\}", DISSECTOR.read_text(), re.S | re.M)
    assert block, "wireshark/mrc.lua: no `local C = { ... }` block"
    lua_constants = dict(re.findall(r"^\s+(\w+) = (0x[0-9A-Fa-f]+|\d+),", block.group(1), re.M))
    assert len(lua_constants) >= 25
    for name, value in lua_constants.items():
        assert hasattr(constants, name), f"mrc.lua constant {name} is not in wire/constants.py"
        ours = getattr(constants, name)
        assert int(value, 0) == ours, f"mrc.lua {name} = {value}, wire.constants: {ours}"
