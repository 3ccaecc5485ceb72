"""Experiment scenarios: the YAML schema, its validation, and the cases a scenario expands to.

A scenario file says what to run (a workload on a topology), what to break (faults), with which
transports, and in which variants. Top-level keys are defaults; each variant overrides some of
them (its `workload` is merged key by key, its `faults` replace the default list). The runner
runs every variant with every transport: one *case* each.

    name: failover                       # results folder prefix
    title: Link killed mid all-reduce    # figure and report titles
    description: free text
    seed: 1
    horizon_s: 5.0                       # give up after this much (simulated or real) time
    sample_interval_s: 0.005             # goodput sampling period
    topology: leafspine:2x2x2            # any `--topo` spec (topologies.topology_from_spec)
    link: {rate_bps: auto, queue_depth: 64, trim_threshold: 8, ecn_threshold: 4, ecn_max_threshold: 8}
                                         # rate_bps: auto (the default) is the topology's own rate
                                         # on netsim, the calibrated one on mininet (experiments/budget.py)
    # data-center keys (netsim): cable delay in seconds and payload bytes per data packet
    #   link: {rate_bps: 100000000000, delay_s: 1.0e-6, mtu_payload: 4096}
    #   switch_profile: htsim-defaults (experiments/switch_profiles.py) replaces the four thresholds
    workload: {kind: allreduce, bytes: 1048576, chunk_bytes: 65536}
    faults:
      - {kind: link_kill, link: auto, at: 30%}
    transports:
      - {name: MRC, mode: mrc}
      - {name: RoCE + reroute 1 s, mode: roce, reroute_delay_s: 1.0}
    variants:
      - {label: leaf-spine}
      - {label: multi-plane, topology: multiplane:2x2x2x2}
    quick: {workload: {bytes: 262144}}   # merged over the top level by --quick

Every error names the file, the field (dotted path) and the reason.
"""
from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import yaml

from host_agent.transport import kinds
from host_agent.transport.config import TransportConfig

WORKLOAD_KINDS = ("allreduce", "alltoall", "incast", "permutation")
FAULT_KINDS = ("link_kill", "link_flap", "switch_blackhole", "switch_kill", "gray_loss", "switch_ev_deny",
               "random_loss", "switch_slow")
LOAD_SWEEP = "load-sweep"        # the `kind:` of a sweep file (experiments/load_sweep.py) beside the scenarios
LINK_KEYS = ("rate_bps", "queue_depth", "trim_threshold", "ecn_threshold",   # fields of every topology link
             "ecn_max_threshold")
CABLE_KEYS = ("delay_s", "mtu_payload")   # of the fabric as a whole: cable delay (s), payload bytes per packet
PROFILE_KEY = "switch_profile"      # named thresholds worked out from the fabric (experiments/switch_profiles.py)
MAX_DELAY_S = 1.0
AUTO = "auto"                        # rate_bps: the calibrated rate on mininet, the topology's on netsim
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


class ScenarioError(ValueError):
    """A scenario file that cannot be run: names the file, the field and the reason."""

    def __init__(self, path: str, field_name: str, reason: str) -> None:
        self.path = path
        self.field = field_name
        self.reason = reason
        where = f"{path}: {field_name}" if field_name else path
        super().__init__(f"{where}: {reason}")


# --- the parsed form ---------------------------------------------------------------------------
@dataclass(frozen=True)
class When:
    """When a fault starts: after `seconds`, or when the workload is `fraction` done."""

    seconds: Optional[float] = None
    fraction: Optional[float] = None

    def __str__(self) -> str:
        return f"{self.fraction:.0%} of the workload" if self.fraction is not None else f"t = {self.seconds:g} s"


@dataclass(frozen=True)
class FaultSpec:
    """One fault: what breaks (a link or a switch), when, and how.

    `link` is "auto" (the fabric link the baseline's flows use most) or a pair of node names;
    `switch` is "auto" (the spine the baseline's flows use most) or a switch name.
    """

    kind: str
    at: When = When(seconds=0.0)
    link: Union[str, tuple] = "auto"
    switch: str = "auto"
    period_s: float = 0.2            # link_flap: time between state changes
    flaps: int = 0                   # link_flap: state changes (0: until the run ends)
    loss: float = 0.01               # gray_loss, random_loss: drop probability per packet
    repair_after_s: Optional[float] = None   # link_kill / switch_*: restore after this long
    share: float = 0.25              # switch_slow: every link of the switch runs at this share of its rate

    @property
    def label(self) -> str:
        target = self.switch if self.kind.startswith("switch") else (
            self.link if isinstance(self.link, str) else "-".join(self.link))
        extra = {"gray_loss": f" {self.loss:.0%} loss", "random_loss": f" {self.loss:.2%} loss",
                 "link_flap": f" every {self.period_s * 1e3:g} ms", "switch_slow": f" at {self.share:.0%} rate"}
        return f"{self.kind.replace('_', ' ')} ({target}){extra.get(self.kind, '')} at {self.at}"


