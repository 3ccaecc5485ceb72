"""Numbers from one case's record: goodput over time, completion, recovery, losses, balance.

Definitions (the same for every backend):

- goodput: transport payload bytes received (first copies only) per sampling interval, in bit/s,
  summed over every flow of the case.
- completion time: from the start of the workload until every rank/flow finished (None: never,
  within the horizon).
- time to recover: from the first failure instant until goodput, averaged over a window (20 ms,
  `RECOVERY_WINDOW_S`, or the record's wider one), is back to 90 % of its average over the same
  window before the failure.
  None when it never is (or when there was no goodput before the failure to compare with). Only a
  dip below that mark and back is timed: goodput that never fell below it after the failure (at the
  samples' resolution, one sample interval) has no time but the note "no dip" (`recovery_note`),
  and so has a drop lasting to the end of the work that is the collective's own tail (a flow had
  finished when it began, and it kept delivering: no gap as long as the window); an averaging window longer than the failure to the end of the work the note "window longer
  than the run" (not measurable: each window would average the rest of the run). A
  failure that takes capacity away can keep a transport below that mark for good while it still
  delivers at what is left: the longest delivery gap tells those apart from a stall.
- longest delivery gap: the longest time, from the first failure until the work was done (or the
  run ended), during which no receiver got a new byte; a stall until a control plane reroutes shows
  up here. Where the record has its receivers' delivery times (`deliveries`: Mininet agents note
  the first and last receive of each sample interval that brought new bytes) a gap longer than a
  sample interval is measured to the packet; otherwise in whole sampling intervals.
- EVs retired: EV transitions to ASSUMED_BAD (each one, including EVs retired again after a probe
  reinstated them).
- retransmissions by cause: trim (trim NACK), timeout, nack (baseline go-back-N).
- per-flow throughput: a flow's payload bits over the time it took (or the whole run if it never
  finished); spread = max / min.
- link utilisation: bits sent on a switch-to-switch link direction over (rate x duration);
  imbalance = max / mean over the fabric's link directions.
- validity (`experiments.validity`): a case whose planned fault missed the workload (took effect
  after it ended, or more than 10 points of its bytes from its planned share) is "invalid", which
  replaces its fidelity verdict; each fault's landing (time, share delivered) is listed.
- ending: "completed", "cut at horizon" (not done, still delivering at the end) or "stuck" (what
  the table calls "never"), with the share of the bytes delivered. htsim: "cut at horizon" only
  means htsim_uec ran to its end unfinished (its deliveries are not measured).
- completion over ideal (`flows_over_ideal`): a flow's completion over its receiver's ideal, every
  byte into the receiver at a rate plus a latency no rate removes. A flow complete as its last byte
  arrives (`datacenter_seeds`, `ecn_ramp_sweep`): the receiver's own NIC rate (all its NICs
  together) plus the one-way propagation delay of the shortest path from its nearest sender, a
  lower bound on any topology: the last flow into a receiver cannot come in under 1 (a flow that
  shares its receiver can). A flow complete as its sender saw it acknowledged (`crosscheck`): the
  hosts' line rate plus the fabric's base RTT, the longest path's round trip, which is no bound
  (it exceeds one by 1.369 µs on datacenter.yaml's cases: `experiments.ideal_excess`).
- not measured: a figure the backend has no measurement of (it declares which:
  experiments.backends.NOT_MEASURED, or leaves the record's field None) is None in the summary, and
  "-" in the tables: never 0, "yes" or a recovery verdict (htsim: goodput and its mean, recovery,
  gaps, retransmission causes, payload and message checks, EVs, and the switch counters: link
  utilisation, trims, fault and queue drops). `retransmissions_total` is every
  retransmission counter the backend reported, summed (htsim_uec's own count where it has no causes).
- recovery without a baseline: a failure with no goodput in the window before it (a fault from
  the start) has nothing to recover to: `goodput_before_failure` False, and the tables say "n/a".
- base RTT: the smallest RTT of a full-size data packet that any host measured in the run. Times in
  RTTs (completion, recovery, longest gap) are the times over it, so that runs on a fast and a slow
  machine, or at different link rates, compare.
"""
from __future__ import annotations

