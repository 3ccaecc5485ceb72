"""The `--topo SPEC` parser: a builder spec such as ``leafspine:4x2x2``, or a YAML file path.

Depends on `topologies.builders` (the builders by kind) and `topologies.yamlfile` (files); neither
depends on it.
"""
from __future__ import annotations

import os
import re

from topologies.builders import BUILDERS
from topologies.model import Topology
from topologies.yamlfile import load_topology


class TopologySpecError(ValueError):
    """A `--topo` spec that names no known builder or carries bad numbers."""


SPEC_HELP = ("dumbbell:H | leafspine:LxSxH | fattree:K | multiplane:PxLxSxH | path/to/file.yaml "
             "(H hosts per leaf/side, L leaves, S spines, P planes, K even)")
_SPEC = re.compile(r"([a-z_-]+)(?::([0-9x]*))?")


def topology_from_spec(spec: str) -> Topology:
    """The topology a `--topo` spec describes: a builder spec (see SPEC_HELP) or a YAML file path."""
    spec = spec.strip()
    if spec.endswith((".yaml", ".yml")) or os.sep in spec or os.path.isfile(spec):
        return load_topology(spec)
    match = _SPEC.fullmatch(spec.lower())
    if not match or match.group(1).replace("-", "").replace("_", "") not in BUILDERS:
        raise TopologySpecError(f"topology spec {spec!r}: unknown kind; expected {SPEC_HELP}")
    kind = match.group(1).replace("-", "").replace("_", "")
    builder, params = BUILDERS[kind]
    numbers = match.group(2)
    if not numbers:
        raise TopologySpecError(f"topology spec {spec!r}: {kind} needs {'x'.join(params)} "
                                f"(e.g. {kind}:{'x'.join('2' * len(params))})")
    parts = numbers.split("x")
    if len(parts) != len(params) or not all(part.isdigit() for part in parts):
        raise TopologySpecError(f"topology spec {spec!r}: {kind} takes {len(params)} number(s) "
                                f"{'x'.join(params)}, got {numbers!r}")
    try:
        return builder(*(int(part) for part in parts))
    except ValueError as error:
        raise TopologySpecError(f"topology spec {spec!r}: {error}") from error
