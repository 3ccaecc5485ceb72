"""A minimal per-path prober run inside a Mininet host: send PROBEs, report the PROBEs that arrive.

    python -m testbed.prober SPEC.json

SPEC: {"nics": {"h1-eth0": "02:00:00:00:00:00", ...}}     # this host's NICs and their MACs
A probe list file: [{"nic": "h1-eth0", "src": "fc00:0:1000::", "dst": "fc00:0:100:102:1001::",
                     "dst_mac": "02:00:00:00:00:01", "ev": 7, "probe_id": 12}, ...]

It speaks the testbed's control protocol (wire.control, JSON lines) on stdin/stdout: the event
`ready` once its raw sockets are open; the request `{"op": "send", "file": FILE}` sends every probe
listed in FILE and answers `{"sent": N}`; every PROBE it receives is the event
`{"event": "rx", "data": {"probe_id", "nic", "ev"}}` at once; `{"op": "stop"}` (or the end of its
input) answers and exits. Frames that are not MRC packets (or not PROBEs) are ignored.
"""
from __future__ import annotations

import json
import os
import select
import socket
import sys
import time
from typing import Literal

from wire import codec
from wire.control import Operations, Request, RequestError, decode, event, refusal, response, write_message
from wire.packets import Probe

ETH_P_ALL = 0x0003
PACING_S = 0.0005        # at most ~2000 probes/s per host: below the default links' packet rate


def mac_bytes(text: str) -> bytes:
    """'02:00:..' -> 6 bytes."""
    return bytes(int(part, 16) for part in text.split(":"))


def open_nic(ifname: str) -> socket.socket:
    """A raw socket bound to one interface, receiving every frame on it."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((ifname, 0))
    sock.setblocking(False)
    return sock


def probe_frame(item: dict, src_mac: bytes) -> bytes:
    """The Ethernet frame of one spec'd probe."""
    import ipaddress
    probe = Probe(src=ipaddress.IPv6Address(item["src"]).packed,
                  dst=ipaddress.IPv6Address(item["dst"]).packed,
                  ev=item["ev"], qp=0, probe_id=item["probe_id"], tsval=0)
    return codec.encode(probe, src_mac, mac_bytes(item["dst_mac"]))


class Send(Request):
    """Send every probe listed in the JSON file `file`."""

    op: Literal["send"]
    file: str


class Stop(Request):
    """Answer, then exit."""

    op: Literal["stop"]


OPERATIONS = Operations(Send, Stop)
READY, RX = "ready", "rx"               # the prober's events


def say(message: dict) -> None:
    """One message to the parent on stdout."""
    write_message(sys.stdout, message)


def run(spec: dict) -> int:
    socks = {name: open_nic(name) for name in spec["nics"]}
    by_fd = {s.fileno(): (name, s) for name, s in socks.items()}
    stdin = sys.stdin.fileno()
    say(event(READY))
    poller = select.poll()
    poller.register(stdin, select.POLLIN)
    for fd in by_fd:
        poller.register(fd, select.POLLIN)
    buffered = b""
    while True:
        for fd, _ in poller.poll(1000):
            if fd == stdin:
                data = os.read(stdin, 4096)
                if not data:
                    return 0
                buffered += data
                while b"\n" in buffered:
                    line, buffered = buffered.split(b"\n", 1)
                    if line.strip() and not answer(spec, socks, line):
                        return 0
                continue
            name, sock = by_fd[fd]
            while True:
                try:
                    frame, addr = sock.recvfrom(2048)
                except BlockingIOError:
                    break
                if addr[2] == socket.PACKET_OUTGOING:
                    continue
                try:
                    packet = codec.decode(frame)
                except codec.MalformedPacket:
                    continue
                if isinstance(packet, Probe):
                    say(event(RX, {"probe_id": packet.probe_id, "nic": name, "ev": packet.ev}))


def answer(spec: dict, socks: dict, line: bytes) -> bool:
    """Answer one request line; False when it was `stop`."""
    rid = None
    try:
        message = decode(line)
        rid = message.get("id")
        request = OPERATIONS.parse(message)
        if isinstance(request, Stop):
            say(response(rid, None))
            return False
        try:
            with open(request.file) as f:
                probes = json.load(f)
        except (OSError, ValueError) as err:
            raise RequestError(f"file: {request.file}: {err}") from None
        say(response(rid, {"sent": send_all(spec, probes, socks)}))
    except RequestError as err:
        say(refusal(rid, str(err)))
    return True


def send_all(spec: dict, probes: list[dict], socks: dict) -> int:
    """Send every listed probe from its NIC; return how many were sent."""
    sent = 0
    for item in probes:
        frame = probe_frame(item, mac_bytes(spec["nics"][item["nic"]]))
        for _ in range(50):
            try:
                socks[item["nic"]].send(frame)
                sent += 1
                break
            except BlockingIOError:      # socket buffer full: let it drain
                select.select([], [socks[item["nic"]]], [], 0.1)
            except OSError:              # e.g. the NIC's link is down
                break
        time.sleep(PACING_S)             # stay well under a link's packet rate (no queue drops)
    return sent


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        return run(json.load(f))


if __name__ == "__main__":
    sys.exit(main())