from typing import Callable, Optional

from experiments import validity
from experiments.backends import NOT_MEASURED
from experiments.record import CaseRecord
from host_agent.transport.events import RETX_CAUSES

RECOVERY_FRACTION = 0.9
RECOVERY_WINDOW_S = 0.02
# The figures a backend may lack a measurement of (experiments.backends.NOT_MEASURED), and the
# summary fields each leaves None.
NOT_MEASURED_FIGURES = {
    "goodput": ("mean_goodput_bps", "time_to_recover_s", "time_to_recover_rtts", "longest_delivery_gap_s",
                "longest_delivery_gap_rtts", "goodput_before_failure"),
    "retransmission causes": ("retransmissions",),
    "bit_exact": ("bit_exact", "app_duplicates", "app_missing"),      # the payload and messages delivered
    "evs": ("evs_retired", "evs_reinstated", "ev_retirements"),
    "switch counters": ("link_utilisation", "packets_trimmed", "packets_dropped_by_faults",
                        "packets_dropped_queue_full"),
}


def goodput_series(record: CaseRecord, flows: Optional[list[int]] = None) -> tuple[list[float], list[float]]:
    """(bin end times, goodput in bit/s) over the run; `flows` picks flow indexes (default all)."""
    times, rates = [], []
    prev_t, prev_b = None, None
    for t, per_flow in record.samples:
        total = sum(per_flow[i] for i in flows) if flows is not None else sum(per_flow)
        if prev_t is not None and t > prev_t:
            times.append(t)
            rates.append((total - prev_b) * 8 / (t - prev_t))
        if prev_t is None or t > prev_t:
            prev_t, prev_b = t, total
    return times, rates


NO_DIP = "no dip"                                  # recovery notes (summary's `recovery_note`)
WINDOW_OVER_RUN = "window longer than the run"


def time_to_recover(record: CaseRecord, fraction: float = RECOVERY_FRACTION,
                    window: Optional[float] = None) -> Optional[float]:
    """Seconds from the first failure until goodput is back to `fraction` of before (None: never,
    or not measurable: `recovery_note` says why).

    Goodput is averaged over `window` (default: the record's `recovery_window`, 20 ms on netsim,
    at least two messages' worth on the mininet backend: experiments.backends.mininet_limits.recovery_window); windows
    slide by the record's samples.
    When goodput stays up for a while after the failure (messages already under way on other
    paths still arrive) and then drops, recovery is from that drop. A drop that lasts until the
    work is done is the collective's own tail, not the failure's, when a flow had finished as it
    began and no delivery gap in it is as long as the window; otherwise goodput stayed below the
    mark. A workload that never completed never recovered."""
    return recovery(record, fraction, window)[0]


def recovery_note(record: CaseRecord, fraction: float = RECOVERY_FRACTION,
                  window: Optional[float] = None) -> Optional[str]:
    """Why a failed case that completed has no recovery time although goodput was measured before
    the failure (None otherwise): NO_DIP, goodput never fell below the target after the failure
    (at the resolution of the samples, `sample_interval`) or fell only for the collective's own
    tail (`recovery`), or WINDOW_OVER_RUN, the averaging
    window is longer than the time from the failure to the end of the work."""
    return recovery(record, fraction, window)[1]


