"""An open-loop paced sender run inside a Mininet host: MRC data frames at a fixed rate, for a time.

    python -m testbed.loadgen SPEC.json

SPEC: {"nic": "h1-eth0", "src_mac": "02:..", "dst_mac": "02:..", "src": "fc00:0:1000::",
       "paths": ["fc00:0:100:102:1002::", ...],   # uSID addresses, used in turn (one EV each)
       "rate_pps": 500, "duration_s": 3.0, "payload_bytes": 1000,
       "dscp": 10, "ecn": 2}                       # TRIMMABLE, ECT(0) unless said otherwise

It prints `ready` once its socket is open, waits for a line `go` on stdin, sends for `duration_s`,
and prints one JSON line: {"sent": N, "elapsed_s": T, "late_max_s": L}; `late_max_s` is the most a
send came after its due time (the host's CPU, not the network, shaping the offered load).
Unlike the agents it does not react to anything: the offered load is the rate asked for.
"""
from __future__ import annotations

import ipaddress
import json
import select
import socket
import sys
import time

from testbed.prober import mac_bytes, say
from wire import codec
from wire import constants
from wire.packets import DataPacket

ETH_P_ALL = 0x0003
MAX_BURST = 16          # frames sent at once when the sender wakes up late (catching up)


def frames(spec: dict) -> list[bytes]:
    """One frame per path: a whole data packet of `payload_bytes`, its EV the path's index."""
    src = ipaddress.IPv6Address(spec["src"]).packed
    n = int(spec.get("payload_bytes", 1000))
    out = []
    for i, path in enumerate(spec["paths"]):
        packet = DataPacket(src=src, dst=ipaddress.IPv6Address(path).packed, ev=i + 1, qp=1, psn=i,
                            va=0, rkey=1, length=n, msg_id=1, msg_len=n, tsval=0, payload=bytes(n),
                            flags=0, dscp=int(spec.get("dscp", constants.DSCP_TRIMMABLE)),
                            ecn=int(spec.get("ecn", constants.ECN_ECT0)))
        out.append(codec.encode(packet, mac_bytes(spec["src_mac"]), mac_bytes(spec["dst_mac"])))
    return out


def send_paced(sock: socket.socket, batch: list[bytes], rate_pps: float, duration_s: float) -> dict:
    """Send `batch` in turn at `rate_pps` for `duration_s`; return what was sent and how late."""
    start = time.monotonic()
    sent, late_max = 0, 0.0
    while True:
        now = time.monotonic()
        elapsed = now - start
        if elapsed >= duration_s:
            break
        due = int(elapsed * rate_pps) + 1 - sent          # frames owed by now
        if due <= 0:
            time.sleep((sent / rate_pps) - elapsed)
            continue
        late_max = max(late_max, elapsed - (sent / rate_pps))
        for _ in range(min(due, MAX_BURST)):
            try:
                sock.send(batch[sent % len(batch)])
            except BlockingIOError:                       # the socket buffer is full: wait for room
                select.select([], [sock], [], 0.05)
                break
            sent += 1
    return {"sent": sent, "elapsed_s": round(time.monotonic() - start, 6), "late_max_s": round(late_max, 6)}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m testbed.loadgen SPEC.json", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        spec = json.load(f)
    rate, duration = float(spec["rate_pps"]), float(spec["duration_s"])
    if rate <= 0 or duration <= 0 or not spec.get("paths"):
        print(f"loadgen: rate_pps and duration_s must be positive and paths not empty: {argv[0]}",
              file=sys.stderr)
        return 2
    batch = frames(spec)
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((spec["nic"], 0))
    sock.setblocking(False)
    say("ready")
    if sys.stdin.readline().strip() != "go":
        return 0
    say(json.dumps(send_paced(sock, batch, rate, duration)))
    sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
