"""Topologies in YAML files: load (with line numbers in every error) and save.

Two forms. A builder shortcut::

    builder: leafspine            # dumbbell | leafspine | fattree | multiplane
    params: {leaves: 4, spines: 2, hosts_per_leaf: 2}
    defaults: {rate: 20Mbit, queue_depth: 64, trim_threshold: 8, ecn_threshold: 4,   # optional
               ecn_max_threshold: 8}        # ECN ramp top; unset: a step at ecn_threshold

or an explicit description::

    name: triangle
    defaults: {rate: 20Mbit}      # optional; unset fields take topologies.model defaults
    hosts: 3                      # or a list of names: [h1, h2, h3]
    switches:
      - {name: s1, tier: leaf, plane: 0}     # tier: leaf|spine|core or 0|1|2; name optional
    links:
      - {a: h1, b: s1}                       # ports optional: switches count from 1 in link order,
      - {a: s1, a_port: 3, b: s2, b_port: 3, rate: 10Mbit, queue_depth: 32}   # a host's is its plane

Rates are bit/s as a number or a string such as "20Mbit", "1.5 Gbit/s", "500kbps".
`TopologyFile` and its parts are the one description of the file; a bad file raises
`TopologyFileError` naming the file, the line, the key and the reason.
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Optional, Union

import yaml
from pydantic import Field, PlainValidator, WithJsonSchema

from topologies import builders
from topologies.model import TIER_NAMES, Host, Link, Switch, Topology, TopologyError
from wire.schema import Schema, SchemaError, check, describe, invalid

LINK_FIELDS = {"rate": "rate_bps", "queue_depth": "queue_depth",
               "trim_threshold": "trim_threshold", "ecn_threshold": "ecn_threshold",
               "ecn_max_threshold": "ecn_max_threshold"}
_RATE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(?:bit(?:/s)?|bps|b/s)?\s*", re.IGNORECASE)
_RATE_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_TIERS_BY_NAME = {name: tier for tier, name in TIER_NAMES.items()}


class TopologyFileError(ValueError):
    """A topology file that cannot be read: names the file, the line (1-based) and the reason."""

    def __init__(self, path: str, line: int | None, reason: str):
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {reason}")
        self.path, self.line, self.reason = path, line, reason


def parse_rate(value: Any) -> int:
    """Bit/s from a number or a string like "20Mbit" (ValueError when neither)."""
    if isinstance(value, bool):
        raise ValueError(f"rate {value!r} is not a number of bit/s")
    if isinstance(value, (int, float)):
        rate = value
    else:
        match = _RATE.fullmatch(str(value))
        if not match:
            raise ValueError(f"rate {value!r} is not like 20Mbit, 1.5Gbit/s or 500000")
        rate = float(match.group(1)) * _RATE_UNITS[match.group(2).lower()]
    if rate != rate or rate in (float("inf"), float("-inf")):
        raise ValueError(f"rate {value!r} is not a finite number of bit/s")
    if rate != int(rate):
        raise ValueError(f"rate {value!r} is not a whole number of bit/s")
    return int(rate)


def format_rate(rate_bps: int) -> str:
    """The shortest exact "<n><unit>bit" spelling of a rate."""
    for unit, factor in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if rate_bps % factor == 0:
            return f"{rate_bps // factor}{unit}bit"
    return str(rate_bps)


def _rate(value: Any) -> int:
    try:
        return parse_rate(value)
    except ValueError as error:
        raise invalid(str(error)) from None


def _tier(value: Any) -> int:
    if isinstance(value, str) and value in _TIERS_BY_NAME:
        return _TIERS_BY_NAME[value]
    if isinstance(value, int) and not isinstance(value, bool) and value in TIER_NAMES:
        return value
    raise invalid(f"tier {value!r} is not one of {', '.join(f'{n}/{t}' for t, n in TIER_NAMES.items())}")


def _hosts(value: Any) -> Union[int, list]:
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise invalid(f"hosts must be >= 0, not {value}")
        return value
    if isinstance(value, list):
        for i, name in enumerate(value):
            if not isinstance(name, str) or not name:
                raise invalid(f"host name {name!r} is not a non-empty string", f"[{i}]")
        return value
    raise invalid(f"hosts must be an integer (a count) or a list of names, not {value!r}")


Rate = Annotated[int, PlainValidator(_rate), WithJsonSchema({"anyOf": [{"type": "integer"}, {"type": "string"}],
                                                               "description": "bit/s, or like 20Mbit"})]
Name = Annotated[str, Field(min_length=1)]


class LinkDefaults(Schema):
    """Link fields: a rate (bit/s or "20Mbit") and the queue and marking thresholds (packets)."""

    rate: Optional[Rate] = None
    queue_depth: Optional[int] = None
    trim_threshold: Optional[int] = None
    ecn_threshold: Optional[int] = None
    ecn_max_threshold: Optional[int] = None

    def link_kwargs(self) -> dict[str, int]:
        """The given fields as Link keyword arguments."""
        return {LINK_FIELDS[key]: value for key, value in self.model_dump(exclude_none=True).items()
                if key in LINK_FIELDS}


class SwitchEntry(Schema):
    """One switch of an explicit file (name default: s<position>)."""

    name: Optional[Name] = None
    tier: Annotated[int, PlainValidator(_tier)] = 0
    plane: int = Field(0, ge=0)


class LinkEntry(LinkDefaults):
    """One link of an explicit file: its ends, their ports (optional) and its own link fields."""

    a: Name
    b: Name
    a_port: Optional[int] = Field(None, ge=0)
    b_port: Optional[int] = Field(None, ge=0)


class TopologyFile(Schema):
    """A topology file: a builder with its parameters, or hosts, switches and links."""

    name: Optional[Name] = None
    builder: Optional[Name] = None
    params: Optional[dict[str, Any]] = Field(None, description="the builder's parameters")
    defaults: Optional[LinkDefaults] = None
    hosts: Optional[Annotated[Union[int, list], PlainValidator(_hosts)]] = None
    switches: Optional[list[SwitchEntry]] = None
    links: Optional[list[LinkEntry]] = None


class _Lines:
    """Where each value of a composed YAML file starts, to name the line of an error."""

    def __init__(self, path: str, root: yaml.Node):
        self.path = path
        self.root = root

    def node(self, loc: tuple, key: bool = False) -> yaml.Node:
        """The node at `loc` (keys and indexes); its key's node when `key`; the deepest one found."""
        node = self.root
        for depth, part in enumerate(loc):
            if isinstance(node, yaml.MappingNode):
                found = next(((k, v) for k, v in node.value if getattr(k, "value", None) == str(part)), None)
                if found is None:
                    return node
                node = found[0] if key and depth == len(loc) - 1 else found[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                node = node.value[part]
            else:
                return node
        return node

    def check_unique_keys(self, node: Optional[yaml.Node] = None) -> None:
        """TopologyFileError at a key written twice in one mapping (YAML would keep the last)."""
        node = self.root if node is None else node
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key, value in node.value:
                name = getattr(key, "value", None)
                if isinstance(name, str) and name in seen:
                    raise TopologyFileError(self.path, key.start_mark.line + 1, f"duplicate key {name!r}")
                seen.add(name)
                self.check_unique_keys(value)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                self.check_unique_keys(item)

    def fail(self, loc: tuple, reason: str, key: bool = False) -> TopologyFileError:
        return TopologyFileError(self.path, self.node(loc, key).start_mark.line + 1, reason)


def load_topology(path: str) -> Topology:
    """Read a topology file; raise TopologyFileError (file, line, reason) when it is bad."""
    try:
        with open(path, encoding="utf-8") as stream:
            text = stream.read()
    except OSError as error:
        raise TopologyFileError(path, None, f"cannot read: {error.strerror or error}") from None
    return loads_topology(text, path)


def loads_topology(text: str, path: str = "<string>") -> Topology:
    """Parse a topology from YAML text; `path` only names it in errors."""
    try:
        root = yaml.compose(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        raise TopologyFileError(path, mark.line + 1 if mark else None,
                                f"not valid YAML: {error.problem or error.context}") from None
    if root is None:
        raise TopologyFileError(path, None, "empty file")
    lines = _Lines(path, root)
    lines.check_unique_keys()
    try:
        data = yaml.constructor.SafeConstructor().construct_document(root)
    except yaml.MarkedYAMLError as error:        # a tag it cannot build, e.g. !!binary of no base64
        mark = error.problem_mark or error.context_mark
        raise TopologyFileError(path, mark.line + 1 if mark else None,
                                f"not a value this file can hold: {error.problem or error}") from None
    if not isinstance(data, dict):
        raise lines.fail((), "the topology file must be a mapping")
    try:
        spec = check(TopologyFile, data)
    except SchemaError as error:
        raise lines.fail(error.loc, f"{error.path}: {error.reason}" if error.path else error.reason,
                         key=error.unknown) from None
    if spec.builder is not None:
        return _load_builder(lines, spec)
    return _load_explicit(lines, spec)


def _load_builder(lines: _Lines, spec: TopologyFile) -> Topology:
    for key in ("hosts", "switches", "links"):
        if getattr(spec, key) is not None:
            raise lines.fail((key,), f"{key!r} cannot be combined with 'builder'")
    kind = spec.builder
    if kind not in builders.BUILDERS:
        raise lines.fail(("builder",), f"unknown builder {kind!r} (expected one of "
                                       f"{', '.join(sorted(builders.BUILDERS))})")
    function, names = builders.BUILDERS[kind]
    kwargs: dict[str, Any] = {}
    allowed = set(names) | ({"bottleneck_rate"} if kind == "dumbbell" else set())
    for key, value in (spec.params or {}).items():
        where = ("params", key)
        if key not in allowed:
            raise lines.fail(where, f"params.{key}: unknown field; expected one of {', '.join(sorted(allowed))}",
                             key=True)
        if key == "bottleneck_rate":
            try:
                kwargs["bottleneck_rate_bps"] = parse_rate(value)
            except ValueError as error:
                raise lines.fail(where, f"params.{key}: {error}") from None
        elif not isinstance(value, int) or isinstance(value, bool):
            raise lines.fail(where, f"params.{key}: expected an integer, got {describe(value)}")
        else:
            kwargs[key] = value
    if spec.defaults is not None:
        kwargs.update(spec.defaults.link_kwargs())
    try:
        topo = function(**kwargs)
    except (ValueError, TypeError) as error:
        raise lines.fail(("params",) if spec.params is not None else ("builder",), f"{kind}: {error}") from None
    if spec.name is not None:
        topo = Topology(spec.name, topo.hosts, topo.switches, topo.links)
    return topo


def _load_explicit(lines: _Lines, spec: TopologyFile) -> Topology:
    if spec.params is not None:
        raise lines.fail(("params",), "'params' needs 'builder'")
    for key in ("hosts", "switches", "links"):
        if getattr(spec, key) is None:
            raise lines.fail((), f"the topology file lacks {key!r} (or a 'builder')")
    defaults = spec.defaults.link_kwargs() if spec.defaults is not None else {}
    if isinstance(spec.hosts, int):
        hosts = [Host(f"h{i + 1}", i) for i in range(spec.hosts)]
        host_locs = [("hosts",)] * spec.hosts
    else:
        hosts = [Host(name, i) for i, name in enumerate(spec.hosts)]
        host_locs = [("hosts", i) for i in range(len(hosts))]
    switches = [Switch(entry.name or f"s{index + 1}", index, entry.tier, entry.plane)
                for index, entry in enumerate(spec.switches)]
    links = _links(lines, spec.links, defaults, hosts, switches)
    topo = Topology(spec.name or lines.path, hosts, switches, links)
    try:
        return topo.validate()
    except TopologyError as error:
        locs = {"host": host_locs, "switch": [("switches", i) for i in range(len(switches))],
                "link": [("links", i) for i in range(len(links))]}.get(error.kind)
        loc = locs[error.index] if locs and error.index is not None else ()
        raise lines.fail(loc, str(error)) from None


def _links(lines: _Lines, entries: list[LinkEntry], defaults: dict[str, int], hosts: list[Host],
           switches: list[Switch]) -> list[Link]:
    planes = {s.name: s.plane for s in switches}
    host_names = {h.name for h in hosts}
    rows = []
    for index, entry in enumerate(entries):
        for end in ("a", "b"):
            name = getattr(entry, end)
            if name not in planes and name not in host_names:
                raise lines.fail(("links", index, end), f"links[{index}].{end}: unknown node {name!r}")
        rows.append(([entry.a, entry.b], [entry.a_port, entry.b_port], {**defaults, **entry.link_kwargs()}))
    _assign_ports(rows, planes)
    return [Link(ends[0], ports[0], ends[1], ports[1], **params) for ends, ports, params in rows]


def _assign_ports(rows: list, planes: dict[str, int]) -> None:
    """Fill missing ports: a host's is its switch's plane; a switch's is its lowest free port."""
    used: dict[str, set[int]] = {}
    for ends, ports, _ in rows:
        for end, port in zip(ends, ports):
            if port is not None and end in planes:
                used.setdefault(end, set()).add(port)
    for ends, ports, _ in rows:
        for i, end in enumerate(ends):
            if ports[i] is not None:
                continue
            if end in planes:
                taken = used.setdefault(end, set())
                port = 1
                while port in taken:
                    port += 1
                taken.add(port)
                ports[i] = port
            else:
                other = ends[1 - i]
                ports[i] = planes.get(other, 0)


def dumps_topology(topo: Topology) -> str:
    """Explicit YAML text of a topology (every port and link field written out)."""
    document = {
        "name": topo.name,
        "hosts": [h.name for h in topo.hosts],
        "switches": [{"name": s.name, "tier": TIER_NAMES[s.tier], "plane": s.plane} for s in topo.switches],
        "links": [{"a": l.a, "a_port": l.a_port, "b": l.b, "b_port": l.b_port,
                   "rate": format_rate(l.rate_bps), "queue_depth": l.queue_depth,
                   "trim_threshold": l.trim_threshold, "ecn_threshold": l.ecn_threshold}
                  | ({} if l.ecn_max_threshold is None else {"ecn_max_threshold": l.ecn_max_threshold})
                  for l in topo.links],
    }
    return _FlowDumper.dump(document)


def save_topology(topo: Topology, path: str) -> None:
    """Write `topo` to `path` in the explicit form (loadable by `load_topology`)."""
    with open(path, "w", encoding="utf-8") as stream:
        stream.write(dumps_topology(topo))


class _FlowDumper:
    """YAML with one line per switch and per link."""

    @staticmethod
    def dump(document: dict) -> str:
        lines = [yaml.safe_dump({"name": document["name"]}, sort_keys=False).rstrip(),
                 "hosts: " + yaml.safe_dump(document["hosts"], default_flow_style=True, width=10**6).strip()]
        for key in ("switches", "links"):
            lines.append(f"{key}:")
            lines.extend("  - " + yaml.safe_dump(item, default_flow_style=True, sort_keys=False,
                                                 width=10**6).strip()
                         for item in document[key])
        return "\n".join(lines) + "\n"