@dataclass(frozen=True)
class WorkloadSpec:
    """The traffic: a collective over every host, an N->1 incast, or a permutation."""

    kind: str
    bytes: int                       # allreduce: array bytes; alltoall: block per pair; others: per flow
    chunk_bytes: int = 65536         # message size
    dtype: str = "float32"           # allreduce element type
    senders: int = 0                 # incast: number of senders (0: every other host)
    victim: bool = False             # incast: add a victim flow beside the incast
    receiver: str = ""               # incast: receiving host (default: the first host)


@dataclass(frozen=True)
class TransportSpec:
    """One transport to compare: MRC or the RoCE-style baseline, and what helps it."""

    name: str
    mode: str
    reroute_delay_s: Optional[float] = None   # baseline + emulated converging control plane
    trimming: bool = True                      # switches trim (False: drop-tail)
    params: dict = field(default_factory=dict)  # TransportConfig overrides


@dataclass(frozen=True)
class Variant:
    """One setting of the experiment (a topology, a fault, a size)."""

    label: str
    topology: str
    link: dict                       # LINK_KEYS (applied to every topology link) and CABLE_KEYS
    workload: WorkloadSpec
    faults: tuple

    @property
    def link_fields(self) -> dict:
        """The link keys that are fields of every topology link (rate, queue, thresholds)."""
        return {k: v for k, v in self.link.items() if k in LINK_KEYS}

    @property
    def delay_s(self) -> Optional[float]:
        """The cable delay the scenario asks for (None: the backend's own)."""
        value = self.link.get("delay_s")
        return None if value is None else float(value)

    @property
    def mtu_payload(self) -> Optional[int]:
        """Payload bytes per data packet the scenario asks for (None: the transport's default)."""
        return self.link.get("mtu_payload")


@dataclass(frozen=True)
class Case:
    """One run: a variant with one transport."""

    scenario: "Scenario"
    variant: Variant
    transport: TransportSpec
    repetition: int = 0                  # which run of this variant and transport (0-based; `run --repeat`)

    @property
    def label(self) -> str:
        return f"{self.variant.label} / {self.transport.name}"


@dataclass(frozen=True)
class Scenario:
    """A parsed, validated scenario file."""

    name: str
    title: str
    description: str
    path: str
    seed: int
    horizon_s: float
    sample_interval_s: float
    transports: tuple
    variants: tuple

    def cases(self) -> list[Case]:
        """Every variant with every transport, variant by variant."""
        return [Case(self, v, t) for v in self.variants for t in self.transports]


# --- loading -----------------------------------------------------------------------------------
TOP_KEYS = {"name", "title", "description", "seed", "horizon_s", "sample_interval_s", "topology", "link",
            "workload", "faults", "transports", "variants", "quick"}
VARIANT_KEYS = {"label", "topology", "link", "workload", "faults"}


