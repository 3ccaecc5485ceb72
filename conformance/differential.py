"""Differential testing: generated cases run on the model and on another target, divergences shrunk.

A scenario is a case in its case-file form (entries, preload, send) drawn by hypothesis: valid
packets of every MRC kind and the baseline's (DSCP NO_TRIM, ECMP routes), mutated and malformed
ones (a length, version, opcode or port field set; frames cut short), table entries within the
switch contract (routes, ECMP groups, a uSID, port thresholds, a faulted port), and standing queues
around the trim and ECN thresholds. Each scenario runs on the reference (the model) and on the other
target; the runs diverge when a port's frames (compared as multisets: the order across ports and
across priorities is timing), a priority both targets report (not one the runner inferred from
overtaking), or a counter cell differ.
Every distinct divergence (by the kinds of difference, see `Divergence.signature`) is shrunk by
hypothesis and written as a case whose expectations are the model's outputs, ready to join
conformance/cases/. `fault_drop_random` is left out: the two targets draw different random numbers.
"""
from __future__ import annotations

import copy
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Optional

import yaml

from wire import constants
from pipeline_contract import names
from conformance.case import ConformanceCase, parse_case
from conformance.frame_diff import field_diff
from conformance.packets import build
from conformance.runner import PRIORITY_NAMES, CaseRun, execute_case

IN_PORT = 1
ROUTED = {"fc00:1:1001::": 2, "fc00:1:1002::": 3}        # /48 routes to single ports
ECMP_DST = "fc00:1:1003::"                                 # /48 to ECMP group 1
USID_DST = "fc00:1:100:102::"                              # this switch's uSID 0x0100, then route fc00:1:102::/48
USID_NEXT_PORT = 4
UNROUTED_DST = "fc00:1:9999::"
DESTINATIONS = list(ROUTED) + [ECMP_DST, USID_DST, UNROUTED_DST]
EGRESS_PORTS = (2, 3, 4)
KINDS = ("data", "sack", "nack", "probe", "probe_reply", "udp")
# Packets a case sends after its preload. On a port that is not held the model's queue is always
# empty, while BMv2 counts the burst's packets between ingress and egress (its queue estimate), so
# such a port's thresholds are set to at least this many: timing, not logic, would decide them.
BURST_MAX = 4
DSCPS = (constants.DSCP_TRIMMABLE, constants.DSCP_TRIMMABLE_RETX, constants.DSCP_NO_TRIM, constants.DSCP_CONTROL,
         constants.DSCP_TRIMMED, constants.DSCP_TRIMMED_LASTHOP)
MUTABLE_FIELDS = {"IPv6.plen": 16, "UDP.len": 16, "IPv6.version": 4, "BTH.opcode": 8, "UDP.dport": 16,
                  "IPv6.nh": 8, "BTH.tver": 4}      # field -> bits (BTH fields only where there is a BTH)
SHRINK_SECONDS = 60.0           # wall-clock budget for shrinking one divergence


# --- generation -------------------------------------------------------------------------------

