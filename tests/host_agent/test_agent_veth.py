"""Agent processes over a veth pair between two network namespaces (no switch, no Mininet).

The paths' destination addresses go straight to the peer: these tests check the agent's I/O
(raw sockets, codec, loop, log, signals, kernel silence), not routing. Needs root and `ip`.
"""
from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from host_agent.eventlog import read_log
from host_agent.transport.events import RETX_CAUSES

pytestmark = [pytest.mark.requires_root, pytest.mark.integration,
              pytest.mark.skipif(shutil.which("ip") is None, reason="needs iproute2 (ip) on PATH")]

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
MACS = ("02:00:00:00:10:00", "02:00:00:00:10:01")
ADDRS = ("fc00:0:1000::", "fc00:0:1001::")
_counter = itertools.count()


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def nic_mac(side: int, plane: int) -> str:
    """MAC of side 0/1's NIC on `plane` (plane 0: MACS)."""
    return MACS[side] if plane == 0 else f"02:00:{plane:02x}:00:10:{side:02x}"


def nic_addr(side: int, plane: int) -> str:
    return ADDRS[side] if plane == 0 else f"fc00:{plane}:{0x1000 + side:x}::"


class VethPair:
    """Two namespaces `<p>a`, `<p>b` joined by one veth per plane, `<p>x<plane>` <-> `<p>y<plane>`.

    `ifs` are the plane-0 interfaces; `plane_ifs[plane]` all of them. `close` removes everything.
    """

    def __init__(self, planes: int = 1) -> None:
        prefix = f"t{os.getpid() % 1000}g{next(_counter)}"
        self.ns = (f"{prefix}a", f"{prefix}b")
        self.plane_ifs = [(f"{prefix}x{p}", f"{prefix}y{p}") for p in range(planes)]
        self.ifs = self.plane_ifs[0]
        self.procs: list[subprocess.Popen] = []
        self._made: list[str] = []
        try:
            for ns in self.ns:
                _ip("netns", "add", ns)
                self._made.append(ns)
            for plane, ifs in enumerate(self.plane_ifs):
                _ip("link", "add", ifs[0], "type", "veth", "peer", "name", ifs[1])
                for i in (0, 1):
                    _ip("link", "set", ifs[i], "netns", self.ns[i])
                    _ip("-n", self.ns[i], "link", "set", ifs[i], "address", nic_mac(i, plane), "up")
        except Exception:
            self.close()
            raise

    def start(self, side: int, *cmd: str, **kwargs) -> subprocess.Popen:
        """Start a process in namespace `side` (0 or 1); it is killed by `close` if still running."""
        proc = subprocess.Popen(["ip", "netns", "exec", self.ns[side], *cmd], cwd=REPO, **kwargs)
        self.procs.append(proc)
        return proc

    def run(self, side: int, *cmd: str) -> str:
        return subprocess.run(["ip", "netns", "exec", self.ns[side], *cmd], check=True,
                              capture_output=True, text=True, timeout=30).stdout

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
        for ns in self._made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self._made.clear()


@pytest.fixture
def veth():
    pair = VethPair()
    try:
        yield pair
    finally:
        pair.close()


@pytest.fixture
def veth2():
    pair = VethPair(planes=2)
    try:
        yield pair
    finally:
        pair.close()


