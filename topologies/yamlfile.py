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
A bad file raises `TopologyFileError` naming the file, the line and the reason.
"""
from __future__ import annotations

import re
from typing import Any

import yaml

from topologies import builders
from topologies.model import TIER_NAMES, Host, Link, Switch, Topology, TopologyError

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


class _Reader:
    """Walks a composed YAML node tree, turning nodes into values and errors into file:line."""

    def __init__(self, path: str):
        self.path = path
        self._constructor = yaml.constructor.SafeConstructor()

    def fail(self, node: yaml.Node | None, reason: str) -> TopologyFileError:
        line = node.start_mark.line + 1 if node is not None else None
        return TopologyFileError(self.path, line, reason)

    def mapping(self, node: yaml.Node, what: str, allowed: set[str],
                required: tuple[str, ...] = ()) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, f"{what} must be a mapping")
        items: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            key = self.value(key_node)
            if key not in allowed:
                raise self.fail(key_node, f"unknown key {key!r} in {what} (expected one of "
                                          f"{', '.join(sorted(allowed))})")
            if key in items:
                raise self.fail(key_node, f"duplicate key {key!r} in {what}")
            items[key] = value_node
        for key in required:
            if key not in items:
                raise self.fail(node, f"{what} lacks {key!r}")
        return items

    def sequence(self, node: yaml.Node, what: str) -> list[yaml.Node]:
        if not isinstance(node, yaml.SequenceNode):
            raise self.fail(node, f"{what} must be a list")
        return list(node.value)

    def value(self, node: yaml.Node) -> Any:
        try:
            return self._constructor.construct_object(node, deep=True)
        except yaml.MarkedYAMLError as error:        # a tag it cannot build, e.g. !!binary of no base64
            raise self.fail(node, f"not a value this file can hold: {error.problem or error}") from None

    def integer(self, node: yaml.Node, what: str, minimum: int | None = None) -> int:
        value = self.value(node)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(node, f"{what} must be an integer, not {value!r}")
        if minimum is not None and value < minimum:
            raise self.fail(node, f"{what} must be >= {minimum}, not {value}")
        return value

    def string(self, node: yaml.Node, what: str) -> str:
        value = self.value(node)
        if not isinstance(value, str) or not value:
            raise self.fail(node, f"{what} must be a non-empty string, not {value!r}")
        return value

    def link_params(self, node: yaml.Node, what: str) -> dict[str, int]:
        """`defaults`-style link fields -> Link keyword arguments."""
        items = self.mapping(node, what, set(LINK_FIELDS))
        return {LINK_FIELDS[key]: self.link_field(key, value, what) for key, value in items.items()}

    def link_field(self, key: str, node: yaml.Node, what: str) -> int:
        if key == "rate":
            try:
                return parse_rate(self.value(node))
            except ValueError as error:
                raise self.fail(node, f"{what}: {error}") from None
        return self.integer(node, f"{what}: {key}")


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
    reader = _Reader(path)
    try:
        root = yaml.compose(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        raise TopologyFileError(path, mark.line + 1 if mark else None,
                                f"not valid YAML: {error.problem or error.context}") from None
    if root is None:
        raise TopologyFileError(path, None, "empty file")
    top = reader.mapping(root, "the topology file",
                         {"name", "builder", "params", "defaults", "hosts", "switches", "links"})
    if "builder" in top:
        return _load_builder(reader, top)
    return _load_explicit(reader, root, top)


def _load_builder(reader: _Reader, top: dict[str, yaml.Node]) -> Topology:
    for key in ("hosts", "switches", "links"):
        if key in top:
            raise reader.fail(top[key], f"{key!r} cannot be combined with 'builder'")
    kind_node = top["builder"]
    kind = reader.string(kind_node, "builder")
    if kind not in builders.BUILDERS:
        raise reader.fail(kind_node, f"unknown builder {kind!r} (expected one of "
                                     f"{', '.join(sorted(builders.BUILDERS))})")
    function, names = builders.BUILDERS[kind]
    kwargs: dict[str, Any] = {}
    if "params" in top:
        allowed = set(names) | ({"bottleneck_rate"} if kind == "dumbbell" else set())
        for key, node in reader.mapping(top["params"], f"params of {kind}", allowed).items():
            if key == "bottleneck_rate":
                kwargs["bottleneck_rate_bps"] = reader.link_field("rate", node, f"params of {kind}")
            else:
                kwargs[key] = reader.integer(node, f"{kind} parameter {key}")
    if "defaults" in top:
        kwargs.update(reader.link_params(top["defaults"], "defaults"))
    try:
        topo = function(**kwargs)
    except (ValueError, TypeError) as error:
        raise reader.fail(top.get("params", kind_node), f"{kind}: {error}") from None
    if "name" in top:
        topo = Topology(reader.string(top["name"], "name"), topo.hosts, topo.switches, topo.links)
    return topo


def _load_explicit(reader: _Reader, root: yaml.Node, top: dict[str, yaml.Node]) -> Topology:
    if "params" in top:
        raise reader.fail(top["params"], "'params' needs 'builder'")
    for key in ("hosts", "switches", "links"):
        if key not in top:
            raise reader.fail(root, f"the topology file lacks {key!r} (or a 'builder')")
    name = reader.string(top["name"], "name") if "name" in top else reader.path
    defaults = reader.link_params(top["defaults"], "defaults") if "defaults" in top else {}
    hosts, host_nodes = _read_hosts(reader, top["hosts"])
    switches, switch_nodes = _read_switches(reader, top["switches"])
    links, link_nodes = _read_links(reader, top["links"], defaults, hosts, switches)
    topo = Topology(name, hosts, switches, links)
    try:
        return topo.validate()
    except TopologyError as error:
        nodes = {"host": host_nodes, "switch": switch_nodes, "link": link_nodes}.get(error.kind)
        node = nodes[error.index] if nodes and error.index is not None else root
        raise reader.fail(node, str(error)) from None


def _read_hosts(reader: _Reader, node: yaml.Node) -> tuple[list[Host], list[yaml.Node]]:
    if isinstance(node, yaml.ScalarNode):
        count = reader.integer(node, "hosts", minimum=0)
        return [Host(f"h{i + 1}", i) for i in range(count)], [node] * count
    items = reader.sequence(node, "hosts (a count or a list of names)")
    return [Host(reader.string(item, "host name"), i) for i, item in enumerate(items)], items


def _read_switches(reader: _Reader, node: yaml.Node) -> tuple[list[Switch], list[yaml.Node]]:
    items = reader.sequence(node, "switches")
    switches = []
    for index, item in enumerate(items):
        what = f"switch #{index}"
        fields = reader.mapping(item, what, {"name", "tier", "plane"})
        name = reader.string(fields["name"], f"{what} name") if "name" in fields else f"s{index + 1}"
        tier = _read_tier(reader, fields["tier"], what) if "tier" in fields else 0
        plane = reader.integer(fields["plane"], f"{what} plane", minimum=0) if "plane" in fields else 0
        switches.append(Switch(name, index, tier, plane))
    return switches, items


def _read_tier(reader: _Reader, node: yaml.Node, what: str) -> int:
    value = reader.value(node)
    if isinstance(value, str) and value in _TIERS_BY_NAME:
        return _TIERS_BY_NAME[value]
    if isinstance(value, int) and not isinstance(value, bool) and value in TIER_NAMES:
        return value
    raise reader.fail(node, f"{what} tier {value!r} is not one of "
                            f"{', '.join(f'{n}/{t}' for t, n in TIER_NAMES.items())}")


def _read_links(reader: _Reader, node: yaml.Node, defaults: dict[str, int], hosts: list[Host],
                switches: list[Switch]) -> tuple[list[Link], list[yaml.Node]]:
    items = reader.sequence(node, "links")
    planes = {s.name: s.plane for s in switches}
    host_names = {h.name for h in hosts}
    rows = []
    for index, item in enumerate(items):
        what = f"link #{index}"
        fields = reader.mapping(item, what, {"a", "a_port", "b", "b_port"} | set(LINK_FIELDS), ("a", "b"))
        ends = [reader.string(fields[end], f"{what} {end}") for end in ("a", "b")]
        ports = [reader.integer(fields[key], f"{what} {key}", minimum=0) if key in fields else None
                 for key in ("a_port", "b_port")]
        params = {**defaults}
        params.update({LINK_FIELDS[key]: reader.link_field(key, value, what)
                       for key, value in fields.items() if key in LINK_FIELDS})
        for end_index, end in enumerate(ends):
            if end not in planes and end not in host_names:
                raise reader.fail(fields["ab"[end_index]], f"{what}: unknown node {end!r}")
        rows.append((ends, ports, params))
    _assign_ports(rows, planes)
    links = [Link(ends[0], ports[0], ends[1], ports[1], **params) for ends, ports, params in rows]
    return links, items


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

