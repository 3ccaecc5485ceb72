"""The cluster file (testbed/clusterfile.py): what a good one gives, and errors naming file and key."""
from __future__ import annotations

import pytest
import yaml

from testbed.clusterfile import ClusterFileError, load_cluster_file, parse_cluster


def write(tmp_path, doc) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return str(path)


def test_a_full_cluster_file(tmp_path):
    key = tmp_path / "id_test"
    key.write_text("not really a key")
    path = write(tmp_path, f"""
scheduler: {{address: 10.0.0.1, port: 8786}}
servers:
  - address: node1.lab
    user: alice
    cores: 16
    python: /opt/mrc/.venv/bin/python
    ssh_options: {{Port: 2222, IdentityFile: {key}, StrictHostKeyChecking: no, ConnectTimeout: 5}}
  - node2.lab
placement: {{s1: node1.lab, h1: node2.lab}}
""")
    spec = load_cluster_file(path)
    one, two = spec.servers
    assert (spec.path, spec.scheduler_address, spec.scheduler_port, spec.cores) == (path, "10.0.0.1", 8786, 17)
    assert (one.address, one.user, one.cores, one.python) == ("node1.lab", "alice", 16, "/opt/mrc/.venv/bin/python")
    assert (two.address, two.user, two.cores, two.python, two.ssh_options) == ("node2.lab", None, 1, None, {})
    assert one.ssh_args() == ["-o", "Port=2222", "-o", f"IdentityFile={key}", "-o", "StrictHostKeyChecking=no",
                              "-o", "ConnectTimeout=5", "alice@node1.lab"]
    assert one.connect_options() == {"username": "alice", "port": 2222, "client_keys": [str(key)],
                                     "known_hosts": None, "connect_timeout": 5}
    assert two.ssh_args() == ["node2.lab"] and two.connect_options() == {}
    assert spec.placement == {"s1": "node1.lab", "h1": "node2.lab"} and spec.server("node2.lab") is two
    with pytest.raises(KeyError, match="node3"):
        spec.server("node3")


@pytest.mark.parametrize("doc, key, reason", [
    ([], "", "expected a mapping with `servers:`"),
    ({"servers": []}, "servers", "non-empty list"),
    ({"servers": [{"address": "a"}], "workers": 3}, "workers", "unknown field; expected one of placement, scheduler, servers"),
    ({"servers": [{"user": "bob"}]}, "servers[0].address", "missing"),
    ({"servers": [{"address": "a b"}]}, "servers[0].address", "expected a host name"),
    ({"servers": ["a", {"address": "b", "cores": 0}]}, "servers[1].cores", "positive integer"),
    ({"servers": [{"address": "a", "cores": "many"}]}, "servers[0].cores", "positive integer"),
    ({"servers": [{"address": "a", "user": ""}]}, "servers[0].user", "expected a user name"),
    ({"servers": [{"address": "a", "hostname": "x"}]}, "servers[0].hostname", "unknown field; expected one of address, cores,"),
    ({"servers": [{"address": "a", "python": ""}]}, "servers[0].python", "path of Python"),
    ({"servers": [{"address": "a", "ssh_options": {"ProxyJump": "b"}}]}, "servers[0].ssh_options.ProxyJump",
     "not supported"),
    ({"servers": [{"address": "a", "ssh_options": {"Port": 70000}}]}, "servers[0].ssh_options.Port", "1..65535"),
    ({"servers": [{"address": "a", "ssh_options": {"IdentityFile": "/no/such/key"}}]},
     "servers[0].ssh_options.IdentityFile", "no such key file"),
    ({"servers": [{"address": "a", "ssh_options": {"StrictHostKeyChecking": "ask"}}]},
     "servers[0].ssh_options.StrictHostKeyChecking", "yes or no"),
    ({"servers": [{"address": "a", "ssh_options": {"ConnectTimeout": -1}}]},
     "servers[0].ssh_options.ConnectTimeout", "seconds > 0"),
    ({"servers": ["a", "b", "a"]}, "servers[2].address", "already servers[0]"),
    ({"servers": ["a"], "scheduler": {"port": "x"}}, "scheduler.port", "port number"),
    ({"servers": ["a"], "scheduler": {"host": "x"}}, "scheduler.host", "unknown field; expected one of address, port"),
    ({"servers": ["a"], "placement": {"s1": "b"}}, "placement.s1", "not the address of a server"),
    ({"servers": ["a"], "placement": ["s1"]}, "placement", "expected a mapping"),
])
def test_errors_name_the_file_and_the_key(tmp_path, doc, key, reason):
    path = write(tmp_path, doc)
    with pytest.raises(ClusterFileError) as info:
        load_cluster_file(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {key}: " if key else f"{path}: "), message
    assert reason in message


def test_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(ClusterFileError, match="missing.yaml: cannot read the file"):
        load_cluster_file(tmp_path / "missing.yaml")
    with pytest.raises(ClusterFileError, match="cluster.yaml: line 2: not valid YAML"):
        load_cluster_file(write(tmp_path, "servers: [a\n"))


def test_the_same_address_on_two_ports_is_two_servers():
    spec = parse_cluster({"servers": [{"address": "127.0.0.1", "ssh_options": {"Port": 2201}},
                                      {"address": "127.0.0.1", "ssh_options": {"Port": 2202}}]})
    assert [s.connect_options()["port"] for s in spec.servers] == [2201, 2202]


def test_the_example_in_the_experiments_readme_is_valid():
    import re
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "experiments" / "README.md").read_text()
    section = text.split("## Cases in parallel", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block, "experiments/README.md, 'Cases in parallel', has no cluster file example"
    spec = parse_cluster(yaml.safe_load(block.group(1)), "experiments/README.md")
    assert [s.cores for s in spec.servers] == [16, 8] and spec.scheduler_address == "10.0.0.1"
