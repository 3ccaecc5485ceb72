"""Whether a case's result means what its table row says: where its faults landed, how it ended.

**Where a fault landed.** Every fault action is recorded with the share of the workload's bytes
delivered when it began to take effect (`FaultEvent.fraction`, at its first change: a blackhole
installs an entry per port, one at a time): netsim knows it exactly at that instant; the Mininet
backend fills it in afterwards from the agents' goodput records, which carry their own times, with
`fill_landing`. A fault's earliest action is where it landed. A case is **invalid** when
a planned fault

- took effect after the workload had ended, or after its last byte had arrived (it touched
  nothing of it),
- never took effect although the workload completed (it was due after the end), or
- landed more than LANDING_TOLERANCE (10 points) of the workload's bytes away from the share it
  was planned at ("at: 30%");

its result then says nothing about the fault, whatever the rest of the row says. A fault that never
took effect because the workload stopped short of its share (stuck or cut earlier) does not make
the case invalid: the case's own ending says what happened.

**How a case ended.** A case that did not complete was either **cut at its horizon** while data was
still being delivered (a new byte within `still_delivering_s` of the end: 5 % of the run or 10
sample intervals), or **stuck** (nothing new for longer): only that reads "never".
"""
from __future__ import annotations

from typing import Optional

from experiments.record import CaseRecord, FaultEvent

LANDING_TOLERANCE = 0.10        # a fault may land this far (share of the bytes) from its planned share
STILL_DELIVERING_SHARE = 0.05   # a case that delivered within this share of its run before its end,
STILL_DELIVERING_SAMPLES = 10   # or within this many sample intervals, was still delivering

COMPLETED, CUT, STUCK = "completed", "cut at horizon", "stuck"


def expected_bytes(record: CaseRecord) -> int:
    """Payload bytes the whole workload carries."""
    return sum(f.expected_bytes for f in record.flows)


def delivered_fraction(record: CaseRecord) -> Optional[float]:
    """Share of the workload's bytes delivered by the end of the run (None: no flows, or a flow's
    bytes not measured)."""
    total = expected_bytes(record)
    if total <= 0 or any(f.received_bytes is None for f in record.flows):
        return None
    return min(1.0, sum(min(f.received_bytes, f.expected_bytes) for f in record.flows) / total)


def delivered_at(record: CaseRecord, t: float) -> Optional[float]:
    """Share of the workload's bytes delivered by `t` (seconds into the workload), from the
    record's cumulative samples, linear between two samples (None: no samples or no flows)."""
    total = expected_bytes(record)
    if total <= 0 or not record.samples:
        return None
    caps = [f.expected_bytes for f in record.flows]

    def share(per_flow) -> float:
        return sum(min(b, cap) for b, cap in zip(per_flow, caps)) / total

    prev_t, prev = None, 0.0
    for ts, per_flow in record.samples:
        now = share(per_flow)
        if ts >= t:
            if prev_t is None or ts <= prev_t:
                return min(1.0, now)
            return min(1.0, prev + (now - prev) * (t - prev_t) / (ts - prev_t))
        prev_t, prev = ts, now
    return min(1.0, prev)


def began(event: FaultEvent) -> float:
    """When a fault event's first change took effect (its `t` when not known)."""
    return event.t if event.began is None else event.began


def fill_landing(record: CaseRecord) -> None:
    """Give every fault event whose delivered share is not known yet the share when it began."""
    for event in record.faults:
        if event.fraction is None:
            event.fraction = delivered_at(record, began(event))


def landings(record: CaseRecord) -> dict[int, FaultEvent]:
    """The earliest event of each planned fault (by its index in `planned_faults`)."""
    first: dict[int, FaultEvent] = {}
    for event in record.faults:
        if event.fault is not None and (event.fault not in first or began(event) < began(first[event.fault])):
            first[event.fault] = event
    return first


def _share(value: Optional[float]) -> str:
    return "?" if value is None else f"{value:.0%}"


