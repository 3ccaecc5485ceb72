"""The MRC host agent: runs one job on one host, over raw sockets, and logs what happens.

    mrc-testbed agent --job job.json [--log events.jsonl]
    python -m host_agent.agent --job job.json

Inside a Mininet host (or any network namespace) the agent opens one raw socket per NIC of the
job, disables IPv6 on those interfaces so the kernel stays silent, connects the transport
Endpoint to every peer the workload needs, runs the collective and writes a JSON-lines event log
(`host_agent.eventlog` lists the records); with the job's `start_file` it writes its `start`
record, then waits for that file to say when to start (`host_agent.start_file`). The loop is
single-threaded and never blocks longer than the next transport timer or goodput sample. With
`--control SOCKET` it also serves the EV operations (query, modify, replace, subscribe, probe;
`host_agent.control`) on that unix socket, removed when the agent exits.

Exit status: 0 the collective finished and its result is bit-exact; 1 it failed, timed out or a
connection failed (a packet ran out of retries: the result record carries `error`);
2 the job, a NIC or the start file is unusable (or no start time came within 10 minutes);
128 + signal number when stopped by SIGTERM/SIGINT before the collective finished.
"""
from __future__ import annotations

import argparse
import logging
import math
import os
import select
import signal
import socket
import sys
import time
from collections import Counter

from wire.control import ControlServer, ControlSocketError
from wire.codec import FrameWriter, MalformedPacket, decode
from host_agent.collectives import CollectiveError, make_collective
from host_agent.collectives.driver import EndpointMessenger
from host_agent.control import ControlService
from host_agent.eventlog import LogWriter
from host_agent.job import Job, JobError, load_job
from host_agent.lateness import WakeupLateness
from host_agent.nic import NicError, RawNic, interface_mac, interface_mtu, quiet_kernel
from host_agent.start_file import WAIT_LIMIT_S, StartFileError, drain_fd, wait_for_start_file
from host_agent.transport import ConnectionFailed, Endpoint, PathInfo, Retransmitted, connection_paths
from wire.packets import DATA_OVERHEAD

log = logging.getLogger("mrc.agent")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_JOB = 2
RECEIVE_BATCH = 16           # frames taken from one NIC before the transport is polled again
MAX_MALFORMED_RECORDS = 20   # malformed frames logged one by one; the rest only counted
FLUSH_EVERY = 0.01           # seconds between flushes of the event log while running (faults at "30%" read it live)
DEFAULT_LINGER = 0.5         # seconds to keep answering after finishing (peers may need our acks)


