"""The compiled build (`speedups`): when it is used, and that it gives what pure Python gives."""
from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import speedups
from speedups import __main__ as builder

ROOT = Path(__file__).resolve().parents[2]
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


@pytest.fixture
def fake_tree(tmp_path, monkeypatch):
    """A checkout of one compiled module, fakepkg.fast, whose "extension" cannot load: importing it
    from the extension fails, from the source gives WHERE == "source"."""
    (tmp_path / "fakepkg").mkdir()
    (tmp_path / "fakepkg" / "__init__.py").write_text("")
    (tmp_path / "fakepkg" / "fast.py").write_text("WHERE = 'source'\n")
    monkeypatch.setattr(speedups, "ROOT", tmp_path)
    monkeypatch.setattr(speedups, "STAMP", tmp_path / "build.json")
    monkeypatch.setattr(speedups, "MODULES", ("fakepkg.fast",))
    monkeypatch.setattr(speedups, "SOURCE_FOLDERS", ("fakepkg",))
    monkeypatch.setattr(speedups, "_chosen", None)
    monkeypatch.delenv(speedups.PURE_ENV, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    finders = list(sys.meta_path)
    yield tmp_path
    sys.meta_path[:] = finders
    sys.modules.pop("fakepkg.fast", None)
    sys.modules.pop("fakepkg", None)


def compile_fake(tree: Path) -> None:
    """What a build leaves: the extension beside the source, the one library in the speedups
    package, and the stamp of both."""
    (tree / "fakepkg" / f"fast{SUFFIX}").write_bytes(b"not a shared object")
    speedups.library_path().parent.mkdir(exist_ok=True)
    speedups.library_path().write_bytes(b"not a library")
    speedups.STAMP.write_text(json.dumps({"mypy": "test", "sources": speedups.source_digests(),
                                          "compiled": speedups.compiled_stats()}))


def test_clean_also_removes_the_build_of_a_module_whose_source_is_gone(fake_tree):
    compile_fake(fake_tree)
    gone = [fake_tree / "fakepkg" / f"renamed{SUFFIX}", fake_tree / "fakepkg" / f"renamed__mypyc{SUFFIX}"]
    for path in gone:
        path.write_bytes(b"a build of a module since renamed")
    assert speedups.orphaned_files() == sorted(gone)
    removed = builder.clean()
    assert set(gone) <= set(removed) and not any(path.exists() for path in gone)
    assert (fake_tree / "fakepkg" / "fast.py").exists() and speedups.orphaned_files() == []


def test_clean_removes_the_library_of_one_module_an_older_build_left(fake_tree):
    """Builds before the one library made a library per module, beside it: no build uses it now."""
    compile_fake(fake_tree)
    old = fake_tree / "fakepkg" / f"fast__mypyc{SUFFIX}"
    old.write_bytes(b"the library of one module")
    assert speedups.orphaned_files() == [old]
    assert old in builder.clean() and not old.exists()


def test_a_build_without_its_library_is_not_used(fake_tree):
    compile_fake(fake_tree)
    speedups.library_path().unlink()
    build = speedups.inspect_build()
    assert not build.compiled and "incomplete" in build.reason


def test_without_a_build_pure_python_is_used(fake_tree):
    build = speedups.inspect_build()
    assert not build.compiled and "not compiled" in build.reason


def test_a_complete_current_build_is_used(fake_tree):
    compile_fake(fake_tree)
    assert speedups.inspect_build().compiled


def test_an_edited_source_selects_pure_python_naming_it(fake_tree):
    compile_fake(fake_tree)
    (fake_tree / "fakepkg" / "fast.py").write_text("WHERE = 'source'  # edited\n")
    build = speedups.inspect_build()
    assert not build.compiled and "fakepkg/fast.py changed" in build.reason


def test_an_edited_dependency_selects_pure_python(fake_tree):
    """mypyc compiled against the types of the files beside the module: a new one counts too."""
    compile_fake(fake_tree)
    (fake_tree / "fakepkg" / "types.py").write_text("X = 1\n")
    build = speedups.inspect_build()
    assert not build.compiled and "fakepkg/types.py changed" in build.reason


def test_a_replaced_extension_selects_pure_python(fake_tree):
    compile_fake(fake_tree)
    (fake_tree / "fakepkg" / f"fast{SUFFIX}").write_bytes(b"another build's extension")
    build = speedups.inspect_build()
    assert not build.compiled and f"fakepkg/fast{SUFFIX} is not the file the build made" in build.reason


def test_the_environment_selects_pure_python(fake_tree, monkeypatch):
    compile_fake(fake_tree)
    monkeypatch.setenv(speedups.PURE_ENV, "1")
    assert speedups.inspect_build().kind == "pure Python"
    monkeypatch.setenv(speedups.PURE_ENV, "0")
    assert speedups.inspect_build().compiled


def test_pure_python_loads_the_source_although_an_extension_is_there(fake_tree):
    """A stale build is passed over (with a warning): the import takes the .py, not the .so."""
    compile_fake(fake_tree)
    (fake_tree / "fakepkg" / "fast.py").write_text("WHERE = 'source'\n# edited since the build\n")
    with pytest.warns(RuntimeWarning, match="using pure Python: fakepkg/fast.py changed"):
        build = speedups.select()
    assert not build.compiled and speedups.select() is build           # chosen once
    import fakepkg.fast
    assert fakepkg.fast.WHERE == "source" and fakepkg.fast.__file__.endswith("fast.py")


def test_the_builder_names_what_is_missing(monkeypatch, tmp_path):
    monkeypatch.setattr(builder, "python_headers", lambda: tmp_path / "nowhere" / "Python.h")
    with pytest.raises(builder.BuildError, match="Python.h"):
        builder.check_tools()


def test_status_says_which_build_and_why(capsys):
    assert builder.main(["status"]) == 0
    assert str(speedups.inspect_build()) in capsys.readouterr().out


def test_every_hot_module_of_this_checkout_is_in_the_build():
    """MODULES leaves out only modules whose source is missing (an older revision's export): here,
    none is."""
    assert speedups.MODULES == speedups.HOT_MODULES


def test_a_module_whose_source_is_missing_is_left_out_of_the_build():
    assert speedups.present_modules(("wire.packets", "wire.no_such_module", "netsim.sim")) == (
        "wire.packets", "netsim.sim")


@pytest.mark.slow
def test_the_compiled_modules_type_check_as_mypyc_needs():
    """mypyc compiles only code mypy accepts: a type error here would make the build fail."""
    pytest.importorskip("mypy.api", reason="mypy is not installed (pip install -e '.[speedups]')")
    from mypy import api
    files = [str(speedups.source_path(m).relative_to(ROOT)) for m in speedups.MODULES]
    out, err, status = api.run(["--follow-imports=silent", "--no-incremental", *files])
    assert status == 0, out + err


RUN_CASES = textwrap.dedent("""
    import json, sys
    import netsim.link, host_agent.transport.sender
    from experiments.backends.netsim_backend import NetsimBackend
    from experiments.scenario import load_scenario
    cases = load_scenario("experiments/permutation.yaml", quick=True).cases()
    cases += load_scenario("experiments/failover.yaml", quick=True).cases()[:2]
    cases += load_scenario("experiments/datacenter.yaml", quick=True).cases()
    records = [NetsimBackend().run_case(case).as_dict() for case in cases]
    print(json.dumps({"files": [netsim.link.__file__, host_agent.transport.sender.__file__],
                      "records": records}, default=repr, sort_keys=True))
""")


def run_cases(pure: bool) -> dict:
    env = dict(os.environ)
    env.pop(speedups.PURE_ENV, None)
    if pure:
        env[speedups.PURE_ENV] = "1"
    done = subprocess.run([sys.executable, "-c", RUN_CASES], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.slow
def test_the_compiled_build_gives_exactly_what_pure_python_gives():
    """The same cases (spraying, ECMP, a failover; at data-center speed incast with trimming, a
    gray spine, a failover), run compiled and as pure Python, give equal records: every counter,
    sample and time."""
    if not speedups.inspect_build().compiled:
        pytest.skip(f"the compiled build is not in use here: {speedups.inspect_build().reason}")
    compiled, pure = run_cases(pure=False), run_cases(pure=True)
    assert all(f.endswith(SUFFIX) for f in compiled["files"]), compiled["files"]
    assert all(f.endswith(".py") for f in pure["files"]), pure["files"]
    assert len(compiled["records"]) == 13 and all(r["completed"] for r in compiled["records"][:3])
    assert compiled["records"][5]["switch_stats"]["trimmed"] > 0          # data-center incast trims
    for fast, slow in zip(compiled["records"], pure["records"]):
        assert fast == slow, f"{fast['variant']} / {fast['transport']} differs"
