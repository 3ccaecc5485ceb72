"""Static checks of the set-up script, CI entry point and VM files, and that README.md promises
what they do. The VM cannot boot here: its files are checked, not run."""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / "scripts" / "setup.sh"
CI_RUN = REPO / ".ci" / "run"
PROVISION = REPO / "vagrant" / "provision.sh"
VAGRANTFILE = REPO / "Vagrantfile"
README = REPO / "README.md"
SHELL_SCRIPTS = [SETUP, CI_RUN, PROVISION, REPO / "vagrant" / "cluster.sh"]

MAIN_EXPERIMENT = "sudo .venv/bin/mrc-testbed run experiments/failover.yaml"


def bash_array(script: Path, name: str) -> list[str]:
    """The words of a bash array assignment NAME=( ... ) in a script (comments dropped)."""
    match = re.search(rf"^{name}=\((.*?)\)", script.read_text(), re.S | re.M)
    assert match, f"{script.name} has no {name}=(...)"
    words = []
    for line in match.group(1).splitlines():
        words += line.split("#", 1)[0].split()
    return words


def readme_quick_start() -> list[str]:
    """The command lines of README.md's first code block."""
    match = re.search(r"```sh\n(.*?)```", README.read_text(), re.S)
    assert match, "README.md has no sh code block"
    return [line.strip() for line in match.group(1).splitlines() if line.strip()]


# --- shell scripts -------------------------------------------------------------------------

@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda p: p.name)
def test_shell_script_parses(script):
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda p: p.name)
def test_shell_script_passes_shellcheck(script):
    if not shutil.which("shellcheck"):
        pytest.skip("needs shellcheck on PATH (Debian package shellcheck)")
    done = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda p: p.name)
def test_shell_script_is_executable_and_strict(script):
    assert script.stat().st_mode & stat.S_IXUSR, f"{script} is not executable"
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text


# --- scripts/setup.sh --------------------------------------------------------------------------