class Agent:
    """One job on one host: NICs, Endpoint, collective, event log and the I/O loop."""

    def __init__(self, job: Job, events: LogWriter, linger: float = DEFAULT_LINGER, spin: float = 0.0,
                 control_path: str | None = None) -> None:
        self.job = job
        self.events = events
        self.linger = linger
        self.spin = spin                       # waits shorter than this are busy-polled, not slept
        self.config = job.transport_config()
        self.name = job.host or f"rank{job.rank}"
        self._mono0 = time.monotonic()
        self._wall0 = time.time()
        self.counters: Counter = Counter()
        self.nics: list[RawNic] = []
        self.kernel_quiet: dict[str, bool] = {}
        self._stop_signal: int | None = None
        self.loop_counts = (0, 0)             # (loop iterations, of which slept), as of the last idle one
        self._sampler: _GoodputSampler | None = None   # the goodput records, while the loop runs
        self.lateness = WakeupLateness()       # timer wake-ups against the time the transport asked for
        self._cpu_at_start = 0.0
        self.run_cpu: float | None = None      # CPU seconds from the workload's start to its end
        self._writers: dict[tuple[int, int], FrameWriter] = {}     # (NIC index, peer QP) -> writer
        self.endpoint = Endpoint(self.name, self.config, rng_seed=job.rank)
        self._result = None                    # the collective's result, once it finished
        self.messenger: EndpointMessenger | None = None
        self.collective = None
        self._unlogged: list = []              # transport events handled but not yet written to the log
        self.control_path = control_path
        self.control: ControlServer | None = None   # the control socket, once opened
        self.connection_error: str | None = None   # the first connection failure (retries ran out)
        self._start_at = job.start_at          # UNIX time to start the workload at (or the start file's)

    # --- clock -------------------------------------------------------------------------------------
    def now(self) -> float:
        """Transport time: seconds since the agent started (monotonic)."""
        return time.monotonic() - self._mono0

    def wall(self, t: float) -> float:
        """UNIX time of transport time `t`."""
        return self._wall0 + t

    # --- set-up --------------------------------------------------------------------------------------
    def open_nics(self) -> None:
        """Open a raw socket on every NIC of the job and silence the kernel on it."""
        for index, spec in enumerate(self.job.nics):
            mtu = interface_mtu(spec.name)
            actual = interface_mac(spec.name)
            if actual != spec.mac_bytes:
                raise NicError(f"interface {spec.name}: its MAC is {actual.hex(':')} but the job says "
                               f"{spec.mac}; peers would send to a MAC this NIC does not receive")
            need = self.config.mtu_payload + DATA_OVERHEAD - 14
            if need > mtu:
                raise NicError(f"interface {spec.name}: MTU {mtu} is too small for mtu_payload "
                               f"{self.config.mtu_payload} (needs {need})")
            self.kernel_quiet[spec.name] = quiet_kernel(spec.name)
            if not self.kernel_quiet[spec.name]:
                log.warning("%s: could not disable IPv6; the kernel may answer MRC packets", spec.name)
            self.nics.append(RawNic(index, spec.name, spec.mac_bytes))

    def _paths_to(self, peer) -> list[PathInfo]:
        """The connection's paths to `peer` (`connection_paths`), and a frame writer per NIC towards it."""
        for index, nic in enumerate(self.job.nics):
            peer_nic = peer.nic_on(nic.plane)
            if peer_nic is not None:
                self._writers[(index, peer.remote_qp)] = FrameWriter(nic.mac_bytes, peer_nic.mac_bytes,
                                                                     max_payload=self.config.mtu_payload)
        return connection_paths(
            self.config.mode, [(index, nic.plane, nic.address_bytes) for index, nic in enumerate(self.job.nics)],
            {plane: peer.nic_on(plane).address_bytes for plane in {n.plane for n in peer.nics}},
            {plane: [socket.inet_pton(socket.AF_INET6, a) for a in addrs] for plane, addrs in peer.paths.items()})

    def open_control(self) -> None:
        """Serve the EV operations on the unix socket `control_path` (host_agent.control)."""
        if self.control_path:
            self.control_service = ControlService(self.endpoint, self.now)
            self.control = ControlServer(self.control_path, self.control_service)

    def connect(self) -> None:
        """Create the collective and connect the Endpoint to every peer it needs."""
        w = self.job.workload
        params = dict(w.params)
        if w.kind == "transfer":
            params["nbytes"] = params.pop("bytes")
        self.messenger = EndpointMessenger(self.endpoint)
        self.collective = make_collective(w.kind, self.job.rank, self.job.world_size, self.messenger, **params)
        for rank in self.collective.peers():
            peer = self.job.peer(rank)
            conns = self.endpoint.connect_qps(f"rank{rank}", local_qp=peer.qp, remote_qp=peer.remote_qp,
                                              paths=self._paths_to(peer))
            for conn in conns[1:]:                   # further QPs: the same NICs and neighbours
                for (nic, qp), writer in list(self._writers.items()):
                    if qp == peer.remote_qp:
                        self._writers[(nic, conn.remote_qp)] = writer
            self.messenger.add_peer(rank, conns)
        self.messenger.attach(self.collective)

    # --- the loop ------------------------------------------------------------------------------------------
    def request_stop(self, signum: int) -> None:
        """Ask the loop to stop (from a signal handler)."""
        self._stop_signal = signum

    def run(self) -> int:
        """Run the workload to completion (or timeout, or signal); return the exit status."""
        self._log_start()
        _fine_timer_slack()
        wake_r, wake_w = socket.socketpair()
        wake_r.setblocking(False)
        wake_w.setblocking(False)
        old_fd = signal.set_wakeup_fd(wake_w.fileno(), warn_on_full_buffer=False)
        try:
            status, reason = self._wait_for_start(wake_r.fileno())
            if status is None:
                status, reason = self._loop(wake_r.fileno())
        finally:
            signal.set_wakeup_fd(old_fd)
            wake_r.close()
            wake_w.close()
        self._log_end(status, reason)
        return status

    def _wait_for_start(self, wake_fd: int) -> tuple[int | None, str]:
        """With the job's `start_file`: wait for the start time it holds (`host_agent.start_file`)
        and keep it as the start; (None, "") to go on, or the exit status and reason when a signal
        came first or the file holds no start time."""
        if self.job.start_file is None:
            self._start_at = self.job.start_at
            return None, ""
        try:
            start_at = wait_for_start_file(self.job.start_file, wake_fd, lambda: self._stop_signal is not None,
                                           WAIT_LIMIT_S)
        except StartFileError as error:
            return EXIT_BAD_JOB, str(error)
        if start_at is None:
            return 128 + self._stop_signal, f"signal {signal.Signals(self._stop_signal).name} before the start"
        self._start_at = start_at
        return None, ""

    def _loop(self, wake_fd: int) -> tuple[int, str]:
        """Poll the transport, transmit, receive; sleep (select, microsecond timeout) until the transport's
        next deadline, a frame or a signal: one pass per wake-up, not a spare one after each send."""
        endpoint, collective = self.endpoint, self.collective
        by_fd = {nic.fileno(): nic for nic in self.nics}
        fds = [*by_fd, wake_fd]
        control = self.control
        monotonic, mono0 = time.monotonic, self._mono0
        now = monotonic() - mono0
        start = max(now, self._start_at - self._wall0)
        started = False
        deadline = start + self.job.timeout
        sampler = self._sampler = _GoodputSampler(self, now)
        finished_at = None
        iterations = sleeps = 0
        drain = endpoint.drain_events
        while True:
            iterations += 1
            now = monotonic() - mono0
            if not started and now >= start:
                self._cpu_at_start = time.process_time()
                collective.start(now)
                started = True
                self.events.write(self.wall(now), "begin", start_at=self._start_at)
            events = drain()
            if events:
                self._handle(events)
                if self.connection_error is not None and finished_at is None:
                    return EXIT_FAILED, self.connection_error
            out = endpoint.poll(now)
            if out:
                self._transmit(out)
            events = drain()                     # what polling raised (retransmissions, failures)
            if events:
                self._handle(events)
                if self.connection_error is not None and finished_at is None:
                    return EXIT_FAILED, self.connection_error
            if now >= sampler.next_at:
                sampler.sample(now)
            if finished_at is None and collective.done:
                finished_at = now
                self.run_cpu = time.process_time() - self._cpu_at_start
                self._log_transport_events()
                self._log_result("finished")
            if self._stop_signal is not None:
                sig = signal.Signals(self._stop_signal).name
                return (EXIT_OK if finished_at is not None and self.result().ok
                        else 128 + self._stop_signal), f"signal {sig}"
            if finished_at is not None and now >= finished_at + self.linger:
                return (EXIT_OK if self.result().ok else EXIT_FAILED), "finished"
            if finished_at is None and now >= deadline:
                return EXIT_FAILED, f"timeout after {self.job.timeout} s"
            timer = None                         # the transport's wake-up time, when the sleep ends at it
            if events:
                wait = 0.0                       # handling them may have queued messages: poll again
            else:                                # (frames waiting end the sleep at once)
                wake = endpoint.next_wakeup()    # a time already past: at once
                limit = min(sampler.next_at, deadline if finished_at is None else finished_at + self.linger,
                            math.inf if started else start)
                if wake is not None and wake < limit:
                    limit = timer = wake
                wait = max(0.0, limit - (monotonic() - mono0))
                if wait < self.spin:
                    wait = 0.0
                    timer = None
                else:
                    sleeps += 1
            self.loop_counts = (iterations, sleeps)
            readable = select.select(fds if control is None else fds + control.fds(), (), (), wait)[0]
            if timer is not None and not readable and finished_at is None:    # the workload's, not the linger's
                self.lateness.record(monotonic() - mono0 - timer)
            for fd in readable:
                if fd == wake_fd:
                    drain_fd(fd)
                elif fd not in by_fd:
                    control.on_readable(fd)
                else:
                    self._receive(by_fd[fd])

    def _handle(self, events: list) -> None:
        """Hand the transport's events to the collective (messages received and sent) and keep
        them for the log (written with the next goodput sample)."""
        handle = self.messenger.handle
        for event in events:
            handle(event)
            if type(event) is Retransmitted:
                self.counters[f"retransmit_{event.cause}"] += 1
            elif type(event) is ConnectionFailed and self.connection_error is None:
                self.connection_error = event.error
        if self.control is not None:
            for client, message in self.control_service.on_events(events):
                self.control.send(client, message)
        self._unlogged.extend(events)

    def _transmit(self, out) -> None:
        writers, nics = self._writers, self.nics
        for nic_index, pkt in out:
            writer = writers.get((nic_index, pkt.qp))
            if writer is None:
                self.counters["tx_no_route"] += 1
                continue
            nics[nic_index].send(writer.write(pkt))

    def _receive(self, nic: RawNic) -> bool:
        """Feed every waiting frame of `nic` (up to a batch) to the endpoint; True if there were any."""
        now = self.now()
        receive = self.endpoint.receive
        index = nic.index
        taken = False
        for frame in nic.receive(RECEIVE_BATCH):
            taken = True
            try:
                pkt = decode(frame)
            except MalformedPacket as bad:
                self.counters["rx_malformed"] += 1
                if self.counters["rx_malformed"] <= MAX_MALFORMED_RECORDS:
                    self.events.write(self.wall(now), "malformed", nic=nic.ifname, reason=bad.reason,
                                      length=len(frame))
                continue
            try:
                receive(now, index, pkt)
            except (ValueError, KeyError, IndexError) as bad:      # well-formed but impossible: drop it
                self.counters["rx_rejected"] += 1
                if self.counters["rx_rejected"] <= MAX_MALFORMED_RECORDS:
                    self.events.write(self.wall(now), "rejected", nic=nic.ifname, reason=str(bad),
                                      packet=type(pkt).__name__)
        if taken and self._sampler is not None:
            self._sampler.note_receive(now)
        return taken

    def result(self):
        """The collective's CollectiveResult (computed once when finished: checking can be costly)."""
        if self._result is not None:
            return self._result
        result = self.collective.result()
        if self.collective.done:
            self._result = result
        return result

    # --- logging ---------------------------------------------------------------------------------------
    def _log_start(self) -> None:
        job = self.job
        self.events.write(self.wall(self.now()), "start", rank=job.rank, world_size=job.world_size,
                          host=self.name, mode=job.mode, pid=os.getpid(),
                          workload={"kind": job.workload.kind, **job.workload.params},
                          nics=[{"name": n.name, "plane": n.plane, "address": n.address,
                                 "ipv6_disabled": self.kernel_quiet.get(n.name, False)} for n in job.nics],
                          peers=self.collective.peers() if self.collective else [])
        self.events.flush()

    def _log_transport_events(self) -> None:
        events = self.endpoint.drain_events()
        if events:
            self._handle(events)
        write, wall = self.events.write, self.wall
        for event in self._unlogged:
            record = event.as_record()
            del record["t"], record["kind"]
            write(wall(event.t), event.kind, **record)
        self._unlogged = []

    def _log_result(self, why: str) -> None:
        result = self.result()
        extra = {"error": self.connection_error} if self.connection_error is not None else {}
        self.events.write(self.wall(self.now()), "result", kind_of=self.job.workload.kind, why=why,
                          cpu_s=self.run_cpu, **result.as_dict(), **extra)
        self.events.flush()

    def _log_end(self, status: int, reason: str) -> None:
        now = self.now()
        self._log_transport_events()
        if not self.collective.done:
            self._log_result(reason)
        stats = self.endpoint.stats()
        connections = list(stats.pop("connections", {}).values())
        self.counters["loop_iterations"], self.counters["loop_sleeps"] = self.loop_counts
        self.events.write(self.wall(now), "counters", agent=dict(self.counters), min_rtt_s=self.endpoint.min_rtt(),
                          wakeups=self.lateness.summary(),
                          nics=[n.counters() for n in self.nics], transport=stats, connections=connections,
                          messages={"sent": self.collective.messages_sent,
                                    "acked": self.collective.messages_acked,
                                    "received": self.collective.messages_received})
        self.events.write(self.wall(now), "stop", reason=reason, status=status)
        self.events.flush()

    def close(self) -> None:
        """Close the NICs and the control socket (removing its file)."""
        for nic in self.nics:
            nic.close()
        if self.control is not None:
            self.control.close()
            self.control = None