def write_jobs(tmp_path: Path, pair: VethPair, workload: dict, mode: str = "mrc", start_in: float = 1.0,
               timeout: float = 20.0, config: dict | None = None, start_file: Path | None = None) -> list[Path]:
    start_at = time.time() + start_in
    paths = []
    planes = range(len(pair.plane_ifs))
    for rank in (0, 1):
        other = 1 - rank
        job = {
            "rank": rank, "world_size": 2, "host": f"h{rank}",
            "nics": [{"name": pair.plane_ifs[p][rank], "mac": nic_mac(rank, p), "address": nic_addr(rank, p),
                      "plane": p} for p in planes],
            "peers": [{"rank": other, "qp": 0x100 + rank, "remote_qp": 0x100 + other,
                       "nics": [{"plane": p, "mac": nic_mac(other, p), "address": nic_addr(other, p)}
                                for p in planes],
                       "paths": {str(p): [nic_addr(other, p)] for p in planes}}],
            "transport": {"mode": mode, "config": {"num_evs": 16, "ev_min_active": 4, **(config or {})}},
            "workload": workload, "timeout": timeout, "start_at": start_at,
            "log": str(tmp_path / f"h{rank}.jsonl"),
            **({"start_file": str(start_file)} if start_file else {}),
        }
        path = tmp_path / f"h{rank}.json"
        path.write_text(json.dumps(job))
        paths.append(path)
    return paths


def agent_cmd(job: Path, *extra: str) -> list[str]:
    return [PYTHON, "-m", "host_agent.agent", "--job", str(job), "--linger", "0.3", *extra]


