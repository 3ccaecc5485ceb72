"""An engineer's own P4 program, as the conformance suite runs it: compiled with p4c into a folder
of its own (never `p4/build/`), its P4Info checked against the switch contract, then handed to the
BMv2 target like the repository's program.

The contract is what the controller, the model and the cases use: every table with its match fields
(name, width, match kind) and its actions, every action with its parameters (name, width), every
counter. The numeric ids may differ: everything is looked up by name.
"""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from p4.config.v1 import p4info_pb2

from pipeline_contract.p4info import load_p4info

P4C_FLAGS = ("--target", "bmv2", "--arch", "v1model", "--std", "p4-16")
COMPILE_TIMEOUT_S = 600


class P4CompileError(RuntimeError):
    """p4c is missing or rejected the program; the message holds p4c's own output, as it wrote it."""


@dataclass(frozen=True)
class CompiledFiles:
    """What p4c wrote for one program."""

    source: Path
    bmv2_json: Path
    p4info: Path


def compile_p4(source: str | Path, out_dir: str | Path, p4c: str | None = None) -> CompiledFiles:
    """Compile `source` for BMv2 (v1model) into `out_dir`: the BMv2 JSON and a text P4Info."""
    source, out_dir = Path(source), Path(out_dir)
    if not source.is_file():
        raise P4CompileError(f"{source}: no such P4 file")
    p4c = p4c or shutil.which("p4c")
    if p4c is None:
        raise P4CompileError("p4c is not on PATH (the project's VM has it; or install p4lang's p4c "
                             "package): it compiles the program given with --p4")
    out_dir.mkdir(parents=True, exist_ok=True)
    p4info = out_dir / f"{source.stem}.p4info.txt"     # .txt: older p4c choose the format by suffix
    try:
        done = subprocess.run([p4c, *P4C_FLAGS, "--p4runtime-files", str(p4info), "-o", str(out_dir),
                               str(source)], capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise P4CompileError(f"p4c took more than {COMPILE_TIMEOUT_S} s on {source}") from None
    if done.returncode != 0:
        raise P4CompileError(f"p4c rejected {source} (exit status {done.returncode}):\n"
                             + (done.stderr + done.stdout).rstrip())
    bmv2_json = out_dir / f"{source.stem}.json"
    missing = [p.name for p in (bmv2_json, p4info) if not p.exists()]
    if missing:
        raise P4CompileError(f"p4c exited 0 but wrote no {' or '.join(missing)} into {out_dir}")
    return CompiledFiles(source, bmv2_json, p4info)


def contract_differences(candidate: p4info_pb2.P4Info,
                         contract: p4info_pb2.P4Info | None = None) -> list[str]:
    """What `candidate` lacks or changes of the contract (default: the repository's P4Info), one
    line each; [] when every table, action and counter the contract names is there alike."""
    contract = contract if contract is not None else load_p4info()
    diffs: list[str] = []
    actions = {a.preamble.name: a for a in candidate.actions}
    action_names = {a.preamble.id: a.preamble.name for a in contract.actions}
    candidate_action_names = {a.preamble.id: a.preamble.name for a in candidate.actions}
    for want in contract.actions:
        name = want.preamble.name
        have = actions.get(name)
        if have is None:
            diffs.append(f"action {name}: missing")
            continue
        diffs += _fields(f"action {name}", "parameter", want.params, have.params,
                         lambda p: (p.bitwidth,), "width")
    tables = {t.preamble.name: t for t in candidate.tables}
    for want in contract.tables:
        name = want.preamble.name
        have = tables.get(name)
        if have is None:
            diffs.append(f"table {name}: missing")
            continue
        diffs += _fields(f"table {name}", "match field", want.match_fields, have.match_fields,
                         lambda f: (f.bitwidth, p4info_pb2.MatchField.MatchType.Name(f.match_type)),
                         "width, match kind")
        have_refs = {candidate_action_names.get(r.id) for r in have.action_refs}
        for ref in want.action_refs:
            if action_names[ref.id] not in have_refs:
                diffs.append(f"table {name}: action {action_names[ref.id]} is not among its actions")
    counters = {c.preamble.name: c for c in candidate.counters}
    for want in contract.counters:
        have = counters.get(want.preamble.name)
        if have is None:
            diffs.append(f"counter {want.preamble.name}: missing")
        elif have.size < want.size:
            diffs.append(f"counter {want.preamble.name}: {have.size} cells, the contract needs {want.size}")
    return diffs


def _fields(owner: str, kind: str, wanted, had, shape, shape_words: str) -> list[str]:
    have = {f.name: f for f in had}
    out = []
    for want in wanted:
        got = have.get(want.name)
        if got is None:
            out.append(f"{owner}: {kind} {want.name} missing")
        elif shape(got) != shape(want):
            out.append(f"{owner}: {kind} {want.name} is {shape(got)}, the contract has {shape(want)} "
                       f"({shape_words})")
    return out