def load_scenario(path: Union[str, Path], quick: bool = False, seed: Optional[int] = None) -> Scenario:
    """Parse and validate the scenario file at `path` (with its `quick` overrides when asked)."""
    path = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ScenarioError(path, "", f"cannot read the file: {error.strerror or error}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else ""
        raise ScenarioError(path, where, f"not valid YAML: {getattr(error, 'problem', error)}") from None
    return parse_scenario(doc, path, quick=quick, seed=seed)


def parse_scenario(doc: Any, path: str = "<scenario>", quick: bool = False, seed: Optional[int] = None) -> Scenario:
    """Validate a scenario given as a dict (what the YAML file holds)."""
    c = _Checker(path)
    if isinstance(doc, dict) and doc.get("kind") == LOAD_SWEEP:
        c.fail("kind", f"this file is a {LOAD_SWEEP}, not a scenario: run it with `mrc-testbed sweep {path}`")
    doc = c.mapping(doc, "", TOP_KEYS)
    if quick and doc.get("quick") is not None:
        doc = _merge(doc, c.mapping(doc["quick"], "quick", TOP_KEYS - {"quick", "name"}))
    name = c.text(doc.get("name"), "name", required=True)
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        c.fail("name", f"{name!r} may only hold letters, digits, '.', '_' and '-' (it names the results folder)")
    title = c.text(doc.get("title", name), "title")
    description = c.text(doc.get("description", ""), "description")
    run_seed = seed if seed is not None else c.integer(doc.get("seed", 1), "seed", minimum=0)
    horizon = c.number(doc.get("horizon_s", 5.0), "horizon_s", positive=True)
    interval = c.number(doc.get("sample_interval_s", 0.005), "sample_interval_s", positive=True)
    if interval >= horizon:
        c.fail("sample_interval_s", f"{interval} s must be shorter than horizon_s ({horizon} s)")
    transports = c.sequence(doc.get("transports"), "transports", required=True)
    parsed_transports = tuple(_transport(c, t, f"transports[{i}]") for i, t in enumerate(transports))
    names = [t.name for t in parsed_transports]
    for i, n in enumerate(names):
        if names.index(n) != i:
            c.fail(f"transports[{i}].name", f"{n!r} is used twice")
    raw_variants = doc.get("variants")
    raw_variants = [{}] if raw_variants is None else c.sequence(raw_variants, "variants", required=True)
    variants = []
    for i, raw in enumerate(raw_variants):
        where = f"variants[{i}]"
        raw = c.mapping(raw, where, VARIANT_KEYS)
        merged = {key: doc.get(key) for key in ("topology", "link", "workload", "faults")}
        if raw.get("workload") is not None:
            merged["workload"] = {**(c.mapping(doc.get("workload") or {}, "workload", None)),
                                  **c.mapping(raw["workload"], f"{where}.workload", None)}
        for key in ("topology", "link", "faults"):
            if key in raw:
                merged[key] = raw[key]
        variants.append(_variant(c, merged, raw, where, i))
    labels = [v.label for v in variants]
    for i, label in enumerate(labels):
        if labels.index(label) != i:
            c.fail(f"variants[{i}].label", f"{label!r} is used twice")
    return Scenario(name, title, description, path, run_seed, horizon, interval, parsed_transports, tuple(variants))


def _merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def _transport(c: "_Checker", raw: Any, where: str) -> TransportSpec:
    raw = c.mapping(raw, where, {"name", "mode", "reroute_delay_s", "trimming", "params"})
    mode = c.choice(raw.get("mode"), f"{where}.mode", tuple(kinds.TRANSPORTS))
    name = c.text(raw.get("name", mode), f"{where}.name")
    delay = raw.get("reroute_delay_s")
    if delay is not None:
        delay = c.number(delay, f"{where}.reroute_delay_s", minimum=0.0)
        if mode != "roce":
            c.fail(f"{where}.reroute_delay_s", "only the baseline (mode: roce) relies on rerouting")
    trimming = c.boolean(raw.get("trimming", True), f"{where}.trimming")
    params = c.mapping(raw.get("params") or {}, f"{where}.params", None)
    known = set(TransportConfig.__dataclass_fields__) - {"mode"}
    for key in params:
        if key not in known:
            c.fail(f"{where}.params.{key}", f"not a transport parameter; known: {', '.join(sorted(known))}")
    try:
        TransportConfig(mode=mode, **params)
    except (TypeError, ValueError) as error:
        c.fail(f"{where}.params", str(error))
    return TransportSpec(name, mode, delay, trimming, dict(params))


def _variant(c: "_Checker", merged: dict, raw: dict, where: str, index: int) -> Variant:
    def at(key: str) -> str:
        return f"{where}.{key}" if key in raw else key

    topology = c.text(merged.get("topology"), at("topology"), required=True)
    from topologies import TopologySpecError, topology_from_spec
    try:
        topology_from_spec(topology)
    except (TopologySpecError, ValueError, OSError) as error:
        c.fail(at("topology"), str(error))
    link = c.mapping(merged.get("link") or {}, at("link"), set(LINK_KEYS) | set(CABLE_KEYS) | {PROFILE_KEY})
    for key, value in link.items():
        if key == PROFILE_KEY:
            continue
        if key == "rate_bps" and value == AUTO:
            continue
        if key == "rate_bps" and isinstance(value, str):
            c.fail(f"{at('link')}.rate_bps", f"{value!r} is neither bit/s (an integer) nor {AUTO!r}")
        if key == "delay_s":
            delay = c.number(value, f"{at('link')}.{key}", minimum=0.0)
            if delay > MAX_DELAY_S:
                c.fail(f"{at('link')}.{key}", f"{delay} s is above {MAX_DELAY_S} s: a cable, not a satellite")
        else:
            c.integer(value, f"{at('link')}.{key}", minimum=0 if key == "ecn_threshold" else 1)
    if PROFILE_KEY in link:
        link = _apply_profile(c, topology, link, f"{at('link')}.{PROFILE_KEY}")
    _check_links(c, topology, link, at("link"))
    workload = _workload(c, merged.get("workload"), at("workload"))
    faults = tuple(_fault(c, f, f"{at('faults')}[{i}]")
                   for i, f in enumerate(c.sequence(merged.get("faults") or [], at("faults"))))
    label = c.text(raw.get("label", topology if index == 0 else f"variant {index + 1}"), f"{where}.label")
    return Variant(label, topology, dict(link), workload, faults)


def _apply_profile(c: "_Checker", topology: str, link: dict, where: str) -> dict:
    """`link` with the thresholds of the switch profile it names, worked out from its rate, cable
    delay and payload size on `topology` (experiments/switch_profiles.py)."""
    from experiments import switch_profiles
    from topologies import topology_from_spec
    name = c.choice(link[PROFILE_KEY], where, switch_profiles.PROFILES)
    missing = [key for key in ("rate_bps", "delay_s", "mtu_payload")
               if key not in link or (key == "rate_bps" and not isinstance(link[key], int))]
    if missing:
        c.fail(where, f"profile {name!r} is sized from the fabric: link needs {', '.join(missing)} "
                      f"(rate_bps in bit/s, not {AUTO!r})")
    hops = 2 * max(1, len(topology_from_spec(topology).tiers()))
    fields = switch_profiles.profile_fields(name, hops, float(link["delay_s"]), float(link["rate_bps"]),
                                            int(link["mtu_payload"]))
    return {**link, **fields}


def _check_links(c: "_Checker", topology: str, link: dict, where: str) -> None:
    """The link keys, over the topology's own values, make links the topology accepts (e.g. an
    ecn_threshold above the default trim_threshold does not)."""
    import dataclasses
    from topologies import topology_from_spec
    from topologies.model import Topology
    fields = {k: v for k, v in link.items() if k in LINK_KEYS and not (k == "rate_bps" and v == AUTO)}
    if not fields:
        return
    topo = topology_from_spec(topology)
    try:
        Topology(topo.name, topo.hosts, topo.switches,
                 [dataclasses.replace(each, **fields) for each in topo.links]).validate()
    except ValueError as error:
        c.fail(where, str(error))


def _workload(c: "_Checker", raw: Any, where: str) -> WorkloadSpec:
    raw = c.mapping(raw, where, {"kind", "bytes", "chunk_bytes", "dtype", "senders", "victim", "receiver"},
                    required=True)
    kind = c.choice(raw.get("kind"), f"{where}.kind", WORKLOAD_KINDS)
    nbytes = c.integer(raw.get("bytes"), f"{where}.bytes", minimum=1, required=True)
    chunk = c.integer(raw.get("chunk_bytes", 65536), f"{where}.chunk_bytes", minimum=1)
    dtype = c.choice(raw.get("dtype", "float32"), f"{where}.dtype", ("float32", "float64", "int32", "int64"))
    senders = c.integer(raw.get("senders", 0), f"{where}.senders", minimum=0)
    victim = c.boolean(raw.get("victim", False), f"{where}.victim")
    receiver = c.text(raw.get("receiver", ""), f"{where}.receiver")
    if kind == "allreduce" and nbytes % 4:
        c.fail(f"{where}.bytes", f"{nbytes} is not a whole number of {dtype} elements")
    return WorkloadSpec(kind, nbytes, chunk, dtype, senders, victim, receiver)


FAULT_KEYS = {"kind", "at", "link", "switch", "period_s", "flaps", "loss", "repair_after_s", "share"}


def _fault(c: "_Checker", raw: Any, where: str) -> FaultSpec:
    raw = c.mapping(raw, where, FAULT_KEYS)
    kind = c.choice(raw.get("kind"), f"{where}.kind", FAULT_KINDS)
    when = _when(c, raw.get("at", 0), f"{where}.at")
    link: Union[str, tuple] = "auto"
    if kind == "random_loss" and ("link" in raw or "switch" in raw):
        c.fail(f"{where}.{'link' if 'link' in raw else 'switch'}",
               "a random_loss fault acts on every host's last hop: it names no link or switch")
    if "link" in raw:
        if kind.startswith("switch"):
            c.fail(f"{where}.link", f"a {kind} fault names a switch, not a link")
        value = raw["link"]
        if value == "auto":
            link = "auto"
        elif isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, str) for v in value):
            link = (value[0], value[1])
        else:
            c.fail(f"{where}.link", f"{value!r} is neither 'auto' nor a pair of node names like [s1, s3]")
    switch = "auto"
    if "switch" in raw:
        if not kind.startswith("switch"):
            c.fail(f"{where}.switch", f"a {kind} fault names a link, not a switch")
        switch = c.text(raw["switch"], f"{where}.switch")
    period = c.number(raw.get("period_s", 0.2), f"{where}.period_s", positive=True)
    flaps = c.integer(raw.get("flaps", 0), f"{where}.flaps", minimum=0)
    loss = c.number(raw.get("loss", 0.01), f"{where}.loss", minimum=0.0)
    if loss > 1:
        c.fail(f"{where}.loss", f"{loss} is a probability: it must lie in 0..1")
    repair = raw.get("repair_after_s")
    if repair is not None:
        repair = c.number(repair, f"{where}.repair_after_s", positive=True)
    share = 0.25
    if "share" in raw:
        if kind != "switch_slow":
            c.fail(f"{where}.share", f"only a switch_slow fault has a rate share (this is {kind})")
        share = c.number(raw["share"], f"{where}.share", positive=True)
        if share > 1:
            c.fail(f"{where}.share", f"{share} is a share of the link rate: it must lie in 0..1")
    return FaultSpec(kind, when, link, switch, period, flaps, loss, repair, share)


