"""The VM's provisioning and self-check, run on this machine: vagrant/provision.sh in its dry run
(every command that would change the system is printed, not run) and vagrant/selfcheck.py against
the model target, or against a fake mrc-testbed for its failures. The VM itself cannot boot here."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROVISION = REPO / "vagrant" / "provision.sh"
SELFCHECK = REPO / "vagrant" / "selfcheck.py"
VENV_MRC_TESTBED = Path(sys.executable).parent / "mrc-testbed"

SOURCE_LIST = "/etc/apt/sources.list.d/home-p4lang.list"
PIN_FILE = "/etc/apt/preferences.d/home-p4lang"
CLI_WRAPPER = "/usr/local/bin/simple_switch_CLI"
PROFILE_SNIPPET = "/etc/profile.d/mrc-testbed.sh"


def clean_environment(tmp_path: Path, **env: str) -> dict[str, str]:
    """This process's environment without MRC_* settings, HOME and TMPDIR in tmp_path, plus env."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MRC_")}
    environment.update(HOME=str(tmp_path), TMPDIR=str(tmp_path))
    environment.update(env)
    return environment


def dry_run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """provision.sh in its dry run, on the repository, from tmp_path."""
    environment = clean_environment(tmp_path, MRC_PROVISION_DRY_RUN="1", MRC_REPO=str(REPO), **env)
    return subprocess.run(["bash", str(PROVISION)], capture_output=True, text=True,
                          env=environment, cwd=tmp_path, stdin=subprocess.DEVNULL, timeout=60)


def written_files(output: str) -> dict[str, str]:
    """The files a dry run would write: path -> content."""
    files: dict[str, str] = {}
    current = None
    for line in output.splitlines():
        match = re.match(r"\+ write (\S+) \(mode \d+\):$", line)
        if match:
            current = match.group(1)
            files[current] = ""
        elif current and line.startswith("| "):
            files[current] += line[2:] + "\n"
        elif current and line == "|":
            files[current] += "\n"
        else:
            current = None
    return files


def commands(output: str) -> list[str]:
    """The commands a dry run would run, in order (without the '+ ')."""
    return [line[2:] for line in output.splitlines()
            if line.startswith("+ ") and not line.startswith("+ write ")]


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    """One dry run with the defaults (the VM as `vagrant up` provisions it)."""
    tmp_path = tmp_path_factory.mktemp("dry-run")
    watched = [Path(p) for p in (SOURCE_LIST, PIN_FILE, CLI_WRAPPER, PROFILE_SNIPPET)]
    existed = {p: p.exists() for p in watched}
    done = dry_run(tmp_path)
    for path in watched:
        assert path.exists() == existed[path], f"the dry run changed {path}"
    assert done.returncode == 0, done.stdout + done.stderr
    return done


# --- provision.sh: dry run ------------------------------------------------------------------------

def test_dry_run_says_so_and_stops_nowhere_else(default_run):
    assert default_run.stdout.startswith("dry run: commands that change the system are printed")
    stops = [line for line in default_run.stdout.splitlines() if "would stop here" in line]
    os_release = Path("/etc/os-release").read_text()
    on_jammy = 'ID=ubuntu' in os_release and 'VERSION_ID="22.04"' in os_release
    if on_jammy:
        assert stops == []
    else:   # this machine is not the VM: said, and only that
        assert len(stops) == 1 and "must be Ubuntu 22.04" in stops[0]


def test_dry_run_source_line_is_http_and_the_key_comes_over_https(default_run):
    files = written_files(default_run.stdout)
    keyring = "/etc/apt/keyrings/home-p4lang.gpg"
    assert files[SOURCE_LIST] == (f"deb [signed-by={keyring}] "
                                  "http://download.opensuse.org/repositories/home:/p4lang/xUbuntu_22.04/ /\n")
    fetches = [c for c in commands(default_run.stdout) if c.startswith("curl ")]
    assert fetches == [f"curl -fsSL -o {keyring}.download "
                       "https://download.opensuse.org/repositories/home:/p4lang/xUbuntu_22.04/Release.key"]
    dearmor = commands(default_run.stdout).index(
        f"gpg --batch --yes --dearmor -o {keyring} {keyring}.download")
    assert commands(default_run.stdout).index(fetches[0]) < dearmor


