"""Testbed pieces that need no Mininet network: run registry and clean-up, target choice,
switch command lines, probe and job construction, EV-state reading."""
from __future__ import annotations

import argparse
import json
import os
import stat
import subprocess
import sys

import pytest

from tests.conftest import requires_root
from controller.entries import PortQueue
from host_agent.job import parse_job
from testbed import nodes, registry
from cli import clean as clean_cmd
from cli.up import choose_target
from testbed.network import TestbedNetwork
from testbed.pathprobe import ecmp_probes, usid_probes
from testbed.transfer import ev_states, transfer_jobs
from topologies.builders import leaf_spine, multi_plane

PREFIX = f"t{os.getpid() % 1000}"


@pytest.fixture
def sleeper():
    """A process of ours to be cleaned up (killed in the end whatever happens)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


# --- registry ------------------------------------------------------------------------------
def test_registry_records_atomically_and_forgets(tmp_path, sleeper):
    reg = registry.RunRegistry("r1", directory=tmp_path)
    reg.record_process(sleeper.pid, "sleeper")
    reg.record_interface(f"{PREFIX}x0")
    state = registry.RunState.load(reg.path)
    assert state.owner_pid == os.getpid() and state.owner_alive()
    assert [p["name"] for p in state.processes] == ["sleeper"]
    assert state.processes[0]["start"] == registry.process_start_time(sleeper.pid)
    assert state.interfaces == [f"{PREFIX}x0"]
    reg.forget_process(sleeper.pid)
    assert registry.RunState.load(reg.path).processes == []
    assert not list(tmp_path.glob("*.tmp"))
    reg.close()
    assert not reg.path.exists()


def test_a_reused_pid_is_never_mistaken_for_ours(sleeper):
    start = registry.process_start_time(sleeper.pid)
    assert registry.is_same_process(sleeper.pid, start)
    assert not registry.is_same_process(sleeper.pid, start + 1)
    killed = registry.end_processes([{"pid": sleeper.pid, "start": start + 1, "name": "other"}])
    assert killed == [] and sleeper.poll() is None


def test_clean_run_ends_recorded_processes(tmp_path, sleeper):
    reg = registry.RunRegistry("r2", directory=tmp_path)
    reg.record_process(sleeper.pid, "sleeper")
    state = registry.RunState.load(reg.path)
    assert registry.leftovers(state) == [f"process sleeper (pid {sleeper.pid})"]
    report = registry.clean_run(state)
    assert report.killed == [f"sleeper (pid {sleeper.pid})"]
    assert sleeper.wait(5) is not None
    assert registry.leftovers(state) == [] and not reg.path.exists()


@requires_root
def test_clean_run_deletes_recorded_interfaces(tmp_path):
    name = f"{PREFIX}va"
    reg = registry.RunRegistry("r3", directory=tmp_path)
    reg.record_interface(name)
    subprocess.run(["ip", "link", "add", name, "type", "veth", "peer", "name", f"{PREFIX}vb"],
                   check=True)
    try:
        state = registry.RunState.load(reg.path)
        assert registry.leftovers(state) == [f"interface {name}"]
        assert registry.clean_run(state).interfaces == [name]
        assert not registry.interface_exists(name) and not registry.interface_exists(f"{PREFIX}vb")
    finally:
        subprocess.run(["ip", "link", "del", name], capture_output=True)


def test_clean_command_spares_live_runs_unless_forced(tmp_path, sleeper, monkeypatch, capsys):
    monkeypatch.setattr(clean_cmd, "list_runs", lambda: registry.list_runs(tmp_path))
    reg = registry.RunRegistry("r4", directory=tmp_path)      # owned by this (live) process
    reg.record_process(sleeper.pid, "sleeper")
    clean_cmd.run(argparse.Namespace(force=False, dry_run=False, run=None, cluster=None))
    assert "still running" in capsys.readouterr().out and sleeper.poll() is None
    clean_cmd.run(argparse.Namespace(force=True, dry_run=False, run=["r-other"], cluster=None))
    assert "r-other: no such recorded run" in capsys.readouterr().out and sleeper.poll() is None
    clean_cmd.run(argparse.Namespace(force=True, dry_run=False, run=["r4"], cluster=None))
    assert "ended 1 processes" in capsys.readouterr().out
    assert sleeper.wait(5) is not None


# --- targets and switch command lines ------------------------------------------------------------
def test_default_target_follows_simple_switch_grpc(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert choose_target(None) == ("model", "target: model (simple_switch_grpc not on PATH)")
    fake = tmp_path / "simple_switch_grpc"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    from controller import installer
    monkeypatch.setattr(installer, "DEFAULT_BMV2_JSON", tmp_path / "mrc.json")
    assert choose_target(None) == ("model", "target: model (simple_switch_grpc found, but mrc.json "
                                            "is not built: make -C p4)")
    (tmp_path / "mrc.json").write_text("{}")
    assert choose_target(None) == ("bmv2", "target: bmv2 (simple_switch_grpc found)")
    assert choose_target("model")[0] == "model"


def test_an_unusable_bmv2_target_is_named_before_anything_is_built(tmp_path, monkeypatch):
    """`up --target bmv2` and `run --target bmv2` check every binary and the program first."""
    from controller import installer
    from experiments.backends import make_backend
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(installer, "DEFAULT_BMV2_JSON", tmp_path / "mrc.json")
    assert "needs simple_switch_grpc on PATH" in nodes.target_unavailable("bmv2")
    assert nodes.target_unavailable("model") is None
    for program in ("simple_switch_grpc", "simple_switch_CLI"):
        (tmp_path / program).write_text("#!/bin/sh\n")
        (tmp_path / program).chmod(0o755)
        if program == "simple_switch_grpc":
            assert "needs simple_switch_CLI on PATH" in nodes.target_unavailable("bmv2")
    assert nodes.target_unavailable("bmv2").endswith("mrc.json (make -C p4)")
    (tmp_path / "mrc.json").write_text("{}")
    assert nodes.target_unavailable("bmv2") is None
    (tmp_path / "simple_switch_CLI").unlink()
    if os.geteuid() == 0:
        monkeypatch.setenv("PATH", f"{tmp_path}:/usr/sbin:/usr/bin:/sbin:/bin")
        if nodes.shutil.which("simple_switch_CLI") is None and nodes.shutil.which("mnexec"):
            with pytest.raises(RuntimeError, match="needs simple_switch_CLI on PATH"):
                make_backend("mininet", "bmv2")
            from cli import up
            parser = argparse.ArgumentParser()
            up.add_arguments(parser)
            assert up.run(parser.parse_args(["--target", "bmv2", "--run-dir", str(tmp_path / "run")])) == 2
            assert not (tmp_path / "run").exists()                # stopped before making anything


def bare_switch(cls, tmp_path, ports):
    """A switch node object without Mininet (only what command() reads)."""
    switch = object.__new__(cls)
    switch.name = switch.topo_name = "s3"
    switch.device_id = 3
    switch.run_dir = tmp_path
    switch.grpc_address = f"unix:{tmp_path}/s3.grpc.sock"
    switch.ready_file = tmp_path / "s3.ready"
    switch.queues = [PortQueue(1, 20_000_000, 64)]
    switch.ingress = {1: 20_000_000}
    switch.data_ports = lambda: ports
    return switch


def test_model_switch_command_line(tmp_path):
    cmd = bare_switch(nodes.RefSwitch, tmp_path, {1: "s3-eth1", 2: "s3-eth2"}).command()
    text = " ".join(cmd)
    assert cmd[1:3] == ["-m", "refswitch.main"]
    assert "--port 1=s3-eth1 --port 2=s3-eth2" in text
    assert "--queue 1:20000000:64" in text
    assert f"--grpc-addr unix:{tmp_path}/s3.grpc.sock" in text and "--device-id 3" in text
    from refswitch.main import add_arguments, build_config      # the model accepts it
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    config = build_config(parser.parse_args(cmd[3:]))
    assert config.ports == {1: "s3-eth1", 2: "s3-eth2"} and config.device_id == 3
    assert config.queues[1] == (20_000_000, 0, 64)
    assert config.ingress == {1: 20_000_000}                      # a host's link, serialised coming in
    assert config.stats_file == str(tmp_path / "s3.stats.json")     # read back for the queue service
    assert config.control_path == str(tmp_path / "s3.ctl.sock")      # queue rates at run time (switch_slow)


def test_bmv2_switch_command_line(tmp_path, monkeypatch):
    fake = tmp_path / "simple_switch_grpc"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(tmp_path))
    cmd = bare_switch(nodes.Bmv2Switch, tmp_path, {1: "s3-eth1", 4: "s3-eth4"}).command()
    text = " ".join(cmd)
    assert "-i 1@s3-eth1 -i 4@s3-eth4" in text and "--device-id 3" in text
    target_options = cmd[cmd.index("--") + 1:]
    assert " ".join(target_options) == (f"--grpc-server-addr unix:{tmp_path}/s3.grpc.sock "
                                        "--priority-queues 2")
    assert "--no-p4" in cmd


def test_bmv2_command_names_the_missing_binary(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(nodes.SwitchStartError, match="simple_switch_grpc is not on PATH"):
        bare_switch(nodes.Bmv2Switch, tmp_path, {1: "s3-eth1"}).command()


def test_unknown_target_is_rejected():
    with pytest.raises(ValueError, match="unknown target 'tofino'"):
        TestbedNetwork(leaf_spine(2, 1, 1), "tofino")


class _AddedSwitches:
    """Stands in for Mininet in `TestbedNetwork._add_switches`: records each addSwitch call."""

    def __init__(self):
        self.calls: dict[str, dict] = {}

    def addSwitch(self, name, **params):
        self.calls[name] = params


def test_every_switch_class_is_made_with_the_same_parameters(tmp_path):
    """The network passes the target's node class in and asks nothing of which class it is: the
    model and BMv2 switches get the same parameters (queues and host link rates included)."""
    made = {}
    for target in ("model", "bmv2"):
        net = TestbedNetwork(leaf_spine(2, 1, 1), target, run_dir=tmp_path / target)
        net.net, net.sock_dir = _AddedSwitches(), tmp_path
        net._add_switches()
        made[target] = net.net.calls
        assert {p.pop("cls") for p in made[target].values()} == {nodes.TARGETS[target]}
        for p in made[target].values():
            p.pop("run_dir")
    assert made["model"] == made["bmv2"]
    leaf, spine = made["model"]["s1"], made["model"]["s3"]          # h1 is on s1's port 1
    assert leaf["queues"] and leaf["ingress"] == {1: 20_000_000} and spine["ingress"] == {}


def test_a_switch_class_says_what_it_needs_of_the_program():
    from controller.installer import CompiledProgram
    from pipeline_contract.p4info import load_p4info
    without_json = CompiledProgram(load_p4info())
    nodes.RefSwitch.check_program(without_json)                 # the model needs only the P4Info
    with pytest.raises(nodes.SwitchStartError, match=r"BMv2 needs the compiled program p4/build/mrc\.json"):
        nodes.Bmv2Switch.check_program(without_json)
    nodes.Bmv2Switch.check_program(CompiledProgram(without_json.p4info, b"{}"))


def test_bmv2_configures_the_queues_it_was_made_with(tmp_path):
    switch = bare_switch(nodes.Bmv2Switch, tmp_path, {1: "s3-eth1"})
    sent = []
    switch.runtime_cli = sent.extend
    switch.configure_queues()
    per_priority = [20_000_000 // (8 * nodes.RATE_PACKET_BYTES[prio]) for prio in (0, 1)]
    assert sent == ["set_queue_depth 64 1 0", "set_queue_depth 64 1 1",
                    f"set_queue_rate {per_priority[0]} 1 0", f"set_queue_rate {per_priority[1]} 1 1"]


# --- probes and jobs -----------------------------------------------------------------------------
def test_usid_probes_cover_every_path_and_know_their_links():
    topo = leaf_spine(4, 2, 2)
    probes = usid_probes(topo)
    assert len(probes) == 8 * 7 + 48
    assert len({p.probe_id for p in probes}) == len(probes)
    one = next(p for p in probes if p.src_host == "h1" and p.dst_host == "h3")
    assert one.switches[0] == "s1" and one.dst.startswith("fc00:0:100:")
    assert one.crosses("h1", "s1") and one.crosses(one.switches[1], "s1")
    assert not one.crosses("s3", "s5")


def test_probes_on_every_plane_of_a_multi_plane_topology():
    topo = multi_plane(2, 2, 2, 1)
    probes = usid_probes(topo)
    assert {p.plane for p in probes} == {0, 1}
    assert all(p.nic.endswith(f"-eth{p.plane}") for p in probes)
    assert {p.plane for p in ecmp_probes(topo, evs=[1])} == {0, 1}


def test_transfer_jobs_are_valid_agent_jobs(tmp_path):
    topo = leaf_spine(2, 2, 1)
    jobs = transfer_jobs(topo, "h1", "h2", 100_000, log_dir=tmp_path)
    parsed = [parse_job(job.to_dict(), source=f"job{i}") for i, job in enumerate(jobs)]
    assert [j.host for j in parsed] == ["h1", "h2"]
    assert len(parsed[0].peer(1).paths[0]) == 2               # two spines, two uSID paths
    assert parsed[0].workload.params == {"src": 0, "dst": 1, "bytes": 100_000,
                                         "chunk_bytes": 65536, "seed": 0}


def test_ev_states_keep_the_last_state_of_each_ev(tmp_path):
    log = tmp_path / "h1.jsonl"
    records = [{"t": 1.0, "kind": "ev_state", "ev": 5, "old": "GOOD", "new": "SKIP"},
               {"t": 1.1, "kind": "goodput", "rx_bps": 1},
               {"t": 1.2, "kind": "ev_state", "ev": 5, "old": "SKIP", "new": "ASSUMED_BAD"},
               {"t": 1.3, "kind": "ev_state", "ev": 9, "old": "ASSUMED_BAD", "new": "GOOD"}]
    log.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    assert ev_states(log) == {5: "ASSUMED_BAD", 9: "GOOD"}
    assert ev_states(tmp_path / "missing.jsonl") == {}


def test_up_explains_a_missing_mnexec(tmp_path, monkeypatch, capsys):
    from cli import up
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(up.os, "geteuid", lambda: 0)
    args = argparse.Namespace(topo="leafspine:2x1x1", target="model", run_dir=str(tmp_path), pcap=False,
                              convergence_delay=None, no_cli=True, verbosity=0)
    assert up.run(args) == 2
    assert "needs mnexec on PATH" in capsys.readouterr().err
    monkeypatch.setattr(up.os, "geteuid", lambda: 1000)
    assert up.run(args) == 2
    assert "needs root" in capsys.readouterr().err


def test_clean_run_also_ends_unrecorded_processes_carrying_the_run_marker(tmp_path):
    run_id = f"{PREFIX}-marker-{os.getpid()}"
    reg = registry.RunRegistry(run_id, directory=tmp_path)
    stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             env=registry.marked_env(run_id))
    try:
        assert [p["pid"] for p in registry.marked_processes(run_id)] == [stray.pid]
        state = registry.RunState.load(reg.path)
        left = registry.leftovers(state)
        assert len(left) == 1 and left[0].endswith(f"(pid {stray.pid}, unrecorded)")
        registry.clean_run(state)
        assert stray.wait(5) is not None
        assert registry.marked_processes(run_id) == []
    finally:
        stray.kill()
        stray.wait()


def test_the_model_serialises_each_hosts_link_into_its_leaf(tmp_path):
    from testbed.network import TestbedNetwork
    from topologies.spec import topology_from_spec
    net = TestbedNetwork(topology_from_spec("leafspine:2x2x2"), "model", run_dir=tmp_path)
    leaf = net._host_links_into("s1")
    assert sorted(leaf) == [p for p in net.topology.ports_of("s1")
                            if net.topology.is_host(net.topology.neighbor("s1", p).node)]
    assert set(leaf.values()) == {20_000_000}
    assert net._host_links_into("s3") == {}                     # a spine: every link has a switch queue
