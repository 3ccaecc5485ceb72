"""Files sent to the servers of a cluster run: every job of a server's agents in one ssh session
(`ClusterNetwork.put_files`), so that starting each agent is one session, not two. The session's
command runs here, in a shell, in place of ssh."""
from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest

pytest.importorskip("mininet")


def test_each_server_gets_all_the_files_of_its_nodes_in_one_session(tmp_path, monkeypatch):
    from testbed import cluster

    sessions = []

    def here(server, command, timeout, control_dir=None, stdin=subprocess.DEVNULL):
        sessions.append(server.address)
        done = subprocess.run(["sh", "-c", command], stdin=stdin, capture_output=True)
        return done.returncode, done.stdout.decode(), done.stderr.decode()

    monkeypatch.setattr(cluster, "run_on", here)
    remote = tmp_path / "remote"
    remote.mkdir()
    servers = {"10.0.0.1": SimpleNamespace(address="10.0.0.1"), "10.0.0.2": SimpleNamespace(address="10.0.0.2")}
    placed_on = {"h1": "10.0.0.1", "h2": "10.0.0.1", "h3": "10.0.0.2"}
    net = SimpleNamespace(server_of=lambda node: servers[placed_on[node]], remote_dir=lambda: str(remote),
                          cluster=SimpleNamespace(server=servers.get), sock_dir=tmp_path)
    local = tmp_path / "jobs"
    local.mkdir()
    files = {}
    for host in placed_on:
        path = local / f"{host}.job.json"
        path.write_text(f'{{"host": "{host}"}}')
        files[host] = [path]
    placed = cluster.ClusterNetwork.put_files(net, files)
    assert sorted(sessions) == ["10.0.0.1", "10.0.0.2"]          # one session per server
    assert placed == {local / f"{h}.job.json": f"{remote}/{h}.job.json" for h in placed_on}
    assert all((remote / f"{h}.job.json").read_text() == f'{{"host": "{h}"}}' for h in placed_on)
    files["h2"] = [tmp_path / "h1.job.json"]
    files["h2"][0].write_text("{}")
    with pytest.raises(cluster.ClusterError, match="10.0.0.1: two files named h1.job.json"):
        cluster.ClusterNetwork.put_files(net, files)
