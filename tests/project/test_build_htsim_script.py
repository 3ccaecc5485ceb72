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
