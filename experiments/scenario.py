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
                                         # on netsim, the calibrated one on mininet (experiments/rate_caps.py)
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

The models below are the one description of the file: `load_scenario` checks a file against them
(every error names the file, the field as a dotted path, and what was expected), and
`python -m experiments.schema` exports them as the JSON Schema editors use
(experiments/scenario.schema.json).
"""
from __future__ import annotations

import copy
import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import Field, PlainValidator, WithJsonSchema, field_validator, model_validator

from host_agent.job import TRANSPORT_PARAMS, Mode, check_transport_params
from wire.schema import Schema, SchemaError, UnreadableDocument, check, describe, invalid, read_document, optional_fields

WORKLOAD_KINDS = ("allreduce", "alltoall", "incast", "permutation")
FAULT_KINDS = ("link_kill", "link_flap", "switch_blackhole", "switch_kill", "gray_loss", "switch_ev_deny",
               "random_loss", "switch_slow")
DTYPES = ("float32", "float64", "int32", "int64")
LOAD_SWEEP = "load-sweep"        # the `kind:` of a sweep file (experiments/load_sweep/sweep_file.py) beside the scenarios
LINK_KEYS = ("rate_bps", "queue_depth", "trim_threshold", "ecn_threshold",   # fields of every topology link
             "ecn_max_threshold")
CABLE_KEYS = ("delay_s", "mtu_payload")   # of the fabric as a whole: cable delay (s), payload bytes per packet
PROFILE_KEY = "switch_profile"      # named thresholds worked out from the fabric (experiments/switch_profiles.py)
MAX_DELAY_S = 1.0
AUTO = "auto"                        # rate_bps: the calibrated rate on mininet, the topology's on netsim
NAME_PATTERN = r"^[A-Za-z0-9_.-]+$"
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


class ScenarioError(ValueError):
    """A scenario file that cannot be run: names the file, the field and the reason."""

    def __init__(self, path: str, field_name: str, reason: str) -> None:
        self.path = path
        self.field = field_name
        self.reason = reason
        where = f"{path}: {field_name}" if field_name else path
        super().__init__(f"{where}: {reason}")


# --- the values of the file's keys ---------------------------------------------------------------
@dataclass(frozen=True)
class When:
    """When a fault starts: after `seconds`, or when the workload is `fraction` done."""

    seconds: Optional[float] = None
    fraction: Optional[float] = None

    def __str__(self) -> str:
        return f"{self.fraction:.0%} of the workload" if self.fraction is not None else f"t = {self.seconds:g} s"


def _when(value: Any) -> When:
    if isinstance(value, When):
        return value
    if isinstance(value, str):
        match = _PERCENT.match(value)
        if not match:
            raise invalid(f"{value!r} is neither seconds (a number) nor a share of the workload like '30%'")
        fraction = float(match.group(1)) / 100
        if not 0 <= fraction < 1:
            raise invalid(f"{value!r} must lie in 0%..99%")
        return When(fraction=fraction)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise invalid(f"expected seconds (a number) or a share of the workload like '30%', got {describe(value)}")
    if not math.isfinite(value) or value < 0:
        raise invalid(f"{value} is below the minimum 0.0" if value < 0 else f"{value} is not a finite number")
    return When(seconds=float(value))


def _link_target(value: Any) -> Union[str, tuple]:
    if value == AUTO:
        return AUTO
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return (value[0], value[1])
    raise invalid(f"{value!r} is neither 'auto' nor a pair of node names like [s1, s3]")


def _rate(value: Any) -> Union[str, int]:
    if value == AUTO:
        return AUTO
    if isinstance(value, str):
        raise invalid(f"{value!r} is neither bit/s (an integer) nor {AUTO!r}")
    if not isinstance(value, int) or isinstance(value, bool):
        raise invalid(f"expected an integer, got {describe(value)}")
    if value < 1:
        raise invalid(f"{value} is below the minimum 1")
    return value


StartTime = Annotated[When, PlainValidator(_when), WithJsonSchema({
    "anyOf": [{"type": "number", "minimum": 0}, {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*%\s*$"}],
    "description": "seconds after the start, or a share of the workload done like '30%'"})]
LinkTarget = Annotated[Union[str, tuple], PlainValidator(_link_target), WithJsonSchema({
    "anyOf": [{"const": AUTO}, {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 2}],
    "description": "'auto' (the fabric link the baseline's flows use most) or a pair of node names"})]
Rate = Annotated[Union[str, int], PlainValidator(_rate), WithJsonSchema({
    "anyOf": [{"const": AUTO}, {"type": "integer", "minimum": 1}],
    "description": "bit/s, or 'auto': the topology's own rate on netsim, the calibrated one on mininet"})]
class FaultSpec(Schema):
    """One fault: what breaks (a link or a switch), when, and how.

    `link` is "auto" (the fabric link the baseline's flows use most) or a pair of node names;
    `switch` is "auto" (the spine the baseline's flows use most) or a switch name.
    """

    kind: Literal[FAULT_KINDS] = Field(description="what breaks")
    at: StartTime = Field(When(seconds=0.0), json_schema_extra={"default": 0})
    link: LinkTarget = AUTO
    switch: str = Field(AUTO, description="'auto' (the spine the baseline's flows use most) or a switch name")
    period_s: float = Field(0.2, gt=0, description="link_flap: time between state changes")
    flaps: int = Field(0, ge=0, description="link_flap: state changes (0: until the run ends)")
    loss: float = Field(0.01, ge=0, description="gray_loss, random_loss: drop probability per packet")
    repair_after_s: Optional[float] = Field(None, gt=0, description="link_kill / switch_*: restore after this long")
    share: float = Field(0.25, gt=0, description="switch_slow: every link of the switch runs at this share of its rate")

    @field_validator("loss")
    @classmethod
    def _probability(cls, loss: float) -> float:
        if loss > 1:
            raise invalid(f"{loss} is a probability: it must lie in 0..1")
        return loss

    @field_validator("share")
    @classmethod
    def _share(cls, share: float) -> float:
        if share > 1:
            raise invalid(f"{share} is a share of the link rate: it must lie in 0..1")
        return share

    @model_validator(mode="after")
    def _target_fits_kind(self) -> "FaultSpec":
        given = self.model_fields_set
        on_switch = self.kind.startswith("switch")
        if self.kind == "random_loss" and ("link" in given or "switch" in given):
            raise invalid("a random_loss fault acts on every host's last hop: it names no link or switch",
                          "link" if "link" in given else "switch")
        if "link" in given and on_switch:
            raise invalid(f"a {self.kind} fault names a switch, not a link", "link")
        if "switch" in given and not on_switch:
            raise invalid(f"a {self.kind} fault names a link, not a switch", "switch")
        if "share" in given and self.kind != "switch_slow":
            raise invalid(f"only a switch_slow fault has a rate share (this is {self.kind})", "share")
        return self

    @property
    def label(self) -> str:
        target = self.switch if self.kind.startswith("switch") else (
            self.link if isinstance(self.link, str) else "-".join(self.link))
        extra = {"gray_loss": f" {self.loss:.0%} loss", "random_loss": f" {self.loss:.2%} loss",
                 "link_flap": f" every {self.period_s * 1e3:g} ms", "switch_slow": f" at {self.share:.0%} rate"}
        return f"{self.kind.replace('_', ' ')} ({target}){extra.get(self.kind, '')} at {self.at}"


class WorkloadSpec(Schema):
    """The traffic: a collective over every host, an N->1 incast, or a permutation."""

    kind: Literal[WORKLOAD_KINDS]
    bytes: int = Field(ge=1, description="allreduce: array bytes; alltoall: block per pair; others: per flow")
    chunk_bytes: int = Field(65536, ge=1, description="message size")
    dtype: Literal[DTYPES] = Field("float32", description="allreduce element type")
    senders: int = Field(0, ge=0, description="incast: number of senders (0: every other host)")
    victim: bool = Field(False, description="incast: add a victim flow beside the incast")
    receiver: str = Field("", description="incast: receiving host (default: the first host)")

    @model_validator(mode="after")
    def _whole_elements(self) -> "WorkloadSpec":
        if self.kind == "allreduce" and self.bytes % 4:
            raise invalid(f"{self.bytes} is not a whole number of {self.dtype} elements", "bytes")
        return self


class TransportSpec(Schema):
    """One transport to compare: MRC or the RoCE-style baseline, and what helps it."""

    mode: Mode
    name: str = Field("", description="its name in tables and figures (default: the mode)")
    reroute_delay_s: Optional[float] = Field(None, ge=0, description="baseline + emulated converging control plane")
    trimming: bool = Field(True, description="switches trim (false: drop-tail)")
    params: dict[str, Any] = Field(default_factory=dict, description="TransportConfig overrides",
                                   json_schema_extra={"propertyNames": {"enum": list(TRANSPORT_PARAMS)}})

    @model_validator(mode="before")
    @classmethod
    def _named_after_mode(cls, data: Any) -> Any:
        if isinstance(data, dict) and "name" not in data and isinstance(data.get("mode"), str):
            return {**data, "name": data["mode"]}
        return data

    @model_validator(mode="after")
    def _fits_the_mode(self) -> "TransportSpec":
        if self.reroute_delay_s is not None and self.mode != "roce":
            raise invalid("only the baseline (mode: roce) relies on rerouting", "reroute_delay_s")
        check_transport_params(self.mode, self.params, "params")
        return self


class LinkFields(Schema):
    """Link keys: applied to every topology link (rate, queue, thresholds) or to the fabric (cable, MTU)."""

    rate_bps: Optional[Rate] = None
    queue_depth: Optional[int] = Field(None, ge=1, description="packets a port queue holds")
    trim_threshold: Optional[int] = Field(None, ge=1, description="queue depth from which packets are trimmed")
    ecn_threshold: Optional[int] = Field(None, ge=0, description="queue depth where ECN marking starts")
    ecn_max_threshold: Optional[int] = Field(None, ge=1, description="queue depth where ECN marking is certain")
    delay_s: Optional[float] = Field(None, ge=0, description="netsim: cable delay in seconds")
    mtu_payload: Optional[int] = Field(None, ge=1, description="netsim: payload bytes per data packet")
    switch_profile: Optional[str] = Field(None, description="named thresholds worked out from the fabric "
                                                            "(experiments/switch_profiles.py), instead of the four")

    @field_validator("switch_profile")
    @classmethod
    def _a_profile(cls, name: Optional[str]) -> Optional[str]:
        from experiments.switch_profiles import PROFILES
        if name is not None and name not in PROFILES:
            raise invalid(f"{name!r} is not one of {', '.join(PROFILES)}")
        return name

    @field_validator("delay_s")
    @classmethod
    def _a_cable(cls, delay: Optional[float]) -> Optional[float]:
        if delay is not None and delay > MAX_DELAY_S:
            raise invalid(f"{delay} s is above {MAX_DELAY_S} s: a cable, not a satellite")
        return delay

    def given(self) -> dict:
        """The keys the file gives, with their values."""
        return self.model_dump(exclude_unset=True)


WorkloadOverride = optional_fields(WorkloadSpec, "WorkloadOverride")


class VariantOverride(Schema):
    """One variant: its label and the top-level keys it overrides (its workload merges key by key)."""

    label: Optional[str] = Field(None, description="its name in tables and figures")
    topology: Optional[str] = Field(None, description="any --topo spec, e.g. leafspine:2x2x2")
    link: Optional[LinkFields] = None
    workload: Optional[WorkloadOverride] = None
    faults: Optional[list[FaultSpec]] = Field(None, description="replaces the top-level list")


class ScenarioKeys(Schema):
    """The keys of a scenario file (top level) and of its `quick:` overrides."""

    name: str = Field(description="results folder prefix: letters, digits, '.', '_' and '-'")
    title: Optional[str] = Field(None, description="figure and report titles (default: the name)")
    description: str = Field("", description="free text")
    seed: int = Field(1, ge=0)
    horizon_s: float = Field(5.0, gt=0, description="give up after this much (simulated or real) time")
    sample_interval_s: float = Field(0.005, gt=0, description="goodput sampling period")
    topology: Optional[str] = Field(None, description="any --topo spec, e.g. leafspine:2x2x2")
    link: Optional[LinkFields] = None
    workload: Optional[WorkloadOverride] = Field(None, description="the traffic; variants merge over it")
    faults: list[FaultSpec] = Field(default_factory=list)
    transports: list[TransportSpec] = Field(min_length=1, description="each variant runs with each transport")
    variants: Optional[list[VariantOverride]] = Field(None, min_length=1)

    @field_validator("name")
    @classmethod
    def _a_folder_name(cls, name: str) -> str:
        if not name.strip():
            raise invalid(f"expected text, got {describe(name)}")
        if not re.fullmatch(NAME_PATTERN, name):
            raise invalid(f"{name!r} may only hold letters, digits, '.', '_' and '-' (it names the results folder)")
        return name


QuickOverride = optional_fields(ScenarioKeys, "QuickOverride", exclude=("name",))


class ScenarioFile(ScenarioKeys):
    """A scenario file as written: defaults at the top level, variants, and what `--quick` changes."""

    model_config = {"title": "MRC testbed scenario", "json_schema_extra": {
        "description": "An experiment of the MRC testbed (experiments/README.md)"}}

    quick: Optional[QuickOverride] = Field(None, description="merged over the top level by --quick")


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
def load_scenario(path: Union[str, Path], quick: bool = False, seed: Optional[int] = None) -> Scenario:
    """Parse and validate the scenario file at `path` (with its `quick` overrides when asked)."""
    try:
        doc = read_document(path)
    except UnreadableDocument as error:
        raise ScenarioError(error.path, error.where, error.reason) from None
    return parse_scenario(doc, str(path), quick=quick, seed=seed)


def parse_scenario(doc: Any, path: str = "<scenario>", quick: bool = False, seed: Optional[int] = None) -> Scenario:
    """Validate a scenario given as a dict (what the YAML file holds)."""
    if isinstance(doc, dict) and doc.get("kind") == LOAD_SWEEP:
        raise ScenarioError(path, "kind", f"this file is a {LOAD_SWEEP}, not a scenario: "
                                          f"run it with `mrc-testbed sweep {path}`")
    if not isinstance(doc, dict):
        raise ScenarioError(path, "top level", f"expected a mapping (key: value), got {describe(doc)}")
    file = _checked(ScenarioFile, doc, path)
    if quick and file.quick is not None:
        file = _checked(ScenarioFile, _merge(doc, doc["quick"]), path)
    if file.sample_interval_s >= file.horizon_s:
        raise ScenarioError(path, "sample_interval_s", f"{file.sample_interval_s} s must be shorter than "
                                                       f"horizon_s ({file.horizon_s} s)")
    names = [t.name for t in file.transports]
    for i, name in enumerate(names):
        if names.index(name) != i:
            raise ScenarioError(path, f"transports[{i}].name", f"{name!r} is used twice")
    variants = [_variant(file, over, f"variants[{i}]" if file.variants else "", i, path)
                for i, over in enumerate(file.variants or [VariantOverride()])]
    labels = [v.label for v in variants]
    for i, label in enumerate(labels):
        if labels.index(label) != i:
            raise ScenarioError(path, f"variants[{i}].label", f"{label!r} is used twice")
    return Scenario(file.name, file.title if file.title is not None else file.name, file.description, path,
                    seed if seed is not None else file.seed, float(file.horizon_s), float(file.sample_interval_s),
                    tuple(file.transports), tuple(variants))


def _checked(model: type, data: Any, path: str, prefix: str = ""):
    try:
        return check(model, data)
    except SchemaError as error:
        where = f"{prefix}.{error.path}" if prefix and error.path else (prefix or error.path)
        raise ScenarioError(path, where.replace(".[", "["), error.reason) from None


def _merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def _variant(file: ScenarioFile, over: VariantOverride, where: str, index: int, path: str) -> Variant:
    """A variant: the top-level keys with its overrides (its workload merged key by key) and checked whole."""
    given = over.model_fields_set

    def at(key: str) -> str:
        return f"{where}.{key}" if key in given else key

    topology = over.topology if "topology" in given else file.topology
    if topology is None:
        raise ScenarioError(path, at("topology"), "missing")
    from topologies import TopologySpecError, topology_from_spec
    try:
        topo = topology_from_spec(topology)
    except (TopologySpecError, ValueError, OSError) as error:
        raise ScenarioError(path, at("topology"), str(error)) from None
    link = over.link if "link" in given else file.link
    link = link.given() if link is not None else {}
    if PROFILE_KEY in link:
        link = _apply_profile(topology, link, f"{at('link')}.{PROFILE_KEY}", path)
    _check_links(topology, link, at("link"), path)
    top = file.workload.model_dump(exclude_unset=True) if file.workload is not None else {}
    mine = over.workload.model_dump(exclude_unset=True) if over.workload is not None else {}
    if file.workload is None and over.workload is None:
        raise ScenarioError(path, at("workload"), "missing (a mapping with kind and bytes)")
    workload = _checked(WorkloadSpec, {**top, **mine}, path, at("workload"))
    faults = (over.faults or []) if "faults" in given else file.faults
    _check_fault_targets(topo, faults, at("faults"), path)
    label = over.label if over.label is not None else (topology if index == 0 else f"variant {index + 1}")
    return Variant(label, topology, link, workload, tuple(faults))


def _check_fault_targets(topo, faults: list, where: str, path: str) -> None:
    """Every link or switch a fault names by name is one of the variant's topology (found when the
    file is read, not when the case reaches the fault)."""
    for i, fault in enumerate(faults):
        if fault.link != AUTO:
            a, b = fault.link
            try:
                topo.link_between(a, b)
            except KeyError:
                raise ScenarioError(path, f"{where}[{i}].link",
                                    f"no link between {a} and {b} in {topo.name}") from None
        if fault.switch != AUTO and not topo.is_switch(fault.switch):
            known = ", ".join(s.name for s in topo.switches)
            raise ScenarioError(path, f"{where}[{i}].switch",
                                f"{fault.switch!r} is not a switch of {topo.name} (its switches: {known})")


def _apply_profile(topology: str, link: dict, where: str, path: str) -> dict:
    """`link` with the thresholds of the switch profile it names, worked out from its rate, cable
    delay and payload size on `topology` (experiments/switch_profiles.py)."""
    from experiments import switch_profiles
    from topologies import topology_from_spec
    name = link[PROFILE_KEY]
    missing = [key for key in ("rate_bps", "delay_s", "mtu_payload")
               if key not in link or (key == "rate_bps" and not isinstance(link[key], int))]
    if missing:
        raise ScenarioError(path, where, f"profile {name!r} is sized from the fabric: link needs "
                                         f"{', '.join(missing)} (rate_bps in bit/s, not {AUTO!r})")
    hops = 2 * max(1, len(topology_from_spec(topology).tiers()))
    fields = switch_profiles.profile_fields(name, hops, float(link["delay_s"]), float(link["rate_bps"]),
                                            int(link["mtu_payload"]))
    return {**link, **fields}


def _check_links(topology: str, link: dict, where: str, path: str) -> None:
    """The link keys, over the topology's own values, make links the topology accepts (e.g. an
    ecn_threshold above the default trim_threshold does not)."""
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
        raise ScenarioError(path, where, str(error)) from None