def misses(record: CaseRecord) -> list[tuple[str, str]]:
    """(reason, short reason) for every planned fault that missed the workload (none: valid)."""
    out = []
    landed = landings(record)
    end = record.completion_time if record.completed else None
    for index, plan in enumerate(record.planned_faults):
        event = landed.get(index)
        if event is None:
            if end is not None:
                out.append((f"{plan.label}: never took effect: the workload ended at {end:.3g} s, before it",
                            "a fault never took effect"))
            continue
        where = f"at {began(event):.3g} s, {_share(event.fraction)} of the bytes delivered"
        if end is not None and began(event) > end:
            out.append((f"{plan.label}: took effect after the workload ended ({where}; "
                        f"the workload ended at {end:.3g} s)", "a fault came after the workload ended"))
        elif event.fraction is not None and event.fraction >= 1.0:
            out.append((f"{plan.label}: took effect after the workload's last byte had arrived ({where})",
                        "a fault came after the last byte"))
        elif (plan.fraction is not None and event.fraction is not None
              and abs(event.fraction - plan.fraction) > LANDING_TOLERANCE + 1e-9):
            off = abs(event.fraction - plan.fraction) * 100
            out.append((f"{plan.label}: took effect {where}, {off:.0f} points from the planned "
                        f"{plan.fraction:.0%} (at most {LANDING_TOLERANCE * 100:.0f})",
                        f"a fault landed at {_share(event.fraction)}, planned {plan.fraction:.0%}"))
    return out


def invalid_reasons(record: CaseRecord) -> list[str]:
    """Why the case is invalid, one line per fault that missed the workload (none: valid)."""
    return [reason for reason, _ in misses(record)]


def outcome_label(record: CaseRecord) -> str:
    """A few words on how the case ended and whether it is invalid, for a legend ('' when it
    completed and is valid): 'cut at horizon: 92 % delivered', 'INVALID: ...'."""
    words = []
    if not record.completed:
        share = delivered_fraction(record)
        got = "" if share is None else f" {int(share * 100)} %"
        words.append(f"cut at horizon:{got} delivered" if ending(record) == CUT else f"never: stuck at{got}")
    words += [f"INVALID: {short}" for _, short in misses(record)[:1]]
    return "; ".join(words)


def landing_list(record: CaseRecord) -> list[dict]:
    """Each planned fault with where it landed (JSON-ready; `t` and `fraction` None: never)."""
    landed = landings(record)
    out = []
    for index, plan in enumerate(record.planned_faults):
        event = landed.get(index)
        out.append({"fault": plan.label, "planned_fraction": plan.fraction, "planned_s": plan.seconds,
                    "t": None if event is None else began(event),
                    "complete_t": None if event is None else event.t,
                    "fraction": None if event is None else event.fraction})
    return out


def still_delivering_s(record: CaseRecord) -> float:
    """How recent a case's last delivery must be for it to count as still delivering at its end: 5 %
    of the run (0.2 s of a 4 s horizon, 2.5 ms of a data-center case's 50 ms) or 10 sample
    intervals, whichever is longer."""
    return max(STILL_DELIVERING_SHARE * (record.end - record.start), STILL_DELIVERING_SAMPLES * record.sample_interval)


def last_delivery(record: CaseRecord) -> Optional[float]:
    """When the last new byte arrived (seconds into the workload), None when none did: from the
    receivers' delivery times when the record has them, else the end of the last sample interval
    that brought bytes."""
    if record.deliveries:
        return max(last for _, last in record.deliveries)
    latest, before = None, 0
    for t, per_flow in record.samples:
        total = sum(per_flow)
        if total > before:
            latest = t
        before = max(before, total)
    return latest


def ending(record: CaseRecord) -> str:
    """COMPLETED, CUT (did not complete, still delivering at the end) or STUCK. A run whose
    deliveries were not measured (a flow's `received_bytes` None: htsim_uec) and that ran to its
    horizon was cut by it: nothing says it was stuck."""
    if record.completed:
        return COMPLETED
    if any(f.received_bytes is None for f in record.flows) and record.end >= record.horizon:
        return CUT
    last = last_delivery(record)
    if last is not None and record.end - last <= still_delivering_s(record) + 1e-9:
        return CUT
    return STUCK