def wait_for(predicate, timeout: float, what: str):
    """Poll `predicate` until it returns something truthy; fail naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def records_of(path: Path, kind: str | None = None) -> list[dict]:
    if not path.exists():
        return []
    try:
        records = read_log(str(path))
    except json.JSONDecodeError:        # a line being written
        return []
    return [r for r in records if kind is None or r["kind"] == kind]


@pytest.mark.parametrize("mode,workload", [
    ("mrc", {"kind": "transfer", "src": 0, "dst": 1, "bytes": 1_000_000, "chunk_bytes": 100_000, "seed": 5}),
    ("mrc", {"kind": "allreduce", "elements": 200_000, "dtype": "float32", "chunk_bytes": 65536, "seed": 6}),
    ("roce", {"kind": "allreduce", "elements": 50_000, "dtype": "int64", "chunk_bytes": 32768, "seed": 7}),
    ("mrc", {"kind": "alltoall", "block_bytes": 300_000, "chunk_bytes": 50_000, "seed": 10}),
], ids=["mrc-transfer", "mrc-allreduce", "roce-allreduce", "mrc-alltoall"])
def test_two_agents_complete_bit_exact_over_veth(tmp_path, veth, mode, workload):
    jobs = write_jobs(tmp_path, veth, workload, mode=mode)
    procs = [veth.start(r, *agent_cmd(jobs[r]), stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    for rank, proc in enumerate(procs):
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, f"agent {rank} exited {proc.returncode}: {err}"
    rtts, delivered = [], 0
    for rank in (0, 1):
        log = tmp_path / f"h{rank}.jsonl"
        records = records_of(log)
        kinds = [r["kind"] for r in records]
        assert kinds[0] == "start" and kinds[-1] == "stop" and records[-1]["status"] == 0
        start = records[0]
        assert start["rank"] == rank and start["nics"][0]["ipv6_disabled"] is True
        (result,) = records_of(log, "result")
        assert result["ok"] is True and result["mismatches"] == 0, result
        assert result["elapsed"] > 0
        if workload["kind"] == "alltoall":
            expected_bytes = workload["block_bytes"]            # one peer
        else:
            expected_bytes = workload.get("bytes") or workload["elements"] * (4 if workload["dtype"] == "float32" else 8)
        assert result["bytes"] == expected_bytes
        samples = records_of(log, "goodput")
        assert len(samples) >= 3
        assert all(s["interval"] > 0 for s in samples)
        assert [s["t"] for s in samples] == sorted(s["t"] for s in samples)
        moved = sum(s["rx_bytes"] + s["tx_bytes"] for s in samples)
        assert moved >= expected_bytes
        received = [s for s in samples if s["rx_bytes"]]
        delivered += len(received)
        assert all(s["t"] - s["interval"] - 0.001 <= s["rx_first"] <= s["rx_last"] <= s["t"]
                   for s in received)                          # the interval's deliveries, in it
        assert all("rx_first" not in s for s in samples if not s["rx_bytes"])
        (counters,) = records_of(log, "counters")
        assert counters["agent"].get("rx_malformed", 0) == 0
        rtts.append(counters["min_rtt_s"])                      # None: this agent sent no data
        assert counters["nics"][0]["tx_frames"] > 0 and counters["nics"][0]["rx_frames"] > 0
        assert veth.run(rank, "cat", f"/proc/sys/net/ipv6/conf/{veth.ifs[rank]}/disable_ipv6").strip() == "1"
    assert all(0 < rtt < 1.0 for rtt in rtts if rtt is not None)      # the base RTT each sender measured
    assert rtts[0] is not None                                          # rank 0 sends in every workload
    assert delivered > 0


def test_baseline_agents_with_several_qps_use_them_all(tmp_path, veth):
    """qps = 3: three connections per peer on the wire (QP numbers stepping by the stride), each
    carrying its turn of the messages; the transfer completes bit-exact."""
    workload = {"kind": "transfer", "src": 0, "dst": 1, "bytes": 600_000, "chunk_bytes": 50_000, "seed": 9}
    jobs = write_jobs(tmp_path, veth, workload, mode="roce", config={"qps": 3})
    procs = [veth.start(r, *agent_cmd(jobs[r]), stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    for rank, proc in enumerate(procs):
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, f"agent {rank} exited {proc.returncode}: {err}"
    (result,) = records_of(tmp_path / "h1.jsonl", "result")
    assert result["ok"] is True and result["mismatches"] == 0
    (counters,) = records_of(tmp_path / "h0.jsonl", "counters")
    conns = counters["connections"]
    assert len(conns) == 3
    assert all(c["stats"].get("data_sent", 0) > 0 for c in conns)              # every QP carried data
    assert sorted(c["name"].rsplit(":", 1)[1] for c in conns) == [hex(0x100 + k * 0x10000) for k in range(3)]


def test_two_plane_agents_spray_over_both_nics(tmp_path, veth2):
    workload = {"kind": "transfer", "src": 0, "dst": 1, "bytes": 600_000, "chunk_bytes": 60_000, "seed": 8}
    jobs = write_jobs(tmp_path, veth2, workload)
    procs = [veth2.start(r, *agent_cmd(jobs[r]), stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    for rank, proc in enumerate(procs):
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, f"agent {rank} exited {proc.returncode}: {err}"
    rtts, delivered = [], 0
    for rank in (0, 1):
        log = tmp_path / f"h{rank}.jsonl"
        (result,) = records_of(log, "result")
        assert result["ok"] is True, result
        (counters,) = records_of(log, "counters")
        nics = {n["ifname"]: n for n in counters["nics"]}
        assert set(nics) == {veth2.plane_ifs[0][rank], veth2.plane_ifs[1][rank]}
        for nic in nics.values():                 # data (rank 0) or SACKs (rank 1) left by both NICs
            assert nic["tx_frames"] > 10 and nic["rx_frames"] > 10, nics


def test_two_plane_agents_finish_over_one_plane_when_the_other_nic_is_down(tmp_path, veth2):
    veth2.run(0, "ip", "link", "set", veth2.plane_ifs[0][0], "down")      # sender's plane-0 NIC
    workload = {"kind": "transfer", "src": 0, "dst": 1, "bytes": 300_000, "chunk_bytes": 30_000, "seed": 9}
    jobs = write_jobs(tmp_path, veth2, workload)
    procs = [veth2.start(r, *agent_cmd(jobs[r]), stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    for rank, proc in enumerate(procs):
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, f"agent {rank} exited {proc.returncode}: {err}"
    sender = tmp_path / "h0.jsonl"
    (result,) = records_of(sender, "result")
    assert result["ok"] is True
    (counters,) = records_of(sender, "counters")
    dead, alive = counters["nics"]
    assert dead["tx_errors"] > 0 and dead["tx_frames"] == 0          # every send on it failed, none crashed
    assert alive["tx_frames"] > 0
    retired = {r["ev"] for r in records_of(sender, "ev_state") if r["new"] == "ASSUMED_BAD" and r["plane"] == 0}
    assert retired                                   # the transport saw the dead plane
    retransmits = records_of(sender, "retransmit")   # what was sent into the dead NIC went again
    assert retransmits and all(r["cause"] in RETX_CAUSES for r in retransmits)
    by_cause = {k: v for k, v in counters["agent"].items() if k.startswith("retransmit_")}
    assert sum(by_cause.values()) == len(retransmits) == counters["transport"]["retransmitted"]


def test_a_connection_out_of_retries_fails_the_job_with_its_error(tmp_path, veth):
    """The peer never runs: every packet times out; past retry_linear_cnt + retry_exp_cnt retries
    the connection fails, and the agent stops at once (exit 1) with the error in its result."""
    workload = {"kind": "transfer", "src": 0, "dst": 1, "bytes": 50_000, "chunk_bytes": 10_000, "seed": 3}
    jobs = write_jobs(tmp_path, veth, workload, start_in=0.3, timeout=20.0,
                      config={"qp_timeout": 10, "retry_linear_cnt": 1, "retry_exp_cnt": 2})
    proc = veth.start(0, *agent_cmd(jobs[0]), stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1, err
    log = tmp_path / "h0.jsonl"
    (failed,) = records_of(log, "conn_failed")
    assert failed["retries"] == 3 and failed["conn"] == "h0->rank1:0x100"
    (result,) = records_of(log, "result")
    assert result["ok"] is False and result["error"] == failed["error"]
    assert "failed: PSN" in result["error"] and "after 3 retries" in result["error"]
    (stop,) = records_of(log, "stop")
    assert stop["reason"] == failed["error"] and stop["status"] == 1


INJECTOR = """
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
for frame in sys.argv[2:]:
    s.send(bytes.fromhex(frame))
