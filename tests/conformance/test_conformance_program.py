"""An engineer's own P4 program: p4c's errors shown as written, the P4Info checked against the contract."""
from __future__ import annotations

import stat
from pathlib import Path

import pytest

from conformance.program import P4CompileError, compile_p4, contract_differences
from pipeline_contract.p4info import load_p4info

BUILD = Path(__file__).resolve().parents[2] / "p4" / "build"


def test_the_repository_program_meets_its_own_contract():
    assert contract_differences(load_p4info()) == []


def test_ids_may_differ_but_names_keys_and_actions_may_not():
    p4info = load_p4info()
    for table in p4info.tables:                  # other ids: still the contract
        table.preamble.id += 7
    assert contract_differences(p4info) == []
    routing = next(t for t in p4info.tables if t.preamble.name == "MrcIngress.routing")
    routing.match_fields[0].bitwidth = 64
    del p4info.counters[0]
    action = p4info.actions[-1]
    action.preamble.name = "MrcIngress.renamed"
    diffs = contract_differences(p4info)
    assert any(d.startswith("table MrcIngress.routing: match field") and "(64," in d for d in diffs), diffs
    assert any(d.startswith("counter ") and d.endswith("missing") for d in diffs), diffs
    assert any("missing" in d and d.startswith("action ") for d in diffs), diffs


def _fake_p4c(tmp_path: Path, body: str) -> str:
    p4c = tmp_path / "p4c"
    p4c.write_text("#!/bin/sh\n" + body)
    p4c.chmod(p4c.stat().st_mode | stat.S_IXUSR)
    return str(p4c)


def test_p4c_errors_come_back_as_p4c_wrote_them(tmp_path):
    source = tmp_path / "mine.p4"
    source.write_text("control broken(\n")
    p4c = _fake_p4c(tmp_path, 'echo "mine.p4(1): [--Werror=parser] error: syntax error, unexpected END" >&2\nexit 1\n')
    with pytest.raises(P4CompileError, match=r"(?s)exit status 1.*mine\.p4\(1\): \[--Werror=parser\] error"):
        compile_p4(source, tmp_path / "out", p4c=p4c)
    with pytest.raises(P4CompileError, match="no such P4 file"):
        compile_p4(tmp_path / "absent.p4", tmp_path / "out", p4c=p4c)


def test_a_compile_writes_only_into_its_own_folder(tmp_path):
    source = tmp_path / "mine.p4"
    source.write_text("// stands for a program\n")
    out = tmp_path / "out"
    # a stand-in p4c that writes what p4c writes: the committed build, under the program's name
    p4c = _fake_p4c(tmp_path, f'cp {BUILD / "mrc.json"} {out}/mine.json\n'
                              f'cp {BUILD / "mrc.p4info.txtpb"} {out}/mine.p4info.txt\n')
    before = sorted(p.name for p in BUILD.iterdir())
    files = compile_p4(source, out, p4c=p4c)
    assert files.bmv2_json == out / "mine.json" and files.p4info == out / "mine.p4info.txt"
    assert contract_differences(load_p4info(files.p4info)) == []
    assert sorted(p.name for p in BUILD.iterdir()) == before


def _run_cli(argv, env_path=None):
    import subprocess
    import sys
    import os
    env = dict(os.environ)
    if env_path:
        env["PATH"] = env_path + os.pathsep + env["PATH"]
    root = Path(__file__).resolve().parents[2]
    return subprocess.run([sys.executable, "-m", "cli", "conformance", *argv], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_cli_own_program_a_p4c_error_and_a_broken_contract_are_said(tmp_path):
    source = tmp_path / "mine.p4"
    source.write_text("// mine\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_p4c(bin_dir, 'echo "mine.p4(3): error: no such table" >&2\nexit 1\n')
    done = _run_cli(["--p4", str(source), "--target", "bmv2"], str(bin_dir))
    assert done.returncode == 2 and "mine.p4(3): error: no such table" in done.stderr
    # a program whose P4Info lost a table: the contract is named line by line
    p4info = load_p4info()
    del p4info.tables[0]
    from google.protobuf import text_format
    (tmp_path / "broken.p4info.txt").write_text(text_format.MessageToString(p4info))
    _fake_p4c(bin_dir, 'out=""; while [ $# -gt 0 ]; do [ "$1" = "-o" ] && out="$2"; shift; done\n'
                       f'cp {BUILD / "mrc.json"} "$out/mine.json"\n'
                       f'cp {tmp_path / "broken.p4info.txt"} "$out/mine.p4info.txt"\n')
    done = _run_cli(["--p4", str(source)], str(bin_dir))
    assert done.returncode == 2 and "does not meet the switch contract" in done.stderr
    assert f"table {load_p4info().tables[0].preamble.name}: missing" in done.stderr
    done = _run_cli(["--p4", str(source), "--target", "model-grpc"], str(bin_dir))
    assert done.returncode == 2 and "runs your program on BMv2" in done.stderr


@pytest.mark.integration
def test_cli_own_program_runs_the_cases_on_bmv2(tmp_path):
    """p4c stood in for by a copy of the committed build of p4/mrc.p4: the trim cases pass on BMv2."""
    import os
    import shutil
    if os.geteuid() != 0 or shutil.which("simple_switch_grpc") is None:
        pytest.skip("needs root and simple_switch_grpc on PATH (BMv2)")
    source = tmp_path / "mine.p4"
    source.write_text("// mine\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_p4c(bin_dir, 'out=""; while [ $# -gt 0 ]; do [ "$1" = "-o" ] && out="$2"; shift; done\n'
                       f'cp {BUILD / "mrc.json"} "$out/mine.json"\n'
                       f'cp {BUILD / "mrc.p4info.txtpb"} "$out/mine.p4info.txt"\n')
    done = _run_cli(["--p4", str(source), "-k", "trim"], str(bin_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "meets the switch contract" in done.stdout and " bmv2 " in done.stdout and "FAIL" not in done.stdout