def test_dry_run_pins_the_p4lang_packages_to_the_repository_host(default_run):
    pin = written_files(default_run.stdout)[PIN_FILE].splitlines()
    assert pin == ["Package: p4lang-*", "Pin: origin download.opensuse.org", "Pin-Priority: 900"]


def test_dry_run_pin_and_source_follow_a_mirror_url(tmp_path):
    url = "https://user@mirror.example.net:8443/p4lang/xUbuntu_22.04/"
    done = dry_run(tmp_path, MRC_P4LANG_REPO_URL=url)
    assert done.returncode == 0, done.stderr
    files = written_files(done.stdout)
    assert "Pin: origin mirror.example.net\n" in files[PIN_FILE]
    assert files[SOURCE_LIST].endswith(" https://user@mirror.example.net:8443/p4lang/xUbuntu_22.04/ /\n")
    assert any(c.endswith(" https://user@mirror.example.net:8443/p4lang/xUbuntu_22.04/Release.key")
               for c in commands(done.stdout))


def test_dry_run_takes_the_key_url_from_the_environment(tmp_path):
    done = dry_run(tmp_path, MRC_P4LANG_KEY_URL="https://keys.example.org/p4lang.key")
    assert done.returncode == 0, done.stderr
    assert any(c.endswith(" https://keys.example.org/p4lang.key") for c in commands(done.stdout))


@pytest.mark.parametrize("setting, value", [("MRC_P4LANG_REPO_URL", "ftp://mirror.example.net/p4lang"),
                                            ("MRC_P4LANG_REPO_URL", "mirror.example.net/p4lang"),
                                            ("MRC_VM_BMV2_BUILD", "fast")])
def test_dry_run_rejects_a_bad_setting_naming_it(tmp_path, setting, value):
    done = dry_run(tmp_path, **{setting: value})
    assert done.returncode == 1
    assert f"{setting}={value}" in done.stderr
    assert "+ " not in done.stdout            # stopped before anything


def test_a_mistyped_dry_run_setting_stops_before_anything(tmp_path):
    command = ["bash", str(PROVISION)]
    if os.geteuid() == 0:                      # as nobody, in case it did not stop
        if not shutil.which("setpriv"):
            pytest.skip("running as root and no setpriv to drop privileges")
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + command
    done = subprocess.run(command, capture_output=True, text=True, cwd="/", timeout=60,
                          env=clean_environment(tmp_path, MRC_PROVISION_DRY_RUN="yes",
                                                MRC_REPO=str(REPO)))
    if "Permission denied" in done.stderr:
        pytest.skip(f"user nobody cannot read {PROVISION}")
    assert done.returncode == 1
    assert "MRC_PROVISION_DRY_RUN=yes" in done.stderr
    assert done.stdout == ""


def test_dry_run_installs_the_packages_then_checks_the_tools(default_run):
    lines = default_run.stdout.splitlines()
    install = next(i for i, line in enumerate(lines) if line.startswith("+ apt-get install"))
    assert lines[install].split()[-3:] == ["p4lang-pi", "p4lang-bmv2", "p4lang-p4c"]
    checks = [line[len("+ check "):] for line in lines[install:] if line.startswith("+ check ")]
    assert checks[:3] == ["p4lang-pi >= 0.1.0", "p4lang-bmv2 >= 1.15.0", "p4lang-p4c >= 1.2.4"]
    for tool in ("simple_switch_grpc", "simple_switch_CLI", "p4c", "mnexec"):
        assert f"{tool} on PATH" in checks
    assert "simple_switch_CLI --help as vagrant in a login shell" in checks


