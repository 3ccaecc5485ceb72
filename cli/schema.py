"""`mrc-testbed schema`: write (or check) the JSON Schemas of scenario and sweep files (experiments/*.schema.json)."""
from __future__ import annotations

import argparse

from experiments import schema


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true",
                        help="do not write: exit 1 when the shipped schema is stale")


def run(args: argparse.Namespace) -> int:
    return schema.main(["--check"] if args.check else [])
