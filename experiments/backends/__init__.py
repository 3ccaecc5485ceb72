"""Backends run one case of a scenario and return its `CaseRecord`.

- `netsim`: the in-process, deterministic network (netsim/) driving the sans-IO transport and the
  collectives directly; fast, needs nothing, used by the tests.
- `htsim`: uet-htsim's `htsim_uec`, built by the user (PATH or $HTSIM_UEC), given the case's
  topology, flows and settings as its input files (experiments/backends/htsim/); MRC maps to its
  UEC transport, and what cannot be mapped is refused.
- `mininet`: the real testbed (testbed/network.py): Mininet hosts running host_agent/agent.py,
  switches on the model or BMv2 target, faults applied to the live network.

Every backend offers the same small interface::

    backend = make_backend("netsim")            # or "mininet", target="model"|"bmv2", pcap=PcapCapture()
    record = backend.run_case(case, progress)   # progress(fraction 0..1) while it runs
"""
from __future__ import annotations

import importlib.util
import os
import shutil
from typing import Callable, Optional, Protocol

from experiments.record import CaseRecord
from experiments.scenario import Case

BACKENDS = ("netsim", "mininet", "htsim")
TARGETS = ("model", "bmv2")

# What a backend's records hold no measurement of (their fields there are placeholders), by name
# (experiments.metrics.NOT_MEASURED_FIGURES): the summaries leave these figures None and the tables
# show "-". htsim_uec prints each flow's completion and totals (its own retransmission count among
# them): no goodput over time (so no mean goodput, recovery or gap), no retransmission by cause,
# no payload or messages to check, no EVs, no switch counters (link utilisation, trims, drops).
NOT_MEASURED = {
    "htsim": ("goodput", "retransmission causes", "bit_exact", "evs", "switch counters"),
}


class Backend(Protocol):
    """Runs cases."""

    name: str

    def run_case(self, case: Case, progress: Callable[[float], None]) -> CaseRecord:
        """Run one case to completion (or its horizon) and return what was measured."""


def mininet_unavailable() -> Optional[str]:
    """Why the mininet backend cannot run here, or None when it can."""
    reasons = []
    if os.geteuid() != 0:
        reasons.append("root")
    if not shutil.which("mnexec"):
        reasons.append("mnexec on PATH (Debian package mininet)")
    for module in ("mininet", "testbed.network", "host_agent.agent"):
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:
            found = False
        if not found:
            reasons.append(f"the module {module}")
    return "the mininet backend needs " + ", ".join(reasons) if reasons else None


def default_backend() -> tuple[str, Optional[str]]:
    """("mininet", None) where the real testbed can run, else ("netsim", why not)."""
    why = mininet_unavailable()
    return ("netsim", why) if why else ("mininet", None)


def make_backend(name: str, target: str = "model", pcap=None, link_rate=None, cluster=None,
                 balancer: Optional[str] = None, keep=None) -> Backend:
    """The backend called `name` ("netsim" or "mininet"; `target`, `pcap`, a
    testbed.capture.PcapCapture capturing every switch port, `link_rate`, an
    experiments.calibration.LinkRate, and `cluster`, the path of a cluster file whose servers run
    each case's network, only for mininet; `balancer`, htsim_uec's load balancer, and `keep`, a folder
    keeping each case's htsim_uec inputs, command and output, only for htsim)."""
    if name == "htsim":
        if pcap is not None or cluster is not None:
            raise ValueError("--pcap and --cluster are for the mininet backend; htsim_uec runs here, on its own")
        from experiments.backends.htsim import HtsimBackend
        return HtsimBackend(**({"balancer": balancer} if balancer else {}), keep=keep)
    if name == "netsim":
        if cluster is not None:
            raise ValueError("a cluster file spreads the mininet backend's networks; netsim cases go to "
                             "servers through experiments.parallel (run --cluster does that)")
        if pcap is not None:
            raise ValueError("--pcap captures the switch ports of the mininet backend: "
                             "netsim has no ports to capture (add --backend mininet)")
        from experiments.backends.netsim_backend import NetsimBackend
        return NetsimBackend()
    if name == "mininet":
        if target not in TARGETS:
            raise ValueError(f"--target {target!r}: expected one of {', '.join(TARGETS)}")
        why = mininet_unavailable()
        if why:
            raise RuntimeError(why)
        from testbed.nodes import target_unavailable
        why = target_unavailable(target)
        if why:
            raise RuntimeError(why)
        from experiments.backends.mininet_backend import MininetBackend
        return MininetBackend(target, pcap=pcap, link_rate=link_rate, cluster=cluster)
    raise ValueError(f"--backend {name!r}: expected one of {', '.join(BACKENDS)}")
