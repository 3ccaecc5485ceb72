"""The reference switch as a process on veths: ready file, P4Runtime programming, forwarding, SIGTERM."""
from __future__ import annotations

import ipaddress
import json
import os
import select
import signal
import subprocess
import sys
import time

import pytest

from pipeline_contract.entries import TableEntry
from pipeline_contract.client import P4RuntimeClient
from wire import codec
from wire.packets import DataPacket
from pipeline_contract.p4info import REPO_ROOT, load_p4info
from refswitch.vethlab import VethLab

pytestmark = [pytest.mark.integration, pytest.mark.requires_root]


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def recv_within(port, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        select.select([port.fileno()], [], [], 0.05)
        frame = port.recv()
        if frame is not None:
            return frame
    return None


@pytest.fixture
def lab():
    with VethLab(f"tr{os.getpid() % 1000}", 2) as lab:
        yield lab


def test_switch_process_forwards_and_exits_cleanly_on_sigterm(lab, tmp_path):
    ready, sock = tmp_path / "ready", tmp_path / "p4rt.sock"
    proc = lab.popen("switch", [sys.executable, "-m", "refswitch.main", "--port", f"1={lab.switch_if(1)}",
                                "--port", f"2={lab.switch_if(2)}", "--grpc-addr", f"unix:{sock}",
                                "--ready-file", str(ready), "--queue", "2:0:32:0",
                                "--stats-file", str(tmp_path / "stats.json")],
                     cwd=str(REPO_ROOT), stderr=subprocess.PIPE)
    host1, host2 = lab.open_port(1), lab.open_port(2)
    try:
        wait_until(lambda: ready.exists() or proc.poll() is not None, 15, "the ready file")
        assert proc.poll() is None, proc.stderr.read().decode()
        assert ready.read_text().split()[1] == f"unix:{sock}"
        with P4RuntimeClient(f"unix:{sock}", 1, "s1", timeout=10) as client:
            client.set_pipeline(load_p4info())
            dst = ipaddress.IPv6Network("fc00:1:1001::/48")
            client.insert([TableEntry("MrcIngress.routing", {"dst_addr": (int(dst.network_address), 48)},
                                      "MrcIngress.forward", {"port": 2})])
            frame = codec.encode(DataPacket(src=ipaddress.IPv6Address("fc00:1:1000::").packed,
                                            dst=ipaddress.IPv6Address("fc00:1:1001::").packed, ev=9, qp=1,
                                            psn=0, va=0, rkey=1, length=300, msg_id=1, msg_len=300, tsval=0,
                                            payload=bytes(300)), bytes(6), bytes(6))
            assert host1.send(frame)
            assert recv_within(host2, 5.0) == frame
            assert recv_within(host1, 0.2) is None                   # nothing reflected back
            assert client.read_counter("MrcEgress.tx", 2)[2].packets == 1
            # a link going down and up again (as the testbed does to fail links) leaves the switch running
            for state in ("down", "up"):
                subprocess.run(["ip", "-n", lab.switch_ns, "link", "set", lab.switch_if(1), state], check=True)
            wait_until(lambda: host1.send(frame) and recv_within(host2, 0.2) == frame, 10, "forwarding again")
            assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert not ready.exists()
        stats = json.loads((tmp_path / "stats.json").read_text())["counters"]
        assert stats["MrcIngress.rx"]["1"][0] >= 2 and stats["MrcEgress.tx"]["2"][0] >= 2
    finally:
        host1.close()
        host2.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
