"""--cluster FILE end to end: an sshd of the test's own on 127.0.0.1 (a free high port, keys made
in a temporary folder, no system configuration read or changed) plays a server of the cluster file,
then two namespace servers (testbed/local_servers.py) play two machines; Dask's workers start there
over SSH and give the sequential records. Skipped where Debian's openssh-server is absent."""
from __future__ import annotations

import getpass
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import requires_sshd
from experiments import parallel
from experiments.backends.netsim_backend import NetsimBackend
from experiments.scenario import parse_scenario
from testbed.clusterfile import load_cluster_file

ROOT = Path(__file__).resolve().parents[2]
SSHD = "/usr/sbin/sshd"
SMALL = {
    "name": "small", "title": "Small cases", "topology": "leafspine:2x2x1", "link": {"rate_bps": 100_000_000},
    "horizon_s": 1.5, "sample_interval_s": 0.002, "workload": {"kind": "allreduce", "bytes": 131072, "chunk_bytes": 16384},
    "transports": [{"name": "MRC", "mode": "mrc"}, {"name": "RoCE", "mode": "roce"}],
    "variants": [{"label": "clean", "faults": []},
                 {"label": "lossy", "faults": [{"kind": "random_loss", "loss": 0.01, "at": 0}]}],
}

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def descendants(pid: int) -> list:
    import psutil
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


@pytest.fixture
def sshd(tmp_path):
    """(port, client key) of an sshd of this test's own on 127.0.0.1; stopped by its PID after."""
    if not (os.path.exists(SSHD) and shutil.which("ssh-keygen")):
        pytest.skip(f"needs {SSHD} and ssh-keygen (Debian package openssh-server)")
    if os.geteuid() == 0 and not os.path.isdir("/run/sshd"):
        pytest.skip("sshd run as root needs its privilege separation folder /run/sshd (made when "
                    "Debian's openssh-server service has started once)")
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / name)], check=True)
    shutil.copy(tmp_path / "client_key.pub", tmp_path / "authorized_keys")
    port = free_port()
    config = tmp_path / "sshd_config"
    config.write_text(f"Port {port}\nListenAddress 127.0.0.1\nHostKey {tmp_path / 'host_key'}\n"
                      f"AuthorizedKeysFile {tmp_path / 'authorized_keys'}\nPidFile {tmp_path / 'sshd.pid'}\n"
                      "PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                      "UsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\n")
    log = tmp_path / "sshd.log"
    with log.open("w") as err:
        daemon = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stderr=err, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while True:
            if daemon.poll() is not None:
                pytest.skip(f"sshd did not start: {log.read_text().strip()[-300:]}")
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                pytest.fail(f"sshd listened on no port {port} within 15 s: {log.read_text()[-300:]}")
            time.sleep(0.1)                   # polling for the listener, bounded by the deadline
        yield port, tmp_path / "client_key", daemon.pid
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)


def test_a_cluster_file_server_reached_over_ssh_gives_the_sequential_records(sshd, tmp_path):
    port, key, sshd_pid = sshd
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(json.dumps({
        "scheduler": {"address": "127.0.0.1"},
        "servers": [{"address": "127.0.0.1", "user": getpass.getuser(), "cores": 2,
                     # this checkout, as an editable install of it would give
                     "python": f"env PYTHONPATH={ROOT} {sys.executable}",
                     "ssh_options": {"Port": port, "IdentityFile": str(key), "StrictHostKeyChecking": "no"}}]}))
    cases = parse_scenario(SMALL).cases()
    sequential = [json.dumps(NetsimBackend().run_case(c).as_dict(), sort_keys=True) for c in cases]
    stream = io.StringIO()
    pool = parallel.DaskPool.over_ssh(load_cluster_file(cluster))
    try:
        assert pool.workers == 2
        workers = pool.client.scheduler_info()["workers"]
        assert all(a.startswith("tcp://127.0.0.1:") for a in workers), workers
        started = [p for p in descendants(sshd_pid) if "python" in p.name() or "python" in " ".join(p.cmdline())]
        assert any("distributed.cli.dask_spec" in " ".join(p.cmdline()) for p in started), started
        records = parallel.run_all(pool, parallel.netsim_case, cases, [c.label for c in cases], stream)
    finally:
        pool.close()
    assert [json.dumps(r.as_dict(), sort_keys=True) for r in records] == sequential
    assert stream.getvalue().splitlines()[0] == (f"{len(cases)} case(s) on 2 Dask workers on 1 server(s) of "
                                                 f"{cluster} (scheduler at 127.0.0.1)")
    # the worker processes end by themselves once the scheduler has closed (within seconds)
    import psutil
    _, left = psutil.wait_procs(started, timeout=30)
    for process in left:
        process.kill()
    assert not left, f"worker processes still running 30 s after the pool closed: {left}"


def test_a_server_without_that_python_is_a_clear_error(sshd, tmp_path):
    port, key, _ = sshd
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(json.dumps({
        "scheduler": {"address": "127.0.0.1"},
        "servers": [{"address": "127.0.0.1", "user": getpass.getuser(), "python": "/nonexistent/python",
                     "ssh_options": {"Port": port, "IdentityFile": str(key), "StrictHostKeyChecking": "no"}}]}))
    with pytest.raises(RuntimeError) as info:
        parallel.DaskPool.over_ssh(load_cluster_file(cluster))
    message = str(info.value)
    assert message.startswith(f"cluster file {cluster}: could not start Dask workers on its servers")
    assert "/nonexistent/python" in message and "No such file" in message


@requires_sshd
def test_two_namespace_servers_run_the_cases_of_their_cluster_file(tmp_path):
    """Two stand-in machines (testbed/local_servers.py: a namespace, an address and an sshd each);
    the cluster file they write, run as it is but for the python (this checkout's)."""
    import yaml
    from testbed.local_servers import NamespaceServers
    cases = parse_scenario(SMALL).cases()
    sequential = [json.dumps(NetsimBackend().run_case(c).as_dict(), sort_keys=True) for c in cases]
    with NamespaceServers(2, tmp_path / "servers") as servers:
        assert len(load_cluster_file(servers.cluster_file).servers) == 2       # their file, as written
        doc = yaml.safe_load(servers.cluster_file.read_text())
        for server in doc["servers"]:
            server["python"] = f"env PYTHONPATH={ROOT} {sys.executable}"
        cluster = tmp_path / "cluster.yaml"
        cluster.write_text(yaml.safe_dump(doc))
        pool = parallel.DaskPool.over_ssh(load_cluster_file(cluster))
        try:
            hosts = {a.rsplit(":", 1)[0] for a in pool.client.scheduler_info()["workers"]}
            records = parallel.run_all(pool, parallel.netsim_case, cases, [c.label for c in cases], io.StringIO())
        finally:
            pool.close()
    assert hosts == {f"tcp://{s.address}" for s in servers.servers}
    assert [json.dumps(r.as_dict(), sort_keys=True) for r in records] == sequential
