"""The JSON Schema of scenario files, exported from the models in experiments/scenario.py.

    python -m experiments.schema            # (re)write experiments/scenario.schema.json
    python -m experiments.schema --check    # exit 1 when the shipped file is stale
    mrc-testbed schema [--check]            # the same

Editors that speak JSON Schema (VS Code's YAML extension, any yaml-language-server client)
validate and complete `experiments/*.yaml` with it: see experiments/README.md, "Editing scenarios".
Transport modes added with `register_transport` are accepted (the schema lists the built-in ones as
suggestions); `load_scenario` stays the judge of what runs (it also checks topologies and links).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from experiments.scenario import ScenarioFile

SCHEMA_FILE = Path(__file__).resolve().parent / "scenario.schema.json"


def scenario_json_schema() -> dict:
    """The JSON Schema (draft 2020-12) of a scenario file."""
    schema = ScenarioFile.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def schema_text() -> str:
    """The schema as the shipped file holds it (sorted keys, a final newline)."""
    return json.dumps(scenario_json_schema(), indent=2, sort_keys=True) + "\n"


def is_current(path: Path = SCHEMA_FILE) -> bool:
    """Whether the file at `path` is what the models export now."""
    return path.is_file() and path.read_text(encoding="utf-8") == schema_text()


def write(path: Path = SCHEMA_FILE) -> Path:
    """Write the schema to `path`; return it."""
    path.write_text(schema_text(), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--check"]:
        if is_current():
            print(f"{SCHEMA_FILE}: up to date")
            return 0
        print(f"{SCHEMA_FILE}: stale; regenerate it with `python -m experiments.schema`", file=sys.stderr)
        return 1
    if argv:
        print("usage: python -m experiments.schema [--check]", file=sys.stderr)
        return 2
    print(f"wrote {write()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