def recovery(record: CaseRecord, fraction: float = RECOVERY_FRACTION,
             window: Optional[float] = None) -> tuple[Optional[float], Optional[str]]:
    """(`time_to_recover`, `recovery_note`) of `record`, worked out once."""
    window = record.recovery_window if window is None else window
    t_fail = record.failure_time
    if t_fail is None or record.completion_time is None:
        return None, None
    bins = _bins(record)
    before = _goodput_before(bins, t_fail, window)
    if before is None:
        return None, None
    end_of_work = record.completion_time
    if window > end_of_work - t_fail + 1e-12:
        return None, WINDOW_OVER_RUN
    target = fraction * before
    after = [(start, end, g) for start, end, g in bins if start >= t_fail - 1e-12 and end <= end_of_work + 1e-12]
    windows = []                                          # (start, goodput averaged over the window)
    for i, (start, _, _) in enumerate(after):
        span = [(e, g) for s, e, g in after[i:] if s < start + window - 1e-12]   # bins starting in the window
        last_end = span[-1][0]
        if last_end >= start + window - 1e-9 or last_end >= end_of_work - 1e-9:
            windows.append((start, sum(g for _, g in span) / len(span)))
    dip = next((k for k, (_, g) in enumerate(windows) if g < target), None)
    if dip is None:                                       # never below the mark the samples resolve
        return (None, NO_DIP) if windows else (None, None)
    back = next((s for s, g in windows[dip:] if g >= target), None)
    if back is not None:                                  # recovered from the first dip below the target
        return max(0.0, back - t_fail), None
    # a dip that lasts to the end of the (completed) work: the collective's own tail when its work was
    # running out (a flow had finished within the window where it began) and it kept delivering (no
    # gap as long as the window); else goodput stayed below the mark, a stall or capacity the failure took
    began = windows[dip][0]
    if dip > 0 and _running_out(record, t_fail, began + window) and _longest_gap(record, began) < window:
        return None, NO_DIP
    return None, None


def _running_out(record: CaseRecord, since: float, t: float) -> bool:
    """Whether a flow of the case finished after `since` and by `t` (fewer flows left to send than
    before: one done before `since` was not sending then either)."""
    return any(f.finish is not None and since < f.finish <= t + 1e-12 for f in record.flows)


def goodput_before_failure(record: CaseRecord, window: Optional[float] = None) -> Optional[bool]:
    """Whether there was goodput in the window before the first failure, the mark recovery is
    measured against (None without a failure); False for a fault from the start."""
    if record.failure_time is None:
        return None
    window = record.recovery_window if window is None else window
    return _goodput_before(_bins(record), record.failure_time, window) is not None


def _bins(record: CaseRecord) -> list[tuple[float, float, float]]:
    """(start, end, goodput) of every sample interval."""
    times, rates = goodput_series(record)
    return [(t - dt, t, g) for t, dt, g in zip(times, _widths(record, times), rates)]


def _goodput_before(bins: list, t_fail: float, window: float) -> Optional[float]:
    """The mean goodput of the bins in the `window` before `t_fail` (None when there was none)."""
    before = [g for start, end, g in bins if end <= t_fail + 1e-12 and end > t_fail - window + 1e-12]
    if not before or sum(before) <= 0:
        return None
    return sum(before) / len(before)


def flows_over_ideal(record: CaseRecord, rate_bps: float | Callable[[str], float],
                     latency: float | Callable[[str, str], float], acked: bool = False,
                     wire_factor: float = 1.0) -> Optional[list[float]]:
    """Each flow's completion over its receiver's ideal, sorted (None when a flow never finished).

    A receiver's ideal is every byte into it at `rate_bps` (bit/s, or a function of the receiver
    giving its own) plus `latency`, the part no rate removes: seconds, or a function of (sender,
    receiver) giving a flow's, of which the receiver takes the smallest over its senders.
    `wire_factor` (wire bytes per payload byte of a full data packet) counts the ideal's bytes as
    they go on the wire, headers included. `acked` divides when a flow's sender saw it all
    acknowledged (`FlowRecord.acked`, None when not known) instead of when its last byte arrived.

    The ideal is a lower bound of the last byte's arrival, so that the last flow into a receiver
    finishes at 1 or more (one that shares its receiver can finish earlier), exactly when
    `rate_bps` is no less than what the receiver's links carry together and `latency` no more than
    the propagation delay of the flow's path: `transport_sizing.line_rate_and_one_way_delay`, on
    any topology. Crosscheck's ideal (`acked`, the hosts' line rate and the fabric's base RTT,
    `transport_sizing.line_rate_and_base_rtt`) is not one: see there by how much it exceeds one."""
    into: dict[str, int] = {}
    fixed: dict[str, float] = {}
    for f in record.flows:
        into[f.dst] = into.get(f.dst, 0) + f.expected_bytes
        own = latency(f.src, f.dst) if callable(latency) else latency
        fixed[f.dst] = min(fixed.get(f.dst, own), own)
    done = [f.acked if acked else f.finish for f in record.flows]
    if not record.flows or any(t is None for t in done):
        return None

    def ideal(dst: str) -> float:
        rate = rate_bps(dst) if callable(rate_bps) else rate_bps
        return into[dst] * wire_factor * 8 / rate + fixed[dst]
    return sorted(t / ideal(f.dst) for f, t in zip(record.flows, done))


