"""Was a run shaped by the emulated network, or by this machine's CPU? The invariants of an emulation,
watched while it runs (after Mininet-HiFi: nodes get the CPU they need, packets sent are packets
received), and a verdict with one line per reason.

- `CpuWatch` samples, in a thread, the CPU time of chosen processes (switches, agents), how long
  their threads waited for a CPU each time they woke (the scheduler's run delay), and the whole
  machine's CPU, from /proc. A process near one full core, or one that waits for a CPU after a
  packet woke it, is a process the network could not count on.
- `link_losses` compares what each switch's neighbour sent on a link with what the switch's
  pipeline counted in (`MrcIngress.rx`): packets lost before the pipeline (veth or socket buffers
  of a switch too slow to read them), kept apart from pipeline drops and trims.
- `Verdict` collects the reasons; `judge` applies the thresholds below (their reasons are in
  experiments/README.md, "Fidelity"); `FidelityMonitor` does all of it for a running network.
"""
from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, field

from pipeline_contract.names import RX, TX
from testbed.cpu_sample import machine_ticks, process_sched

SAMPLE_S = 0.25                  # how often CpuWatch samples
WINDOW_S = 1.0                   # CPU shares are judged over windows this long

# Thresholds of the verdict (experiments/README.md, "Fidelity", says why each is where it is).
PROCESS_CPU_LIMIT = 0.90         # share of one core a switch or agent may use in any 1 s window
MACHINE_CPU_LIMIT = 0.95         # a machine busier than this in any 1 s window is named as context of a
                                 # distorted verdict; alone it is no reason (a nice-19 job yields its CPU)
SCHED_WAIT_LIMIT_S = 0.5e-3      # mean wait for a CPU per wake-up, in any 1 s window with wake-ups
SCHED_MIN_WAKEUPS = 50           # ... judged only over windows with this many wake-ups
LINK_LOSS_LIMIT = 0.001          # share of packets a healthy link may lose before the pipeline
LINK_LOSS_MIN_PACKETS = 20       # ... counted only from this many lost packets (a handful is in flight)
QUEUE_SERVED_LIMIT = 0.95        # share of its rate a backlogged queue must be served at
QUEUE_MIN_BUSY_S = 0.05          # ... judged only from this much backlogged service time
WAKEUP_LATE_LIMIT_S = 1e-3       # p99 lateness of an agent's timer wake-ups (half the 2 ms minimum RTO)
PACKET_TIMES_OF_WAIT = 0.5       # ... both limits are at least this many (wait) or 1 (lateness) packet
                                 # times at the hosts' rate: a slower emulated network tolerates more
FAULT_LATE_LIMIT_S = 20e-3       # a fault action (a link set down, ...) takes effect at most this long after it
                                 # was due, or FAULT_LATE_PACKETS packet times at the hosts' rate when longer
FAULT_LATE_PACKETS = 2
WAKEUP_MIN_COUNT = 100           # ... judged only from this many timer wake-ups


def _between(a: tuple[float, int, int, int], b: tuple[float, int, int, int]) -> tuple[float, float | None]:
    """CPU share and mean wait per wake-up (None: too few wake-ups) between samples a and b."""
    (t0, r0, w0, n0), (t1, r1, w1, n1) = a, b
    share = (r1 - r0) / 1e9 / max(t1 - t0, 1e-9)
    return share, ((w1 - w0) / 1e9 / (n1 - n0) if n1 - n0 >= SCHED_MIN_WAKEUPS else None)


def _seconds(s: float) -> str:
    """A duration in ms below a second, else in s."""
    return f"{s * 1e3:.3g} ms" if s < 1 else f"{s:.3g} s"


@dataclass
class CpuShare:
    """How much CPU one process (or the machine) used, mean over the watch and in the busiest window;
    for a process also how long it waited for a CPU per wake-up (mean, and in the worst window)."""

    mean: float = 0.0
    peak: float = 0.0
    wait_mean_s: float = 0.0
    wait_peak_s: float = 0.0

    def as_dict(self) -> dict:
        return {"mean": round(self.mean, 3), "peak": round(self.peak, 3),
                "wait_mean_ms": round(self.wait_mean_s * 1e3, 3), "wait_peak_ms": round(self.wait_peak_s * 1e3, 3)}