def scenarios():
    """The hypothesis strategy of scenarios (case-file dicts without `expect`)."""
    from hypothesis import strategies as st

    @st.composite
    def packet(draw, favourite: str):
        kind = draw(st.sampled_from(("data",) * 4 + KINDS))          # data most often
        spec = {"kind": kind, "src": "fc00:1:1000::",
                "dst": draw(st.sampled_from([favourite] * 6 + DESTINATIONS)),
                "ev": draw(st.integers(0, (1 << 20) - 1))}
        spec["dscp"] = draw(st.one_of(st.sampled_from((constants.DSCP_TRIMMABLE,) * 4 + DSCPS), st.integers(0, 63)))
        spec["ecn"] = draw(st.one_of(st.just(constants.ECN_ECT0), st.integers(0, 3)))
        if kind in ("data", "udp"):
            spec["payload_len"] = draw(st.sampled_from([0, 1, 64, 256, 1000]))
        if kind == "data":
            spec["flags"] = draw(st.integers(0, 3))
        mutation = draw(st.sampled_from(["none"] * 4 + ["set", "truncate"]))
        fields = [f for f in MUTABLE_FIELDS if kind != "udp" or not f.startswith("BTH.")]
        if mutation == "set":
            name = draw(st.sampled_from(fields))
            spec["set"] = {name: draw(st.integers(0, (1 << MUTABLE_FIELDS[name]) - 1))}
        elif mutation == "truncate":
            spec["truncate"] = draw(st.integers(14, len(build(spec))))
        return spec

    @st.composite
    def port_config(draw, port):
        # ECN as a step (ecn_max_threshold = ecn_threshold): inside a ramp each target draws from its
        # own RNG, so only the ramp's ends compare (cases/ecn_ramp.yaml).
        ecn = draw(st.integers(1, 6))
        return {"table": names.PORT_CONFIG, "match": {"port": port}, "action": names.SET_PORT_CONFIG,
                "params": {"trim_threshold": draw(st.integers(1, 5)), "ecn_threshold": ecn,
                           "host_facing": draw(st.integers(0, 1)), "ecn_max_threshold": ecn}}

    @st.composite
    def scenario(draw):
        entries = [{"table": names.ROUTING, "match": {"dst_addr": f"{dst}/48"}, "action": names.FORWARD,
                    "params": {"port": port}} for dst, port in ROUTED.items()]
        size = draw(st.integers(1, 3))
        entries.append({"table": names.ROUTING, "match": {"dst_addr": f"{ECMP_DST}/48"}, "action": names.ECMP_SELECT,
                        "params": {"group": 1, "size": size}})
        entries += [{"table": names.ECMP_MEMBER, "match": {"group": 1, "index": i}, "action": names.FORWARD,
                     "params": {"port": EGRESS_PORTS[i]}} for i in range(size)]
        entries.append({"table": names.USID_LOCAL, "match": {"dst_usid_prefix": 0xFC0000010100},
                        "action": names.USID_SHIFT})
        entries.append({"table": names.ROUTING, "match": {"dst_addr": "fc00:1:102::/48"}, "action": names.FORWARD,
                        "params": {"port": USID_NEXT_PORT}})
        configs = {}
        for port in EGRESS_PORTS:
            if draw(st.booleans()):
                configs[port] = draw(port_config(port))
                entries.append(configs[port])
        out = {"entries": entries}
        favourite = draw(st.sampled_from(DESTINATIONS))
        routed = [p for p in sorted(configs) if p in ROUTED.values()]
        if routed and draw(st.integers(0, 2)):      # mostly, a standing queue around a threshold of that port
            port = draw(st.sampled_from(routed))
            params = configs[port]["params"]
            threshold = draw(st.sampled_from([params["trim_threshold"]] * 2 + [params["ecn_threshold"]]))
            count = max(0, threshold + draw(st.integers(-1, 1)))
            favourite = next(d for d, p in ROUTED.items() if p == port)
            if count:
                out["preload"] = {"port": port, "in_port": IN_PORT, "count": count,
                                  "packet": {"kind": "data", "src": "fc00:1:1003::", "dst": favourite,
                                             "payload_len": 64}}
        held = out.get("preload", {}).get("port")
        for port, config in configs.items():      # a port that drains: out of the burst's reach (see BURST_MAX)
            if port != held:
                params = config["params"]
                for key in ("trim_threshold", "ecn_threshold", "ecn_max_threshold"):
                    params[key] = max(params[key], BURST_MAX)
        faultable = [p for p in EGRESS_PORTS if p != held]    # a faulted held port would drop its standing queue
        if draw(st.integers(0, 3)) == 0:
            entries.append({"table": names.PORT_FAULT, "match": {"port": draw(st.sampled_from(faultable))},
                            "action": names.FAULT_DROP})
        out["send"] = [{"port": IN_PORT, "packet": p}
                       for p in draw(st.lists(packet(favourite), min_size=1, max_size=BURST_MAX))]
        return out

    return scenario()


def to_case(scenario: dict, name: str, expect: Optional[dict] = None, about: str = "") -> ConformanceCase:
    """A ConformanceCase from a scenario (its expectations: `expect`, else every counter read)."""
    data = dict(copy.deepcopy(scenario), name=name, about=about)
    data["expect"] = expect if expect is not None else {"counters": {n: {} for n in names.ALL_COUNTERS}}
    return parse_case(data, {}, "differential")


# --- comparison -------------------------------------------------------------------------------

