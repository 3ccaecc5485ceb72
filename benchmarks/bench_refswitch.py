"""Forwarding rate of the reference switch process and of BMv2 next to a plain raw-socket loop.

    sudo .venv/bin/python benchmarks/bench_refswitch.py [--seconds 3] [--frame 1024]
    sudo .venv/bin/python benchmarks/bench_refswitch.py --bmv2 [--bmv2-dir /opt/p4-perf/bin ...]

Builds two veth pairs between namespaces (refswitch.vethlab; removed at the end whatever
happens), then measures, with a traffic process blasting 1 KB MRC data frames into port 1 and
counting what leaves port 2:
  plain   - a minimal Python loop that reads port 1 and writes port 2 (the ceiling for raw sockets here)
  model   - the reference switch (python -m refswitch.main), programmed over P4Runtime, forwarding
  trim    - the same with port 2's trim threshold at 0, so every packet is trimmed
  paced   - the same with port 2's egress queue at 100 Mbit/s (checks the pacing timers)
  bmv2    - (with --bmv2) BMv2's simple_switch_grpc running p4/build/mrc.json, programmed over
            P4Runtime with the same route, once per build found: the one on PATH and every
            folder given by --bmv2-dir or listed in MRC_BMV2_BUILDS (folders separated by ':'),
            e.g. a debug build and a performance build (--disable-logging-macros
            --disable-elogger, -O3)
Prints packets/s for each, the model/plain ratio, packets forwarded per CPU-second of the forwarding
process (the single-core speed, steadier than wall-clock rates on a shared machine), and saves JSON
under benchmarks/results/.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from wire import codec, constants                      # noqa: E402
from experiments import conditions                     # noqa: E402
from wire.packets import DataPacket                         # noqa: E402
from testbed.processes import stop_process                  # noqa: E402

DST = bytes.fromhex("fc000001100100000000000000000000")          # fc00:1:1001::
SRC = bytes.fromhex("fc000001100000000000000000000000")          # fc00:1:1000::
RESULTS = REPO / "benchmarks" / "results"
PACED_BPS = 100_000_000          # egress rate of the paced run


def data_frame(frame_len: int) -> bytes:
    """An MRC data frame of `frame_len` bytes (trimmable, ECT(0)) to fc00:1:1001::."""
    payload = frame_len - constants.DATA_HEADERS_LEN - constants.ICRC_LEN
    pkt = DataPacket(src=SRC, dst=DST, ev=0x1234, qp=1, psn=0, va=0, rkey=1, length=payload, msg_id=1,
                     msg_len=payload, tsval=0, payload=bytes(payload))
    return codec.encode(pkt, bytes.fromhex("020001000000"), bytes.fromhex("020001000001"))


# --- helper modes, run inside a namespace ------------------------------------------------------

def traffic(tx_if: str, rx_if: str, frame_len: int, warmup: float, seconds: float) -> dict:
    """Blast frames into tx_if; count frames arriving on rx_if during the measured window."""
    from refswitch.ports import RawPort
    tx, rx = RawPort(1, tx_if).open(), RawPort(2, rx_if).open()
    frame = data_frame(frame_len)
    sent = received = total = 0
    lengths = set()
    start = time.monotonic()
    t_measure, t_end = start + warmup, start + warmup + seconds
    measuring = False
    while True:
        now = time.monotonic()
        if now >= t_end:
            break
        if not measuring and now >= t_measure:
            measuring, sent, received = True, 0, 0
        for _ in range(16):
            if tx.send(frame):
                sent += 1
        while True:
            got = rx.recv()
            if got is None:
                break
            received += 1
            total += 1
            if len(lengths) < 4:
                lengths.add(len(got))
    return {"sent": sent, "received": received, "received_total": total, "seconds": seconds,
            "pps": received / seconds,
            "out_lengths": sorted(lengths)}


def plain_forward(in_if: str, out_if: str) -> None:
    """Copy every frame from in_if to out_if until SIGTERM: the raw-socket ceiling."""
    import select
    import signal
    from refswitch.ports import RawPort
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    a, b = RawPort(1, in_if).open(), RawPort(2, out_if).open()
    ep = select.epoll()
    ep.register(a.fileno(), select.EPOLLIN)
    recv, send = a.recv, b.send
    while True:
        ep.poll()
        for _ in range(64):
            frame = recv()
            if frame is None:
                break
            send(frame)


# --- orchestration (root) ----------------------------------------------------------------------

def cpu_seconds(pid: int) -> float:
    """User + system CPU time used so far by process `pid`."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_traffic(lab, args, switch_pid: int | None = None) -> dict:
    """Run the traffic process; with `switch_pid`, also the forwarder's packets per CPU-second."""
    cpu_before = cpu_seconds(switch_pid) if switch_pid else None
    done = lab.popen("host", [sys.executable, __file__, "--mode", "traffic", lab.host_if(1), lab.host_if(2),
                              "--frame", str(args.frame), "--seconds", str(args.seconds)],
                     stdout=subprocess.PIPE, cwd=str(REPO))
    out, _ = done.communicate(timeout=args.seconds + 30)
    if done.returncode != 0:
        raise RuntimeError(f"traffic process failed with status {done.returncode}")
    result = json.loads(out)
    if switch_pid:
        cpu = cpu_seconds(switch_pid) - cpu_before
        result["forwarder_cpu_seconds"] = cpu
        result["pps_per_cpu_second"] = result["received_total"] / cpu if cpu else None
    return result


