"""Integration: the 4-leaf/2-spine, 8-host network on real switch processes in Mininet.

One network per target per module (model always; BMv2 when `simple_switch_grpc` is installed).
Checks: bring-up stages, every uSID path of every host pair delivers a PROBE, counters read back
over P4Runtime match the probes, a dead link fails exactly the paths through it, the emulated
converging control plane reroutes ECMP after its delay and restores the baseline routes, and
tear-down leaves no process, namespace or interface behind. Run serially (Mininet).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import requires_bmv2, requires_mininet
from controller.installer import DEFAULT_BMV2_JSON, verify
from controller.routes import compute_programs
from testbed import nodes
from testbed.capture import MAX_SNAPLEN, PcapCapture
from testbed.network import STAGES, BringUpError, TestbedNetwork
from testbed.pathprobe import ProbeSession, ecmp_probes, run_probes, usid_probes
from testbed.registry import RunState, leftovers, list_runs, marked_processes
from testbed.transfer import run_transfer
from topologies.builders import leaf_spine
from wire import constants

pytestmark = [pytest.mark.integration, pytest.mark.slow, requires_mininet]

REPO = Path(__file__).resolve().parents[2]


def processes_mentioning(text: str) -> list[str]:
    """Command lines of running processes that contain `text` (e.g. a run folder)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{proc.name}: {cmdline.strip()}")
    return found


def report(request, line: str) -> None:
    """Print a measured figure in the pytest output, even without -s."""
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if capture is None:
        print(f"[testbed] {line}")
        return
    with capture.global_and_fixture_disabled():
        print(f"\n[testbed] {line}")


def root_ipv6_settings() -> dict[str, str]:
    """disable_ipv6 of the root namespace (all, default and every interface)."""
    settings = {}
    for conf in Path("/proc/sys/net/ipv6/conf").iterdir():
        try:
            settings[conf.name] = (conf / "disable_ipv6").read_text().strip()
        except OSError:         # an interface that vanished meanwhile
            continue
    return settings


def same_ipv6_settings(before: dict, after: dict) -> bool:
    """True when all/default and every interface present both times kept its setting (other
    teammates' tests may add or remove their own interfaces meanwhile)."""
    common = before.keys() & after.keys()
    assert {"all", "default"} <= common
    return all(before[k] == after[k] for k in common)


def assert_nothing_left(state: RunState, run_dir: Path) -> None:
    assert leftovers(state) == []
    assert processes_mentioning(str(run_dir)) == []
    assert not (state.path and state.path.exists()), "state file of a cleanly stopped run remains"


@pytest.fixture(scope="module", params=["model", pytest.param("bmv2", marks=requires_bmv2)])
def network(request, tmp_path_factory):
    """A running leafspine:4x2x2 network on one target; torn down and checked after the module."""
    if request.param == "bmv2" and not DEFAULT_BMV2_JSON.exists():
        pytest.skip(f"BMv2 needs the compiled program {DEFAULT_BMV2_JSON} (make -C p4)")
    run_dir = tmp_path_factory.mktemp(f"net-{request.param}")
    lines: list[str] = []
    root_before = root_ipv6_settings()
    net = TestbedNetwork(leaf_spine(4, 2, 2), request.param, run_dir=run_dir, progress=lines.append)
    try:
        net.start()
        state = net.registry.state
        net.progress_lines = lines
        net.root_before = (root_before, None)
        report(request, f"bring-up of {net.topology.name} on {request.param}: {net.bring_up_s:.2f} s "
                        f"({', '.join(f'{k} {v:.2f} s' for k, v in net.stage_times.items())})")
        yield net
    finally:
        remaining = net.stop()
    assert remaining == []
    assert_nothing_left(state, run_dir)
    assert same_ipv6_settings(root_before, root_ipv6_settings())


def test_root_namespace_is_untouched(network):
    """Switch ports live in the switches' namespaces; root IPv6 settings are never changed."""
    settings, _ = network.root_before
    ports = {intf.name for node in network.net.switches + network.net.hosts for intf in node.intfList()}
    assert ports and not ports & set(os.listdir("/sys/class/net"))
    assert same_ipv6_settings(settings, root_ipv6_settings())