def test_dry_run_sets_up_the_venv_and_the_login(default_run):
    cmds = commands(default_run.stdout)
    assert (f"env MRC_VENV=/opt/mrc-testbed/venv PYTHON=/usr/bin/python3 bash {REPO}/scripts/setup.sh"
            in cmds)
    assert "ln -sfn /opt/mrc-testbed/venv/bin/mrc-testbed /usr/local/bin/mrc-testbed" in cmds
    profile = written_files(default_run.stdout)[PROFILE_SNIPPET]
    assert '. "/opt/mrc-testbed/venv/bin/activate"' in profile
    assert f'cd "{REPO}"' in profile
    done = subprocess.run(["bash", "-n"], input=profile, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_dry_run_stages_come_in_order(default_run):
    stages = [line.split(": ", 1)[1] for line in default_run.stdout.splitlines()
              if line.startswith("==> provision: ")]
    expected = ["p4lang package repository", "Ubuntu and p4lang packages", "checking the P4 tools",
                "project virtual environment", "login environment", "simple_switch_CLI for vagrant",
                "self-check", "done"]
    assert [next(e for e in expected if s.startswith(e)) for s in stages] == expected


def test_dry_run_ends_with_the_self_check_commands(default_run):
    lines = default_run.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("==> provision: self-check"))
    tail = lines[start + 1:]
    assert tail[0] == (f"+ /opt/mrc-testbed/venv/bin/python {SELFCHECK} --mrc-testbed "
                       f"/opt/mrc-testbed/venv/bin/mrc-testbed --repo {REPO} --out /opt/mrc-testbed/selfcheck")
    assert tail[1] == f"+ (in {REPO}) /opt/mrc-testbed/venv/bin/mrc-testbed conformance --target bmv2"
    assert tail[2] == (f"+ (in {REPO}) /opt/mrc-testbed/venv/bin/mrc-testbed run experiments/failover.yaml"
                       " --backend mininet --target bmv2 --quick --out /opt/mrc-testbed/selfcheck/failover")


def test_dry_run_with_packages_builds_nothing_from_source(default_run):
    for word in ("git clone", "./configure", "autogen", "make -C", "/opt/bmv2-performance"):
        assert not any(word in c for c in commands(default_run.stdout)), word


def test_dry_run_performance_build_builds_pi_then_bmv2_without_logging(tmp_path):
    done = dry_run(tmp_path, MRC_VM_BMV2_BUILD="performance")
    assert done.returncode == 0, done.stderr
    cmds = commands(done.stdout)
    src, prefix = "/usr/local/src/mrc-bmv2-performance", "/opt/bmv2-performance"
    expected = [
        f"git clone --recursive --branch main https://github.com/p4lang/PI.git {src}/PI",
        f"git clone --branch main https://github.com/p4lang/behavioral-model.git {src}/behavioral-model",
        f"(in {src}/PI) ./autogen.sh",
        f"(in {src}/PI) ./configure --prefix={prefix} --with-proto --without-internal-rpc "
        "--without-cli --without-bmv2",
        f"make -C {src}/PI install",
        f"(in {src}/behavioral-model) ./autogen.sh",
        f"(in {src}/behavioral-model) ./configure --prefix={prefix} --with-pi --with-thrift "
        f"--disable-logging-macros --disable-elogger CXXFLAGS=-O3 CPPFLAGS=-I{prefix}/include "
        f"LDFLAGS=-L{prefix}/lib\\ -Wl\\,-rpath\\,{prefix}/lib PKG_CONFIG_PATH={prefix}/lib/pkgconfig",
        f"make -C {src}/behavioral-model install-strip",
        f"ln -sfn {prefix}/bin/simple_switch_grpc /usr/local/bin/simple_switch_grpc",
    ]
    positions = [cmds.index(c) for c in expected]
    assert positions[2:] == sorted(positions[2:]), "PI is built and installed before BMv2"
    builds = [c for c in cmds if c.startswith("apt-get install") and "libthrift-dev" in c]
    assert builds and cmds.index(builds[0]) < positions[0]
    assert not any("p4c" in c for c in cmds if "git clone" in c)      # p4c stays a package
    # the switch it built is there before the CLI check and the self-check use it
    assert cmds.index(expected[-1]) < next(i for i, c in enumerate(cmds) if "selfcheck.py" in c)


