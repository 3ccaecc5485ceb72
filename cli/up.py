"""`mrc-testbed up`: bring a topology up on a switch target, program it, open the Mininet CLI.

    mrc-testbed up --topo leafspine:4x2x2 --target model

Extra CLI commands (besides Mininet's own): `link_down A B`, `link_up A B`,
`transfer SRC DST SIZE [mrc|roce]`, `evs HOST`, `counters SWITCH`, `paths SRC DST`,
`probe [ecmp]`; live EV control of a host pair (agents kept running with their control sockets):
`evs H1 H2`, `ev deny|allow|good|bad|replace|stop H1 H2 EV [NEW_EV]`, `probe H1 H2 EV`.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import time
from pathlib import Path

from mininet.cli import CLI

from wire.control import ControlError

from cli.errors import fail
from testbed import nodes
from testbed.capture import add_pcap_arguments, capture_from_args
from testbed.evsession import EvSessions, format_array
from testbed.fidelity import FidelityMonitor
from testbed.logs import setup_logging
from testbed.network import BringUpError, TestbedNetwork


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topo", default="leafspine:4x2x2",
                        help="topology spec (e.g. leafspine:4x2x2, fattree:4) or YAML file "
                             "(default leafspine:4x2x2)")
    parser.add_argument("--target", choices=sorted(nodes.TARGETS),
                        help="switch target (default: bmv2 when simple_switch_grpc is on PATH, "
                             "else model)")
    parser.add_argument("--run-dir", help="folder for logs, pcaps and agent logs "
                                          "(default runs/up-<time>)")
    add_pcap_arguments(parser)
    parser.add_argument("--convergence-delay", type=float, metavar="SECONDS",
                        help="emulate a converging control plane: reroute around a dead link "
                             "this long after it goes down (default: off, routing is static)")
    parser.add_argument("--cluster", metavar="FILE", type=Path,
                        help="run the nodes on the servers of this cluster file (Mininet's cluster edition; "
                             "model or BMv2 target; testbed/clusterfile.py)")
    parser.add_argument("--no-cli", action="store_true",
                        help="do not open the CLI: keep the network up until SIGTERM/Ctrl-C")


def choose_target(requested: str | None) -> tuple[str, str]:
    """The target to use and a one-line reason."""
    if requested:
        return requested, f"target: {requested} (--target)"
    from controller.installer import DEFAULT_BMV2_JSON
    target = nodes.default_target()
    if target == "model":
        return target, "target: model (simple_switch_grpc not on PATH)"
    if not DEFAULT_BMV2_JSON.exists():
        return "model", (f"target: model (simple_switch_grpc found, but {DEFAULT_BMV2_JSON.name} "
                         "is not built: make -C p4)")
    return target, "target: bmv2 (simple_switch_grpc found)"


class TestbedCLI(CLI):
    """Mininet's CLI plus the testbed's commands."""

    prompt = "mrc> "

    def __init__(self, testbed: TestbedNetwork, monitor: FidelityMonitor, **kwargs):
        self.testbed = testbed
        self.monitor = monitor
        self.ev_sessions = EvSessions(testbed)
        try:
            super().__init__(testbed.net, **kwargs)
        finally:
            self.ev_sessions.stop()

    def _args(self, line: str, count: int, usage: str) -> list[str] | None:
        words = line.split()
        if len(words) < count:
            print(f"usage: {usage}")
            return None
        return words

    def _guard(self, fn, *args) -> None:
        try:
            fn(*args)
        except ControlError as exc:
            print(f"error: {exc}")
        except KeyError as exc:
            print(f"error: {exc.args[0] if exc.args else exc}")
        except (ValueError, RuntimeError, OSError, TimeoutError) as exc:
            print(f"error: {exc}")

    def do_link_down(self, line: str) -> None:
        """link_down A B: take the link between nodes A and B down."""
        words = self._args(line, 2, "link_down A B")
        if words:
            self._guard(self.testbed.link_down, words[0], words[1])

    def do_link_up(self, line: str) -> None:
        """link_up A B: bring the link between nodes A and B back up."""
        words = self._args(line, 2, "link_up A B")
        if words:
            self._guard(self.testbed.link_up, words[0], words[1])

    def do_transfer(self, line: str) -> None:
        """transfer SRC DST SIZE [mrc|roce]: send SIZE bytes with the host agents, print goodput."""
        words = self._args(line, 3, "transfer SRC DST SIZE [mrc|roce]")
        if not words:
            return
        from testbed.transfer import run_transfer

        def go():
            mode = words[3] if len(words) > 3 else "mrc"
            print(run_transfer(self.testbed, words[0], words[1], int(words[2]), mode).describe())
        self._guard(go)

    def do_evs(self, line: str) -> None:
        """evs HOST: the EV states of HOST's last agent run.
        evs H1 H2: H1's live EV array towards H2 (states, ports, paths, drop counts); starts the
        pair's agents with their control sockets when they are not running."""
        words = self._args(line, 1, "evs HOST | evs H1 H2")
        if not words:
            return
        if len(words) >= 2:
            def show():
                for text in format_array(self.ev_sessions.get(words[0], words[1]).request(words[0], "array")):
                    print(text)
            self._guard(show)
            return
        from testbed.transfer import ev_states
        log = self.testbed.run_dir / "agents" / f"{words[0]}.jsonl"
        states = ev_states(log)
        if not states:
            print(f"no EV state changes recorded for {words[0]} (log {log}); run a transfer first")
            return
        by_state: dict[str, list[int]] = {}
        for ev, state in sorted(states.items()):
            by_state.setdefault(state, []).append(ev)
        for state, evs in sorted(by_state.items()):
            print(f"{state:<12} {len(evs):4d}  {' '.join(f'{e:#x}' for e in evs[:16])}"
                  f"{' ...' if len(evs) > 16 else ''}")

    def do_fidelity(self, line: str) -> None:
        """fidelity: is this machine keeping up? switch CPU and wait for a CPU, link losses, so far."""
        def show():
            verdict = self.monitor.verdict()
            print(f"{verdict.label} (since the network came up)")
            for reason in verdict.reasons:
                print(f"  {reason}")
            for name, share in sorted(verdict.measured["processes"].items()):
                print(f"  {name:<6} CPU {share['mean']:.0%} mean, {share['peak']:.0%} busiest; "
                      f"wait per wake-up {share['wait_mean_ms']:.3f} ms mean, {share['wait_peak_ms']:.3f} ms worst")
            machine = verdict.measured["machine_cpu"]
            print(f"  machine CPU {machine['mean']:.0%} mean, {machine['peak']:.0%} busiest on "
                  f"{verdict.measured['cpus']} cores, load average up to {verdict.measured['load_peak']}")
        self._guard(show)

    def do_counters(self, line: str) -> None:
        """counters SWITCH: every non-zero counter of SWITCH, read over P4Runtime."""
        words = self._args(line, 1, "counters SWITCH")
        if not words:
            return

        def show():
            shown = 0
            for name, cells in self.testbed.counters(words[0]).items():
                for port, value in sorted(cells.items()):
                    print(f"{name:<28} port {port:3d}  {value.packets:10d} pkts {value.bytes:12d} B")
                    shown += 1
            if not shown:
                print(f"{words[0]}: every counter is zero")
        self._guard(show)

    def do_ev(self, line: str) -> None:
        """ev deny|allow|good|bad H1 H2 EV: set EV of H1's connection to H2 DENIED, back in use
        after a probe (allow), GOOD or ASSUMED_BAD; ev replace H1 H2 EV [NEW_EV]: REPLACE_EV (the
        new EV is probed before use); ev stop H1 H2: stop the pair's agents."""
        usage = "ev deny|allow|good|bad|replace H1 H2 EV [NEW_EV] | ev stop H1 H2"
        words = self._args(line, 3, usage)
        if not words:
            return
        action, a, b = words[0], words[1], words[2]
        if action == "stop":
            print(f"stopped {self.ev_sessions.stop(a, b)} session(s)")
            return
        ops = {"deny": ("deny", {}), "allow": ("allow", {}), "good": ("modify", {"state": "GOOD"}),
               "bad": ("modify", {"state": "ASSUMED_BAD"}), "replace": ("replace", {})}
        if action not in ops or len(words) < 4:
            print(f"usage: {usage}")
            return
        op, fields = ops[action]
        if action == "replace" and len(words) > 4:
            fields = {"new_ev": words[4]}

        def go():
            row = self.ev_sessions.get(a, b).request(a, op, ev=words[3], **fields)
            print(f"{a}: EV {row['ev']:#010x} {row['state']} (slot {row['slot']}, port {row['port']}, "
                  f"path {row['path']}, drops {row['drop_count']})")
        self._guard(go)

    def do_probe(self, line: str) -> None:
        """probe [ecmp]: send a PROBE on every uSID path (or ECMP route) of every host pair and
        list the ones that do not arrive.
        probe H1 H2 EV: one probe on EV of H1's connection to H2; prints the port and the RTT."""
        words = line.split()
        if len(words) >= 3:
            def one():
                result = self.ev_sessions.get(words[0], words[1]).request(
                    words[0], "probe", ev=words[2], timeout_ns=2_000_000_000)
                if result["rtt_ns"] is None:
                    print(f"{words[0]}: EV {result['ev']:#010x} port {result['port']}: no answer")
                else:
                    print(f"{words[0]}: EV {result['ev']:#010x} port {result['port']}: "
                          f"RTT {result['rtt_ns'] / 1000:.1f} us")
            self._guard(one)
            return
        from testbed.pathprobe import ecmp_probes, run_probes, usid_probes

        def go():
            topo = self.testbed.topology
            probes = ecmp_probes(topo) if line.strip() == "ecmp" else usid_probes(topo)
            failed = run_probes(self.testbed, probes, timeout=10).failed()
            print(f"{len(probes) - len(failed)}/{len(probes)} probes arrived")
            for p in failed[:20]:
                via = " ".join(p.switches) if p.switches else f"ECMP to {p.dst} (EV {p.ev:#x})"
                print(f"  lost {p.src_host} -> {p.dst_host} via {via}")
        self._guard(go)

    def do_paths(self, line: str) -> None:
        """paths SRC DST: the uSID paths between two hosts."""
        words = self._args(line, 2, "paths SRC DST")
        if not words:
            return
        from topologies.paths import host_paths

        def show():
            for path in host_paths(self.testbed.topology, words[0], words[1]):
                print(f"plane {path.plane}: {' '.join(path.switches):<20} {path.address}")
        self._guard(show)