@pytest.fixture(scope="module")
def prober(network):
    """A prober process in every host of the module's network, reused by every test."""
    with ProbeSession(network) as session:
        yield session


def assert_switches_alive(network) -> None:
    for switch in network.net.switches:
        if not switch.alive():
            tail = switch.log_path.read_text(errors="replace").splitlines()[-6:]
            pytest.fail(f"switch {switch.name} died; its log ends:\n" + "\n".join(tail))


def test_bring_up_reports_every_stage(network):
    topo = network.topology
    assert len(topo.hosts) == 8 and len(topo.switches) == 6
    assert [line.split()[1] for line in network.progress_lines[:len(STAGES)]] == list(STAGES)
    assert network.progress_lines[-1].startswith(f"network {topo.name} up on {network.target}")
    assert all(network.switch(s.name).alive() for s in topo.switches)
    state = network.registry.state          # every process of the run carries its marker
    marked = {p["pid"] for p in marked_processes(state.run_id)}
    assert {p["pid"] for p in state.processes} <= marked
    figures = json.loads((network.run_dir / "bringup.json").read_text())
    assert figures["hosts"] == 8 and set(figures["stages"]) == set(STAGES)
    for host in topo.hosts:        # IPv6 is off in every host namespace: the kernel stays silent
        out = network.host(host.name).cmd("sysctl -n net.ipv6.conf.all.disable_ipv6")
        assert out.strip() == "1"
        for nic in topo.host_nics(host.name):   # NICs named and addressed per docs/design.md
            assert network.host(host.name).intf(nic.ifname).MAC() == nic.mac


def test_servers_listen_only_on_unix_sockets_or_inside_switch_namespaces(network):
    """No process of the run listens on a TCP/UDP port of the root namespace; in a switch's own
    namespace only BMv2's thrift port may listen (that namespace has no outside interface)."""
    ours = {str(p["pid"]) for p in marked_processes(network.registry.state.run_id)}
    root = subprocess.run(["ss", "-ltunpH"], capture_output=True, text=True, check=True).stdout
    assert not [line for line in root.splitlines() if any(f"pid={pid}," in line for pid in ours)]
    allowed = {f":{nodes.Bmv2Switch.THRIFT_PORT}"} if network.target == "bmv2" else set()
    for switch in network.net.switches:
        listening = switch.cmd("ss -ltunH").split("\n")
        ports = {line.split()[4].rsplit(":", 1)[-1] for line in listening if line.strip()}
        assert {f":{p}" for p in ports} <= allowed, f"{switch.name} listens on {ports}"


def test_every_host_pair_reaches_every_other_on_every_usid_path(network, prober):
    probes = usid_probes(network.topology)
    assert len(probes) == 8 * 7 + 48          # same-leaf pairs: 1 path; other pairs: 2 spines
    result = prober.run(probes)
    assert result.failed() == []
    assert result.misdelivered() == []


def test_counters_read_back_match_the_probes(network, prober):
    before = {s.name: network.counters(s.name) for s in network.topology.switches}
    probes = usid_probes(network.topology)
    result = prober.run(probes, attempts=1)         # each probe once: counts must add up
    delivered = [p for p in probes if result.delivered(p)]
    assert len(delivered) >= 0.9 * len(probes)
    hops_sent = sum(len(p.switches) for p in probes)
    hops_delivered = sum(len(p.switches) for p in delivered)

    def total(name, counters):
        return sum(v.packets for v in counters.get(name, {}).values())
    after = {s.name: network.counters(s.name) for s in network.topology.switches}
    for counter in ("MrcIngress.rx", "MrcEgress.tx"):
        grown = sum(total(counter, after[s]) - total(counter, before[s]) for s in after)
        if len(delivered) == len(probes):
            assert grown == hops_sent, counter       # one count per switch a probe crossed
        else:                                         # a frame lost on a wire (loaded machine)
            assert hops_delivered <= grown <= hops_sent, counter
    drops = sum(total(c, after[s]) for s in after for c in
                ("MrcIngress.no_route_drops", "MrcIngress.malformed_drops", "MrcIngress.fault_drops"))
    assert drops == 0