class _GoodputSampler:
    """Goodput records every `goodput_interval`, each with the times of the interval's first and
    last delivery of new payload bytes (`rx_first`, `rx_last`: a gap in delivery is then known to
    the packet, not to the interval); also drains transport events and flushes the log."""

    def __init__(self, agent: Agent, now: float) -> None:
        self.agent = agent
        self.every = agent.job.goodput_interval
        self.next_at = now + self.every
        self.last_at = self.last_flush = now
        self.last_rx = self.last_rx_msg = self.last_tx = 0
        self.seen_rx = 0                   # payload bytes received as of the latest receive
        self.first_rx_at = self.last_rx_at = None

    def received(self) -> int:
        """Payload bytes (first copies) received so far on every connection."""
        return sum(c.stats["payload_bytes_received"] for c in self.agent.endpoint.connections.values())

    def note_receive(self, now: float) -> None:
        """After frames were received at `now`: note it as a delivery when they brought new payload."""
        rx = self.received()
        if rx != self.seen_rx:
            self.seen_rx = rx
            if self.first_rx_at is None:
                self.first_rx_at = now
            self.last_rx_at = now

    def sample(self, now: float) -> None:
        agent = self.agent
        rx = self.received()
        rx_msg, tx = agent.messenger.rx_bytes, agent.messenger.tx_acked_bytes
        interval = now - self.last_at
        spans = {}
        if self.first_rx_at is not None:
            spans = {"rx_first": agent.wall(self.first_rx_at), "rx_last": agent.wall(self.last_rx_at)}
        agent.events.write(agent.wall(now), "goodput", interval=interval,
                           rx_bytes=rx - self.last_rx, rx_msg_bytes=rx_msg - self.last_rx_msg,
                           tx_bytes=tx - self.last_tx, rx_bps=8 * (rx - self.last_rx) / interval,
                           tx_bps=8 * (tx - self.last_tx) / interval, **spans)
        self.first_rx_at = self.last_rx_at = None
        self.last_rx, self.last_rx_msg, self.last_tx, self.last_at = rx, rx_msg, tx, now
        self.next_at = now + self.every
        agent._log_transport_events()
        if now - self.last_flush >= FLUSH_EVERY:
            agent.events.flush()
            self.last_flush = now