def wait_for(path: str, proc: subprocess.Popen, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise RuntimeError(f"switch exited with status {proc.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"switch not ready after {timeout} s")
        time.sleep(0.05)


def measure_model(lab, args, tmp: str, trim: bool, queue: str | None = None) -> dict:
    from pipeline_contract.entries import TableEntry
    from pipeline_contract.client import P4RuntimeClient
    from pipeline_contract.p4info import load_p4info
    sock, ready = os.path.join(tmp, "s.sock"), os.path.join(tmp, "ready")
    proc = lab.popen("switch", [sys.executable, "-m", "refswitch.main", "--port", f"1={lab.switch_if(1)}",
                                "--port", f"2={lab.switch_if(2)}", "--grpc-addr", f"unix:{sock}",
                                "--ready-file", ready, "--log-level", "WARNING"]
                     + (["--queue", queue] if queue else []), cwd=str(REPO))
    try:
        wait_for(ready, proc)
        entries = [TableEntry("MrcIngress.routing", {"dst_addr": (int.from_bytes(DST, "big"), 48)},
                              "MrcIngress.forward", {"port": 2})]
        if trim:
            entries.append(TableEntry("MrcIngress.port_config", {"port": 2}, "MrcIngress.set_port_config",
                                      {"trim_threshold": 0, "ecn_threshold": 0, "host_facing": 0,
                                       "ecn_max_threshold": 0}))
        with P4RuntimeClient(f"unix:{sock}", 1, "bench") as client:
            client.set_pipeline(load_p4info())
            client.insert(entries)
            result = run_traffic(lab, args, proc.pid)
            result["trimmed_counter"] = client.read_counter("MrcIngress.trimmed", 2)[2].packets
            result["tx_counter"] = client.read_counter("MrcEgress.tx", 2)[2].packets
        return result
    finally:
        stop_process(proc)
        for p in (sock, ready):
            if os.path.exists(p):
                os.unlink(p)


def bmv2_builds(dirs: list[str]) -> list[Path]:
    """Every simple_switch_grpc to measure: the one on PATH, then those in `dirs` and MRC_BMV2_BUILDS."""
    import shutil
    found = []
    on_path = shutil.which("simple_switch_grpc")
    if on_path:
        found.append(Path(on_path).resolve())
    for folder in list(dirs) + [d for d in os.environ.get("MRC_BMV2_BUILDS", "").split(":") if d]:
        binary = Path(folder) / "simple_switch_grpc"
        if not binary.is_file():
            raise RuntimeError(f"{folder}: no simple_switch_grpc there (--bmv2-dir / MRC_BMV2_BUILDS)")
        found.append(binary.resolve())
    return list(dict.fromkeys(found))


def measure_bmv2(lab, args, tmp: str, binary: Path) -> dict:
    """BMv2 `binary` forwarding port 1 to port 2 with p4/build/mrc.json and one route."""
    from controller.installer import CompiledProgram
    from pipeline_contract.client import P4RuntimeClient
    from pipeline_contract.entries import TableEntry
    program = CompiledProgram.load()
    if not program.device_config:
        raise RuntimeError("BMv2 needs p4/build/mrc.json (make -C p4 where p4c is installed)")
    sock = os.path.join(tmp, "bmv2.sock")
    argv = [str(binary), "--device-id", "1", "--no-p4", "--thrift-port", "9090",
            "--notifications-addr", f"ipc://{os.path.join(tmp, 'notifications.ipc')}",
            "-i", f"1@{lab.switch_if(1)}", "-i", f"2@{lab.switch_if(2)}",
            "--", "--grpc-server-addr", f"unix:{sock}", "--priority-queues", "2"]
    log = open(os.path.join(tmp, f"bmv2-{binary.parent.name}.log"), "wb")
    proc = lab.popen("switch", argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(sock, proc)
        entries = [TableEntry("MrcIngress.routing", {"dst_addr": (int.from_bytes(DST, "big"), 48)},
                              "MrcIngress.forward", {"port": 2})]
        with P4RuntimeClient(f"unix:{sock}", 1, "bench-bmv2", timeout=30) as client:
            client.set_pipeline(program.p4info, program.device_config)
            client.insert(entries)
            result = run_traffic(lab, args, proc.pid)
        result["binary"] = str(binary)
        return result
    finally:
        stop_process(proc)
        log.close()
        if os.path.exists(sock):
            os.unlink(sock)


def measure_plain(lab, args) -> dict:
    proc = lab.popen("switch", [sys.executable, __file__, "--mode", "plain", lab.switch_if(1), lab.switch_if(2)],
                     cwd=str(REPO))
    try:
        time.sleep(0.5)   # no readiness signal from this tiny loop; it only has to open two sockets
        if proc.poll() is not None:
            raise RuntimeError("plain forwarder exited")
        return run_traffic(lab, args, proc.pid)
    finally:
        stop_process(proc)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("bench", "traffic", "plain"), default="bench", help=argparse.SUPPRESS)
    parser.add_argument("ifaces", nargs="*", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=3.0, help="measured window per run (default 3)")
    parser.add_argument("--frame", type=int, default=1024, help="frame length in bytes (default 1024)")
    parser.add_argument("--bmv2", action="store_true",
                        help="measure BMv2 builds (beside plain and the model) instead of the model's variants")
    parser.add_argument("--bmv2-dir", action="append", default=[], metavar="DIR",
                        help="a folder holding a simple_switch_grpc build to measure (repeatable)")
    args = parser.parse_args(argv)
    if args.mode == "traffic":
        print(json.dumps(traffic(args.ifaces[0], args.ifaces[1], args.frame, 0.5, args.seconds)))
        return 0
    if args.mode == "plain":
        plain_forward(args.ifaces[0], args.ifaces[1])
        return 0
    if os.geteuid() != 0:
        print("bench_refswitch: needs root (network namespaces, raw sockets)", file=sys.stderr)
        return 2
    from refswitch.vethlab import VethLab
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))     # unwind: the lab is always removed
    if args.bmv2:
        return main_bmv2(args)
    measuring = conditions.Measuring()
    results: dict = {"frame_bytes": args.frame, "seconds": args.seconds}
    with tempfile.TemporaryDirectory(prefix="mrc-bench-") as tmp, VethLab(f"b{os.getpid() % 1000}", 2) as lab:
        results["plain"] = measure_plain(lab, args)
        results["model"] = measure_model(lab, args, tmp, trim=False)
        results["model_trim"] = measure_model(lab, args, tmp, trim=True)
        results["paced_rate_bps"] = PACED_BPS
        results["model_paced"] = measure_model(lab, args, tmp, trim=False, queue=f"2:{PACED_BPS}:1000")
    plain, model, trim = (results[k]["pps"] for k in ("plain", "model", "model_trim"))
    results["ratio_model_to_plain"] = model / plain if plain else None
    results["conditions"] = measured = measuring.done()

    def per_cpu(key):
        value = results[key].get("pps_per_cpu_second")
        return f"{value:10.0f}" if value else "       n/a"
    print(f"frames of {args.frame} bytes, {args.seconds:.0f} s windows; {conditions.text(measured)}")
    print("                          wall-clock rate      per CPU-second of the forwarder")
    print(f"  plain raw-socket loop : {plain:10.0f} pkt/s   {per_cpu('plain')} pkt")
    print(f"  reference switch      : {model:10.0f} pkt/s   {per_cpu('model')} pkt"
          f"   ({results['ratio_model_to_plain']:.2f} of plain)")
    print(f"  reference, all trimmed: {trim:10.0f} pkt/s   {per_cpu('model_trim')} pkt"
          f"   (out lengths {results['model_trim']['out_lengths']})")
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"refswitch-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    paced = results["model_paced"]["pps"]
    want = PACED_BPS / (8 * args.frame)
    print(f"  paced at {PACED_BPS / 1e6:.0f} Mbit/s   : {paced:10.0f} pkt/s   (configured {want:.0f} pkt/s)")
    print(f"saved {path.relative_to(REPO)}")
    return 0