"""


def _foreign_frames() -> tuple[list[bytes], list[bytes]]:
    """(malformed MRC-port frames, stray non-MRC frames) from the peer to the agent's MAC/address."""
    from scapy.layers.inet import UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw
    base = Ether(src=MACS[1], dst=MACS[0]) / IPv6(src=ADDRS[1], dst=ADDRS[0])
    malformed = [
        bytes(base / UDP(sport=1234, dport=4791) / Raw(b"\x0a" + b"\0" * 39)),   # valid checksum: the kernel would answer
        bytes(base / UDP(sport=1235, dport=4791) / Raw(b"\xee" + b"\0" * 11)),   # unknown opcode
        bytes(base / UDP(sport=1236, dport=4791, len=200) / Raw(b"\xc0" + b"\0" * 39)),  # UDP length lies
    ]
    stray = [bytes(base / UDP(sport=53, dport=53) / Raw(b"\0" * 20)),
             bytes(Ether(src=MACS[1], dst=MACS[0], type=0x0800) / Raw(b"\x45" + b"\0" * 40)),
             bytes(Ether(src=MACS[1], dst="02:00:00:00:99:99") / IPv6(src=ADDRS[1], dst=ADDRS[0])   # not our MAC
                   / UDP(sport=1237, dport=4791) / Raw(b"\x0a" + b"\0" * 39)),
             bytes(Ether(src=MACS[1], dst="ff:ff:ff:ff:ff:ff") / IPv6(src=ADDRS[1], dst=ADDRS[0])   # broadcast
                   / UDP(sport=1238, dport=4791) / Raw(b"\x0a" + b"\0" * 39))]
    return malformed, stray


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_cleanly_counts_malformed_and_kernel_stays_silent(tmp_path, veth, signum):
    tcpdump = shutil.which("tcpdump")
    for side in (0, 1):      # addresses, routes, neighbours: with IPv6 on, the kernel would answer at once
        veth.run(side, "ip", "addr", "add", f"{ADDRS[side]}/32", "dev", veth.ifs[side], "nodad")
        veth.run(side, "ip", "neigh", "replace", ADDRS[1 - side], "lladdr", MACS[1 - side],
                 "dev", veth.ifs[side], "nud", "permanent")
    jobs = write_jobs(tmp_path, veth, {"kind": "allreduce", "elements": 1000}, start_in=0.0, timeout=60)
    capture = tmp_path / "icmp.pcap"
    sniffer = None
    if tcpdump:
        sniffer = veth.start(1, tcpdump, "-Z", "root", "-i", veth.ifs[1], "-U", "-w", str(capture),
                             "(icmp6 and ip6[40] == 1) or ether proto 0x88b5", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: capture.exists() or sniffer.poll() is not None, 10, "tcpdump to open its capture")
        assert sniffer.poll() is None, f"tcpdump exited with {sniffer.returncode}"
    agent = veth.start(0, *agent_cmd(jobs[0]), stderr=subprocess.PIPE, text=True)   # its peer never comes
    log = tmp_path / "h0.jsonl"
    wait_for(lambda: records_of(log, "start"), 20, "the agent's start record")
    malformed, stray = _foreign_frames()
    veth.run(1, PYTHON, "-c", INJECTOR, veth.ifs[1], *(f.hex() for f in malformed + stray))
    wait_for(lambda: len(records_of(log, "malformed")) == len(malformed), 20, "malformed-frame records")
    agent.send_signal(signum)
    _, err = agent.communicate(timeout=20)
    assert agent.returncode == 128 + signum, err
    records = records_of(log)
    assert records[-1] == {**records[-1], "kind": "stop", "reason": f"signal {signum.name}",
                           "status": 128 + signum}
    (result,) = records_of(log, "result")
    assert result["ok"] is False and "not finished" in result["detail"]
    (counters,) = records_of(log, "counters")
    assert counters["agent"]["rx_malformed"] == len(malformed)
    nic = counters["nics"][0]
    assert nic["rx_frames"] == len(malformed)        # stray frames never reach the agent (BPF filter)
    assert nic["tx_frames"] > 0                      # it kept trying its absent peer
    reasons = [r["reason"] for r in records_of(log, "malformed")]
    assert any("opcode" in r for r in reasons) and any("length" in r for r in reasons)
    assert veth.run(0, "cat", f"/proc/sys/net/ipv6/conf/{veth.ifs[0]}/disable_ipv6").strip() == "1"
    if sniffer is not None:
        # A marker frame from the agent's side, sent after everything it could have answered:
        # once the capture holds it, any ICMPv6 answer would be there too.
        veth.run(0, PYTHON, "-c", INJECTOR, veth.ifs[0], _marker_frame().hex())
        captured = wait_for(lambda: _read_capture(capture), 20, "the marker frame in the capture")
        sniffer.send_signal(signal.SIGTERM)
        sniffer.wait(timeout=10)
        unreachable = [p for p in captured if p.haslayer("ICMPv6DestUnreach") and p.src == MACS[0]]
        assert not unreachable, "the kernel answered MRC traffic with ICMPv6 destination unreachable"