def _when(c: "_Checker", value: Any, where: str) -> When:
    if isinstance(value, str):
        match = _PERCENT.match(value)
        if not match:
            c.fail(where, f"{value!r} is neither seconds (a number) nor a share of the workload like '30%'")
        fraction = float(match.group(1)) / 100
        if not 0 <= fraction < 1:
            c.fail(where, f"{value!r} must lie in 0%..99%")
        return When(fraction=fraction)
    return When(seconds=c.number(value, where, minimum=0.0))


class _Checker:
    """Type and range checks that raise ScenarioError naming the file and the field."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, where: str, reason: str):
        raise ScenarioError(self.path, where, reason)

    def mapping(self, value: Any, where: str, allowed: Optional[set], required: bool = False) -> dict:
        if value is None and not required:
            return {}
        if not isinstance(value, dict):
            self.fail(where or "top level", f"expected a mapping (key: value), got {_kind(value)}")
        if allowed is not None:
            for key in value:
                if key not in allowed:
                    self.fail(f"{where}.{key}" if where else str(key),
                              f"unknown field; expected one of {', '.join(sorted(allowed))}")
        return value

    def sequence(self, value: Any, where: str, required: bool = False) -> list:
        if value is None:
            if required:
                self.fail(where, "missing (a list is required)")
            return []
        if not isinstance(value, list) or (required and not value):
            self.fail(where, f"expected a non-empty list, got {_kind(value)}")
        return value

    def text(self, value: Any, where: str, required: bool = False) -> str:
        if value is None and required:
            self.fail(where, "missing")
        if not isinstance(value, str) or (required and not value.strip()):
            self.fail(where, f"expected text, got {_kind(value)}")
        return value

    def choice(self, value: Any, where: str, options) -> str:
        if value not in options:
            self.fail(where, f"{value!r} is not one of {', '.join(options)}")
        return value

    def boolean(self, value: Any, where: str) -> bool:
        if not isinstance(value, bool):
            self.fail(where, f"expected true or false, got {_kind(value)}")
        return value

    def integer(self, value: Any, where: str, minimum: Optional[int] = None, required: bool = False) -> int:
        if value is None and required:
            self.fail(where, "missing")
        if not isinstance(value, int) or isinstance(value, bool):
            self.fail(where, f"expected an integer, got {_kind(value)}")
        if minimum is not None and value < minimum:
            self.fail(where, f"{value} is below the minimum {minimum}")
        return value

    def number(self, value: Any, where: str, minimum: Optional[float] = None, positive: bool = False) -> float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            self.fail(where, f"expected a number, got {_kind(value)}")
        if not math.isfinite(value):
            self.fail(where, f"{value} is not a finite number")
        if positive and value <= 0:
            self.fail(where, f"{value} must be positive")
        if minimum is not None and value < minimum:
            self.fail(where, f"{value} is below the minimum {minimum}")
        return float(value)


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return f"{type(value).__name__} {value!r}"[:80]