def _priority_name(p: Optional[int]) -> Optional[str]:
    return {v: k for k, v in PRIORITY_NAMES.items()}.get(p)


def compare_runs(ref: CaseRun, other: CaseRun) -> list[str]:
    """How the other run differs from the reference: per port frames, priorities, counters."""
    lines = []
    for run, who in ((ref, "reference"), (other, "other")):
        if run.result.status == "error":
            return [f"error on the {who} target: {run.result.message}"]
    ports = sorted({o.port for o in ref.outputs} | {o.port for o in other.outputs})
    for port in ports:
        want = Counter(o.frame for o in ref.outputs if o.port == port)
        got = Counter(o.frame for o in other.outputs if o.port == port)
        missing, extra = list((want - got).elements()), list((got - want).elements())
        if len(missing) != len(extra):
            lines.append(f"port {port}: count {sum(want.values())} -> {sum(got.values())}")
        for a, b in zip(missing, extra):
            lines += [f"port {port}: fields {d}" for d in field_diff(a, b)]
        prio_want = {o.frame: o.priority for o in ref.outputs if o.port == port}
        for o in other.outputs:        # an inferred priority is timing: a held port's rate may let a filler go first
            if (o.port == port and o.priority is not None and not o.inferred
                    and prio_want.get(o.frame) not in (None, o.priority)):
                lines.append(f"port {port}: priority {_priority_name(prio_want[o.frame])} -> "
                             f"{_priority_name(o.priority)}")
    for name in names.ALL_COUNTERS:
        a, b = ref.counters.get(name, {}), other.counters.get(name, {})
        if name == names.QUEUE_DEPTH_SEEN:     # the depth a packet saw on a draining port is timing on BMv2
            a, b = _per_port(a), _per_port(b)
        for cell in sorted(set(a) | set(b)):
            if a.get(cell, (0, 0)) != b.get(cell, (0, 0)):
                lines.append(f"counter {name}[{cell}]: {a.get(cell, (0, 0))} -> {b.get(cell, (0, 0))}")
    return lines


def _per_port(cells: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """queue_depth_seen summed over each port's depth buckets: which packets were counted, not at
    what depth (on BMv2 a packet between ingress and egress counts in the depth the next one sees,
    so on a port that drains the depth depends on timing; the cases pin depths on held queues)."""
    out: dict[int, tuple[int, int]] = {}
    for cell, (packets, octets) in cells.items():
        port = names.depth_of_cell(cell)[0]
        p, b = out.get(port, (0, 0))
        out[port] = (p + packets, b + octets)
    return out


def signature(differences: list[str]) -> tuple[str, ...]:
    """The kinds of difference, without ports, cells or values: the frame-level kinds (fields that
    differ, counts, priorities) when frames differ, else the counters that differ. Two divergences
    with one signature are taken for one cause."""
    frames, counters = set(), set()
    for d in differences:
        if d.startswith("counter "):
            counters.add(d.split("[")[0])
        elif d.startswith("port "):
            what = d.split(": ", 1)[1]
            frames.add("field " + what[len("fields "):].split(":")[0] if what.startswith("fields ")
                       else what.split(" ")[0])
        else:
            frames.add(d.split(":")[0])
    return tuple(sorted(frames or counters))


# --- the search -------------------------------------------------------------------------------

@dataclass
class Divergence:
    """A scenario on which the targets differ, as shrunk as the search got it."""

    scenario: dict
    differences: list[str]
    reference: CaseRun

    @property
    def signature(self) -> tuple[str, ...]:
        return signature(self.differences)

    def case_dict(self, name: str) -> dict:
        """The case-file form: the scenario, expecting what the reference did (exact frames, counters)."""
        packets = [{"port": o.port, "bytes": o.frame.hex()}
                   | ({"priority": _priority_name(o.priority)} if o.priority is not None else {})
                   for o in self.reference.outputs]
        # per-port counters only: queue_depth_seen's cells depend on timing on BMv2 (_per_port)
        counters = {n: {port: list(cell) for port, cell in sorted(self.reference.counters.get(n, {}).items())}
                    for n in names.COUNTERS}
        for d in self.differences:         # a cell only the other target counted: expect it zero
            if d.startswith("counter ") and not d.startswith(f"counter {names.QUEUE_DEPTH_SEEN}["):
                counter, cell = d[len("counter "):].split("[")[0], int(d.split("[")[1].split("]")[0])
                counters[counter].setdefault(cell, [0, 0])
        expect = {"packets": packets} if packets else {"none": True}
        expect["counters"] = {n: cells for n, cells in counters.items() if cells}
        return dict(name=name, about="differential: " + "; ".join(self.differences[:6]),
                    **copy.deepcopy(self.scenario), expect=expect)


@dataclass
class DifferentialReport:
    """What a differential run did and found."""

    examples: int
    runs: int
    seconds: float
    divergences: list[Divergence] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)        # scenarios a target could not run

    def case_file(self, prefix: str) -> str:
        """Every divergence as one YAML case file."""
        cases = [d.case_dict(f"{prefix}_{i}") for i, d in enumerate(self.divergences)]
        head = ("# Divergences found by `mrc-testbed conformance --differential`; expectations are the\n"
                "# model's outputs. Move a case into conformance/cases/ once its cause is understood.\n")
        return head + yaml.safe_dump({"cases": cases}, sort_keys=False, width=120,
                                     default_flow_style=None)


