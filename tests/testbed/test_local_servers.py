"""Namespace servers (testbed/local_servers.py): each answers ssh with the keys made for it, reaches
the others over the bridge, and nothing of them outlives the process that made them, even a SIGKILL."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import requires_sshd
from testbed.local_servers import LocalServersError, NamespaceServers

ROOT = Path(__file__).resolve().parents[2]


def link_exists(name: str) -> bool:
    return Path(f"/sys/class/net/{name}").exists()


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_until(condition, timeout: float) -> bool:
    """Poll `condition` until it holds or `timeout` seconds pass; whether it held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.mark.slow
@requires_sshd
def test_servers_answer_ssh_each_in_its_namespace_and_reach_each_other(tmp_path):
    with NamespaceServers(2, tmp_path / "servers") as servers:
        seen = []
        for server in servers.servers:
            done = subprocess.run(servers.ssh_command(server, "ip -o -4 addr show cl0"), capture_output=True,
                                  text=True, timeout=20)
            assert done.returncode == 0, done.stderr
            seen.append(done.stdout.split()[3])
        assert seen == [f"{s.address}/24" for s in servers.servers]
        first, second = servers.servers
        ping = subprocess.run(servers.ssh_command(first, f"ping -c 1 -W 2 {second.address}"),
                              capture_output=True, text=True, timeout=20)
        assert ping.returncode == 0, ping.stdout + ping.stderr
        assert "known_hosts" in servers.cluster_file.read_text()
        pids = [p.pid for p in [*servers._sshds.values(), *servers._holders.values()]]
        link = servers.link
    assert not link_exists(link)
    assert [pid for pid in pids if alive(pid)] == []


@pytest.mark.slow
@requires_sshd
def test_a_key_not_made_for_the_servers_is_refused(tmp_path):
    with NamespaceServers(1, tmp_path / "servers") as servers:
        stranger = tmp_path / "stranger"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
        server = servers.servers[0]
        done = subprocess.run(["ssh", "-F", str(servers.folder / "ssh_config"), "-o", f"IdentityFile={stranger}",
                               "-o", "IdentitiesOnly=yes", "-i", str(stranger), f"root@{server.address}", "true"],
                              capture_output=True, text=True, timeout=20)
        # ssh_config's IdentityFile adds the made key too; so ask with the stranger's key alone:
        alone = subprocess.run(["ssh", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-i", str(stranger),
                                "-o", f"UserKnownHostsFile={servers.folder / 'known_hosts'}",
                                "-o", "StrictHostKeyChecking=yes", "-F", "/dev/null",
                                f"root@{server.address}", "true"], capture_output=True, text=True, timeout=20)
        assert done.returncode == 0          # the made key, offered by the config, still works
        assert alone.returncode != 0 and "Permission denied" in alone.stderr


@pytest.mark.slow
@requires_sshd
def test_sigkill_of_the_process_that_made_them_leaves_nothing(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "testbed.local_servers", "--servers", "2",
                             "--dir", str(tmp_path / "servers")], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "Ctrl-C removes them" in line:
                break
        link = re.search(r"servers up behind (\S+)", "".join(lines)).group(1)
        assert link_exists(link), "".join(lines) + proc.stderr.read() if proc.poll() is not None else lines
        children = [int(p) for p in subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                                   text=True).stdout.split()]
        made = [pid for pid in children if b"testbed.supervisor" not in Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert len(made) == 5                     # the holders of the fabric and of two servers, two sshds
                                                  # (and the run's supervisor: all must be gone after)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert wait_until(lambda: not link_exists(link) and not any(alive(p) for p in children), 2.0), \
        f"still there 2 s after SIGKILL: link {link_exists(link)}, processes {[p for p in children if alive(p)]}"


@pytest.mark.slow
@requires_sshd
def test_two_sets_of_servers_at_once_take_a_link_and_subnet_each(tmp_path):
    with NamespaceServers(1, tmp_path / "a") as first, NamespaceServers(1, tmp_path / "b") as second:
        assert first.link != second.link and not first.subnet.overlaps(second.subnet)
        for made in (first, second):
            done = subprocess.run(made.ssh_command(made.servers[0], "true"), capture_output=True, timeout=20)
            assert done.returncode == 0


def test_a_subnet_too_small_or_in_use_is_refused(tmp_path):
    with pytest.raises(LocalServersError, match="room for 3 servers"):
        NamespaceServers(3, tmp_path, subnet="10.213.7.0/29")
    with pytest.raises(LocalServersError, match="between 1 and 50"):
        NamespaceServers(0, tmp_path)


@requires_sshd
def test_the_servers_python_runs_this_checkout_s_code_from_any_folder(tmp_path):
    """A server's login shell starts in its home folder, where `python -m host_agent.agent` would
    import whatever the Python's installation points to (in a second checkout of the repository:
    the first one's agents and switches, not the code the front end runs)."""
    servers = NamespaceServers(1, tmp_path / "servers")
    servers.build()
    import yaml
    python = yaml.safe_load(servers.cluster_file.read_text())["servers"][0]["python"]
    done = subprocess.run([python, "-c", "import host_agent, testbed; print(host_agent.__file__, testbed.__file__)"],
                          cwd="/", capture_output=True, text=True, timeout=60, env={"PATH": os.environ["PATH"]})
    assert done.returncode == 0, done.stderr
    assert all(Path(f).is_relative_to(ROOT) for f in done.stdout.split()), done.stdout
