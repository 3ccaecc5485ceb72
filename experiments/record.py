"""What one case produced, as plain data: the raw material of metrics, plots and results.

A backend fills a `CaseRecord`; `metrics.summarise` reduces it to numbers; `results` writes it as
JSON lines. Times are seconds from the start of the workload.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional


@dataclass
class FlowRecord:
    """One directed stream of data between two hosts."""

    src: str
    dst: str
    expected_bytes: int            # payload the flow must carry
    role: str = "data"             # "data", "incast", "victim"
    received_bytes: Optional[int] = 0   # transport payload bytes received (first copies only; None: not
                                        # measured: htsim_uec says only when a flow finished)
    finish: Optional[float] = None  # when its last byte arrived (None: never)
    acked: Optional[float] = None   # when its sender had every byte acknowledged (None: not known)


@dataclass
class LinkRecord:
    """Counters of one switch-to-switch link direction."""

    name: str
    rate_bps: float
    tx_bytes: int
    dropped_queue: int = 0
    dropped_down: int = 0


@dataclass
class FaultEvent:
    """A fault action as it happened: when it had taken effect (`t`), when its first change did
    (`began`: an action of several changes, e.g. a blackhole's entry on every port, takes effect
    one change at a time), and the share of the workload's bytes delivered when it began
    (`fraction`; None until known). `fault` is the index of its fault in the record's
    `planned_faults` (None: not known); a fault's earliest event is where it landed."""

    t: float
    what: str
    target: str
    breaks: bool
    fraction: Optional[float] = None
    fault: Optional[int] = None
    began: Optional[float] = None


@dataclass
class FaultPlan:
    """A fault as the scenario planned it: what (`label`), and when: at `seconds` into the workload
    or when `fraction` of its bytes have arrived."""

    label: str
    seconds: Optional[float] = None
    fraction: Optional[float] = None


@dataclass
class CaseRecord:
    """Everything measured in one case (a variant with one transport)."""

    scenario: str
    variant: str
    transport: str
    mode: str
    backend: str
    seed: int
    topology: str
    hosts: int
    workload: str
    start: float = 0.0
    end: float = 0.0                       # when the run stopped (completion or horizon)
    horizon: float = 0.0
    completed: bool = False                # every flow / rank finished
    completion_time: Optional[float] = None
    bit_exact: Optional[bool] = False      # every byte the application got is the expected one (None: not measured)
    app_duplicates: int = 0                # messages handed to the application twice
    app_missing: Optional[int] = 0         # messages never handed to the application (None: not measured)
    sample_interval: float = 0.01
    recovery_window: float = 0.02          # averaging window of the time-to-recover metric (s)
    samples: list = field(default_factory=list)        # [t, [cumulative bytes per flow]]
    deliveries: list = field(default_factory=list)     # [first, last]: a receiver's first and last
    # delivery of new bytes within one of its sample intervals (s), when the backend knows them
    flows: list = field(default_factory=list)          # FlowRecord
    links: list = field(default_factory=list)          # LinkRecord (fabric links)
    faults: list = field(default_factory=list)         # FaultEvent
    planned_faults: list = field(default_factory=list)  # FaultPlan, in the scenario's order
    reroutes: list = field(default_factory=list)       # times the control plane reprogrammed routes
    ev_events: list = field(default_factory=list)      # ev_state / ev_backup events (dicts)
    transport_stats: dict = field(default_factory=dict)  # summed counters of every connection
    switch_stats: dict = field(default_factory=dict)     # summed switch counters
    fidelity: dict = field(default_factory=dict)         # verdict, reasons, measured (testbed/fidelity.py)
    base_rtt: Optional[float] = None       # the smallest data-packet RTT any host measured (s)
    repetition: int = 0                    # which run of its case (0-based; `run --repeat`)
    notes: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def failure_time(self) -> Optional[float]:
        """The first instant a fault made things worse (its first change), or None."""
        times = [f.t if f.began is None else f.began for f in self.faults if f.breaks]
        return min(times) if times else None