def _fine_timer_slack() -> None:
    """Let short sleeps end on time (Linux rounds them up by 50 us by default); best effort."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(29, 1000, 0, 0, 0)         # PR_SET_TIMERSLACK, 1 us
    except (OSError, AttributeError):
        pass


# --- command line ---------------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `mrc-testbed agent`."""
    parser.add_argument("--job", required=True, help="job file (JSON, see host_agent/job.py)")
    parser.add_argument("--log", help="event log (JSON lines); default: the job's \"log\" field, "
                                      "else <job file>.events.jsonl")
    parser.add_argument("--timeout", type=float, help="seconds before giving up (overrides the job)")
    parser.add_argument("--linger", type=float, default=DEFAULT_LINGER,
                        help="seconds to keep answering peers after finishing (default %(default)s)")
    parser.add_argument("--check", action="store_true",
                        help="only check the job file, print what it asks for and exit (0: valid, 2: not)")
    parser.add_argument("--control", metavar="SOCKET",
                        help="serve the EV operations (query, modify, replace, subscribe, probe) on this "
                             "unix socket while running (host_agent/control.py); removed on exit")
    parser.add_argument("--spin-us", type=float, default=0.0,
                        help="busy-poll instead of sleeping for waits shorter than this many "
                             "microseconds (default 0: always sleep; spinning agents share CPUs badly)")