def test_the_cli_wrapper_runs_the_system_python_whatever_python3_is_first(default_run, tmp_path):
    if not Path("/usr/bin/python3").exists():
        pytest.skip("needs /usr/bin/python3")
    wrapper = written_files(default_run.stdout)[CLI_WRAPPER]
    assert wrapper.startswith("#!/bin/sh\n")
    assert 'exec /usr/bin/python3 /usr/bin/simple_switch_CLI "$@"' in wrapper
    # Stand-ins: the BMv2 CLI script, and a venv whose python3 comes first on PATH.
    fake_cli = tmp_path / "simple_switch_CLI"
    fake_cli.write_text("#!/usr/bin/env python3\nimport sys\nprint(sys.executable, *sys.argv[1:])\n")
    venv_bin = tmp_path / "venv-bin"
    venv_bin.mkdir()
    (venv_bin / "python3").write_text("#!/bin/sh\necho venv python3; exit 3\n")
    (venv_bin / "python3").chmod(0o755)
    script = tmp_path / "wrapper"
    script.write_text(wrapper.replace("/usr/bin/simple_switch_CLI", str(fake_cli)))
    script.chmod(0o755)
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=30,
                          env=dict(os.environ, PATH=f"{venv_bin}:{os.environ['PATH']}"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.split() == ["/usr/bin/python3", "--help"]


# --- selfcheck.py -------------------------------------------------------------------------------

def selfcheck(tmp_path: Path, *args: str, mrc_testbed: Path = VENV_MRC_TESTBED,
              timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SELFCHECK), "--mrc-testbed", str(mrc_testbed),
                           "--repo", str(REPO), "--out", str(tmp_path / "out"), *args],
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                          env=clean_environment(tmp_path))


def test_selfcheck_dry_run_prints_the_two_commands(tmp_path):
    done = selfcheck(tmp_path, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"+ (in {REPO}) {VENV_MRC_TESTBED} conformance --target bmv2",
        f"+ (in {REPO}) {VENV_MRC_TESTBED} run experiments/failover.yaml --backend mininet "
        f"--target bmv2 --quick --out {tmp_path / 'out' / 'failover'}",
    ]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_selfcheck_passes_on_the_model_target(tmp_path):
    """The real commands, on the model target and the netsim backend (no root, no BMv2)."""
    if not VENV_MRC_TESTBED.exists():
        pytest.skip(f"needs {VENV_MRC_TESTBED}")
    done = selfcheck(tmp_path, "--target", "model", "--backend", "netsim")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    listed = subprocess.run([str(VENV_MRC_TESTBED), "conformance", "--list"], capture_output=True,
                            text=True, cwd=REPO, timeout=60)
    cases = len(listed.stdout.splitlines())
    assert re.search(rf"^conformance  ok   {cases}/{cases} cases pass on model$", out, re.M), out
    assert re.search(r"^failover     ok   MRC done and bit-exact in 2/2 variants", out, re.M), out
    assert re.search(r"^installed\s+p4lang-p4c ", out, re.M)
    assert "fidelity" in out
    assert out.rstrip().endswith("result       PASS")
    assert len(out.splitlines()) <= 24                        # one screen
    result = tmp_path / "out" / "result.txt"
    assert result.read_text() == out
    assert (tmp_path / "out" / "failover" / "summary.json").is_file()