def _marker_frame() -> bytes:
    """A frame of the local experimental ethertype 0x88B5, which no stack answers."""
    return bytes.fromhex(MACS[1].replace(":", "") + MACS[0].replace(":", "")) + b"\x88\xb5" + b"marker" * 8


def _read_capture(path: Path):
    """The packets captured so far once the marker frame is among them, else None."""
    from scapy.layers.l2 import Ether
    from scapy.utils import rdpcap
    try:
        packets = rdpcap(str(path))
    except Exception:                   # header or last record still being written
        return None
    return packets if any(p.haslayer(Ether) and p[Ether].type == 0x88B5 for p in packets) else None


def test_agents_with_a_start_file_wait_for_it_then_start_at_its_time(tmp_path, veth):
    """Both agents write their start record and wait; no payload moves before the time the start
    file gives, written once both are up (the job's own `start_at`, now, is not read)."""
    from host_agent.start_file import write_start_file
    start_file = tmp_path / "start_at"
    jobs = write_jobs(tmp_path, veth, {"kind": "transfer", "src": 0, "dst": 1, "bytes": 200_000,
                                       "chunk_bytes": 50_000, "seed": 3}, start_in=0.0, start_file=start_file)
    procs = [veth.start(r, *agent_cmd(jobs[r]), stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    for rank in (0, 1):
        wait_for(lambda: records_of(tmp_path / f"h{rank}.jsonl", "start"), 30, f"the start record of h{rank}")
    start_at = time.time() + 0.5
    write_start_file(start_file, start_at)
    for rank, proc in enumerate(procs):
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, f"agent {rank} exited {proc.returncode}: {err}"
    for rank in (0, 1):
        samples = records_of(tmp_path / f"h{rank}.jsonl", "goodput")
        moving = [s for s in samples if s["rx_bytes"] or s["tx_bytes"]]
        assert moving and min(s["t"] for s in moving) >= start_at


def test_an_agent_stopped_while_waiting_for_its_start_file_exits_at_once(tmp_path, veth):
    jobs = write_jobs(tmp_path, veth, {"kind": "allreduce", "elements": 10}, start_file=tmp_path / "start_at")
    proc = veth.start(0, *agent_cmd(jobs[0]), stderr=subprocess.PIPE, text=True)
    wait_for(lambda: records_of(tmp_path / "h0.jsonl", "start"), 30, "the start record")
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=10)
    assert proc.returncode == 128 + signal.SIGTERM
    assert records_of(tmp_path / "h0.jsonl", "stop")[-1]["reason"] == "signal SIGTERM before the start"


def test_a_start_file_without_a_time_stops_the_agent_naming_it(tmp_path, veth):
    start_file = tmp_path / "start_at"
    start_file.write_text("at noon\n")
    jobs = write_jobs(tmp_path, veth, {"kind": "allreduce", "elements": 10}, start_file=start_file)
    proc = veth.start(0, *agent_cmd(jobs[0]), stderr=subprocess.PIPE, text=True)
    proc.communicate(timeout=30)
    assert proc.returncode == 2
    (stop,) = records_of(tmp_path / "h0.jsonl", "stop")
    assert stop["reason"] == f"start file {start_file}: 'at noon' is not a UNIX time"


def test_bad_job_exits_2_naming_the_field(tmp_path):
    job = tmp_path / "bad.json"
    job.write_text(json.dumps({"rank": 0, "world_size": 1, "nics": [], "workload": {"kind": "transfer"}}))
    proc = subprocess.run([PYTHON, "-m", "host_agent.agent", "--job", str(job)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "bad.json: nics: expected a non-empty list, got list []" in proc.stderr


def test_wrong_mac_in_job_exits_2_naming_both(tmp_path, veth):
    jobs = write_jobs(tmp_path, veth, {"kind": "allreduce", "elements": 10})
    data = json.loads(jobs[0].read_text())
    data["nics"][0]["mac"] = "02:00:00:00:77:77"
    jobs[0].write_text(json.dumps(data))
    proc = veth.start(0, *agent_cmd(jobs[0]), stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert veth.ifs[0] in err and "02:00:00:00:77:77" in err and MACS[0] in err


def test_missing_interface_exits_2_naming_it(tmp_path, veth):
    jobs = write_jobs(tmp_path, veth, {"kind": "allreduce", "elements": 10})
    data = json.loads(jobs[0].read_text())
    data["nics"][0]["name"] = "nosuchif0"
    jobs[0].write_text(json.dumps(data))
    proc = veth.start(0, *agent_cmd(jobs[0]), stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "nosuchif0" in err
