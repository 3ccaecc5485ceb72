"""What the agents of a testbed case wrote: the workload's progress while it runs, and the case's
record once they have stopped. Logs are JSON lines (host_agent/eventlog.py), read tolerantly.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from experiments.backends.agent_jobs import FlowLog
from experiments.record import CaseRecord
from host_agent.eventlog import LogFollower, read_log
from testbed.agents import AgentProcess

KEPT_EVENTS = ("ev_state", "ev_backup")     # transport events a case record keeps


class Progress:
    """The workload's progress, read live from the agents' event logs (their goodput records).

    Agents flush their logs every 10 ms, each at its own moment, so what is read lags, and by a
    different amount per log; the records carry their own times, so `eta` extrapolates each
    log at its own rate up to now.
    """

    def __init__(self, logs: list[Path], expected_bytes: int, start_at: float) -> None:
        self.logs = logs
        self.expected = max(1, expected_bytes)
        self.start_at = start_at
        self._followers = {path: LogFollower(path) for path in logs}
        self._received = {path: 0 for path in logs}     # bytes per log, as of its latest record
        self._until = {path: start_at for path in logs}   # time of each log's latest record
        self.received = 0
        self.last_t = start_at

    def read(self) -> float:
        """Take in what the agents have written since; return the share received as of `last_t`."""
        for path, follower in self._followers.items():
            for r in follower.read():
                if r.get("kind") != "goodput":
                    continue
                self._received[path] += r.get("rx_bytes", 0)
                self._until[path] = max(self._until[path], r.get("t", self._until[path]))
        self.received = sum(self._received.values())
        self.last_t = max(self._until.values(), default=self.start_at)
        return min(1.0, self.received / self.expected)

    def eta(self, fraction: float) -> float | None:
        """UNIX time at which `fraction` of the workload is (or was) received, each log going on
        at its own rate so far from its own latest record."""
        target = fraction * self.expected
        if self.received >= target:
            return self.last_t
        rates = {p: self._received[p] / (self._until[p] - self.start_at)
                 for p in self.logs if self._until[p] > self.start_at}
        rate = sum(rates.values())
        if rate <= 0:
            return None
        # bytes each log has received by time t: received_p + rate_p (t - until_p); solve for the target
        behind = sum(r * (self.last_t - self._until[p]) for p, r in rates.items())
        return self.last_t + (target - self.received - behind) / rate


def read_results(record: CaseRecord, agents: list[AgentProcess], flow_logs: list[FlowLog],
                 start_at: float) -> dict[str, dict]:
    """Results, transport counters and EV events of every agent; goodput of every flow. Returns each
    agent's timer wake-up lateness (`host_agent.lateness` summary) by host name."""
    lateness: dict[str, dict] = {}
    stats: Counter = Counter()
    finished, exact, rtts = {}, True, []
    for agent in agents:
        for r in agent.records():
            kind = r.get("kind")
            t = r.get("t", start_at) - start_at
            if kind in KEPT_EVENTS:
                record.ev_events.append({**r, "t": t, "host": agent.job.host})
            elif kind == "result" and r.get("ok"):
                finished[agent.name] = t
            elif kind == "counters":
                if isinstance(r.get("wakeups"), dict):
                    lateness[agent.name] = r["wakeups"]
                if isinstance(r.get("min_rtt_s"), (int, float)) and r["min_rtt_s"] > 0:
                    rtts.append(r["min_rtt_s"])
                transport = r.get("transport", {})
                stats.update({k: v for k, v in transport.items() if isinstance(v, (int, float))})
        failure = agent.failure()
        if failure:
            exact = False
            record.notes.append(failure)
    _goodput(record, flow_logs, start_at)
    record.completed = exact and len(finished) == len(agents)
    record.bit_exact = exact
    record.completion_time = max(finished.values()) if record.completed else None
    record.end = record.completion_time if record.completed else record.horizon
    record.transport_stats = dict(stats)
    record.base_rtt = min(rtts) if rtts else None
    record.app_missing = len(agents) - len(finished)
    return lateness


def start_lateness(agents: list[AgentProcess], start_at: float) -> dict[str, float | None]:
    """How long after the common start `start_at` (UNIX time) each agent began its workload: its
    `begin` record against `start_at` (0 for one that began on time), by agent name; None for an
    agent whose log has none (it never began)."""
    late: dict[str, float | None] = {}
    for agent in agents:
        began = next((r.get("t") for r in agent.records() if r.get("kind") == "begin"), None)
        late[agent.name] = max(0.0, began - start_at) if isinstance(began, (int, float)) else None
    return late


def _goodput(record: CaseRecord, flow_logs: list[FlowLog], start_at: float) -> None:
    """Each flow's cumulative bytes per sample interval, and its finish time."""
    interval = record.sample_interval
    bins = []
    for item in flow_logs:
        per_bin: Counter = Counter()
        for r in read_log(item.log):
            if r.get("kind") == "goodput":
                per_bin[max(0, int((r["t"] - start_at) / interval))] += r.get("rx_bytes", 0)
                if r.get("rx_bytes") and "rx_first" in r and "rx_last" in r:
                    record.deliveries.append([r["rx_first"] - start_at, r["rx_last"] - start_at])
            elif r.get("kind") == "result" and r.get("ok"):
                item.flow.finish = r["t"] - start_at
        bins.append(per_bin)
    last = max((max(b, default=0) for b in bins), default=0)
    cumulative = [0] * len(bins)
    record.samples = [[0.0, list(cumulative)]]
    for k in range(last + 1):
        for i, per_bin in enumerate(bins):
            cumulative[i] += per_bin.get(k, 0)
        record.samples.append([(k + 1) * interval, list(cumulative)])
    for item, got in zip(flow_logs, cumulative):
        item.flow.received_bytes = got
    record.deliveries.sort()