FAKE_MRC_TESTBED = r"""#!/usr/bin/env bash
# A stand-in for mrc-testbed: its behaviour comes from FAKE_* variables in the environment file.
. "$(dirname "$0")/fake.env"
case "$1" in
    conformance)
        [ -n "${FAKE_HANG:-}" ] && exec sleep 60
        echo "case                        target      result    time  detail"
        echo "ecn_mark_above_threshold    bmv2        PASS     0.01s  "
        echo "trim_when_queue_full        bmv2        FAIL     0.02s  expected a trimmed packet on port 2"
        echo "usid_shift                  bmv2        PASS     0.01s  "
        echo "bmv2: 2 pass, 1 fail"
        exit 1 ;;
    run)
        out="${*: -1}"
        if [ -n "${FAKE_SUMMARY:-}" ]; then mkdir -p "$out"; printf '%s' "$FAKE_SUMMARY" > "$out/summary.json"; fi
        exit "${FAKE_RUN_STATUS:-0}" ;;
    clean)
        touch "$(dirname "$0")/cleaned"; exit 0 ;;
esac
exit 64
"""


def fake_case(variant: str, transport: str, mode: str, completed: bool, **extra) -> dict:
    return {"variant": variant, "transport": transport, "mode": mode, "completed": completed,
            "completion_time_s": 1.25 if completed else None, "bit_exact": completed, **extra}