def test_dead_link_fails_exactly_the_paths_through_it(network, prober):
    probes = usid_probes(network.topology)
    through = {p.probe_id for p in probes if p.crosses("s1", "s5")}
    assert 0 < len(through) < len(probes)
    network.link_down("s1", "s5")
    try:
        result = prober.run(probes, expect={p.probe_id for p in probes} - through)
        assert_switches_alive(network)                   # a link going down must not kill a switch
        assert {p.probe_id for p in result.failed()} == through
    finally:
        network.link_up("s1", "s5")
    assert prober.run(probes).failed() == []


def test_links_set_from_several_threads_at_once_all_take_effect(network, prober):
    """Faults fire from timer threads (a flap every 200 ms): concurrent link changes must not
    collide in the wire node's shell."""
    import threading
    errors = []

    def toggle(a, b):
        try:
            for up in (False, True, False, True):
                network.set_link(a, b, up)
        except Exception as error:                       # noqa: BLE001 - asserted below
            errors.append(repr(error))

    threads = [threading.Thread(target=toggle, args=pair) for pair in (("s1", "s5"), ("s1", "s6"), ("s2", "s5"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == [] and not any(t.is_alive() for t in threads)
    assert prober.run(usid_probes(network.topology)).failed() == []        # every link is back up


def test_converging_control_plane_reroutes_after_delay_and_restores(network, prober, request):
    topo = network.topology
    probes = ecmp_probes(topo, evs=range(1, 5))
    assert prober.run(probes).failed() == []
    leaf_s1 = {"h1", "h2"}                       # only their traffic can use the link s1-s5
    untouched = {p.probe_id for p in probes if not {p.src_host, p.dst_host} & leaf_s1}
    plane = network.enable_convergence(delay=2.0)
    link_down = False
    try:
        network.link_down("s1", "s5")
        link_down = True
        before = prober.run(probes, timeout=1.2, attempts=2)   # what gets through before rerouting
        assert plane.history == [], "probing took longer than the convergence delay"
        lost = {p.probe_id for p in before.failed()}
        assert lost and not lost & untouched    # ECMP flows hashed onto s1-s5 stall until reroute
        assert plane.wait_idle(timeout=10)
        assert not plane.errors
        record = plane.history[-1]
        assert record.done_at - record.notified_at >= plane.delay
        assert record.updates["s1"] > 0
        assert prober.run(probes).failed() == []       # ECMP routes around s1-s5 now
        network.link_up("s1", "s5")
        link_down = False
        assert plane.wait_idle(timeout=10)
        baseline = compute_programs(topo)
        reports = [verify(network.clients[n], p) for n, p in baseline.items()]
        assert all(r.ok for r in reports), "\n".join(r.describe() for r in reports)
        assert prober.run(usid_probes(topo)).failed() == []
    finally:
        plane.stop()
        network.control_plane = None
        if link_down:
            network.link_up("s1", "s5")
    report(request, f"ECMP probes lost before reconvergence: {len(lost)} of {len(probes)}; "
                    f"reprogramming {record.done_at - record.notified_at:.2f} s after the failure "
                    f"(delay {plane.delay:.1f} s)")


def test_failed_bring_up_leaves_nothing(tmp_path, monkeypatch):
    """A switch process that cannot start: BringUpError naming it, and a full tear-down."""
    from testbed import nodes
    original = nodes.RefSwitch.command
    monkeypatch.setattr(nodes.RefSwitch, "command", lambda self: original(self) + ["--no-such-option"])
    net = TestbedNetwork(leaf_spine(2, 1, 1), "model", run_dir=tmp_path, progress=lambda _: None)
    with pytest.raises(BringUpError, match=r"model switch s\d: exited"):
        net.start()
    assert net.net is None
    assert processes_mentioning(str(tmp_path)) == []


def test_clean_removes_what_a_sigkilled_run_left(tmp_path):
    """Start `mrc-testbed up` in a subprocess, SIGKILL it and its supervisor mid-run (what an older
    version leaves), `mrc-testbed clean`, check."""
    known = {state.run_id for state in list_runs()}
    run_dir = tmp_path / "killed"
    up = subprocess.Popen([sys.executable, "-m", "cli", "up", "--topo", "leafspine:2x2x1",
                           "--target", "model", "--run-dir", str(run_dir), "--no-cli"],
                          cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          start_new_session=True)
    state = None
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and up.poll() is None:
            mine = [s for s in list_runs() if s.run_id not in known and s.owner_pid == up.pid]
            if mine and any("switch s" in p["name"] and "shell" not in p["name"]
                            for p in mine[0].processes):
                state = mine[0]
                break
            time.sleep(0.05)
        assert state is not None, "bring-up never started a switch: " + \
            (up.stdout.read().decode() if up.poll() is not None else "")
        assert state.supervisor, "the run has no supervisor"
        os.kill(state.supervisor["pid"], signal.SIGKILL)     # as an older version: no supervisor
        up.kill()                                    # SIGKILL: no tear-down runs
        up.wait(10)
        state = RunState.load(state.path)            # everything recorded up to the kill
        assert leftovers(state), "a SIGKILLed run should leave processes behind"
        clean = subprocess.run([sys.executable, "-m", "cli", "clean", "--run", state.run_id],
                               cwd=str(REPO),
                               capture_output=True, text=True, timeout=60)
        assert clean.returncode == 0, clean.stdout + clean.stderr
        assert state.run_id in clean.stdout
        assert leftovers(state) == []
        assert processes_mentioning(str(run_dir)) == []
        assert not state.path.exists()
    finally:
        if up.poll() is None:
            up.kill()
            up.wait(10)
        if state is not None and leftovers(state):
            from testbed.registry import clean_run
            clean_run(state)


def pcap_lengths(path: Path) -> tuple[int, list[tuple[int, int]]]:
    """A pcap file's snapshot length and the (captured, original) length of each packet."""
    data = path.read_bytes()
    order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    snaplen = struct.unpack_from(order + "I", data, 16)[0]
    records, offset = [], 24
    while offset < len(data):
        captured, original = struct.unpack_from(order + "II", data, offset + 8)
        records.append((captured, original))
        offset += 16 + captured
    return snaplen, records


def test_pcap_per_switch_port(tmp_path):
    """With pcap on, every switch port has a capture holding the probes that crossed it, whole."""
    topo = leaf_spine(2, 1, 1)
    net = TestbedNetwork(topo, "model", run_dir=tmp_path, pcap=True, progress=lambda _: None)
    try:
        net.start()
        assert run_probes(net, usid_probes(topo)).failed() == []
    finally:
        assert net.stop() == []
    from scapy.utils import rdpcap
    for switch in topo.switches:
        for port in topo.ports_of(switch.name):
            frames = rdpcap(str(tmp_path / f"{switch.name}-port{port}.pcap"))
            assert len(frames) >= 2, f"{switch.name} port {port}"   # one probe each way at least
            snaplen, records = pcap_lengths(tmp_path / f"{switch.name}-port{port}.pcap")
            assert snaplen == MAX_SNAPLEN and all(c == o for c, o in records)
    assert processes_mentioning(str(tmp_path)) == []


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
def test_pcap_of_a_transfer_decodes_with_the_dissector(tmp_path):
    """Whole data packets, SACKs and probes captured on a switch port: tshark with
    wireshark/mrc.lua decodes every one as MRC, none malformed; a snapshot length cuts them."""
    topo = leaf_spine(2, 1, 1)
    net = TestbedNetwork(topo, "model", run_dir=tmp_path / "whole", pcap=True, progress=lambda _: None)
    try:
        net.start()
        assert run_probes(net, usid_probes(topo)).failed() == []
        assert run_transfer(net, "h1", "h2", 60_000).ok
    finally:
        assert net.stop() == []
    fields = ("frame.len", "frame.cap_len", "_ws.col.Protocol", "mrc.opcode", "_ws.malformed")
    rows = []
    for pcap in sorted((tmp_path / "whole").glob("*.pcap")):
        out = subprocess.run(["tshark", "-X", f"lua_script:{REPO / 'wireshark' / 'mrc.lua'}", "-r",
                              str(pcap), "-T", "fields", *[a for f in fields for a in ("-e", f)]],
                             capture_output=True, text=True, timeout=120, check=True,
                             env=dict(os.environ, HOME=str(tmp_path))).stdout
        rows += [dict(zip(fields, line.split("\t"))) for line in out.splitlines()]
    kinds = {int(row["mrc.opcode"], 0) for row in rows}
    assert {constants.OP_RC_WRITE_ONLY, constants.OP_SACK, constants.OP_PROBE} <= kinds
    data = [row for row in rows if int(row["mrc.opcode"], 0) == constants.OP_RC_WRITE_ONLY]
    assert max(int(row["frame.len"]) for row in data) > 1000
    for row in rows:
        assert row["_ws.col.Protocol"] == "MRC" and row["_ws.malformed"] == ""
        assert row["frame.len"] == row["frame.cap_len"]

    net = TestbedNetwork(topo, "model", run_dir=tmp_path / "cut", pcap=PcapCapture(128),
                         progress=lambda _: None)
    try:
        net.start()
        assert run_transfer(net, "h1", "h2", 20_000).ok
    finally:
        assert net.stop() == []
    cut = [pcap_lengths(pcap) for pcap in (tmp_path / "cut").glob("*.pcap")]
    assert {snaplen for snaplen, _ in cut} == {128}
    records = [r for _, rs in cut for r in rs]
    assert any(o > 128 for _, o in records) and all(c == min(o, 128) for c, o in records)
    assert processes_mentioning(str(tmp_path)) == []


def test_up_command_cli_end_to_end(tmp_path):
    """`mrc-testbed up` with its CLI driven on stdin: probe, counters, transfer, evs, exit."""
    commands = "probe\ncounters s1\ntransfer h1 h2 50000\nevs h1\nlink_down s1 s9\nexit\n"
    run_dir = tmp_path / "up"
    done = subprocess.run([sys.executable, "-m", "cli", "up", "--topo", "leafspine:2x1x1",
                           "--target", "model", "--run-dir", str(run_dir)], input=commands,
                          cwd=str(REPO), capture_output=True, text=True, timeout=120)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert out.splitlines()[0] == "target: model (--target)"
    assert "[5/5] program" in out and "up on model in" in out
    assert "2/2 probes arrived" in out
    assert "MrcIngress.rx" in out                       # counters of s1 after the probes
    assert "h1 -> h2: 50000 bytes in" in out and "goodput" in out
    assert "error: no link between s1 and s9" in out
    assert processes_mentioning(str(run_dir)) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_up_stops_cleanly_on_a_signal(tmp_path, sig):
    """`mrc-testbed up --no-cli` tears everything down on SIGTERM or Ctrl-C (SIGINT)."""
    known = {state.run_id for state in list_runs()}
    run_dir = tmp_path / "signalled"
    up = subprocess.Popen([sys.executable, "-m", "cli", "up", "--topo", "leafspine:2x1x1",
                           "--target", "model", "--run-dir", str(run_dir), "--no-cli"],
                          cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in up.stdout:                       # ends if `up` exits early
            lines.append(line)
            if line.startswith("network up"):
                break
        assert lines and lines[-1].startswith("network up"), "".join(lines)
        state = next(s for s in list_runs() if s.run_id not in known and s.owner_pid == up.pid)
        assert state.processes
        up.send_signal(sig)
        assert up.wait(30) == (128 + sig if sig == signal.SIGTERM else 0)   # 143: terminated
        assert leftovers(state) == []
        assert not state.path.exists()
        assert processes_mentioning(str(run_dir)) == []
    finally:
        if up.poll() is None:
            up.kill()
            up.wait(10)


def test_the_fidelity_monitor_watches_every_switch_and_counts_each_link_direction(tmp_path):
    """On a live network: every switch process is watched, and the probes each switch sent on a
    link were all counted in by its neighbour's pipeline (no loss before the pipeline)."""
    from testbed.fidelity import FidelityMonitor
    topo = leaf_spine(2, 1, 1)
    net = TestbedNetwork(topo, "model", run_dir=tmp_path, progress=lambda _: None)
    try:
        net.start()
        monitor = FidelityMonitor(net, sample_s=0.1).start()
        assert run_probes(net, usid_probes(topo)).failed() == []
        monitor.stop()
        verdict = monitor.verdict()
    finally:
        assert net.stop() == []
    measured = verdict.measured
    assert set(measured["processes"]) == {"s1", "s2", "s3"}
    assert set(measured["link_loss"]) == {"s1->s3", "s3->s1", "s2->s3", "s3->s2"}
    assert all(sent == received and sent > 0 for sent, received in measured["link_loss"].values())
    assert not [r for r in verdict.reasons if "lost before the pipeline" in r]
