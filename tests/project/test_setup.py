"""scripts/setup.sh's decisions, run against fake system tools: what it installs, when it calls apt,
and that a second run reuses what the first one made (idempotence). Nothing real is installed."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Each fake appends "<name> <args>" to $FAKE_LOG.
FAKES = {
    "id": '[ "$1" = -u ] && { echo "${FAKE_UID:-0}"; exit 0; }; exec /usr/bin/id "$@"',
    "dpkg-query": 'echo "dpkg-query $*" >> "$FAKE_LOG"\n'
                  'pkg="${!#}"\n'
                  'case " $FAKE_INSTALLED " in *" $pkg "*) echo -n "install ok installed";; '
                  '*) exit 1;; esac',
    "apt-get": 'echo "apt-get $*" >> "$FAKE_LOG"',
    "debconf-set-selections": 'echo "debconf-set-selections $(cat)" >> "$FAKE_LOG"',
    "chown": 'echo "chown $*" >> "$FAKE_LOG"',
    # The interpreter on PATH: answers the version, ensurepip and headers checks, makes a fake venv.
    "python3": 'case "$1" in\n'
               '  -V) echo "Python 3.11.0";;\n'
               '  -c) case "$2" in *ensurepip*) exit "${FAKE_NO_ENSUREPIP:-0}";;\n'
               '                   *Python.h*) exit "${FAKE_NO_HEADERS:-0}";; esac;;\n'
               '  -m) echo "python3 $*" >> "$FAKE_LOG"; mkdir -p "$3/bin"\n'
               '      cp "$FAKE_BIN/venv-python" "$3/bin/python";;\n'
               'esac',
    # The venv's interpreter: pip records its arguments and installs a fake mrc-testbed; the
    # compiled build is out of date (FAKE_BUILT=1: up to date) and builds (FAKE_BUILD_FAILS=1: fails).
    "venv-python": 'case "$1" in\n'
                   '  -V) echo "Python 3.11.0";;\n'
                   '  -c) case "$2" in *inspect_build*) [ "${FAKE_BUILT:-0}" = 1 ];; esac;;\n'
                   '  -m) case "$2" in\n'
                   '        pip) echo "pip $*" >> "$FAKE_LOG"\n'
                   '             printf "#!/bin/sh\\nexit 0\\n" > "$(dirname "$0")/mrc-testbed"\n'
                   '             chmod +x "$(dirname "$0")/mrc-testbed";;\n'
                   '        speedups) echo "speedups $3" >> "$FAKE_LOG"\n'
                   '             [ "$3" != build ] || [ "${FAKE_BUILD_FAILS:-0}" = 0 ];;\n'
                   '      esac;;\n'
                   'esac',
}

ALL_PACKAGES = "mininet iproute2 iputils-ping ethtool tcpdump tshark procps python3-venv gcc shellcheck ruby"
RUNTIME = "mininet iproute2 iputils-ping ethtool tcpdump tshark procps"


@pytest.fixture
def fake_setup(tmp_path):
    """A copy of setup.sh in a scratch repository, run with the fakes first on PATH."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "setup.sh", repo / "scripts" / "setup.sh")
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    for name, body in FAKES.items():
        (fake_bin / name).write_text("#!/usr/bin/env bash\n" + body + "\n")
        (fake_bin / name).chmod(0o755)
    log = tmp_path / "calls.log"

    def run(*args: str, installed: str = ALL_PACKAGES, uid: int = 0, ensurepip: bool = True, headers: bool = True,
            built: bool = False, build_fails: bool = False):
        log.write_text("")
        env = dict(os.environ, PATH=f"{fake_bin}:{os.environ['PATH']}", FAKE_LOG=str(log),
                   FAKE_BIN=str(fake_bin), FAKE_INSTALLED=installed, FAKE_UID=str(uid),
                   FAKE_NO_ENSUREPIP="0" if ensurepip else "1", FAKE_NO_HEADERS="0" if headers else "1",
                   FAKE_BUILT=str(int(built)), FAKE_BUILD_FAILS=str(int(build_fails)),
                   PYTHON=str(fake_bin / "python3"))
        env.pop("MRC_VENV", None)
        done = subprocess.run(["bash", str(repo / "scripts" / "setup.sh"), *args], env=env,
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        return done, log.read_text().splitlines()
    run.repo = repo
    return run


def calls_of(calls: list[str], program: str) -> list[str]:
    return [call for call in calls if call.split(" ", 1)[0] == program]


def test_nothing_to_install_means_no_apt(fake_setup):
    done, calls = fake_setup()
    assert done.returncode == 0, done.stderr
    assert "already installed: mininet iproute2" in done.stdout
    assert not calls_of(calls, "apt-get")


def test_missing_packages_are_installed_non_interactively(fake_setup):
    done, calls = fake_setup(installed="iproute2 procps")
    assert done.returncode == 0, done.stderr
    apt = calls_of(calls, "apt-get")
    assert apt[0] == "apt-get update -q"
    assert apt[1] == ("apt-get install -y -q --no-install-recommends "
                      "mininet iputils-ping ethtool tcpdump tshark gcc")
    preseed = calls_of(calls, "debconf-set-selections")
    assert preseed == ["debconf-set-selections wireshark-common "
                       "wireshark-common/install-setuid boolean false"]
    assert calls.index(preseed[0]) < calls.index(apt[1])


def test_python3_venv_is_added_when_the_interpreter_lacks_ensurepip(fake_setup):
    done, calls = fake_setup(installed=RUNTIME + " gcc", ensurepip=False)
    assert done.returncode == 0, done.stderr
    assert calls_of(calls, "apt-get")[1].endswith("--no-install-recommends python3-venv")


def test_dev_adds_the_static_check_tools_and_sshd(fake_setup):
    done, calls = fake_setup("--dev", installed=RUNTIME + " gcc")
    assert done.returncode == 0, done.stderr
    assert calls_of(calls, "apt-get")[1].endswith("--no-install-recommends shellcheck ruby openssh-server sudo")


@pytest.mark.slow
def test_second_run_reuses_the_venv_and_reinstalls_the_project(fake_setup):
    first, first_calls = fake_setup()
    assert first.returncode == 0, first.stderr
    venv = fake_setup.repo / ".venv"
    assert calls_of(first_calls, "python3") == [f"python3 -m venv {venv}"]
    second, second_calls = fake_setup()
    assert second.returncode == 0, second.stderr
    assert "reusing it" in second.stdout
    assert not calls_of(second_calls, "python3")
    for calls in (first_calls, second_calls):
        pip = calls_of(calls, "pip")
        assert len(pip) == 1
        assert pip[0].endswith(f"-e {fake_setup.repo}[test,speedups]")
    stages = [line for line in second.stdout.splitlines() if line.startswith("==> ")]
    assert [s.split()[1] for s in stages[:4]] == ["1/4", "2/4", "3/4", "4/4"]


def test_the_simulator_is_compiled_unless_up_to_date(fake_setup):
    done, calls = fake_setup()
    assert done.returncode == 0, done.stderr
    assert calls_of(calls, "speedups") == ["speedups build"]
    done, calls = fake_setup(built=True)
    assert done.returncode == 0, done.stderr
    assert calls_of(calls, "speedups") == ["speedups status"] and "up to date" in done.stdout


def test_a_failed_compile_leaves_pure_python_and_says_so(fake_setup):
    done, calls = fake_setup(build_fails=True)
    assert done.returncode == 0, done.stderr
    assert "the compiled build failed" in done.stdout and "pure Python" in done.stdout


def test_pure_installs_no_compiler_and_removes_the_build(fake_setup):
    done, calls = fake_setup("--pure", installed=RUNTIME)
    assert done.returncode == 0, done.stderr
    assert not calls_of(calls, "apt-get")
    assert calls_of(calls, "speedups") == ["speedups clean"]


def test_python_headers_are_added_when_missing(fake_setup):
    done, calls = fake_setup(installed=RUNTIME + " gcc", headers=False)
    assert done.returncode == 0, done.stderr
    assert calls_of(calls, "apt-get")[1].endswith("--no-install-recommends python3.11-dev")


def test_user_only_touches_no_system_package(fake_setup):
    done, calls = fake_setup("--user-only", installed="", uid=1000)
    assert done.returncode == 0, done.stderr
    assert not calls_of(calls, "dpkg-query") and not calls_of(calls, "apt-get")
    assert calls_of(calls, "pip")
