"""Per-path reachability: a PROBE on every path from every source NIC, and which ones arrive.

`usid_probes(topo)` lists one probe per (source host, destination host, uSID path);
`ecmp_probes(topo, evs)` lists probes to destination NIC addresses (routed by ECMP in the switches);
`ProbeSession(net)` runs one `testbed.prober` process in every host of a running `TestbedNetwork`;
each `run(probes)` sends every probe and returns where each one arrived (`run_probes`: one round).
"""
from __future__ import annotations

import json
import selectors
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from testbed import prober
from topologies.paths import all_pairs_paths
from wire.control import decode, write_message

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class ProbeSpec:
    """One probe: from a source NIC, to an address, expected at a destination host."""

    probe_id: int
    src_host: str
    nic: str                     # source interface name
    src: str                     # source NIC address
    dst: str                     # uSID path address or destination NIC address
    dst_mac: str
    dst_host: str
    ev: int
    switches: tuple = ()         # the uSID path's switches (empty for ECMP probes)
    plane: int = 0

    def crosses(self, a: str, b: str) -> bool:
        """True when this probe's uSID path uses the link between nodes a and b."""
        hops = (self.src_host, *self.switches, self.dst_host)
        return any({x, y} == {a, b} for x, y in zip(hops, hops[1:], strict=False))


def usid_probes(topo) -> list[ProbeSpec]:
    """A probe on every uSID path of every ordered host pair, on every plane."""
    probes = []
    for (src, dst), paths in all_pairs_paths(topo).items():
        for path in paths:
            dst_nic = topo.host_nic(dst, path.plane)
            probes.append(ProbeSpec(len(probes) + 1, src, path.src_nic.ifname, str(path.src_nic.address),
                                    str(path.address), dst_nic.mac, dst, ev=len(probes) + 1,
                                    switches=tuple(path.switches), plane=path.plane))
    return probes


def ecmp_probes(topo, evs=range(1, 9)) -> list[ProbeSpec]:
    """Probes to each destination NIC address (the baseline's ECMP routing), one per EV."""
    probes = []
    for src in topo.hosts:
        for dst in topo.hosts:
            if src.name == dst.name:
                continue
            for src_nic in topo.host_nics(src.name):
                dst_nic = topo.host_nic(dst.name, src_nic.plane)
                for ev in evs:
                    probes.append(ProbeSpec(len(probes) + 1, src.name, src_nic.ifname,
                                            str(src_nic.address), str(dst_nic.address), dst_nic.mac,
                                            dst.name, ev=ev, plane=src_nic.plane))
    return probes


@dataclass
class ProbeArrivals:
    """Where each probe arrived: {probe_id: (host, nic)}; and the probes that were sent."""

    sent: list[ProbeSpec]
    arrived: dict

    def delivered(self, probe: ProbeSpec) -> bool:
        """True when `probe` arrived at its destination host (on the NIC of its plane)."""
        where = self.arrived.get(probe.probe_id)
        return where is not None and where[0] == probe.dst_host

    def failed(self) -> list[ProbeSpec]:
        return [p for p in self.sent if not self.delivered(p)]

    def misdelivered(self) -> list[ProbeSpec]:
        return [p for p in self.sent if p.probe_id in self.arrived and not self.delivered(p)]