def missing_prerequisite() -> str | None:
    """Why Mininet cannot run here (not root, no mnexec), or None."""
    if os.geteuid() != 0:
        return "needs root (Mininet creates namespaces and veths): run it with sudo"
    if shutil.which("mnexec") is None:
        return "needs mnexec on PATH (Debian package mininet; scripts/setup.sh installs it)"
    return None


def run(args: argparse.Namespace) -> int:
    from topologies.spec import topology_from_spec
    problem = missing_prerequisite()
    if problem:
        return fail("up", problem)
    target, line = choose_target(args.target)
    problem = nodes.target_unavailable(target)
    if problem:
        return fail("up", problem)
    print(line, flush=True)
    try:
        topo = topology_from_spec(args.topo)
        capture = capture_from_args(args)
    except (ValueError, OSError) as exc:
        return fail("up", str(exc))
    run_dir = Path(args.run_dir or f"runs/up-{time.strftime('%Y%m%d-%H%M%S')}")
    run_dir.mkdir(parents=True, exist_ok=True)
    setup_logging(args.verbosity, run_dir)
    params = dict(run_dir=run_dir, pcap=capture, convergence_delay=args.convergence_delay,
                  progress=lambda text: print(text, flush=True))
    if args.cluster is not None:
        from testbed.cluster import ClusterError, ClusterNetwork
        from testbed.clusterfile import ClusterFileError, load_cluster_file
        try:
            testbed = ClusterNetwork(topo, load_cluster_file(args.cluster), target, **params)
        except (ClusterFileError, ClusterError, ValueError) as exc:
            return fail("up", str(exc))
    else:
        testbed = TestbedNetwork(topo, target, **params)
    monitor = FidelityMonitor(testbed)
    try:
        testbed.start()
        monitor.start()
        print(f"logs in {run_dir}", flush=True)
        if args.no_cli:
            print("network up; Ctrl-C or SIGTERM to stop", flush=True)
            while True:                  # until Ctrl-C (exit 0) or SIGTERM (cli.main's handler, exit 143)
                signal.pause()
        else:
            TestbedCLI(testbed, monitor)
    except BringUpError as exc:
        return fail("up", str(exc), 1)
    except KeyboardInterrupt:
        pass
    finally:
        monitor.stop()
        left = testbed.stop()
        if left:
            print("could not remove: " + ", ".join(left) + " (run mrc-testbed clean)")
    return 0
