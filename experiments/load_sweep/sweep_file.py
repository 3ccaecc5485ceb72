"""The sweep file: which topology and links, who sends to whom through which queue, and the loads.

    kind: load-sweep                 # tells it apart from a scenario
    name: trim-sweep                 # results folder prefix
    topology: dumbbell:4
    link: {rate_bps: 4000000, queue_depth: 64, trim_threshold: 16, ecn_threshold: 4, ecn_max_threshold: 12}
    senders: [h1, h2, h3]
    receiver: h4
    bottleneck: [s2, h4]             # the egress queue of s2 towards h4
    loads: [0.25, 0.5, 1.0, 1.5]     # offered load, shares of the bottleneck's rate
    step_s: 3.0
    payload_bytes: 1000
    quick: {loads: [0.5, 1.5], step_s: 1.0}

`SweepSpec` is the one description of the file; `load_sweep_spec` checks it, then against its
topology; a SweepError names the file and the key.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import Field, field_validator

from experiments.scenario import LINK_KEYS, LOAD_SWEEP, NAME_PATTERN
from topologies import topology_from_spec
from topologies.model import Topology
from topologies.paths import host_paths
from wire.schema import Schema, SchemaError, UnreadableDocument, check, invalid, read_document


class SweepError(ValueError):
    """A bad sweep file: the message names the file and the key."""


Load = Annotated[float, Field(gt=0, le=10)]


class SweepQuick(Schema):
    """What `--quick` changes: the loads and the time per load."""

    loads: Optional[list[Load]] = Field(None, min_length=1)
    step_s: Optional[float] = Field(None, gt=0, le=600)


class SweepSpec(Schema):
    """What to sweep: the topology and its links, who sends to whom through which queue, the loads."""

    kind: Literal[LOAD_SWEEP]
    name: str = Field(description="results folder prefix: letters, digits, '.', '_' and '-'")
    title: str = ""
    description: str = ""
    topology: str = Field(description="a topology spec, e.g. dumbbell:4")
    link: dict[str, int] = Field(description="fields of every topology link: " + ", ".join(LINK_KEYS))
    senders: list[str] = Field(min_length=1)
    receiver: str
    bottleneck: list[str] = Field(min_length=2, max_length=2, description="[switch, next node]: its egress queue")
    loads: list[Load] = Field(min_length=1, description="offered load as a share of the bottleneck's rate")
    step_s: float = Field(gt=0, le=600, description="seconds each load is offered")
    payload_bytes: int = Field(1000, ge=1, le=9000)
    quick: Optional[SweepQuick] = None

    @field_validator("name")
    @classmethod
    def _a_folder_name(cls, name: str) -> str:
        if not re.fullmatch(NAME_PATTERN, name):
            raise invalid(f"{name!r} may only hold letters, digits, '.', '_' and '-' (it names the results folder)")
        return name

    @field_validator("link", mode="before")
    @classmethod
    def _link_fields(cls, link: Any) -> Any:
        for key in link if isinstance(link, dict) else ():
            if key not in LINK_KEYS:
                raise invalid(f"unknown field; expected one of {', '.join(LINK_KEYS)}", key)
        return link

    @property
    def label(self) -> str:
        """The title, or the name."""
        return self.title or self.name

    def topology_built(self) -> Topology:
        """The topology with the sweep's link fields on every link."""
        topo = topology_from_spec(self.topology)
        links = [dataclasses.replace(link, **self.link) for link in topo.links]
        return Topology(topo.name, topo.hosts, topo.switches, links).validate()


def load_sweep_spec(path: str | Path, quick: bool = False) -> SweepSpec:
    """Read a sweep file (`quick:` overrides loads and step_s); SweepError names what is wrong."""
    path = Path(path)
    try:
        raw = read_document(path)
    except UnreadableDocument as error:
        raise SweepError(str(error)) from None
    if not isinstance(raw, dict):
        raise SweepError(f"{path}: a sweep file is a mapping")
    if raw.get("kind") != LOAD_SWEEP:
        raise SweepError(f"{path}: kind must be {LOAD_SWEEP!r} (a sweep file), not {raw.get('kind')!r}"
                         + ("; scenarios run with `mrc-testbed run`" if "workload" in raw else ""))
    spec = _checked(raw, path)
    if quick and spec.quick is not None:
        spec = _checked({**raw, **spec.quick.model_dump(exclude_none=True)}, path)
    _check_against_topology(path, spec)
    return spec


def _checked(raw: Any, path: Path) -> SweepSpec:
    try:
        return check(SweepSpec, raw)
    except SchemaError as error:
        raise SweepError(f"{path}: {error}") from None


def _check_against_topology(path: Path, spec: SweepSpec) -> None:
    try:
        topo = spec.topology_built()
    except (ValueError, TypeError) as error:
        raise SweepError(f"{path}: topology/link: {error}") from None
    switch, towards = spec.bottleneck
    try:
        topo.link_between(switch, towards)
    except (KeyError, ValueError):
        raise SweepError(f"{path}: bottleneck: no link between {switch} and {towards} in {spec.topology}") from None
    if not topo.is_switch(switch):
        raise SweepError(f"{path}: bottleneck: {switch} is not a switch")
    hosts = {h.name for h in topo.hosts}
    for key, host in (*((f"senders[{i}]", h) for i, h in enumerate(spec.senders)), ("receiver", spec.receiver)):
        if host not in hosts:
            raise SweepError(f"{path}: {key}: no host {host!r} in {spec.topology}")
    if spec.receiver in spec.senders:
        raise SweepError(f"{path}: receiver: {spec.receiver} is also a sender")
    for i, sender in enumerate(spec.senders):
        if not paths_through_bottleneck(spec, topo, sender):
            raise SweepError(f"{path}: senders[{i}]: no path from {sender} to {spec.receiver} crosses {switch}->{towards}")


def paths_through_bottleneck(spec: SweepSpec, topo: Topology, sender: str) -> list:
    """The uSID paths from `sender` to the receiver that cross the bottleneck (switch -> next node)."""
    switch, towards = spec.bottleneck

    def crosses(switches: tuple[str, ...]) -> bool:
        hops = (*switches, spec.receiver)
        return any((x, y) == (switch, towards) for x, y in zip(hops, hops[1:]))

    return [p for p in host_paths(topo, sender, spec.receiver) if crosses(p.switches)]