class ProbeSession:
    """One `testbed.prober` process per host of a running network, reused for several rounds.

    Each round offsets its probe ids, so a late PROBE of an earlier round is never counted.
    """

    ROUND_STRIDE = 1 << 20

    def __init__(self, net, ready_timeout: float = 30.0):
        self.net = net
        self.ready_timeout = ready_timeout
        self.procs: dict[str, subprocess.Popen] = {}
        self.selector = selectors.DefaultSelector()
        self.lines = _Lines(self.selector)
        self.spec_dir = net.run_dir / "probes"
        self.round = 0

    def __enter__(self) -> "ProbeSession":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> "ProbeSession":
        """Start every host's prober and wait until all have their sockets open."""
        self.spec_dir.mkdir(exist_ok=True)
        try:
            for host in self.net.topology.hosts:
                spec = {"nics": {nic.ifname: nic.mac for nic in self.net.topology.host_nics(host.name)}}
                path = self.spec_dir / f"{host.name}.json"
                path.write_text(json.dumps(spec))
                proc = self.net.popen(host.name, [sys.executable, "-m", "testbed.prober", str(path)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, cwd=str(REPO), bufsize=0)
                self.procs[host.name] = proc
                self.selector.register(proc.stdout, selectors.EVENT_READ, host.name)
            deadline = time.monotonic() + self.ready_timeout
            ready: set[str] = set()
            while len(ready) < len(self.procs):
                if time.monotonic() > deadline:
                    raise TimeoutError("probers not ready in time: " + self.lines.stderr(self.procs))
                ready.update(h for h, message in self.lines.read(deadline, self.procs)
                             if message.get("event") == prober.READY)
        except BaseException:
            self.close()
            raise
        return self

    def run(self, probes: list[ProbeSpec], timeout: float = 15.0,
            expect: set[int] | None = None, attempts: int = 3) -> ProbeArrivals:
        """Send `probes` and return where every probe arrived.

        Waits until the `expect`ed probes (default: all) arrived; an expected probe still missing
        after its attempt's share of `timeout` is sent again, up to `attempts` times (a lost frame
        is not an unreachable path). Probes outside `expect` are sent once.
        """
        self.round += 1
        offset = self.round * self.ROUND_STRIDE
        expect = {p.probe_id for p in probes} if expect is None else set(expect)
        arrived: dict[int, tuple[str, str]] = {}
        began = time.monotonic()
        batch = probes
        for attempt in range(1, attempts + 1):
            self._send(batch, offset, attempt)
            deadline = began + timeout * attempt / attempts
            while not expect <= arrived.keys() and time.monotonic() < deadline:
                for host, message in self.lines.read(deadline, self.procs):
                    if message.get("event") == prober.RX:
                        pid, nic = message["data"]["probe_id"], message["data"]["nic"]
                        if pid // self.ROUND_STRIDE == self.round:
                            arrived.setdefault(pid - offset, (host, nic))
                    elif message.get("ok") is False:
                        raise RuntimeError(f"prober on {host} refused a request: {message.get('error')}")
            batch = [p for p in probes if p.probe_id in expect and p.probe_id not in arrived]
            if not batch:
                break
        return ProbeArrivals(probes, arrived)

    def _send(self, probes: list[ProbeSpec], offset: int, attempt: int) -> None:
        for host, proc in self.procs.items():
            items = [{"nic": p.nic, "src": p.src, "dst": p.dst, "dst_mac": p.dst_mac, "ev": p.ev,
                      "probe_id": offset + p.probe_id} for p in probes if p.src_host == host]
            if not items:
                continue
            path = self.spec_dir / f"{host}.round{self.round}.{attempt}.json"
            path.write_text(json.dumps(items))
            write_message(proc.stdin, {"op": "send", "file": str(path)})

    def close(self) -> None:
        """Stop every prober (by PID)."""
        for proc in self.procs.values():
            try:
                write_message(proc.stdin, {"op": "stop"})
                proc.stdin.close()
            except OSError:
                pass
        for proc in self.procs.values():
            try:
                proc.wait(5)                  # a prober told to stop exits by itself
            except subprocess.TimeoutExpired:
                pass
            self.net.stop_process(proc)
        self.procs = {}
        self.selector.close()


def run_probes(net, probes: list[ProbeSpec], timeout: float = 15.0,
               expect: set[int] | None = None) -> ProbeArrivals:
    """One round of `probes` in a fresh ProbeSession (see ProbeSession.run)."""
    with ProbeSession(net) as session:
        return session.run(probes, timeout, expect)


class _Lines:
    """Complete messages (wire.control) from several prober processes' stdout."""

    def __init__(self, selector: selectors.BaseSelector):
        self.selector = selector
        self.partial: dict[str, bytes] = {}

    def read(self, deadline: float, procs: dict) -> list[tuple[str, dict]]:
        left = deadline - time.monotonic()
        out = []
        if left <= 0:
            return out
        for key, _ in self.selector.select(min(left, 0.5)):
            data = key.fileobj.read(65536)
            if not data:
                self.selector.unregister(key.fileobj)
                if procs[key.data].poll() not in (None, 0):
                    raise RuntimeError(f"prober on {key.data} failed: " + self.stderr(procs))
                continue
            buf = self.partial.get(key.data, b"") + data
            *complete, rest = buf.split(b"\n")
            self.partial[key.data] = rest
            out += [(key.data, decode(line)) for line in complete if line.strip()]
        return out

    @staticmethod
    def stderr(procs: dict) -> str:
        texts = []
        for host, proc in procs.items():
            if proc.poll() is not None and proc.stderr is not None:
                texts.append(f"{host}: {proc.stderr.read().decode(errors='replace')[-500:]}")
        return "; ".join(texts) or "no prober exited"