def slowest_over_ideal(record: CaseRecord, rate_bps: float | Callable[[str], float],
                       latency: float | Callable[[str, str], float]) -> Optional[float]:
    """The slowest flow's completion over its receiver's ideal (`flows_over_ideal`; None when a flow
    never finished)."""
    ratios = flows_over_ideal(record, rate_bps, latency)
    return None if ratios is None else ratios[-1]


def longest_delivery_gap(record: CaseRecord) -> Optional[float]:
    """Seconds of the longest time after the first failure with no new byte delivered: between
    the record's delivery times when it has them, else the longest run of samples without.

    None without a failure or samples. Runs from the failure to the completion, or to the end of
    the run when the work never completed: then a gap still open at the end counts up to it."""
    t_fail = record.failure_time
    if t_fail is None or not record.samples:
        return None
    return _longest_gap(record, t_fail)


def _longest_gap(record: CaseRecord, since: float) -> float:
    """`longest_delivery_gap` counted from `since` instead of the first failure."""
    end_of_work = record.completion_time if record.completion_time is not None else record.end
    if record.deliveries:
        return _gap_between_deliveries(record.deliveries, since, end_of_work, record.completion_time is None)
    longest, last_delivery, delivered, previous = 0.0, since, None, since
    for t, per_flow in record.samples:
        total = sum(per_flow)
        if t <= since:
            delivered = total
            continue
        if t > end_of_work + 1e-9:
            break
        if delivered is None or total > delivered:     # bytes came in between `previous` and t
            longest = max(longest, previous - last_delivery)
            last_delivery, delivered = t, total
        previous = t
    if record.completion_time is None:
        longest = max(longest, end_of_work - last_delivery)
    return max(0.0, longest)


def _gap_between_deliveries(deliveries: list, t_fail: float, end: float, open_end: bool) -> float:
    """The longest time in [t_fail, end] between deliveries, from spans [first, last] of
    deliveries (a span's inside counts as delivering); to `end` as well when `open_end`."""
    longest, last = 0.0, t_fail
    for first, final in sorted(deliveries):
        if final < t_fail:
            continue
        if first > end:
            break
        if first > last:
            longest = max(longest, first - last)
        last = max(last, final)
    if open_end:
        longest = max(longest, end - last)
    return max(0.0, longest)


def _widths(record: CaseRecord, times: list[float]) -> list[float]:
    widths, prev = [], None
    for t in times:
        widths.append(record.sample_interval if prev is None else t - prev)
        prev = t
    return widths


def retransmissions(record: CaseRecord) -> dict[str, int]:
    """Retransmitted data packets by cause."""
    return {cause: int(record.transport_stats.get(f"retx_{cause}") or 0) for cause in RETX_CAUSES}


def retransmissions_total(record: CaseRecord) -> Optional[int]:
    """Every retransmission counter (`retx_*`) the backend reported, summed: the causes' sum, or a
    backend's own count where it has no causes (htsim_uec's); None when the causes were not
    measured and no other count was reported either."""
    counts = [int(value) for key, value in record.transport_stats.items()
              if key.startswith("retx_") and isinstance(value, (int, float))]
    if not counts and "retransmission causes" in not_measured(record):
        return None
    return sum(counts)


