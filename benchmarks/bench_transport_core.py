"""CPU cost of the sans-IO transport core alone: packets/s of a sender and of a receiver endpoint.

    .venv/bin/python benchmarks/bench_transport_core.py [--packets 30000] [--burst 8]

Two endpoints are wired back to back in one process (no sockets, no codec, no network): the
sender sprays 1 KB packets over 8 paths on 2 planes, the receiver places them and returns SACKs
that the sender processes. Time is simulated (the clock jumps to the next wake-up), and the CPU
time (thread CPU time) spent in each endpoint's calls (poll, receive, next_wakeup) is measured
separately.
Prints packets/s and microseconds per data packet for each side, with the machine load. Not a
test: figures depend on the machine and on what else runs on it.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from host_agent.transport import Endpoint, PathInfo, TransportConfig    # noqa: E402
from experiments import conditions                                       # noqa: E402


def run(packets: int, burst: int) -> dict:
    """Send `packets` data packets; return CPU seconds per side."""
    cfg = TransportConfig(qp_timeout=10, initial_rtt=1e-4, max_cwnd=64, init_cwnd_pkts=64,
                          pacing_burst_pkts=burst)
    tx, rx = Endpoint("tx", cfg), Endpoint("rx", cfg)
    paths = [PathInfo(p, p, bytes(16), bytes([p, i]) + bytes(14)) for p in range(2) for i in range(4)]
    conn = tx.connect("rx", 1, 2, paths)
    rx.connect("tx", 2, 1, paths)
    tx.send_message(conn, bytes(1024 * packets))
    clock = time.thread_time               # CPU time of this thread: less sensitive to other load
    now, t_tx, t_rx, sent = 0.0, 0.0, 0.0, 0
    while not conn.sender.idle:
        t0 = clock()
        out = tx.poll(now)
        t1 = clock()
        for nic, pkt in out:
            rx.receive(now, nic, pkt)
        back = rx.poll(now)
        wake_rx = rx.next_wakeup()
        t2 = clock()
        for nic, pkt in back:
            tx.receive(now, nic, pkt)
        wake_tx = tx.next_wakeup()
        t3 = clock()
        t_tx += (t1 - t0) + (t3 - t2)
        t_rx += t2 - t1
        sent += len(out)
        wakes = [t for t in (wake_tx, wake_rx) if t is not None]
        now = max(now + 1e-7, min(wakes))
    data = tx.stats()["data_sent"]
    return {"data_packets": data, "packets_out": sent, "tx_s": t_tx, "rx_s": t_rx}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=30000, help="data packets to send (default 30000)")
    ap.add_argument("--burst", type=int, default=8, help="pacing_burst_pkts (default 8)")
    args = ap.parse_args(argv)
    measuring = conditions.Measuring()
    r = run(args.packets, args.burst)
    n = r["data_packets"]
    print(f"{conditions.text(measuring.done())}; {n} data packets of 1 KB, 8 paths on 2 planes, SACK every 2 packets")
    print(f"sender   {n / r['tx_s']:>10,.0f} packets/s  {r['tx_s'] / n * 1e6:6.1f} us/packet (poll, SACK processing)")
    print(f"receiver {n / r['rx_s']:>10,.0f} packets/s  {r['rx_s'] / n * 1e6:6.1f} us/packet (placement, SACKs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
