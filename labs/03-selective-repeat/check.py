"""Checks of lab 3: the student's SackProcessor (sack.py, class SelectiveRepeat) on netsim.

Every run sends h1 -> h2 over a one-plane leaf-spine with two spines (MRC sprays over both),
with a random loss of data at the receiver's last hop (leaf s2's port to h2). The path monitor
is held still (a timeout retires no EV; lab 4 is about that), and the sender's own loss detection
from SACKs (`sack_loss_detection`) is off, fixed by the checker (the student's class gets a copy of
the configuration and a read-only view of the window), so every retransmission is the SACK
processor's or a timer's; the checks count the packets the student's `lost` itself declared.
The class must not be, derive from or call MRC's own SACK processing or loss detection.
Runs are deterministic: the loss pattern is the simulator's seed.
"""
from __future__ import annotations

import dataclasses

from host_agent.transport import Policies, lossdetect
from host_agent.transport.policies import MrcPathMonitor, MrcSackProcessor
from labs import transfers
from labs.checking import Check, CheckFailed, StudentRuns
from labs.originality import ReferenceWatch, methods_of, require_own

FILE, CLASS = "sack.py", "SelectiveRepeat"
SEED = 7
MB = 1_000_000
GOODPUT_MARGIN = 1.10          # at 1 % loss, selective repeat beats go-back-N by at least 10 %
SACK_SHARE = 0.9               # share of the retransmissions the student's own declarations must account for
# the transport settings of every run, fixed here: MRC's own loss detection from SACKs would repair
# the losses itself, and the student's class gets a copy of the configuration, never this one
FIXED = {"sack_loss_detection": False}
# MRC's own SACK processing and loss detection: the student's class must not be, derive from or call them
REFERENCE_CLASSES = (MrcSackProcessor, lossdetect.ReorderLossDetector)
RUNS = StudentRuns(FILE)       # each run of the student's class, once per state of the file


class HeldPathMonitor(MrcPathMonitor):
    """MRC's path monitor, except that a timeout blames no path."""

    def on_timeout(self, evset, timeout, now):
        return []


@dataclasses.dataclass(frozen=True)
class SentView:
    """What the student's code may see of one packet (policies.SentPacket), read-only."""

    seq: int
    sent_at: float
    transmissions: int
    in_flight: bool
    acked: bool


class WindowView:
    """The sender's window as policies.SendWindow, read-only: the student's code gets this, not the sender."""

    __slots__ = ("_segment", "cum_acked", "next_seq")

    def __init__(self, window) -> None:
        self._segment = window.segment
        self.cum_acked, self.next_seq = window.cum_acked, window.next_seq

    def segment(self, seq):
        seg = self._segment(seq)
        return None if seg is None else SentView(seg.seq, seg.sent_at, seg.transmissions, seg.in_flight, seg.acked)


class DeclarationLog:
    """A SackProcessor between the sender and the student's: counts the packets the student's
    `lost` declared while they were in flight (what the sender resends for them)."""

    def __init__(self, student) -> None:
        self.student = student
        self.declared = 0              # sequence numbers declared lost while in flight
        self.bad_returns: list[str] = []

    def lost(self, cum, base, bitmap, window, now):
        answer = self.student.lost(cum, base, bitmap, WindowView(window), now)
        try:
            seqs = [int(s) for s in (answer or ())]
        except (TypeError, ValueError):
            self.bad_returns.append(repr(answer)[:80])
            return ()
        for seq in set(seqs):
            seg = window.segment(seq)
            if seg is not None and seg.in_flight and not seg.acked:
                self.declared += 1
        return seqs


def student_class(ws):
    cls = getattr(ws.module(FILE), CLASS, None)
    if cls is None:
        raise CheckFailed(f"{FILE} defines no class {CLASS}")
    require_own(cls, [*REFERENCE_CLASSES, lossdetect], f"{FILE}'s {CLASS}")
    return cls


@dataclasses.dataclass
class Run:
    """One transfer: its flow, the data the fault dropped, and the student's declarations."""

    flow: object
    dropped: int
    declared: int = 0