def not_measured(record: CaseRecord) -> list[str]:
    """The figures of NOT_MEASURED_FIGURES the record has no measurement of: those its backend
    declares (experiments.backends.NOT_MEASURED) and those its fields leave None (no samples: no
    goodput; bit_exact None; a retransmission cause or evs_retired None)."""
    missing = set(NOT_MEASURED.get(record.backend, ()))
    stats = record.transport_stats
    if not record.samples:
        missing.add("goodput")
    if record.bit_exact is None:
        missing.add("bit_exact")
    if any(f"retx_{cause}" in stats and stats[f"retx_{cause}"] is None for cause in RETX_CAUSES):
        missing.add("retransmission causes")
    if "evs_retired" in stats and stats["evs_retired"] is None:
        missing.add("evs")
    return [figure for figure in NOT_MEASURED_FIGURES if figure in missing]


def flow_throughputs(record: CaseRecord) -> list[Optional[float]]:
    """Bit/s of each flow over its own duration (the whole run when it never finished; None when
    its bytes were not measured)."""
    out: list[Optional[float]] = []
    for flow in record.flows:
        end = flow.finish if flow.finish is not None else record.end
        duration = max(end - record.start, 1e-9)
        out.append(None if flow.received_bytes is None else flow.received_bytes * 8 / duration)
    return out


def link_utilisation(record: CaseRecord) -> list[float]:
    """Utilisation (0..1) of every switch-to-switch link direction over the workload's duration."""
    duration = (record.completion_time if record.completion_time is not None else record.end) - record.start
    if duration <= 0:
        return [0.0 for _ in record.links]
    return [link.tx_bytes * 8 / (link.rate_bps * duration) for link in record.links]


def imbalance(values: list[float]) -> Optional[float]:
    """max / mean of `values` (None when they are all zero)."""
    if not values or sum(values) <= 0:
        return None
    return max(values) / (sum(values) / len(values))


def ev_retirements(record: CaseRecord) -> dict:
    """Of the EVs the MRC connections that sent data started with (their `ev_set` records, netsim;
    a connection that only acknowledged never used its EVs, and would count them as kept; a record
    from before `sent_data` counts every connection): how many, the share never ASSUMED_BAD during
    the run, and for each connection that retired EVs after the failure, how long after it its
    first went (seconds: the slowest and fastest connection, and `by_connection`, each connection's)."""
    backups = {(e["conn"], e["ev"]) for e in record.ev_events if e["kind"] == "ev_backup"}
    home = {(e["conn"], item["ev"]) for e in record.ev_events if e["kind"] == "ev_set" and e.get("sent_data", True)
            for item in e["evs"]} - backups
    retired, first = set(), {}
    t_fail = record.failure_time
    for e in record.ev_events:
        if e["kind"] == "ev_state" and e["new"] == "ASSUMED_BAD":
            retired.add((e["conn"], e["ev"]))
            if t_fail is not None and e["t"] >= t_fail:
                first[e["conn"]] = min(first.get(e["conn"], e["t"]), e["t"])
    delays = [t - t_fail for t in first.values()] if t_fail is not None else []
    return {"evs": len(home), "kept_share": 1 - len(retired & home) / len(home) if home else None,
            "first_retired_after_failure_s": {"max": max(delays), "min": min(delays),
                                              "by_connection": {c: t - t_fail for c, t in first.items()}}
            if delays else None}


def in_rtts(seconds: Optional[float], base_rtt: Optional[float]) -> Optional[float]:
    """`seconds` in base RTTs (None when either is unknown)."""
    if seconds is None or not base_rtt or base_rtt <= 0:
        return None
    return seconds / base_rtt