class _Found(Exception):
    """A new divergence (raised inside the hypothesis test so that hypothesis shrinks it)."""


def run_differential(n: int, seed: int, reference, other,
                     progress: Optional[Callable[[str], None]] = None,
                     found: Optional[Callable[[DifferentialReport], None]] = None) -> DifferentialReport:
    """Generate `n` scenarios (hypothesis, seeded by `seed`), run each on both started targets, and
    shrink every distinct divergence; `found(report so far)` is called after each one is shrunk."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis.errors import Flaky

    start = time.monotonic()
    known: dict[tuple[str, ...], Divergence] = {}
    cache: dict[str, Optional[Divergence]] = {}
    state = {"examples": 0, "runs": 0, "shrinking_since": None, "last": None, "errors": []}

    def diverges(scenario: dict) -> Optional[Divergence]:
        key = yaml.safe_dump(scenario, sort_keys=True)
        if key in cache:
            return cache[key]
        since = state["shrinking_since"]
        if since is not None and time.monotonic() - since > SHRINK_SECONDS:
            return None                      # out of shrinking time: unseen candidates count as equal
        state["runs"] += 1
        case = to_case(scenario, "differential")
        ref = execute_case(case, reference)
        result = None
        diff = compare_runs(ref, execute_case(case, other))
        if diff and diff[0].startswith("error on the"):     # a harness failure, not a divergence
            state["errors"].append(diff[0])
            diff = []
        if diff:
            again = compare_runs(ref, execute_case(case, other))     # a divergence must repeat
            if again and signature(again) == signature(diff):
                result = Divergence(scenario, diff, ref)
        cache[key] = result
        return result

    rounds = 0
    while state["examples"] < n:
        budget = n - state["examples"]
        state["shrinking_since"] = None

        @settings(max_examples=budget, database=None, deadline=None, derandomize=False, print_blob=False,
                  suppress_health_check=list(HealthCheck), phases=[Phase.generate, Phase.shrink],
                  report_multiple_bugs=False)
        @hypothesis_seed(seed + rounds)
        @given(scenarios())
        def probe(scenario):
            if state["shrinking_since"] is None:
                state["examples"] += 1
                if progress and state["examples"] % 100 == 0:
                    progress(f"{state['examples']} cases, {time.monotonic() - start:.0f} s, "
                             f"{len(known)} divergences")
            found = diverges(scenario)
            if found is not None and found.signature not in known:
                if state["shrinking_since"] is None:
                    state["shrinking_since"] = time.monotonic()
                    if progress:
                        progress(f"example {state['examples']}: divergence {found.signature}, shrinking")
                state["last"] = found
                raise _Found()

        rounds += 1
        try:
            probe()
        except (_Found, Flaky):
            last = state["last"]
            known[last.signature] = last
            if progress:
                progress(f"shrunk to {len(last.scenario['send'])} packets: {'; '.join(last.differences[:3])}")
            if found:
                found(DifferentialReport(state["examples"], state["runs"], time.monotonic() - start,
                                         list(known.values()), state["errors"]))
            continue
        break
    return DifferentialReport(state["examples"], state["runs"], time.monotonic() - start, list(known.values()),
                              state["errors"])