def run(args: argparse.Namespace) -> int:
    """Run one agent; return its exit status."""
    try:
        job = load_job(args.job)
    except JobError as err:
        print(f"mrc-testbed agent: {err}", file=sys.stderr)
        return EXIT_BAD_JOB
    if getattr(args, "check", False):
        w = job.workload
        print(f"{args.job}: valid job for rank {job.rank} of {job.world_size} ({job.host or 'no host name'}), "
              f"mode {job.mode}, {w.kind} {w.params}, NICs {[n.name for n in job.nics]}, "
              f"peers {[p.rank for p in job.peers]}")
        return EXIT_OK
    if args.timeout is not None:
        if args.timeout <= 0:
            print(f"mrc-testbed agent: --timeout {args.timeout} must be > 0", file=sys.stderr)
            return EXIT_BAD_JOB
        job = _with_timeout(job, args.timeout)
    log_path = args.log or job.log or f"{args.job}.events.jsonl"
    try:
        events = LogWriter.open(log_path)
    except OSError as err:
        print(f"mrc-testbed agent: cannot write the event log {log_path}: {err.strerror}", file=sys.stderr)
        return EXIT_BAD_JOB
    agent = Agent(job, events, linger=args.linger, spin=max(0.0, args.spin_us) * 1e-6,
                  control_path=getattr(args, "control", None))
    previous = {s: signal.signal(s, lambda signum, _frame: agent.request_stop(signum))
                for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            agent.open_nics()
            agent.connect()
            agent.open_control()
        except (NicError, CollectiveError, ValueError, ControlSocketError) as err:
            events.write(time.time(), "stop", reason=f"set-up failed: {err}", status=EXIT_BAD_JOB)
            print(f"mrc-testbed agent: {err}", file=sys.stderr)
            return EXIT_BAD_JOB
        return agent.run()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        agent.close()
        events.close()


def _with_timeout(job: Job, timeout: float) -> Job:
    return job.model_copy(update={"timeout": float(timeout)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m host_agent.agent", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