@dataclass(frozen=True)
class Span:
    """A stretch of wall-clock time during which `who` broke a limit (`why`)."""

    start: float
    end: float
    who: str
    why: str


def merge_spans(spans: list[Span]) -> list[Span]:
    """Overlapping spans of the same process and reason joined into one."""
    merged: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.who, s.why, s.start)):
        last = merged[-1] if merged else None
        if last is not None and (last.who, last.why) == (span.who, span.why) and span.start <= last.end:
            merged[-1] = Span(last.start, max(last.end, span.end), last.who, last.why)
        else:
            merged.append(span)
    return sorted(merged, key=lambda s: (s.start, s.who))


class CpuWatch:
    """Samples the CPU time of named processes and of the machine while a run goes on."""

    cpus: int | None = None          # the CPUs of the machine sampled (None: this one's)

    def __init__(self, sample_s: float = SAMPLE_S, window_s: float = WINDOW_S) -> None:
        self.sample_s = sample_s
        self._wall_offset = time.time() - time.monotonic()     # monotonic sample times -> wall clock
        self.window = max(1, round(window_s / sample_s))
        self._pids: dict[str, int] = {}
        self._series: dict[str, list[tuple[float, int, int, int]]] = {}   # name -> (time, run, wait, slices)
        self._machine: list[tuple[float, int, int]] = []          # (time, busy, total)
        self._load_peak = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def watch(self, name: str, pid: int) -> None:
        """Also sample process `pid` under `name` (from the next sample on)."""
        with self._lock:
            self._pids[name] = pid
            self._series.setdefault(name, [])

    def start(self, delay_s: float = 0.0) -> "CpuWatch":
        """Sample from now on, or from `delay_s` seconds on (what comes before, such as processes
        starting up, is not judged)."""
        if delay_s <= 0:
            self._sample()
        self._thread = threading.Thread(target=self._run, args=(delay_s,), name="cpu-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Take a last sample and end the sampling thread (once; a watch never started does nothing)."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self._sample()

    def _run(self, delay_s: float) -> None:
        if delay_s > 0:
            if self._stop.wait(delay_s):
                return
            self._sample()
        while not self._stop.wait(self.sample_s):
            self._sample()

    def _sample(self) -> None:
        with self._lock:
            pids = dict(self._pids)
        scheds = {name: process_sched(pid) for name, pid in pids.items()}
        self.add_sample(time.monotonic(), machine_ticks(), {n: s for n, s in scheds.items() if s is not None},
                        os.getloadavg()[0])

    def add_sample(self, now: float, machine: tuple[int, int], processes: dict[str, tuple[int, int, int]],
                   load: float) -> None:
        """One sample at monotonic time `now`: the machine's (busy, total) ticks, each process's
        (run ns, wait ns, wake-ups) by name (a name not seen before is watched from now on), and
        the 1-minute load average."""
        with self._lock:
            self._machine.append((now, *machine))
            for name, sched in processes.items():
                self._series.setdefault(name, []).append((now, *sched))
        self._load_peak = max(self._load_peak, load)

    def processes(self) -> dict[str, CpuShare]:
        """Each watched process's share of one core."""
        with self._lock:
            return {name: self._share(series) for name, series in self._series.items()}

    def machine(self) -> CpuShare:
        """The machine's busy share of all its cores."""
        with self._lock:
            busy = [(t, b) for t, b, _ in self._machine]
            cores = [(t, c) for t, _, c in self._machine]
        if len(busy) < 2:
            return CpuShare()
        spent = [b for _, b in busy]
        total = [c for _, c in cores]
        mean = (spent[-1] - spent[0]) / max(1, total[-1] - total[0])
        peak = max(((spent[i] - spent[i - self.window]) / max(1, total[i] - total[i - self.window])
                    for i in range(self.window, len(spent))), default=mean)
        return CpuShare(mean, max(peak, mean))

    def distorted_spans(self, sched_wait_s: float = SCHED_WAIT_LIMIT_S) -> list[Span]:
        """The windows (wall clock) in which a watched process used more CPU than PROCESS_CPU_LIMIT
        or waited longer than `sched_wait_s` per wake-up, merged per process and reason."""
        with self._lock:
            series = {name: list(points) for name, points in self._series.items()}
        spans = []
        for name, points in series.items():
            for i in range(self.window, len(points)):
                a, b = points[i - self.window], points[i]
                share, wait = _between(a, b)
                start, end = a[0] + self._wall_offset, b[0] + self._wall_offset
                if share > PROCESS_CPU_LIMIT:
                    spans.append(Span(start, end, name, "CPU"))
                if wait is not None and wait > sched_wait_s:
                    spans.append(Span(start, end, name, "CPU wait"))
        return merge_spans(spans)

    @property
    def load_peak(self) -> float:
        """The highest 1-minute load average seen."""
        return self._load_peak

    def _share(self, series: list[tuple[float, int, int, int]]) -> CpuShare:
        if len(series) < 2:
            return CpuShare()
        mean, mean_wait = _between(series[0], series[-1])
        windows = [_between(series[i - self.window], series[i]) for i in range(self.window, len(series))]
        peak = max([share for share, _ in windows] + [mean])
        waits = [w for _, w in windows if w is not None]
        return CpuShare(mean, peak, mean_wait or 0.0, max(waits + [mean_wait or 0.0]))


@dataclass
class LinkLoss:
    """Packets one switch's neighbour sent on a link and what the switch's pipeline counted in."""

    link: str                    # "s1->s3": sent by s1, received by s3
    sent: int
    received: int

    @property
    def lost(self) -> int:
        return max(0, self.sent - self.received)

    @property
    def share(self) -> float:
        return self.lost / self.sent if self.sent else 0.0


def link_losses(topo, tx: dict[str, dict[int, int]], rx: dict[str, dict[int, int]],
                skip: set[str] = frozenset()) -> list[LinkLoss]:
    """Per switch-to-switch link direction: packets the sending switch's egress counted out (`tx`:
    {switch: {port: packets}}) against packets the receiving switch's ingress counted in (`rx`).
    Links touching a node in `skip` (faulted on purpose) are left out."""
    losses = []
    for link in topo.links:
        if not (topo.is_switch(link.a) and topo.is_switch(link.b)) or link.a in skip or link.b in skip:
            continue
        for a, pa, b, pb in ((link.a, link.a_port, link.b, link.b_port), (link.b, link.b_port, link.a, link.a_port)):
            if a in tx and b in rx:
                losses.append(LinkLoss(f"{a}->{b}", tx[a].get(pa, 0), rx[b].get(pb, 0)))
    return losses


@dataclass(frozen=True)
class VerdictLimits:
    """The time limits of a verdict: fixed floors, raised for a slow emulated network, where
    one packet's transmission takes longer than the floors (a 1 KB packet at 1 Mbit/s: 8 ms)."""

    sched_wait_s: float = SCHED_WAIT_LIMIT_S
    wakeup_late_s: float = WAKEUP_LATE_LIMIT_S
    fault_late_s: float = FAULT_LATE_LIMIT_S

    @classmethod
    def for_packet_time(cls, packet_s: float) -> "VerdictLimits":
        """The limits for hosts whose full data packet takes `packet_s` seconds to send."""
        return cls(max(SCHED_WAIT_LIMIT_S, PACKET_TIMES_OF_WAIT * packet_s), max(WAKEUP_LATE_LIMIT_S, packet_s),
                   max(FAULT_LATE_LIMIT_S, FAULT_LATE_PACKETS * packet_s))


@dataclass
class Verdict:
    """Faithful, or distorted with one line per reason; with what was measured."""

    reasons: list[str] = field(default_factory=list)
    measured: dict = field(default_factory=dict)
    watched: bool = True                 # False: nothing could be measured (a verdict of "unknown")
    spans: list[tuple[float, float, str]] = field(default_factory=list)   # (start s, end s, who: why)
    limits: VerdictLimits = field(default_factory=VerdictLimits)
    servers: dict[str, str] = field(default_factory=dict)   # node -> the server it ran on (a cluster run)

    @property
    def faithful(self) -> bool:
        return self.watched and not self.reasons

    @property
    def label(self) -> str:
        if not self.watched:
            return "unknown"
        return "faithful" if self.faithful else "distorted"

    def add_lateness(self, lateness: dict[str, dict]) -> None:
        """Judge each agent's timer wake-ups (`host_agent.lateness` summaries by name) too: their p99
        against the wake-up limit, and the latest single one against a fault's limit. An agent
        that got no CPU for that long stalled its connections once, as a late fault shifts a run
        (under CPU load one wake-up came 12-156 ms late while the p99 stayed within its limit).
        One reason for the single late ones, naming the latest. The agent measures its wake-ups
        while its workload runs (not in its linger after it)."""
        self.measured["wakeups"] = dict(lateness)
        judged = set()
        for name, summary in sorted(lateness.items()):
            p99 = summary.get("p99_ms", 0.0) / 1e3
            if summary.get("n", 0) >= WAKEUP_MIN_COUNT and p99 > self.limits.wakeup_late_s:
                judged.add(name)
                self.reasons.append(f"{name}: timer wake-ups late by {p99 * 1e3:.2g} ms at p99 "
                                    f"(p50 {summary.get('p50_ms', 0.0):.2g} ms, max "
                                    f"{summary.get('max_ms', 0.0):.3g} ms, {summary['n']} wake-ups; "
                                    f"limit {self.limits.wakeup_late_s * 1e3:.2g} ms)")
        once = {name: summary.get("max_ms", 0.0) / 1e3 for name, summary in lateness.items()
                if name not in judged and summary.get("max_ms", 0.0) / 1e3 > self.limits.fault_late_s}
        if once:
            name = max(once, key=lambda n: (once[n], n))
            self.reasons.append(f"{name}: a timer wake-up came {_seconds(once[name])} late ({len(once)} of the "
                                f"{len(lateness) - len(judged)} agents whose p99 was within its limit had one later "
                                f"than {self.limits.fault_late_s * 1e3:.3g} ms)")

    def add_fault_lateness(self, late: list[tuple[str, str, float]]) -> None:
        """Judge how long after it was due each fault took effect ((what, target, seconds) each):
        a link set down waits for the kernel's own threads, which an emulation that keeps every
        CPU busy at real-time priority starves (measured: 235-290 ms, against 6-30 ms)."""
        self.measured["faults_late_ms"] = [[what, where, round(s * 1e3, 2)] for what, where, s in late]
        for what, where, seconds in late:
            if seconds > self.limits.fault_late_s:
                self.reasons.append(f"{where}: {what} took effect {seconds * 1e3:.3g} ms after it was due "
                                    f"(limit {self.limits.fault_late_s * 1e3:.3g} ms)")

    def add_start_lateness(self, late: dict[str, float | None]) -> None:
        """Judge how long after the common start each agent began its workload (seconds by agent
        name; 0 for one that was up before it and waited). A collective waits for its last member,
        so one late agent shifts everything the record times from the start (completion, goodput,
        faults due at a time, the horizon) by that much: the machine's doing (agents launched over
        ssh on a busy machine came up seconds late, and the all-reduce lost that much of its
        horizon), judged like a fault's lateness. One reason, naming the last agent; and one naming
        the agents that never began (None: no begin record)."""
        self.measured["starts_late_ms"] = {name: None if s is None else round(s * 1e3, 1)
                                           for name, s in sorted(late.items())}
        never = sorted(name for name, s in late.items() if s is None)
        if never:
            self.reasons.append(f"{never[0]}: never began its workload (no begin record in its log"
                                + (f"; neither did {', '.join(never[1:])})" if len(never) > 1 else ")"))
        over = {name: s for name, s in late.items() if s is not None and s > self.limits.fault_late_s}
        if over:
            name = max(over, key=lambda n: (over[n], n))
            self.reasons.append(f"{name}: began its workload {_seconds(over[name])} after the common start "
                                f"({len(over)} of {len(late)} agents late; limit "
                                f"{self.limits.fault_late_s * 1e3:.3g} ms)")

    def add_queue_service(self, service: dict[str, dict[int, dict]]) -> None:
        """Judge how each switch's rate-limited queues were served while backlogged too
        (`refswitch` EgressQueue.service() per switch and port)."""
        self.measured["queue_service"] = {name: {str(port): q for port, q in ports.items()}
                                          for name, ports in service.items()}
        for name, ports in sorted(service.items()):
            for port, q in sorted(ports.items()):
                busy, lost = q.get("busy_s", 0.0), q.get("lost_s", 0.0)
                served = busy / (busy + lost) if busy + lost else 1.0
                if busy + lost >= QUEUE_MIN_BUSY_S and served < QUEUE_SERVED_LIMIT:
                    rate = q.get("rate_bps") or 0
                    self.reasons.append(f"{name} port {port}: queue served at {served:.0%} of its "
                                        f"{rate / 1e6:g} Mbit/s while backlogged ({lost * 1e3:.0f} ms "
                                        f"behind over {busy + lost:.2f} s)")

    def as_dict(self) -> dict:
        return {"verdict": self.label, "reasons": [self.where(reason) for reason in self.reasons],
                "measured": self.measured, "spans": [list(span) for span in self.spans]}

    def where(self, reason: str) -> str:
        """`reason` naming the server(s) of the nodes it is about, on a run over several servers:
        "s1->s3: ..." becomes "s1->s3 (servers A, B): ..." (a reason of a server's watch names it already)."""
        who, sep, rest = reason.partition(": ")
        if not self.servers or not sep or who.startswith("server "):
            return reason
        names = [part.split(" ")[0] for part in re.split(r"->|-", who)]
        found = list(dict.fromkeys(self.servers[n] for n in names if n in self.servers))
        if not found:
            return reason
        return f"{who} ({'server' if len(found) == 1 else 'servers'} {', '.join(found)}): {rest}"


def judge(cpu: CpuWatch, losses: list[LinkLoss], origin: float = 0.0,
          limits: VerdictLimits = VerdictLimits()) -> Verdict:
    """The verdict of a run from its CPU watch and its link losses; its distorted spans in seconds
    since `origin` (a wall-clock time, e.g. the start of the workload)."""
    verdict = judge_measures(cpu.processes(), cpu.machine(), cpu.load_peak, losses, cpus=cpu.cpus, limits=limits)
    verdict.spans = [(round(s.start - origin, 3), round(s.end - origin, 3), f"{s.who}: {s.why}")
                     for s in cpu.distorted_spans(limits.sched_wait_s)]
    return verdict


def judge_measures(processes: dict[str, CpuShare], machine: CpuShare, load_peak: float,
                   losses: list[LinkLoss], cpus: int | None = None,
                   limits: VerdictLimits = VerdictLimits()) -> Verdict:
    """The verdict of a run from what was measured: each process's CPU, the machine's, link losses."""
    verdict = Verdict(limits=limits)
    cores = cpus or os.cpu_count() or 1
    verdict.measured = {"machine_cpu": machine.as_dict(), "cpus": cores, "load_peak": round(load_peak, 2),
                        "processes": {n: s.as_dict() for n, s in processes.items()},
                        "link_loss": {x.link: [x.sent, x.received] for x in losses if x.sent}}
    for name, share in sorted(processes.items(), key=lambda item: (-item[1].peak, item[0])):
        why = []
        if share.peak > PROCESS_CPU_LIMIT:
            why.append(f"CPU {share.peak:.0%} of a core at its busiest (mean {share.mean:.0%})")
        if share.wait_peak_s > limits.sched_wait_s:
            why.append(f"waited {share.wait_peak_s * 1e3:.2g} ms for a CPU per wake-up at worst "
                       f"(mean {share.wait_mean_s * 1e3:.2g} ms)")
        if why:
            verdict.reasons.append(f"{name}: {', '.join(why)}")
    for loss in losses:
        if loss.lost >= LINK_LOSS_MIN_PACKETS and loss.share > LINK_LOSS_LIMIT:
            verdict.reasons.append(f"{loss.link}: {loss.share:.1%} of packets lost before the pipeline "
                                   f"({loss.lost} of {loss.sent})")
    if verdict.reasons and machine.peak > MACHINE_CPU_LIMIT:     # context: why the processes waited
        verdict.reasons.append(f"machine: CPU {machine.peak:.0%} busy at its busiest on {cores} cores "
                               f"(load average up to {load_peak:.1f})")
    return verdict


def _packet_bytes(given: int | None) -> int:
    """A full data packet on the wire (the transport's default payload) unless `given`."""
    if given is not None:
        return given
    from host_agent.transport.config import TransportConfig
    from wire.packets import DATA_OVERHEAD
    return TransportConfig().mtu_payload + DATA_OVERHEAD


class FidelityMonitor:
    """The fidelity of one running `TestbedNetwork`: its switch processes watched from `start()`,
    with any other process added by `watch` (agents); on a network spread over servers, each
    server's processes and CPUs by a watch of that server (`net.server_watches`), every reason of
    which names its server; `verdict()` judges what it saw so far."""

    def __init__(self, net, sample_s: float = SAMPLE_S, packet_bytes: int | None = None) -> None:
        self.net = net
        self.cpu = CpuWatch(sample_s)
        self.servers: dict[str, CpuWatch] = {}          # server address -> the watch of that server
        self.limits = VerdictLimits.for_packet_time(_packet_bytes(packet_bytes) * 8 / net.topology.host_rate_bps())

    def start(self, delay_s: float = 0.0) -> "FidelityMonitor":
        """Watch from now on, or from `delay_s` seconds on (once the workload starts). Switches on
        other servers (testbed.cluster) are not this machine's processes: their server's watch
        samples them there."""
        for name, pid in self.net.switch_pids().items():
            if not self.net.is_remote(name):
                self.cpu.watch(name, pid)
        self.servers = self.net.server_watches(self.cpu.sample_s)
        for watch in self.servers.values():
            watch.start(delay_s)
        self.cpu.start(delay_s)
        return self

    def watch(self, name: str, pid: int) -> None:
        self.cpu.watch(name, pid)

    def stop(self) -> None:
        self.cpu.stop()
        for watch in self.servers.values():
            watch.stop()

    def verdict(self, skip: set[str] = frozenset(), packets: tuple[dict, dict] | None = None,
                origin: float = 0.0) -> Verdict:
        """The verdict so far. `packets` = (tx, rx) per switch and port, when the caller has read the
        counters already; otherwise every live switch's counters are read now. Links of nodes in
        `skip` (faulted on purpose) are not judged. Distorted spans are timed from `origin` (wall clock)."""
        tx, rx = packets if packets is not None else self._packets()
        verdict = judge(self.cpu, link_losses(self.net.topology, tx, rx, skip), origin, self.limits)
        verdict.servers = self.net.node_servers()
        for address, watch in sorted(self.servers.items()):
            one = judge(watch, [], origin, self.limits)
            verdict.reasons += [f"server {address}: {reason}" for reason in one.reasons]
            verdict.spans += [(start, end, f"server {address}: {who}") for start, end, who in one.spans]
            verdict.measured.setdefault("servers", {})[address] = one.measured
            if not one.measured["processes"]:
                verdict.watched = False       # "unknown": that server's processes were not sampled
                verdict.reasons.append(f"server {address}: no sample of its processes came back")
        return verdict

    def _packets(self) -> tuple[dict, dict]:
        tx, rx = {}, {}
        for name in self.net.switch_pids():
            counters = self.net.counters(name)
            tx[name] = {port: v.packets for port, v in counters.get(TX, {}).items()}
            rx[name] = {port: v.packets for port, v in counters.get(RX, {}).items()}
        return tx, rx
