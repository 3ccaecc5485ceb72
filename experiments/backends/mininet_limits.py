"""What the Mininet backend can honour of a case, and how finely it can measure one.

`check_mininet` refuses the scenario keys Mininet cannot run (a cable delay, a repaired switch,
data frames larger than a veth carries); agents record goodput at most every AGENT_SAMPLE_MIN_S
(`agent_sample_interval`), and the time-to-recover metric averages over at least
RECOVERY_WINDOW_MESSAGES messages (`recovery_window`).
"""
from __future__ import annotations

from experiments.metrics import RECOVERY_WINDOW_S
from experiments.scenario import Case
from experiments.transport_sizing import mtu_payload
from topologies.model import Topology

MININET_FRAME_MAX = 1500 + 14   # bytes of an Ethernet frame a veth carries (MTU 1500)
AGENT_SAMPLE_MIN_S = 0.005      # agents on Mininet record goodput at most this often
RECOVERY_WINDOW_MESSAGES = 2    # messages a recovery window holds at least on Mininet


def check_mininet(case: Case) -> None:
    """Raise ScenarioError naming the first scenario key of `case` the Mininet backend cannot honour."""
    from experiments.scenario import ScenarioError
    from wire.packets import DATA_OVERHEAD
    path = case.scenario.path
    if case.variant.delay_s is not None:
        raise ScenarioError(path, "link.delay_s", f"{case.variant.delay_s:g} s: Mininet's links are veth pairs "
                            f"whose delay is the machine's, not set per cable; run it with the netsim backend")
    for i, fault in enumerate(case.variant.faults):
        if fault.kind == "switch_kill" and fault.repair_after_s is not None:
            raise ScenarioError(path, f"faults[{i}].repair_after_s", "a switch_kill fault is not repaired on the "
                                "mininet backend (a killed switch process is not restarted); run it with netsim")
    mtu = mtu_payload(case)
    if mtu + DATA_OVERHEAD > MININET_FRAME_MAX:
        raise ScenarioError(path, "link.mtu_payload", f"{mtu} bytes make data frames of {mtu + DATA_OVERHEAD} "
                            f"bytes, above the veth MTU ({MININET_FRAME_MAX}-byte frames): at most "
                            f"{MININET_FRAME_MAX - DATA_OVERHEAD} on Mininet")


def agent_sample_interval(case: Case) -> float:
    """How often agents on Mininet record goodput: the scenario's sample interval, but no more often
    than AGENT_SAMPLE_MIN_S (every record is a JSON line written by a process that shares the
    machine's CPUs with the switches)."""
    return max(case.scenario.sample_interval_s, AGENT_SAMPLE_MIN_S)


def recovery_window(case: Case, topo: Topology) -> float:
    """The averaging window of the time-to-recover metric on Mininet: metrics.RECOVERY_WINDOW_S,
    widened to RECOVERY_WINDOW_MESSAGES messages (`chunk_bytes`) at the hosts' rate. Goodput there
    is counted per packet and sampled every 5 ms, but a collective's goodput comes in bursts of its
    messages: over 8 packets (34 ms at 2 Mbit/s) the main experiment's MRC runs, whose goodput did
    not drop at all (6.5 Mbit/s the second before and after the kill), read as recovering in 58 ms
    and 2.2 s. Windows still slide by the 5 ms samples."""
    return max(RECOVERY_WINDOW_S, RECOVERY_WINDOW_MESSAGES * case.variant.workload.chunk_bytes * 8
               / topo.host_rate_bps())
