"""The JSON Schemas of the experiment files, exported from their models: scenario files
(experiments/scenario.py) and load sweep files (experiments/load_sweep/sweep_file.py).

    python -m experiments.schema            # (re)write experiments/scenario.schema.json and sweep.schema.json
    python -m experiments.schema --check    # exit 1 when a shipped file is stale
    mrc-testbed schema [--check]            # the same

Editors that speak JSON Schema (VS Code's YAML extension, any yaml-language-server client)
validate and complete `experiments/*.yaml` with them: see experiments/README.md, "Editing scenarios".
Transport modes added with `register_transport` are accepted (the schema lists the built-in ones as
suggestions); `load_scenario` stays the judge of what runs (it also checks topologies and links).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from experiments.load_sweep.sweep_file import SweepSpec
from experiments.scenario import ScenarioFile

FOLDER = Path(__file__).resolve().parent
SCHEMA_FILE = FOLDER / "scenario.schema.json"
SWEEP_SCHEMA_FILE = FOLDER / "sweep.schema.json"
MODELS = {SCHEMA_FILE.name: ScenarioFile, SWEEP_SCHEMA_FILE.name: SweepSpec}


def json_schema(name: str = SCHEMA_FILE.name) -> dict:
    """The JSON Schema (draft 2020-12) of the files the schema file `name` describes."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **MODELS[name].model_json_schema()}


def schema_text(name: str = SCHEMA_FILE.name) -> str:
    """A schema as its shipped file holds it (sorted keys, a final newline)."""
    return json.dumps(json_schema(name), indent=2, sort_keys=True) + "\n"


def is_current(path: Path = SCHEMA_FILE, name: str | None = None) -> bool:
    """Whether the file at `path` is what the models export now (`name`: which schema; default
    the one `path` is named after)."""
    return path.is_file() and path.read_text(encoding="utf-8") == schema_text(name or path.name)


def write(path: Path = SCHEMA_FILE, name: str | None = None) -> Path:
    """Write a schema to `path` (`name`: which one; default the one `path` is named after)."""
    path.write_text(schema_text(name or path.name), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    files = [FOLDER / name for name in MODELS]
    if argv == ["--check"]:
        stale = [path for path in files if not is_current(path)]
        for path in stale:
            print(f"{path}: stale; regenerate it with `python -m experiments.schema`", file=sys.stderr)
        if not stale:
            print(f"{', '.join(p.name for p in files)}: up to date")
        return 1 if stale else 0
    if argv:
        print("usage: python -m experiments.schema [--check]", file=sys.stderr)
        return 2
    for path in files:
        print(f"wrote {write(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
