"""An open-loop paced sender run inside a Mininet host: MRC data frames at a fixed rate, for a time.

    python -m testbed.loadgen SPEC.json

SPEC (`LoadSpec`): {"nic": "h1-eth0", "src_mac": "02:..", "dst_mac": "02:..", "src": "fc00:0:1000::",
       "paths": ["fc00:0:100:102:1002::", ...],   # uSID addresses, used in turn (one EV each)
       "rate_pps": 500, "duration_s": 3.0, "payload_bytes": 1000,
       "dscp": 10, "ecn": 2}                       # TRIMMABLE, ECT(0) unless said otherwise

It speaks the testbed's control protocol (wire.control, JSON lines) on stdin/stdout: the event
`ready` once its socket is open; the request `{"op": "go"}` makes it send for `duration_s` and
answer `{"sent": N, "elapsed_s": T, "late_max_s": L}`, then exit; `late_max_s` is the most a send
came after its due time (the host's CPU, not the network, shaping the offered load).
Unlike the agents it does not react to anything: the offered load is the rate asked for.
`run_generators` is the other side: one generator per sender in a running network, started together.
"""
from __future__ import annotations

import ipaddress
import select
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Literal

from pydantic import Field

from testbed.prober import mac_bytes
from wire import codec
from wire import constants
from wire.control import (ControlError, Operations, Request, RequestError, decode, event, read_message,
                          refusal, response, result_of, write_message)
from wire.packets import DataPacket
from wire.schema import Schema, SchemaError, check

ETH_P_ALL = 0x0003
MAX_BURST = 16          # frames sent at once when the sender wakes up late (catching up)
READY = "ready"         # the generator's event once its socket is open
REPO = Path(__file__).resolve().parent.parent


class LoadSpec(Schema):
    """What one generator sends: from which NIC, to which paths, how fast, for how long."""

    nic: str
    src_mac: str
    dst_mac: str
    src: str
    paths: list[str] = Field(min_length=1, description="uSID addresses, used in turn (one EV each)")
    rate_pps: float = Field(gt=0)
    duration_s: float = Field(gt=0)
    payload_bytes: int = Field(1000, ge=1, le=9000)
    dscp: int = constants.DSCP_TRIMMABLE
    ecn: int = constants.ECN_ECT0


class Go(Request):
    """Send for the spec's duration, then answer what was sent."""

    op: Literal["go"]


OPERATIONS = Operations(Go)


def frames(spec: LoadSpec) -> list[bytes]:
    """One frame per path: a whole data packet of `payload_bytes`, its EV the path's index."""
    src = ipaddress.IPv6Address(spec.src).packed
    n = spec.payload_bytes
    out = []
    for i, path in enumerate(spec.paths):
        packet = DataPacket(src=src, dst=ipaddress.IPv6Address(path).packed, ev=i + 1, qp=1, psn=i,
                            va=0, rkey=1, length=n, msg_id=1, msg_len=n, tsval=0, payload=bytes(n),
                            flags=0, dscp=spec.dscp, ecn=spec.ecn)
        out.append(codec.encode(packet, mac_bytes(spec.src_mac), mac_bytes(spec.dst_mac)))
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


def read_spec(path: str) -> LoadSpec:
    """The spec file at `path`, checked; ValueError naming the key otherwise."""
    import json
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    try:
        return check(LoadSpec, data)
    except SchemaError as error:
        raise ValueError(f"{path}: {error}") from None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m testbed.loadgen SPEC.json", file=sys.stderr)
        return 2
    try:
        spec = read_spec(argv[0])
    except (OSError, ValueError) as error:
        print(f"loadgen: {error}", file=sys.stderr)
        return 2
    batch = frames(spec)
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((spec.nic, 0))
    sock.setblocking(False)
    write_message(sys.stdout, event(READY))
    line = sys.stdin.readline()
    if not line:
        return 0
    rid = None
    try:
        message = decode(line)
        rid = message.get("id")
        OPERATIONS.parse(message)
    except RequestError as err:
        write_message(sys.stdout, refusal(rid, str(err)))
        return 2
    write_message(sys.stdout, response(rid, send_paced(sock, batch, spec.rate_pps, spec.duration_s)))
    sock.close()
    return 0


def run_generators(net, specs: dict[str, dict], folder: Path) -> list[dict]:
    """Start a generator in each host of `specs` (host -> LoadSpec fields) of the running network
    `net`, let them go together once all are ready, and return their reports."""
    procs = {}
    try:
        for host, spec in specs.items():
            path = folder / f"loadgen-{host}.json"
            path.write_text(check(LoadSpec, spec).model_dump_json())
            procs[host] = net.popen(host, [sys.executable, "-m", "testbed.loadgen", str(path)],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    cwd=str(REPO), text=True, bufsize=1)
        for host, proc in procs.items():
            message = _next(proc, host)
            if message.get("event") != READY:
                raise RuntimeError(f"loadgen on {host} did not start: {message}")
        for proc in procs.values():
            write_message(proc.stdin, {"op": "go", "id": 1})
        reports = []
        for host, proc in procs.items():
            try:
                reports.append(result_of(_next(proc, host), f"loadgen on {host}"))
            except ControlError as err:
                raise RuntimeError(f"loadgen on {host} failed: {err}") from None
        return reports
    finally:
        for proc in procs.values():
            net.stop_process(proc)


def _next(proc: subprocess.Popen, host: str) -> dict:
    try:
        message = read_message(proc.stdout)
    except ValueError as err:
        raise RuntimeError(f"loadgen on {host}: {err}") from None
    if message is None:
        raise RuntimeError(f"loadgen on {host} exited: {proc.stderr.read().strip()}")
    return message


if __name__ == "__main__":
    sys.exit(main())
