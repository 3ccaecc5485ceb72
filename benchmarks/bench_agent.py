"""Sustained send rate of the MRC host agent next to a plain raw-socket sender on the same veth.

    sudo .venv/bin/python benchmarks/bench_agent.py [--bytes 20000000] [--seconds 2] [--repeat 2]

Builds two network namespaces joined by a veth pair (removed at the end whatever happens), then
measures, with 1 KB payloads (1130-byte frames):
  raw    - a minimal Python loop sending one prebuilt MRC data frame over an AF_PACKET socket,
           with a raw-socket reader counting frames on the other end (the ceiling for Python here)
  agent  - `python -m host_agent.agent` sending a transfer of --bytes to a second agent on the
           other end, which places the data and returns SACKs that the sender processes; rate =
           data packets sent / transfer time, for each setting in SETTINGS (transport defaults;
           qp_timeout 14 (16.8 ms), which avoids spurious timeouts when the scheduler delays the peer;
           plus pacing bursts of 16 packets; plus busy-polling short waits)
Prints packets/s for each, the agent/raw ratio, the CPU time per data packet of each agent
(from the agents' own accounting: the rate one agent could reach on a core of its own), the
machine load, and saves JSON under benchmarks/results/. Not a test: figures depend on the
machine and on what else runs on it (both agents share the machine's CPUs).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from wire import codec                                        # noqa: E402
from experiments import conditions                            # noqa: E402
from wire.packets import DataPacket                           # noqa: E402
from host_agent.eventlog import read_log                      # noqa: E402
from host_agent.job import Job, JobTransport, NicSpec, PeerSpec, job_workload  # noqa: E402
from wire.control import decode, event, read_message, response, result_of, write_message  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
MACS = ("02:00:00:00:10:00", "02:00:00:00:10:01")
ADDRS = ("fc00:0:1000::", "fc00:0:1001::")
PAYLOAD = 1024
# Transport settings measured (TransportConfig fields); "default" is what jobs get without config.
SETTINGS = {   # name: (TransportConfig fields, agent options)
    "default": ({}, []),
    "qp_timeout=14": ({"qp_timeout": 14}, []),      # no spurious timeouts when the machine is busy
    "qp_timeout=14,burst=16": ({"qp_timeout": 14, "pacing_burst_pkts": 16}, []),   # + bursts per wake-up
    "qp_timeout=14,burst=16,spin": ({"qp_timeout": 14, "pacing_burst_pkts": 16}, ["--spin-us", "200"]),
}
PATHS = 4                                 # distinct path addresses (all reach the peer: no switch)


def frame() -> bytes:
    """One MRC data frame with a 1 KB payload from side 0 to side 1."""
    pkt = DataPacket(src=socket.inet_pton(socket.AF_INET6, ADDRS[0]), dst=socket.inet_pton(socket.AF_INET6, ADDRS[1]),
                     ev=0x1234, qp=0x101, psn=0, va=0, rkey=1, length=PAYLOAD, msg_id=1, msg_len=PAYLOAD,
                     tsval=0, payload=bytes(PAYLOAD))
    return codec.encode(pkt, bytes.fromhex(MACS[0].replace(":", "")), bytes.fromhex(MACS[1].replace(":", "")))


# --- helper modes (run inside a namespace) ----------------------------------------------------------

def raw_send(ifname: str, seconds: float) -> dict:
    """Send the frame in a tight loop for `seconds`; report packets/s and CPU use."""
    data = frame()
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    sock.bind((ifname, 0))
    sent, errors = 0, 0
    t0, c0 = time.perf_counter(), time.process_time()
    end = t0 + seconds
    while time.perf_counter() < end:
        for _ in range(64):
            try:
                sock.send(data)
                sent += 1
            except OSError:
                errors += 1
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"sent": sent, "errors": errors, "wall_s": wall, "cpu_s": cpu, "pps": sent / wall}


def raw_count(ifname: str, seconds: float) -> dict:
    """Count MRC frames arriving on `ifname` for `seconds` (same BPF filter as the agent's NICs)."""
    from host_agent.nic import RawNic
    nic = RawNic(0, ifname, b"\0" * 6)
    import select
    poller = select.epoll()
    poller.register(nic.fileno(), select.EPOLLIN)
    write_message(sys.stdout, event("ready"))
    end = time.perf_counter() + seconds
    count = 0
    while time.perf_counter() < end:
        if poller.poll(0.05):
            for _ in nic.receive():
                count += 1
    return {"received": count}


# --- the namespace pair ---------------------------------------------------------------------------

class NamespacePair:
    """Two namespaces joined by one veth pair; `close` removes them."""

    def __init__(self) -> None:
        prefix = f"b{os.getpid() % 10000}"
        self.ns = (f"{prefix}a", f"{prefix}b")
        self.ifs = (f"{prefix}x0", f"{prefix}y0")
        self._made: list[str] = []
        try:
            for ns in self.ns:
                self._ip("netns", "add", ns)
                self._made.append(ns)
            self._ip("link", "add", self.ifs[0], "type", "veth", "peer", "name", self.ifs[1])
            for i in (0, 1):
                self._ip("link", "set", self.ifs[i], "netns", self.ns[i])
                self._ip("-n", self.ns[i], "link", "set", self.ifs[i], "address", MACS[i], "up")
        except Exception:
            self.close()
            raise

    @staticmethod
    def _ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)

    def popen(self, side: int, *cmd: str) -> subprocess.Popen:
        return subprocess.Popen(["ip", "netns", "exec", self.ns[side], *cmd], cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def close(self) -> None:
        for ns in self._made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self._made.clear()


def _finish(proc: subprocess.Popen, timeout: float) -> str:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise RuntimeError(f"{proc.args} did not finish within {timeout} s")
    if proc.returncode != 0:
        raise RuntimeError(f"{proc.args} exited {proc.returncode}: {err.strip()[-500:]}")
    return out


PIN = True      # sender on CPU 0, receiver on CPU 1 (when there are two CPUs and taskset)


def _pin(side: int) -> list[str]:
    """taskset prefix putting side 0 (sender) and side 1 (receiver) on CPUs of their own."""
    if PIN and (os.cpu_count() or 1) >= 2 and shutil.which("taskset"):
        return ["taskset", "-c", str(side)]
    return []


def measure_raw(pair: NamespacePair, seconds: float) -> dict:
    me = str(Path(__file__).resolve())
    counter = pair.popen(1, *_pin(1), sys.executable, me, "--raw-count", pair.ifs[1], str(seconds + 1.5))
    if read_message(counter.stdout) != event("ready"):
        raise RuntimeError(f"raw counter failed: {counter.communicate()[1].strip()[-500:]}")
    sender = pair.popen(0, *_pin(0), sys.executable, me, "--raw-send", pair.ifs[0], str(seconds))
    result = result_of(decode(_finish(sender, seconds + 30)), "raw sender")
    result.update(result_of(decode(_finish(counter, seconds + 30)), "raw counter"))
    return result


def _job(pair: NamespacePair, rank: int, nbytes: int, config: dict, log: Path, start_at: float) -> Job:
    other = 1 - rank
    peer = PeerSpec(rank=other, qp=0x100 + rank, remote_qp=0x100 + other,
                    nics=(NicSpec(plane=0, mac=MACS[other], address=ADDRS[other]),),
                    paths={0: tuple(f"fc00:0:{0x100 + i:x}:{0x1000 + other:x}::" for i in range(PATHS))})
    return Job(rank=rank, world_size=2, host=f"bench{rank}",
               nics=(NicSpec(plane=0, mac=MACS[rank], address=ADDRS[rank], name=pair.ifs[rank]),), peers=(peer,),
               workload=job_workload("transfer", {"src": 0, "dst": 1, "bytes": nbytes, "chunk_bytes": 1 << 20}),
               transport=JobTransport(mode="mrc", config={"mtu_payload": PAYLOAD, **config}), timeout=120,
               start_at=start_at, log=str(log))


def measure_agent(pair: NamespacePair, tmp: Path, nbytes: int, setting: tuple, name: str) -> dict:
    config, options = setting
    start_at = time.time() + 1.5
    procs = []
    for rank in (1, 0):
        job = _job(pair, rank, nbytes, config, tmp / f"{name}-{rank}.jsonl", start_at).write(tmp / f"{name}-{rank}.json")
        procs.append(pair.popen(rank, *_pin(rank), "/usr/bin/time", "-f", "%U %S %e", sys.executable, "-m",
                                "host_agent.agent", "--job", str(job), "--linger", "0.3", *options))
    cpu = {}
    for rank, proc in zip((1, 0), procs):
        try:
            out, err = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        if proc.returncode != 0:
            raise RuntimeError(f"agent {rank} exited {proc.returncode}: {err.strip()[-500:]}")
        user, system, elapsed = (float(x) for x in err.strip().splitlines()[-1].split())
        cpu[rank] = {"user_s": user, "sys_s": system, "process_wall_s": elapsed}
    records = read_log(tmp / f"{name}-0.jsonl")
    result = next(r for r in records if r["kind"] == "result")
    receiver = read_log(tmp / f"{name}-1.jsonl")
    receiver_cpu = next(r for r in receiver if r["kind"] == "result").get("cpu_s")
    counters = next(r for r in records if r["kind"] == "counters")
    transport = counters["transport"]
    data_sent = transport.get("data_sent", 0)
    return {
        "setting": name, "config": config, "agent_options": options, "bytes": nbytes, "ok": result["ok"],
        "transfer_s": result["elapsed"], "data_packets_sent": data_sent,
        "pps": data_sent / result["elapsed"], "goodput_gbps": 8 * nbytes / result["elapsed"] / 1e9,
        "sender_cpu_s": result.get("cpu_s"),
        "sender_cpu_us_per_packet": 1e6 * result["cpu_s"] / data_sent if result.get("cpu_s") and data_sent else None,
        "receiver_cpu_us_per_packet": 1e6 * receiver_cpu / data_sent if receiver_cpu and data_sent else None,
        "retransmitted": transport.get("retransmitted", 0), "timeouts": transport.get("timeouts", 0),
        "sacks_received": transport.get("sacks_received", 0),
        "connection": counters.get("connections", [{}])[0], "cpu": cpu,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bytes", type=int, default=20_000_000, help="transfer size per agent run")
    parser.add_argument("--seconds", type=float, default=2.0, help="duration of the raw-socket run")
    parser.add_argument("--repeat", type=int, default=2, help="agent runs per setting (best is reported)")
    parser.add_argument("--no-pin", action="store_true", help="do not pin sender and receiver to CPUs 0 and 1")
    parser.add_argument("--raw-send", nargs=2, metavar=("IF", "SECONDS"), help=argparse.SUPPRESS)
    parser.add_argument("--raw-count", nargs=2, metavar=("IF", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.raw_send:
        write_message(sys.stdout, response(None, raw_send(args.raw_send[0], float(args.raw_send[1]))))
        return 0
    if args.raw_count:
        write_message(sys.stdout, response(None, raw_count(args.raw_count[0], float(args.raw_count[1]))))
        return 0
    global PIN
    PIN = not args.no_pin
    if os.geteuid() != 0:
        print("bench_agent: needs root (network namespaces and raw sockets)", file=sys.stderr)
        return 2
    measuring = conditions.Measuring()
    results: dict = {"payload_bytes": PAYLOAD, "frame_bytes": len(frame()), "pinned": bool(_pin(0))}
    pair = NamespacePair()
    try:
        with tempfile.TemporaryDirectory(prefix="bench_agent.") as tmp:
            results["raw"] = measure_raw(pair, args.seconds)
            results["agent"] = {}
            for name, setting in SETTINGS.items():
                runs = [measure_agent(pair, Path(tmp), args.bytes, setting, f"run{i}") for i in range(args.repeat)]
                results["agent"][name] = {"best": max(runs, key=lambda r: r["pps"]), "runs": runs}
    finally:
        pair.close()
    results["conditions"] = measured = measuring.done()
    raw = results["raw"]["pps"]
    print(f"agent benchmark ({PAYLOAD}-byte payloads, {results['frame_bytes']}-byte frames; "
          f"{conditions.text(measured)})")
    print(f"  raw-socket sender        : {raw:10.0f} pkt/s  (receiver counted {results['raw']['received']})")
    for name, entry in results["agent"].items():
        best = entry["best"]
        best["ratio_to_raw"] = best["pps"] / raw if raw else None
        print(f"  agent, {name:<18}: {best['pps']:10.0f} pkt/s  ({best['ratio_to_raw']:.3f} of raw; "
              f"{best['goodput_gbps']:.3f} Gbit/s goodput, {best['retransmitted']} retransmitted, "
              f"srtt {best['connection'].get('srtt', float('nan')) * 1e3:.2f} ms, ok={best['ok']})")
        per_packet = min((r["sender_cpu_us_per_packet"] for r in entry["runs"] if r["sender_cpu_us_per_packet"]),
                         default=None)
        receiver = min((r["receiver_cpu_us_per_packet"] for r in entry["runs"] if r["receiver_cpu_us_per_packet"]),
                       default=None)
        if per_packet:
            entry["sender_cpu_us_per_packet"] = per_packet
            entry["receiver_cpu_us_per_packet"] = receiver
            print(f"      CPU per data packet: sender {per_packet:.1f} us (incl. SACK processing) -> "
                  f"{1e6 / per_packet:.0f} pkt/s on a core of its own; receiver {receiver or float('nan'):.1f} us")
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"agent-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"  saved {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
