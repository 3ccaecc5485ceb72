"""Checks of lab 3: the student's SackProcessor (sack.py, class SelectiveRepeat) on netsim.

Every run sends h1 -> h2 over a one-plane leaf-spine with two spines (MRC sprays over both),
with a random loss of data at the receiver's last hop (leaf s2's port to h2). The path monitor
is held still (a timeout retires no EV; lab 4 is about that), and the sender's own loss detection
from SACKs (`sack_loss_detection`) is off, so every retransmission is the SACK processor's or a timer's. Runs are deterministic: the loss pattern is the simulator's seed.
"""
from __future__ import annotations

from host_agent.transport import Policies
from host_agent.transport.policies import MrcPathMonitor
from labs import transfers
from labs.checking import Check, CheckFailed

FILE, CLASS = "sack.py", "SelectiveRepeat"
SEED = 7
MB = 1_000_000
GOODPUT_MARGIN = 1.10          # at 1 % loss, selective repeat beats go-back-N by at least 10 %
SACK_SHARE = 0.9               # share of the retransmissions a SACK must have asked for
OWN_DETECTION_OFF = {"sack_loss_detection": False}   # MRC's built-in rule would repair the losses itself
_runs: dict = {}               # (folder, file state, scenario) -> (flow outcome, packets dropped)


class HeldPathMonitor(MrcPathMonitor):
    """MRC's path monitor, except that a timeout blames no path."""

    def on_timeout(self, evset, timeout, now):
        return []


def student_class(ws):
    cls = getattr(ws.module(FILE), CLASS, None)
    if cls is None:
        raise CheckFailed(f"{FILE} defines no class {CLASS}")
    return cls


def run(ws, loss: float, size: int = MB, seed: int = SEED, mode: str = "mrc"):
    """(flow outcome, data packets the fault dropped) of one transfer, run once per file state."""
    path = ws.path(FILE)
    key = (str(ws.folder.resolve()), path.stat().st_mtime_ns, path.stat().st_size, loss, size, seed, mode)

    def make():
        net = transfers.fabric(seed)
        net.switches["s2"].set_fault(net.port("s2", "h2"), drop_prob=loss)
        policies = (Policies(sack=student_class(ws), path_monitor=HeldPathMonitor) if mode == "mrc"
                    else None)
        outcome = transfers.run_flows(net, [transfers.Flow("h1", "h2", size)], transfers.config(mode, **OWN_DETECTION_OFF),
                                      policies, until=0.5)
        return outcome.flows[0], net.switches["s2"].counters["fault_drops_data"]
    return _remember(key, make)


def _remember(key: tuple, make):
    """The result of `make()` for `key` (folder, file state, scenario), made once; a class's runs are
    kept only for the folder being checked."""
    if key not in _runs:
        for old in [k for k in _runs if k[0] != key[0]]:
            del _runs[old]
        _runs[key] = make()
    return _runs[key]


def exactly_once(ws) -> str:
    seen = []
    for loss in (0.0, 0.01, 0.2):
        flow, dropped = run(ws, loss)
        if not flow.exactly_once:
            raise CheckFailed(f"at {loss:.0%} loss: {flow.delivered} of {flow.messages} messages delivered "
                              f"intact, {flow.corrupted} corrupted, {flow.duplicates} twice, "
                              f"{flow.acked} acknowledged to the sender")
        seen.append(f"{loss:.0%}: {dropped} lost, {flow.sender.stats['retransmitted']} resent")
    return "1 MB delivered exactly once, bit exact (" + "; ".join(seen) + ")"


def no_spurious(ws) -> str:
    seen = []
    for loss in (0.01, 0.2):
        flow, dropped = run(ws, loss)
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
        flow, dropped = run(ws, loss)
        stats = flow.sender.stats
        by_sack, resent = stats["retx_sack"], stats["retransmitted"]
        if resent and by_sack < SACK_SHARE * resent:
            raise CheckFailed(f"at {loss:.0%} loss only {by_sack} of {resent} retransmissions came from SACKs "
                              f"({stats['retx_timeout']} waited for a timeout)")
        seen.append(f"{loss:.0%}: {by_sack} of {resent} by SACK")
    return "; ".join(seen)


def beats_go_back_n(ws) -> str:
    ours, _ = run(ws, 0.01, size=2 * MB, seed=1)
    theirs, _ = run(ws, 0.01, size=2 * MB, seed=1, mode="roce")
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
          exactly_once),
    Check("no spurious retransmissions",
          "spraying reorders packets: a hole in the bitmap may be a packet still on a slower path; "
          "what evidence says a packet is really gone, and not merely late?",
          no_spurious),
    Check("losses repaired by SACK, not by timers",
          "a timer fires only after an RTO; the SACKs that come back after a loss already show the hole "
          "about one RTT after it",
          sack_recovers),
    Check("goodput beats go-back-N at 1 % loss",
          "go-back-N resends everything after a loss; selective repeat resends only what is missing",
          beats_go_back_n),
]