@pytest.fixture
def fake_testbed(tmp_path):
    """A fake mrc-testbed; call it with the fake's settings, get its path."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    program = bin_dir / "mrc-testbed"
    program.write_text(FAKE_MRC_TESTBED)
    program.chmod(0o755)

    def make(**settings: str) -> Path:
        (bin_dir / "fake.env").write_text("".join(f"{k}={shlex.quote(v)}\n"
                                                  for k, v in settings.items()))
        return program
    return make


def test_selfcheck_names_what_failed_and_cleans_up(tmp_path, fake_testbed):
    summary = {"backend": "mininet", "interrupted": False, "cases": [
        fake_case("leaf-spine", "MRC", "mrc", True, fidelity={"verdict": "faithful"}),
        fake_case("leaf-spine", "RoCE", "roce", False),
        fake_case("multi-plane", "MRC", "mrc", False, fidelity={"verdict": "distorted"})]}
    program = fake_testbed(FAKE_SUMMARY=json.dumps(summary))
    done = selfcheck(tmp_path, mrc_testbed=program)
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert re.search(r"^conformance  FAIL 2/3 cases pass on bmv2 \(exit status 1; log .*conformance.txt\)$",
                     out, re.M), out
    assert "trim_when_queue_full FAIL: expected a trimmed packet on port 2" in out
    assert re.search(r"^failover     FAIL MRC done and bit-exact in 1/2 variants, quick, mininet", out, re.M)
    assert re.search(r"multi-plane\s+MRC\s+NOT done\s+NOT bit-exact\s+distorted", out)
    assert re.search(r"leaf-spine\s+MRC\s+done in 1.25 s\s+bit-exact\s+faithful", out)
    assert "faithful in 1/2 failover cases" in out
    assert re.search(r"^clean-up     ok   mrc-testbed clean", out, re.M)
    assert out.rstrip().endswith("result       FAIL: conformance, failover")
    assert (program.parent / "cleaned").exists()


@pytest.mark.slow
def test_selfcheck_fails_an_mrc_case_whose_fault_missed_the_collective(tmp_path, fake_testbed):
    """`mrc-testbed run` exits 3 when a case is invalid; the self-check judges from the summary."""
    late = "link kill (s1-s3) at 30% of the workload: took effect after the workload ended (at 1.86 s)"
    summary = {"backend": "mininet", "interrupted": False, "cases": [
        fake_case("leaf-spine", "MRC", "mrc", True, fidelity="invalid", invalid_reasons=[late]),
        fake_case("leaf-spine", "RoCE + reroute 1 s", "roce", False, ending="cut at horizon",
                  delivered_fraction=0.917, fidelity="faithful")]}
    program = fake_testbed(FAKE_SUMMARY=json.dumps(summary), FAKE_RUN_STATUS="3")
    out = selfcheck(tmp_path, mrc_testbed=program).stdout
    assert re.search(r"^failover     FAIL MRC done and bit-exact in 1/1 variants, 1 of them invalid "
                     r"\(the fault missed the collective\), quick, mininet backend on bmv2$", out, re.M), out
    assert f"invalid: leaf-spine / MRC: {late}" in out
    assert re.search(r"RoCE \+ reroute 1 s\s+NOT done \(cut at horizon, 91 %\)\s+NOT bit-exact\s+faithful", out)


@pytest.mark.slow
def test_selfcheck_passes_valid_mrc_cases_beside_an_invalid_baseline(tmp_path, fake_testbed):
    summary = {"backend": "mininet", "interrupted": False, "cases": [
        fake_case("leaf-spine", "MRC", "mrc", True, fidelity="faithful"),
        fake_case("leaf-spine", "RoCE", "roce", False, ending="stuck", delivered_fraction=0.4,
                  fidelity="invalid", invalid_reasons=["link kill (s1-s3) at 30% of the workload: ..."])]}
    program = fake_testbed(FAKE_SUMMARY=json.dumps(summary), FAKE_RUN_STATUS="3")
    out = selfcheck(tmp_path, mrc_testbed=program).stdout
    assert re.search(r"^failover     ok   MRC done and bit-exact in 1/1 variants, quick", out, re.M), out
    assert re.search(r"RoCE\s+NOT done \(stuck at 40 %\)\s+NOT bit-exact\s+invalid", out)


@pytest.mark.slow
def test_selfcheck_reports_a_run_that_wrote_no_summary(tmp_path, fake_testbed):
    program = fake_testbed(FAKE_RUN_STATUS="3")
    done = selfcheck(tmp_path, mrc_testbed=program)
    assert done.returncode == 1
    assert re.search(r"^failover     FAIL no summary.json \(exit status 3; log .*failover.txt\)$",
                     done.stdout, re.M), done.stdout
    assert "not reported by this version" in done.stdout


@pytest.mark.slow
def test_selfcheck_stops_a_command_that_overruns(tmp_path, fake_testbed):
    program = fake_testbed(FAKE_HANG="1")
    done = selfcheck(tmp_path, "--timeout", "1", mrc_testbed=program)
    assert done.returncode == 1
    assert re.search(r"^conformance  FAIL 0/0 cases pass on bmv2 \(stopped after 1 s;", done.stdout,
                     re.M), done.stdout
    assert (program.parent / "cleaned").exists()


def test_selfcheck_names_a_bad_option(tmp_path):
    done = selfcheck(tmp_path, "--timeout", "0", "--dry-run")
    assert done.returncode == 2
    assert "--timeout 0" in done.stderr
    done = subprocess.run([sys.executable, str(SELFCHECK), "--repo", str(tmp_path / "nowhere")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "nowhere: no such folder" in done.stderr


def test_selfcheck_is_standard_library_only():
    text = SELFCHECK.read_text()
    imported = set(re.findall(r"^(?:from|import) (\w+)", text, re.M))
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)
    assert text.startswith("#!/usr/bin/env python3\n")


@pytest.mark.requires_mininet
@pytest.mark.requires_bmv2
@pytest.mark.integration
@pytest.mark.slow
def test_selfcheck_passes_on_bmv2(tmp_path):
    """The VM's self-check for real, on this checkout: BMv2's conformance cases and the quick
    failover on Mininet with BMv2 (root, Mininet and simple_switch_grpc; a few minutes). It runs as
    the other tests do (conftest): links at the fixed rates of the calibration file, so nothing is
    calibrated, and without real-time scheduling (MRC_REALTIME=0), which above a machine's
    calibration starves the kernel's threads: at 20 Mbit/s on BMv2 a link went down 730 ms late,
    after the collective."""
    program = tmp_path / "mrc-testbed"
    program.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m cli.main \"$@\"\n")
    program.chmod(0o755)
    env = clean_environment(tmp_path, **{k: v for k, v in os.environ.items() if k.startswith("MRC_")})
    done = subprocess.run([sys.executable, str(SELFCHECK), "--mrc-testbed", str(program), "--repo", str(REPO),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=1800,
                          stdin=subprocess.DEVNULL, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("result       PASS"), done.stdout
    assert re.search(r"^failover     ok   MRC done and bit-exact in 2/2 variants", done.stdout, re.M)
