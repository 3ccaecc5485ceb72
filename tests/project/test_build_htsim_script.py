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


PATCH = ROOT / "scripts" / "htsim-measurement-switches.patch"


def old_side(patch: str) -> dict[str, str]:
    """What each file of `patch` held before it, as far as the patch shows it (its hunks' context
    and removed lines, hunk after hunk): enough for the patch to apply to."""
    files: dict[str, list[str]] = {}
    current = None
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            current = files.setdefault(line.split(" b/", 1)[1], [])
        elif current is None or line.startswith(("--- ", "+++ ", "index ", "@@")):
            continue
        elif line.startswith((" ", "-")):
            current.append(line[1:])
    return {name: "\n".join(lines) + "\n" for name, lines in files.items()}


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.skipif(not all(shutil.which(t) for t in ("git", "make", "c++")), reason="needs git, make and c++")
def test_the_measurement_switches_are_applied_when_asked_and_taken_out_when_not(tmp_path):
    """--measurement-switches applies scripts/htsim-measurement-switches.patch after the checkout; a
    later build in the same clone takes it out, at the same commit or another one. The clone is of
    a stand-in repository holding what the patch applies to (a cmake that fails stops the script
    right after: the build itself takes minutes)."""
    upstream = tmp_path / "upstream"
    for name, text in old_side(PATCH.read_text()).items():
        (upstream / name).parent.mkdir(parents=True, exist_ok=True)
        (upstream / name).write_text(text)
    git("init", "-q", cwd=upstream)
    git("add", "-A", cwd=upstream)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first", cwd=upstream)
    first = git("rev-parse", "HEAD", cwd=upstream)
    (upstream / "README").write_text("a later commit\n")
    git("add", "-A", cwd=upstream)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "second", cwd=upstream)
    second = git("rev-parse", "HEAD", cwd=upstream)
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "cmake").write_text('#!/bin/sh\n[ "$1" = --version ] && echo "cmake version 3.25.1" && exit 0\nexit 1\n')
    (tools / "cmake").chmod(0o755)
    path = f"{tools}:/usr/bin:/bin"
    source = tmp_path / "p" / "src" / "uet-htsim" / "htsim" / "sim" / "datacenter"

    def build(*args):
        return run(["--prefix", str(tmp_path / "p"), *args], path, tmp_path, MRC_HTSIM_REPO_URL=str(upstream))

    def switches_in() -> int:
        """How many of the patch's changes the clone's sources hold."""
        text = "".join((source / name).read_text() for name in ("main_uec.cpp", "fat_tree_topology.cpp",
                                                                 "../uec.cpp", "../uec.h"))
        return sum(switch in text for switch in (
            'getenv("MRC_NO_LASTHOP_ECN")', 'getenv("MRC_FULL_SLOW_BUFFERS")', 'bytes_from_env("MRC_DATA_HEADER_BYTES"',
            'bytes_from_env("MRC_ACK_BYTES"', 'bytes_from_env("MRC_NACK_BYTES"', "pkt->set_size(_ack_bytes);",
            "pkt->set_size(_nack_bytes);", "static uint16_t _ack_bytes;"))

    def switched() -> bool:
        found = switches_in()
        assert found in (0, 8), f"{found} of the patch's 8 changes in the clone: partly applied"
        return found == 8

    done = build("--commit", first, "--measurement-switches")
    assert done.returncode == 1 and "cmake could not configure" in done.stderr, done.stdout + done.stderr
    assert "measurement switches applied" in done.stdout and switched()
    done = build("--commit", first, "--measurement-switches")          # again: still applied, once
    assert done.returncode == 1 and "cmake could not configure" in done.stderr and switched()
    done = build("--commit", second)                                   # another commit, without them
    assert done.returncode == 1 and "cmake could not configure" in done.stderr, done.stdout + done.stderr
    assert "taken out" in done.stdout and not switched()
    assert git("rev-parse", "HEAD", cwd=tmp_path / "p" / "src" / "uet-htsim") == second
    done = build("--commit", "0" * 40)
    assert done.returncode == 1 and f"commit {'0' * 40} is not in {upstream}" in done.stderr, done.stderr