def main_bmv2(args) -> int:
    """Plain loop, model and every BMv2 build found, on the same veths; save bmv2-*.json."""
    from refswitch.vethlab import VethLab
    builds = bmv2_builds(args.bmv2_dir)
    if not builds:
        print("bench_refswitch: no simple_switch_grpc on PATH, none given with --bmv2-dir or "
              "MRC_BMV2_BUILDS (build BMv2: README.md, 'BMv2 from source')", file=sys.stderr)
        return 2
    measuring = conditions.Measuring()
    results: dict = {"frame_bytes": args.frame, "seconds": args.seconds, "bmv2": {}}
    with tempfile.TemporaryDirectory(prefix="mrc-bench-") as tmp, VethLab(f"b{os.getpid() % 1000}", 2) as lab:
        results["plain"] = measure_plain(lab, args)
        results["model"] = measure_model(lab, args, tmp, trim=False)
        for binary in builds:
            results["bmv2"][str(binary.parent)] = measure_bmv2(lab, args, tmp, binary)
    results["conditions"] = measured = measuring.done()
    plain = results["plain"]["pps"]
    print(f"frames of {args.frame} bytes, {args.seconds:.0f} s windows; {conditions.text(measured)}")
    rows = [("plain raw-socket loop", results["plain"]), ("reference switch", results["model"])]
    rows += [(f"BMv2 {folder}", r) for folder, r in results["bmv2"].items()]
    for name, r in rows:
        per_cpu = r.get("pps_per_cpu_second")
        print(f"  {name:<34}: {r['pps']:10.0f} pkt/s  ({r['pps'] / plain:.2f} of plain)   "
              + (f"{per_cpu:10.0f} pkt per CPU-second" if per_cpu else ""))
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"bmv2-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"saved {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