def summarise(record: CaseRecord) -> dict:
    """The case's headline numbers, as JSON-ready values."""
    throughputs = flow_throughputs(record)
    (recover, why_no_recovery), gap = recovery(record), longest_delivery_gap(record)
    utilisation = link_utilisation(record)
    roles = {}
    for flow, bps in zip(record.flows, throughputs):
        roles.setdefault(flow.role, []).append(bps)
    times, rates = goodput_series(record)
    unmeasured = None in throughputs         # a flow's bytes not measured: no figure over the flows
    finished = [t for t in throughputs if t is not None and t > 0]
    invalid = validity.invalid_reasons(record)
    summary = {
        "scenario": record.scenario,
        "variant": record.variant,
        "transport": record.transport,
        "mode": record.mode,
        "backend": record.backend,
        "seed": record.seed,
        "repetition": record.repetition,
        "topology": record.topology,
        "hosts": record.hosts,
        "workload": record.workload,
        "completed": record.completed,
        "completion_time_s": record.completion_time,
        "failure_time_s": record.failure_time,
        "time_to_recover_s": recover,
        "recovery_note": why_no_recovery,
        "goodput_before_failure": goodput_before_failure(record),
        "longest_delivery_gap_s": gap,
        "base_rtt_s": record.base_rtt,
        "completion_rtts": in_rtts(record.completion_time, record.base_rtt),
        "time_to_recover_rtts": in_rtts(recover, record.base_rtt),
        "longest_delivery_gap_rtts": in_rtts(gap, record.base_rtt),
        "reroute_times_s": list(record.reroutes),
        "bit_exact": record.bit_exact,
        "app_duplicates": record.app_duplicates,
        "app_missing": record.app_missing,
        "evs_retired": int(record.transport_stats.get("evs_retired") or 0),
        "evs_reinstated": int(record.transport_stats.get("evs_reinstated") or 0),
        "ev_retirements": ev_retirements(record),
        "retransmissions": retransmissions(record),
        "retransmissions_total": retransmissions_total(record),
        "packets_dropped_queue_full": _count(record.switch_stats.get("queue_full_drops")),
        "packets_trimmed": int(record.switch_stats.get("trimmed", 0)),
        "packets_dropped_by_faults": int(record.switch_stats.get("fault_drops", 0)),
        "mean_goodput_bps": (sum(rates) / len(rates)) if rates else 0.0,
        "flow_throughput_bps": ({"min": None, "mean": None, "max": None, "spread_max_over_min": None} if unmeasured
                                else {"min": min(throughputs, default=0.0), "mean": _mean(throughputs),
                                      "max": max(throughputs, default=0.0),
                                      "spread_max_over_min": (max(finished) / min(finished)) if finished else None}),
        "throughput_by_role_bps": {role: None if None in v else _mean(v) for role, v in roles.items()},
        "link_utilisation": {"max": max(utilisation, default=0.0), "mean": _mean(utilisation),
                             "max_over_mean": imbalance(utilisation)},
        "recovery_window_s": record.recovery_window,
        "sample_interval_s": record.sample_interval,
        "end_s": record.end,
        "samples": len(times),
        "fidelity": "invalid" if invalid else record.fidelity.get("verdict", "unknown"),
        "fidelity_monitor": record.fidelity.get("verdict", "unknown"),
        "fidelity_reasons": list(record.fidelity.get("reasons", [])),
        "invalid_reasons": invalid,
        "ending": validity.ending(record),
        "delivered_fraction": validity.delivered_fraction(record),
        "faults": validity.landing_list(record),
        "notes": list(record.notes),
        "not_measured": not_measured(record),
    }
    for figure in summary["not_measured"]:
        for key in NOT_MEASURED_FIGURES[figure]:
            summary[key] = None
    return summary


def _count(value) -> Optional[int]:
    """An integer counter, or None when the backend could not measure it."""
    return None if value is None else int(value)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


SUMMARY_FIELDS = tuple(summarise(CaseRecord("s", "v", "t", "mrc", "netsim", 0, "topo", 0, "w")).keys())
