"""scripts/build-htsim.sh: its usage errors, missing tools and a failed download, each named
(the build itself needs the internet and minutes: it is not run here)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "build-htsim.sh"
BASH = shutil.which("bash")


def run(args, path: str, tmp_path: Path, **env) -> subprocess.CompletedProcess:
    environment = {"PATH": path, "HOME": str(tmp_path), **env}
    return subprocess.run([BASH, str(SCRIPT), *args], capture_output=True, text=True, env=environment, timeout=60)


def test_a_bad_option_exits_2_naming_it(tmp_path):
    done = run(["--jobs", "many"], "/usr/bin:/bin", tmp_path)
    assert done.returncode == 2 and "--jobs many" in done.stderr
    done = run(["--frobnicate"], "/usr/bin:/bin", tmp_path)
    assert done.returncode == 2 and "unknown option: --frobnicate" in done.stderr


def test_missing_tools_exit_3_naming_each(tmp_path):
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("id", "nproc", "dirname", "head", "awk"):      # the shell's helpers, but no build tools
        found = shutil.which(name)
        if found:
            (tools / name).symlink_to(found)
    done = run(["--prefix", str(tmp_path / "p")], str(tools), tmp_path)
    assert done.returncode == 3, done.stderr
    for word in ("git", "cmake", "make", "a C++ compiler"):
        assert word in done.stderr


@pytest.mark.skipif(not all(shutil.which(t) for t in ("git", "cmake", "make", "c++")),
                    reason="needs git, cmake, make and c++ on PATH to get as far as the download")
def test_a_failed_download_exits_4_and_says_the_testbed_works_without(tmp_path):
    done = run(["--prefix", str(tmp_path / "p")], "/usr/local/bin:/usr/bin:/bin", tmp_path,
               MRC_HTSIM_REPO_URL=str(tmp_path / "no-such-repository"))
    assert done.returncode == 4, done.stderr
    assert "could not download" in done.stderr and "only the htsim backend needs it" in done.stderr
    assert not (tmp_path / "p" / "src" / "uet-htsim").exists()


MIRROR = Path("/work/.mirror/ultraethernet+uet-htsim/repo")     # a local copy of uet-htsim, where there is one


@pytest.mark.skipif(not MIRROR.is_dir() or not all(shutil.which(t) for t in ("git", "make", "c++")),
                    reason="needs a local copy of uet-htsim (none here: CI has no internet) and git, make, c++")
def test_the_measurement_switches_are_applied_when_asked_and_taken_out_when_not(tmp_path):
    """--measurement-switches applies scripts/htsim-measurement-switches.patch to the pinned commit;
    a later build in the same clone without it takes the patch out again. (A cmake that fails stops
    the script right after: the build itself takes minutes.)"""
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "cmake").write_text('#!/bin/sh\n[ "$1" = --version ] && echo "cmake version 3.25.1" && exit 0\nexit 1\n')
    (tools / "cmake").chmod(0o755)
    path = f"{tools}:/usr/bin:/bin"
    source = tmp_path / "p" / "src" / "uet-htsim" / "htsim" / "sim" / "datacenter"
    done = run(["--prefix", str(tmp_path / "p"), "--measurement-switches"], path, tmp_path, MRC_HTSIM_REPO_URL=str(MIRROR))
    assert done.returncode == 1 and "cmake could not configure" in done.stderr, done.stderr
    assert "measurement switches applied" in done.stdout
    assert 'getenv("MRC_NO_LASTHOP_ECN")' in (source / "main_uec.cpp").read_text()
    assert 'getenv("MRC_FULL_SLOW_BUFFERS")' in (source / "fat_tree_topology.cpp").read_text()
    done = run(["--prefix", str(tmp_path / "p")], path, tmp_path, MRC_HTSIM_REPO_URL=str(MIRROR))
    assert done.returncode == 1 and "taken out" in done.stdout, done.stdout + done.stderr
    assert "MRC_" not in (source / "main_uec.cpp").read_text() + (source / "fat_tree_topology.cpp").read_text()