def test_setup_help():
    done = subprocess.run(["bash", str(SETUP), "--help"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0
    assert "--user-only" in done.stdout


def test_setup_rejects_unknown_option():
    done = subprocess.run(["bash", str(SETUP), "--frobnicate"], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 1
    assert "unknown option: --frobnicate" in done.stderr


def test_setup_refuses_to_run_without_root():
    command = ["bash", str(SETUP)]
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("running as root and no setpriv to drop privileges")
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + command
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, cwd="/")
    if "Permission denied" in done.stderr:
        pytest.skip(f"user nobody cannot read {SETUP}")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "needs root" in done.stderr
    assert "--user-only" in done.stderr
    assert "==>" not in done.stdout          # nothing was started


def test_setup_installs_the_packages_readme_lists():
    text = README.read_text()
    match = re.search(r"installs the Debian packages\n\s*`([^`]+)`", text)
    assert match, "README.md no longer lists the Debian packages of scripts/setup.sh"
    assert match.group(1).split() == bash_array(SETUP, "APT_PACKAGES")


def test_setup_packages_cover_what_the_tests_need():
    packages = set(bash_array(SETUP, "APT_PACKAGES"))
    assert {"mininet", "iproute2", "iputils-ping", "ethtool", "tcpdump", "tshark"} <= packages


# --- .ci/run ----------------------------------------------------------------------------------

def test_ci_runs_exactly_the_readme_test_command():
    test_command = readme_quick_start()[-1]
    assert test_command == ".venv/bin/python -m pytest -q tests"
    ci_lines = [line.strip() for line in CI_RUN.read_text().splitlines()]
    assert test_command in ci_lines
    setup_line = next(i for i, line in enumerate(ci_lines) if line.startswith("bash scripts/setup.sh"))
    assert setup_line < ci_lines.index(test_command)


def test_make_test_runs_the_readme_test_command():
    if not shutil.which("make"):
        pytest.skip("needs make on PATH")
    done = subprocess.run(["make", "-n", "-C", str(REPO), "--no-print-directory", "test"],
                          capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == readme_quick_start()[-1]


def test_readme_first_screen_is_clone_setup_experiment_tests():
    lines = readme_quick_start()
    assert len(lines) == 4
    assert lines[0].startswith("git clone ")
    assert lines[1] == "sudo scripts/setup.sh"
    assert lines[2] == MAIN_EXPERIMENT
    first_screen = README.read_text().splitlines()[:25]
    assert any(MAIN_EXPERIMENT in line for line in first_screen)


@pytest.fixture
def fake_checkout(tmp_path):
    """A copy of .ci/run beside a no-op setup.sh and a fake venv whose pytest exits with
    $FAKE_PYTEST_STATUS and whose 'clean' command exists when $FAKE_CLEAN_STATUS is set."""
    (tmp_path / ".ci").mkdir()
    shutil.copy2(CI_RUN, tmp_path / ".ci" / "run")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "setup.sh").write_text("#!/usr/bin/env bash\necho fake set-up\n")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    fakes = {
        "python": '#!/usr/bin/env bash\n'
                  'if [ "$1" = -c ]; then [ -n "${FAKE_CLEAN_STATUS:-}" ]; exit; fi\n'
                  'echo "fake pytest: $*"; exit "$FAKE_PYTEST_STATUS"\n',
        "mrc-testbed": '#!/usr/bin/env bash\necho "fake mrc-testbed $*"; exit "$FAKE_CLEAN_STATUS"\n',
    }
    for name, body in fakes.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)

    def run(pytest_status: int, clean_status: int | None = None) -> subprocess.CompletedProcess:
        env = dict(os.environ, FAKE_PYTEST_STATUS=str(pytest_status))
        env.pop("FAKE_CLEAN_STATUS", None)
        if clean_status is not None:
            env["FAKE_CLEAN_STATUS"] = str(clean_status)
        return subprocess.run(["bash", str(tmp_path / ".ci" / "run")], capture_output=True,
                              text=True, env=env, stdin=subprocess.DEVNULL, timeout=30)
    return run


@pytest.mark.parametrize("pytest_status, ci_status", [(0, 0), (1, 1), (2, 2), (5, 1)])
def test_ci_passes_pytest_status_and_fails_when_no_tests_ran(fake_checkout, pytest_status, ci_status):
    done = fake_checkout(pytest_status)
    assert done.returncode == ci_status, done.stdout + done.stderr
    assert "fake set-up" in done.stdout
    assert "fake pytest: -m pytest -q tests" in done.stdout
    if pytest_status == 5:
        assert "collected no tests" in done.stderr


def test_ci_cleans_leftovers_before_the_tests(fake_checkout):
    done = fake_checkout(0, clean_status=0)
    assert done.returncode == 0
    assert done.stdout.index("fake mrc-testbed clean") < done.stdout.index("fake pytest")


def test_ci_stops_when_cleaning_fails(fake_checkout):
    done = fake_checkout(0, clean_status=3)
    assert done.returncode == 1
    assert "fake pytest" not in done.stdout
    assert "'mrc-testbed clean' failed" in done.stderr


# --- the VM -----------------------------------------------------------------------------------

RUBY_VAGRANT_STUB = r"""
require "json"
# Records what a Vagrantfile configures, without Vagrant.
class Recorder
  attr_reader :data
  def initialize; @data = {}; end
  def method_missing(name, *args, **kwargs, &block)
    key = name.to_s
    if key.end_with?("=")
      @data[key.chomp("=")] = args.first
    elsif key == "provider"
      settings, override = Recorder.new, Recorder.new
      block.call(settings, override) if block
      (@data["providers"] ||= {})[args.first] = { "settings" => settings, "override" => override }
    elsif key == "define"
      machine = Recorder.new
      block.call(machine) if block
      (@data["machines"] ||= {})[args.first] = { "settings" => machine, "options" => kwargs }
    elsif args.empty? && kwargs.empty? && block.nil?
      @data[key] ||= Recorder.new
    else
      (@data["calls"] ||= []) << [key, args, kwargs]
    end
  end
  def respond_to_missing?(*) true end
  def to_json(*a) @data.to_json(*a) end
end
module Vagrant
  def self.configure(version)
    config = Recorder.new
    yield config
    puts JSON.generate(config)
  end
end
load ARGV[0]
"""


def needs_ruby():
    if not shutil.which("ruby"):
        pytest.skip("needs ruby on PATH to check the Vagrantfile")


def vagrant_config(tmp_path, vagrantfile: Path = VAGRANTFILE, **env) -> dict:
    needs_ruby()
    stub = tmp_path / "vagrant_stub.rb"
    stub.write_text(RUBY_VAGRANT_STUB)
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("MRC_VM_", "MRC_P4LANG_"))}
    environment.update(env)
    done = subprocess.run(["ruby", str(stub), str(vagrantfile)], capture_output=True, text=True,
                          env=environment, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_vagrantfile_syntax():
    needs_ruby()
    done = subprocess.run(["ruby", "-c", str(VAGRANTFILE)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_vagrantfile_defaults(tmp_path):
    config = vagrant_config(tmp_path)
    assert config["vm"]["box"] == "bento/ubuntu-22.04"
    providers = config["vm"]["providers"]
    assert set(providers) == {"virtualbox", "libvirt"}
    for provider in providers.values():
        assert provider["settings"]["cpus"] == 4
        assert provider["settings"]["memory"] == 8192
    provisioners = [call for call in config["vm"]["calls"] if call[0] == "provision"]
    assert provisioners and provisioners[0][2]["path"] == "vagrant/provision.sh"
    assert (REPO / provisioners[0][2]["path"]).is_file()


def test_vagrantfile_takes_cpus_and_memory_from_the_environment(tmp_path):
    config = vagrant_config(tmp_path, MRC_VM_CPUS="2", MRC_VM_MEMORY="4096")
    for provider in config["vm"]["providers"].values():
        assert provider["settings"]["cpus"] == 2
        assert provider["settings"]["memory"] == 4096


def test_vagrantfile_passes_the_p4lang_repository_override_to_provisioning(tmp_path):
    def provision_env(config):
        return [call for call in config["vm"]["calls"] if call[0] == "provision"][0][2]["env"]
    assert "MRC_P4LANG_REPO_URL" not in provision_env(vagrant_config(tmp_path))
    url = "https://mirror.invalid/p4lang/xUbuntu_22.04"
    assert provision_env(vagrant_config(tmp_path, MRC_P4LANG_REPO_URL=url))["MRC_P4LANG_REPO_URL"] == url


def test_vagrantfile_rejects_a_bad_cpu_count(tmp_path):
    needs_ruby()
    stub = tmp_path / "vagrant_stub.rb"
    stub.write_text(RUBY_VAGRANT_STUB)
    done = subprocess.run(["ruby", str(stub), str(VAGRANTFILE)], capture_output=True, text=True,
                          env=dict(os.environ, MRC_VM_CPUS="lots"), timeout=60)
    assert done.returncode != 0
    assert 'MRC_VM_CPUS="lots"' in done.stderr


def test_provision_installs_the_p4lang_packages_readme_promises():
    readme_rows = re.findall(r"^\| `(p4lang-[a-z0-9-]+)` \| ([0-9][0-9.]*) \|", README.read_text(), re.M)
    assert readme_rows, "README.md has no table of p4lang packages"
    provisioned = [tuple(entry.split("=", 1)) for entry in bash_array(PROVISION, "P4LANG_PACKAGES")]
    assert sorted(provisioned) == sorted(readme_rows)
    assert {name for name, _ in provisioned} >= {"p4lang-p4c", "p4lang-bmv2", "p4lang-pi"}


def test_provision_installs_what_setup_needs_and_runs_setup():
    ubuntu = set(bash_array(PROVISION, "UBUNTU_PACKAGES"))
    assert set(bash_array(SETUP, "APT_PACKAGES")) <= ubuntu
    assert "python3-venv" in ubuntu                 # Ubuntu's python3 needs it for venv
    assert 'bash "$REPO/scripts/setup.sh"' in PROVISION.read_text()


def test_provision_uses_p4lang_repository_for_jammy_with_a_keyring():
    text = PROVISION.read_text()
    assert "home:/p4lang/xUbuntu_22.04" in text
    assert "signed-by=" in text
    assert "apt-key" not in text


def shell_function(script: Path, name: str) -> str:
    """The text of a bash function NAME() { ... } of a script (up to its closing brace)."""
    match = re.search(rf"^{name}\(\) {{\n.*?^}}\n", script.read_text(), re.S | re.M)
    assert match, f"{script.name} has no function {name}"
    return match.group(0)


def test_provision_builds_from_source_only_in_the_performance_build():
    build = shell_function(PROVISION, "build_pi_and_bmv2")
    rest = PROVISION.read_text().replace(build, "")
    for word in ("git clone", "make -C", "./configure", "autogen"):
        assert word in build
        assert word not in rest, f"provision.sh builds outside the performance build ({word!r})"
    assert 'if [ "$BMV2_BUILD" = package ]; then' in shell_function(PROVISION, "select_bmv2_build")
    assert 'BMV2_BUILD="${MRC_VM_BMV2_BUILD:-package}"' in rest


def test_provision_performance_build_configures_bmv2_without_logging():
    flags = bash_array(PROVISION, "BMV2_CONFIGURE_FLAGS")
    assert flags == ["--with-pi", "--with-thrift", "--disable-logging-macros", "--disable-elogger"]
    assert "CXXFLAGS=-O3" in shell_function(PROVISION, "build_pi_and_bmv2")
    assert "p4c" not in shell_function(PROVISION, "build_pi_and_bmv2")   # p4c stays the package


def test_provision_source_line_uses_http_and_the_key_https():
    text = PROVISION.read_text()
    assert ('P4LANG_URL="${MRC_P4LANG_REPO_URL:-http://download.opensuse.org/repositories/'
            'home:/p4lang/xUbuntu_22.04}"') in text
    assert 'P4LANG_KEY_URL="${MRC_P4LANG_KEY_URL:-https://${P4LANG_URL#*://}/Release.key}"' in text
    assert 'deb [signed-by=$P4LANG_KEYRING] $P4LANG_URL/ /' in text


def test_provision_pin_follows_the_repository_url():
    text = PROVISION.read_text()
    assert "Pin: origin download.opensuse.org" not in text
    assert 'Pin: origin $(url_host "$P4LANG_URL")' in text


def test_provision_checks_simple_switch_cli_and_runs_it_for_the_user():
    assert "simple_switch_CLI" in bash_array(PROVISION, "P4_TOOLS")
    assert '"${P4_TOOLS[@]}"' in shell_function(PROVISION, "check_installed")
    check = shell_function(PROVISION, "check_cli_for_user")
    assert "runuser -l \"$VM_USER\" -c 'simple_switch_CLI --help'" in check
    assert "exec /usr/bin/python3 $SYSTEM_CLI" in shell_function(PROVISION, "set_up_login")


def test_provision_ends_with_the_self_check_and_survives_its_failure():
    main = shell_function(PROVISION, "main").splitlines()
    assert main[-3].strip() == "self_check"
    check = shell_function(PROVISION, "self_check")
    assert '"$REPO/vagrant/selfcheck.py"' in check
    assert 'if ! "$VENV/bin/python" "${check[@]}"; then' in check      # a failure warns, no exit
    text = (REPO / "vagrant" / "selfcheck.py").read_text()
    assert '[self.mrc_testbed, "conformance", "--target", self.target]' in text
    assert ('[self.mrc_testbed, "run", FAILOVER_SCENARIO, "--backend", self.backend,\n'
            '                "--target", self.target, "--quick", "--out", str(self.failover_folder)]') in text


def test_provision_leaves_mrc_testbed_on_path_and_the_user_in_the_repo():
    text = PROVISION.read_text()
    assert "/etc/profile.d/" in text
    assert "bin/activate" in text
    assert "/usr/local/bin/mrc-testbed" in text     # also under sudo (secure_path)
    assert 'cd "$REPO"' in text


def test_vagrantfile_plugs_in_the_virtualbox_network_cable(tmp_path):
    virtualbox = vagrant_config(tmp_path)["vm"]["providers"]["virtualbox"]["settings"]
    assert ["customize", [["modifyvm", "id", "--cableconnected1", "on"]], {}] in virtualbox["calls"]


@pytest.mark.slow
def test_vagrantfile_names_each_clone_s_virtualbox_vm_apart(tmp_path):
    names = []
    for parent in ("a", "b", "a"):
        clone = tmp_path / parent / "mrc-testbed"
        clone.mkdir(parents=True, exist_ok=True)
        shutil.copy2(VAGRANTFILE, clone / "Vagrantfile")
        config = vagrant_config(tmp_path, clone / "Vagrantfile")
        names.append(config["vm"]["providers"]["virtualbox"]["settings"]["name"])
    assert names[0] != names[1]                # two clones, two names
    assert names[0] == names[2]                # the same clone keeps its name
    assert all(name.startswith("mrc-testbed-mrc-testbed-") for name in names)


def provision_env(config: dict) -> dict:
    return [call for call in config["vm"]["calls"] if call[0] == "provision"][0][2]["env"]




@pytest.mark.slow
def test_vagrantfile_cluster_profile_boots_n_vms_with_keys_and_writes_the_cluster_file(tmp_path):
    clone = tmp_path / "mrc-testbed"
    (clone / "vagrant").mkdir(parents=True)
    shutil.copy2(VAGRANTFILE, clone / "Vagrantfile")
    assert "machines" not in vagrant_config(tmp_path, clone / "Vagrantfile")["vm"]     # one VM by default
    config = vagrant_config(tmp_path, clone / "Vagrantfile", MRC_VMS="3")
    machines = config["vm"]["machines"]
    assert list(machines) == ["mrc1", "mrc2", "mrc3"] and machines["mrc1"]["options"] == {"primary": True}
    addresses = []
    for name, machine in machines.items():
        calls = machine["settings"]["vm"]["calls"]
        (network,) = [c for c in calls if c[0] == "network"]
        addresses.append(network[2]["ip"])
        files = [c[2]["destination"] for c in calls if c[0] == "provision" and c[1] == ["file"]]
        assert "/tmp/mrc-cluster/host_ed25519" in files and "/tmp/mrc-cluster/id_ed25519" in files
        assert [c[2]["path"] for c in calls if c[0] == "provision" and c[1] == ["shell"]] == ["vagrant/cluster.sh"]
        assert machine["settings"]["vm"]["providers"]["virtualbox"]["settings"]["name"].endswith(f"-{name}")
    assert addresses == ["192.168.56.11", "192.168.56.12", "192.168.56.13"]
    keys = clone / ".vagrant" / "mrc-cluster"
    known = (keys / "known_hosts").read_text().splitlines()
    assert [line.split()[0] for line in known] == addresses                       # every VM's host key
    assert len({line.split()[2] for line in known}) == 3
    from testbed.clusterfile import parse_cluster
    import yaml
    doc = yaml.safe_load((clone / "vagrant" / "cluster.yaml").read_text())
    for server in doc["servers"]:          # the key is a path inside the VMs: checked there, not here
        server["ssh_options"].pop("IdentityFile")
    cluster = parse_cluster(doc, "vagrant/cluster.yaml")
    assert [s.address for s in cluster.servers] == addresses and cluster.servers[0].user == "root"
    assert cluster.servers[0].ssh_options["UserKnownHostsFile"] == "/root/.ssh/mrc_cluster_known_hosts"
    again = vagrant_config(tmp_path, clone / "Vagrantfile", MRC_VMS="3")            # keys made once
    assert (keys / "known_hosts").read_text().splitlines() == known and again["vm"]["machines"]


def test_vagrantfile_passes_the_bmv2_build_to_provisioning(tmp_path):
    assert provision_env(vagrant_config(tmp_path))["MRC_VM_BMV2_BUILD"] == "package"
    chosen = vagrant_config(tmp_path, MRC_VM_BMV2_BUILD="performance")
    assert provision_env(chosen)["MRC_VM_BMV2_BUILD"] == "performance"
    stub = tmp_path / "vagrant_stub.rb"
    done = subprocess.run(["ruby", str(stub), str(VAGRANTFILE)], capture_output=True, text=True,
                          env=dict(os.environ, MRC_VM_BMV2_BUILD="fast"), timeout=60)
    assert done.returncode != 0
    assert 'MRC_VM_BMV2_BUILD="fast"' in done.stderr


def test_readme_runs_the_vm_suite_as_root_with_the_venv_python():
    venv = re.search(r'^VENV="\$\{MRC_VENV:-([^}]+)\}"', PROVISION.read_text(), re.M).group(1)
    vm_section = README.read_text().split("## The VM", 1)[1].split("\n## ", 1)[0]
    assert f"sudo {venv}/bin/python -m pytest -q tests" in vm_section
    assert f"sudo {venv}/bin/python /vagrant/vagrant/selfcheck.py" in vm_section
    assert "MRC_VM_BMV2_BUILD=performance" in vm_section
    assert "make -C p4" in vm_section
    served = re.findall(r"^\| `(p4lang-[a-z0-9-]+)` \| [0-9.]+ \| ([0-9][0-9.]*) \|", vm_section, re.M)
    assert dict(served) == {"p4lang-p4c": "1.2.5.17", "p4lang-bmv2": "1.15.6", "p4lang-pi": "0.1.3"}
