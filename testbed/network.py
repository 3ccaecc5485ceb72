"""Bring a `topologies.Topology` up as a Mininet network of P4 switches, program it, tear it down.

Stages (one progress line each, with its duration):

1. hosts     — a Mininet host per topology host (own namespace, IPv6 off);
2. switches  — a switch node per topology switch (own namespace, IPv6 off), model or BMv2;
3. links     — each topology link is port <-veth-> bridge <-veth-> port through a "wire"
               namespace (cutting it drops carrier at both ends, as a real cable cut does), no tc
               shaping (the bottleneck is the switch's egress queue); host NICs named and
               addressed as docs/design.md says;
4. start     — every switch process launched, then waited for (P4Runtime ready);
5. program   — the static programs from `controller.routes.compute_programs` installed over
               P4Runtime and read back; egress queues configured.

Everything created is recorded in a `testbed.registry.RunRegistry` first, and every process
carries the run's marker; the run's supervisor (`testbed.supervisor`) removes all of it within
about a second if this process dies without its tear-down (SIGKILL included), and `mrc-testbed
clean` can too. `stop()` always runs the whole tear-down.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import sys
import time
from pathlib import Path
from typing import Callable

from mininet.link import Link
from mininet.net import Mininet

from p4.v1 import p4runtime_pb2

from controller.convergence import DEFAULT_DELAY_S, ConvergingControlPlane
from controller.entries import PortQueue
from controller.installer import CompiledProgram, install
from controller.routes import compute_programs
from pipeline_contract.client import CounterValue, P4RuntimeClient
from pipeline_contract.entries import TableEntry
from pipeline_contract.names import FAULT_DROP, FAULT_DROP_RANDOM, PORT_CONFIG, PORT_FAULT, TRIM_NEVER
from testbed import nodes, realtime
from testbed.capture import PcapCapture
from testbed.processes import DEFAULT_GRACE_S, stop_process
from testbed.registry import RunRegistry, leftovers, state_dir

log = logging.getLogger("mrc.testbed")

STAGES = ("hosts", "switches", "links", "start", "program")
WIRE = "wire"           # the namespace holding one bridge per link (testbed.nodes.WireNode)


class BringUpError(RuntimeError):
    """The network could not be brought up; the message names the stage and the cause."""


class TestbedNetwork:
    """One running testbed: Mininet nodes, switch processes, P4Runtime sessions."""

    __test__ = False        # not a pytest test class

    def __init__(self, topology, target: str = "model", run_dir: str | Path = "runs/latest",
                 program: CompiledProgram | None = None, pcap: bool | PcapCapture = False,
                 convergence_delay: float | None = None,
                 progress: Callable[[str], None] | None = None, run_id: str | None = None):
        if target not in nodes.TARGETS:
            raise ValueError(f"unknown target {target!r}: choose one of {', '.join(nodes.TARGETS)}")
        self.topology = topology
        self.target = target
        self.switch_cls: type[nodes.P4Switch] = nodes.TARGETS[target]    # the node class every switch is
        self.run_dir = Path(run_dir).resolve()
        self.compiled = program      # the P4 program the switches run (P4Info, BMv2 JSON)
        self.pcap = PcapCapture.of(pcap)       # None: no capture; True means whole packets
        self.convergence_delay = convergence_delay
        self.progress = progress or (lambda line: log.info("%s", line))
        self.run_id = run_id
        self.registry: RunRegistry | None = None
        self.net: Mininet | None = None
        self.wire: nodes.WireNode | None = None
        self.sock_dir: Path | None = None          # the run's unix sockets (short paths)
        self.programs = compute_programs(topology)
        self.clients: dict[str, P4RuntimeClient] = {}
        self.control_plane: ConvergingControlPlane | None = None
        self.stage_times: dict[str, float] = {}
        self.bring_up_s: float = 0.0
        self._port_faults: dict[tuple[str, int], TableEntry] = {}   # faults installed now
        # what each switch reported of its rate-limited queues when stop() ended it (model target)
        self.queue_service: dict[str, dict[int, dict]] = {}
        self.control_priority = realtime.ControlPriority()   # this thread and the wire's shell, while up

    # --- bring-up -----------------------------------------------------------------------------
    def start(self) -> "TestbedNetwork":
        """Bring everything up; on any failure tear down what exists and raise BringUpError."""
        began = time.monotonic()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.registry = RunRegistry(self.run_id, supervised=True)
        self.sock_dir = state_dir() / self.registry.state.run_id
        self.sock_dir.mkdir(parents=True, exist_ok=True)
        try:
            if self.compiled is None:
                self.compiled = CompiledProgram.load()
            self.switch_cls.check_program(self.compiled)
            self.net = Mininet(topo=None, build=False, controller=None, link=Link,
                               autoSetMacs=False, autoStaticArp=False, waitConnected=False)
            for number, (stage, step) in enumerate(zip(STAGES, (
                    self._add_hosts, self._add_switches, self._add_links,
                    self._start_switches, self._program), strict=True), start=1):
                t0 = time.monotonic()
                detail = step()
                self.stage_times[stage] = time.monotonic() - t0
                self.progress(f"[{number}/{len(STAGES)}] {stage:<9} {detail} "
                              f"({self.stage_times[stage]:.2f} s)")
        except BaseException as exc:
            self.stop()
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            raise BringUpError(f"bring-up of {self.topology.name} on {self.target} failed: {exc}") \
                from exc
        self.bring_up_s = time.monotonic() - began
        self.control_priority.raise_(self._control_pids())
        self.progress(f"network {self.topology.name} up on {self.target} in {self.bring_up_s:.2f} s")
        (self.run_dir / "bringup.json").write_text(json.dumps({
            "topology": self.topology.name, "target": self.target, "hosts": len(self.topology.hosts),
            "switches": len(self.topology.switches), "seconds": round(self.bring_up_s, 3),
            "stages": {k: round(v, 3) for k, v in self.stage_times.items()}}, indent=1))
        return self

    def __enter__(self) -> "TestbedNetwork":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _add_hosts(self) -> str:
        for host in self.topology.hosts:
            node = self.net.addHost(host.name, cls=nodes.MrcHost, ip=None,
                                    run_id=self.registry.state.run_id)
            self.registry.record_process(node.pid, f"host shell {host.name}", group=True)
        return f"{len(self.topology.hosts)} hosts"

    def _add_switches(self) -> str:
        for switch in self.topology.switches:
            program = self.programs[switch.name]
            self.net.addSwitch(switch.name, cls=self.switch_cls, device_id=program.device_id,
                               run_dir=str(self.run_dir), sock_dir=str(self.sock_dir),
                               topo_name=switch.name, pcap=self.pcap, registry=self.registry,
                               queues=program.queues, ingress=self._host_links_into(switch.name))
        return f"{len(self.topology.switches)} {self.target} switches"

    def _host_links_into(self, switch: str) -> dict[int, int]:
        """Port -> bit rate of each link from a host into `switch`: no switch egress queue
        serialises those (the model does it as frames come in; BMv2 cannot)."""
        rates = {}
        for port in self.topology.ports_of(switch):
            far = self.topology.neighbor(switch, port)
            if self.topology.is_host(far.node):
                link = self.topology.link_between(switch, far.node)
                if link.rate_bps:
                    rates[port] = link.rate_bps
        return rates

    def _add_links(self) -> str:
        self.wire = nodes.WireNode(WIRE, run_id=self.registry.state.run_id)
        self.registry.record_process(self.wire.pid, "wire shell", group=True)
        for index, link in enumerate(self.topology.links):
            for end, (node, port) in enumerate(((link.a, link.a_port), (link.b, link.b_port))):
                params = {"intfName2": nodes.WireNode.end_names(index)[end]}
                if self.topology.is_host(node):     # host NICs: named and addressed per design
                    nic = self.topology.host_nic(node, port)
                    params.update(intfName1=nic.ifname, addr1=nic.mac)
                self.net.addLink(self.net[node], self.wire, port1=port, port2=2 * index + end + 1,
                                 **params)
            self.wire.join(index)
        self.net.build()
        for host in self.net.hosts:
            nodes.disable_ipv6(host, [i.name for i in host.intfList() if i.name != "lo"])
        return f"{len(self.topology.links)} links"

    def _stop_wires(self) -> None:
        """End the wire node, once the nodes and links are stopped and before what is left of the
        run's record is looked for."""
        if self.wire is not None:
            self.wire.terminate()
            self.wire = None

    def _control_pids(self) -> tuple[int, ...]:
        """The processes that cut links, raised with this thread while the network runs."""
        return (self.wire.pid,)

    def _start_switches(self) -> str:
        for switch in self.net.switches:
            switch.start([])
        for switch in self.net.switches:
            switch.wait_ready()
        return f"{len(self.net.switches)} switch processes ready"

    def _program(self) -> str:
        def program_one(name: str) -> int:
            switch = self.net[name]
            program = self.programs[name]
            client = P4RuntimeClient(switch.grpc_address, program.device_id, name=name)
            self.clients[name] = client     # before connecting: stop() closes it, even half-open
            client.connect()
            report = install(client, program, self.compiled)
            switch.configure_queues()
            return report.installed

        # One switch after the other: a parallel version once failed with "dictionary changed size
        # during iteration" (Mininet nodes and the shared P4Info index are not made for threads),
        # and programming is a small share of bring-up (about 0.1 s per switch).
        counts = [program_one(s.name) for s in self.topology.switches]
        if self.convergence_delay is not None:
            self.enable_convergence(self.convergence_delay)
        return f"{sum(counts)} entries installed and verified"

    # --- use ------------------------------------------------------------------------------------
    def enable_convergence(self, delay: float = DEFAULT_DELAY_S) -> ConvergingControlPlane:
        """Turn on the emulated converging control plane (reroute `delay` s after a link event)."""
        if self.control_plane is None:
            self.control_plane = ConvergingControlPlane(self.topology, self.clients, self.programs,
                                                        delay=delay)
        return self.control_plane

    def host(self, name: str):
        """The Mininet host called `name`."""
        return self.net[name]

    def switch(self, name: str) -> nodes.P4Switch:
        """The Mininet switch node called `name`."""
        return self.net[name]

    def set_link(self, a: str, b: str, up: bool) -> None:
        """Cut the link between nodes `a` and `b` (both ends lose carrier) or restore it."""
        link = self.topology.link_between(a, b)
        self.wire.set_link(self.topology.links.index(link), up)
        if self.control_plane is not None:
            (self.control_plane.link_up if up else self.control_plane.link_down)(link)

    def link_down(self, a: str, b: str) -> None:
        self.set_link(a, b, up=False)

    def link_up(self, a: str, b: str) -> None:
        self.set_link(a, b, up=True)

    def set_port_fault(self, switch: str, port: int, drop_all: bool = False, drop_prob: float = 0.0) -> None:
        """Make `switch` drop every packet leaving by `port` (a blackhole), or each with probability
        `drop_prob` (a gray link); neither clears the port's fault."""
        client = self._client(switch)
        old = self._port_faults.pop((switch, port), None)
        if not drop_all and not drop_prob:
            if old is not None:
                client.write([(p4runtime_pb2.Update.DELETE, old)])
            return
        if drop_all:
            entry = TableEntry(PORT_FAULT, {"port": port}, FAULT_DROP)
        else:
            entry = TableEntry(PORT_FAULT, {"port": port}, FAULT_DROP_RANDOM,
                               {"drop_ppm": int(round(drop_prob * 1_000_000))})
        kind = p4runtime_pb2.Update.MODIFY if old is not None else p4runtime_pb2.Update.INSERT
        client.write([(kind, entry)])
        self._port_faults[(switch, port)] = entry

    def set_switch_rate(self, switch: str, share: float) -> None:
        """Serve every link of `switch` at `share` of the rate it was programmed with (1.0: back to
        it), both ways: its own egress queues, and the queues of neighbour switches facing it (a
        host's NIC towards a slowed leaf keeps its pace). A gray switch: up, forwarding, slow."""
        if not self.topology.is_switch(switch):
            raise KeyError(f"no switch named {switch!r}")
        if not 0 < share <= 1:
            raise ValueError(f"share: {share!r} is not in (0, 1]")
        ports = [(switch, port) for port in self.topology.ports_of(switch)]
        for port in self.topology.ports_of(switch):
            far = self.topology.neighbor(switch, port)
            if self.topology.is_switch(far.node):
                ports.append((far.node, self.topology.port_towards(far.node, switch)))
        changes: dict[str, list[PortQueue]] = {}
        for name, port in ports:
            full = next(q for q in self.programs[name].queues if q.port == port)
            if not full.rate_bps:
                raise ValueError(f"{name} port {port}: its queue has no rate (unlimited) to take a share of")
            rate = full.rate_bps if share == 1 else max(1, int(full.rate_bps * share))
            changes.setdefault(name, []).append(dataclasses.replace(full, rate_bps=rate))
        for name, queues in changes.items():
            self.switch(name).set_queue_rates(queues)

    def set_trimming(self, on: bool) -> None:
        """Trimming on every port as the controller programmed it, or off (drop-tail switches: the
        trim threshold becomes one no queue reaches)."""
        for name, program in self.programs.items():
            changes = []
            for entry in program.entries_of(PORT_CONFIG):
                threshold = entry.params["trim_threshold"] if on else TRIM_NEVER
                changes.append((p4runtime_pb2.Update.MODIFY,
                                dataclasses.replace(entry, params={**entry.params, "trim_threshold": threshold})))
            if changes:
                self._client(name).write(changes)

    def kill_switch(self, name: str) -> None:
        """End a switch's process, as a switch that dies; the control plane, if any, sees its
        sessions drop and routes around it."""
        self.switch(name).stop_process()
        if self.control_plane is not None:
            self.control_plane.switch_down(name, list(self.topology.links_of(name)))

    def switch_pids(self) -> dict[str, int]:
        """The PID of every running switch process, by switch name."""
        return {s.name: s.process.pid for s in self.net.switches if s.alive()} if self.net is not None else {}

    def switch_alive(self, name: str) -> bool:
        """Whether the switch's process still runs."""
        return self.switch(name).alive()

    def reroutes(self) -> list[float]:
        """UNIX times at which the converging control plane finished a reroute (none without one)."""
        if self.control_plane is None:
            return []
        offset = time.time() - time.monotonic()
        return [r.done_at + offset for r in self.control_plane.history]

    def control_plane_errors(self) -> list[str]:
        """What the converging control plane could not do (writes that failed)."""
        return list(self.control_plane.errors) if self.control_plane is not None else []

    def _client(self, switch: str) -> P4RuntimeClient:
        if switch not in self.clients:
            raise KeyError(f"no switch named {switch!r} (switches: {', '.join(self.clients)})")
        return self.clients[switch]

    def counters(self, switch: str, port: int | None = None) -> dict[str, dict[int, CounterValue]]:
        """Every counter of one switch read over P4Runtime: {counter: {port: value}}, non-zero."""
        client = self._client(switch)
        result = {}
        for name in client.counter_names():
            cells = client.read_counter(name, port)
            result[name] = {p: v for p, v in cells.items() if v.packets or v.bytes}
        return result

    def agent_control(self, host: str, name: str, local_dir: str) -> tuple[str, str]:
        """Where agent `name` on `host` serves its control socket, and where this machine reaches
        it: the same path in `local_dir` here."""
        path = f"{local_dir}/{name}.sock"
        return path, path

    def server_watches(self, sample_s: float) -> dict:
        """A CPU watch per server of a network spread over several (testbed.cluster): none here."""
        return {}

    def node_servers(self) -> dict[str, str]:
        """Node -> the server it runs on, for a network spread over several: none here."""
        return {}

    def is_remote(self, node: str) -> bool:
        """Whether `node` runs on another server (testbed.cluster): never on one machine."""
        return False

    def python(self, node: str) -> str:
        """The Python interpreter that runs the testbed's modules where `node` runs."""
        return sys.executable

    def popen(self, host: str, cmd: list[str], **kwargs):
        """Start a process in a host's namespace, recorded for clean-up."""
        proc = self.net[host].popen(cmd, **kwargs)
        self.registry.record_process(proc.pid, f"{cmd[0]} on {host}")
        return proc

    def stop_process(self, proc, grace: float = DEFAULT_GRACE_S) -> int | None:
        """End a process `popen` started (SIGTERM, SIGKILL after `grace` s); it leaves the record."""
        code = stop_process(proc, grace)
        if proc is not None and self.registry is not None:
            self.registry.forget_process(proc.pid)
        return code

    # --- tear-down ------------------------------------------------------------------------------
    def stop(self) -> list[str]:
        """Tear everything down (always completes); return what could not be removed."""
        if self.control_plane is not None:
            self.control_plane.stop()
        for client in self.clients.values():
            try:
                client.close()
            except Exception:        # noqa: BLE001 - tear-down goes on
                pass
        self.clients = {}
        if self.net is not None:
            for switch in self.net.switches:
                try:
                    switch.stop_process()
                except Exception as exc:     # noqa: BLE001
                    log.warning("stopping %s: %s", switch.name, exc)
                service = switch.queue_service()
                if service is not None:
                    self.queue_service[switch.name] = service
            try:
                self.net.stop()
            except Exception as exc:         # noqa: BLE001
                log.warning("mininet stop: %s", exc)
            self.net = None
        self._stop_wires()
        remaining: list[str] = []
        if self.registry is not None:
            from testbed.registry import clean_run
            remaining = leftovers(self.registry.state)
            if remaining:                     # e.g. processes a user started in a host
                clean_run(self.registry.state)
                remaining = leftovers(self.registry.state)
            if not remaining:
                self.registry.close()
            self.registry = None
        if self.sock_dir is not None:
            for sock in self.sock_dir.glob("*.sock"):
                sock.unlink(missing_ok=True)
            try:
                self.sock_dir.rmdir()
            except OSError:
                pass
        self.control_priority.lower()
        return remaining