def run(ws, loss: float, size: int = MB, seed: int = SEED, mode: str = "mrc") -> Run:
    """One transfer with the student's class (mode "mrc") or go-back-N ("roce"), run once per file state."""
    def make():
        net = transfers.fabric(seed)
        net.switches["s2"].set_fault(net.port("s2", "h2"), drop_prob=loss)
        cfg = transfers.config(mode, **FIXED)
        settings = dataclasses.asdict(cfg)
        logs: list[DeclarationLog] = []
        if mode != "mrc":
            outcome = transfers.run_flows(net, [transfers.Flow("h1", "h2", size)], cfg, None, until=0.5)
            return Run(outcome.flows[0], net.switches["s2"].counters["fault_drops_data"])
        cls = student_class(ws)
        with ReferenceWatch([m for c in REFERENCE_CLASSES for m in methods_of(c)]) as watch:
            def sack(config):
                log = DeclarationLog(watch.student(watch.call(cls, dataclasses.replace(config))))
                logs.append(log)
                return log
            outcome = transfers.run_flows(net, [transfers.Flow("h1", "h2", size)], cfg,
                                          Policies(sack=sack, path_monitor=HeldPathMonitor), until=0.5)
        watch.verify(f"{FILE}'s {CLASS}")
        if dataclasses.asdict(cfg) != settings:
            raise CheckFailed("the transport's settings changed during the run: the checker fixes them "
                              f"({', '.join(f'{k}={v}' for k, v in FIXED.items())}, ...)")
        bad = [b for log in logs for b in log.bad_returns]
        if bad:
            raise CheckFailed(f"{CLASS}.lost must return a list of ints (sequence numbers), not {bad[0]}")
        return Run(outcome.flows[0], net.switches["s2"].counters["fault_drops_data"],
                   sum(log.declared for log in logs))
    return RUNS.get(ws, (loss, size, seed, mode), make)


def exactly_once(ws) -> str:
    seen = []
    for loss in (0.0, 0.01, 0.2):
        r = run(ws, loss)
        flow, dropped = r.flow, r.dropped
        if not flow.exactly_once:
            raise CheckFailed(f"at {loss:.0%} loss: {flow.delivered} of {flow.messages} messages delivered "
                              f"intact, {flow.corrupted} corrupted, {flow.duplicates} twice, "
                              f"{flow.acked} acknowledged to the sender")
        seen.append(f"{loss:.0%}: {dropped} lost, {flow.sender.stats['retransmitted']} resent")
    return "1 MB delivered exactly once, bit exact (" + "; ".join(seen) + ")"


def no_spurious(ws) -> str:
    seen = []
    for loss in (0.01, 0.2):
        r = run(ws, loss)
        flow, dropped = r.flow, r.dropped
        duplicates = flow.receiver.stats["duplicates"]
        resent = flow.sender.stats["retransmitted"]
        if duplicates > 1 + dropped // 50:
            raise CheckFailed(f"at {loss:.0%} loss the network dropped {dropped} data packets, the sender "
                              f"resent {resent}, and {duplicates} of them reached the receiver a second time")
        seen.append(f"{loss:.0%}: {resent} resent for {dropped} lost, {duplicates} duplicates")
    return "; ".join(seen)


def sack_recovers(ws) -> str:
    seen = []
    for loss in (0.01, 0.2):
        r = run(ws, loss)
        stats = r.flow.sender.stats
        resent = stats["retransmitted"]
        if resent and r.declared < SACK_SHARE * resent:
            raise CheckFailed(f"at {loss:.0%} loss your {CLASS}.lost declared {r.declared} packets lost, and the "
                              f"sender resent {resent} ({stats['retx_timeout']} after waiting for a timeout): "
                              "most losses waited for a timer", expected=f">= {SACK_SHARE:.0%} of {resent}")
        seen.append(f"{loss:.0%}: {r.declared} of {resent} declared lost by your SACK processing")
    return "; ".join(seen)


def beats_go_back_n(ws) -> str:
    ours = run(ws, 0.01, size=2 * MB, seed=1).flow
    theirs = run(ws, 0.01, size=2 * MB, seed=1, mode="roce").flow
    if not ours.exactly_once:
        raise CheckFailed("the 2 MB transfer at 1 % loss did not complete exactly once")
    ratio = ours.goodput_bps / theirs.goodput_bps
    detail = (f"2 MB at 1 % loss: {ours.goodput_bps / 1e9:.2f} Gbit/s against go-back-N's "
              f"{theirs.goodput_bps / 1e9:.2f} Gbit/s ({ratio:.2f}x)")
    if ratio < GOODPUT_MARGIN:
        raise CheckFailed(f"{detail}; expected at least {GOODPUT_MARGIN:.2f}x")
    return detail


CHECKS = [
    Check("exactly once at 0, 1 and 20 % loss",
          "the cumulative PSN covers every number below it and bit i of the bitmap covers base + i; "
          "a number either covers is not a hole, and only packets still in flight can be resent",
          exactly_once, points=1),
    Check("no spurious retransmissions",
          "spraying reorders packets: a hole in the bitmap may be a packet still on a slower path; "
          "what evidence says a packet is really gone, and not merely late?",
          no_spurious, points=3),
    Check("losses repaired by SACK, not by timers",
          "a timer fires only after an RTO; the SACKs that come back after a loss already show the hole "
          "about one RTT after it",
          sack_recovers, points=3),
    Check("goodput beats go-back-N at 1 % loss",
          "go-back-N resends everything after a loss; selective repeat resends only what is missing",
          beats_go_back_n, points=3),
]
