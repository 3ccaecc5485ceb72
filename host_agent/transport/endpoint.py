"""All connections of one host: the sans-IO façade the agent process and the network model drive.

Usage (one host; the peer does the same with the QPs swapped)::

    ep = Endpoint("h0", TransportConfig())
    conn = ep.connect("h1", local_qp=0x11, remote_qp=0x22, paths=paths_h0_to_h1)
    msg_id = ep.send_message(conn, b"...")
    # then, forever:
    ep.receive(now, nic, packet)                 # for every packet arriving on a NIC
    for event in ep.drain_events():              # what happened (or ep.next_event(), one at a time)
        if isinstance(event, MessageReceived): ...       # event.conn, event.msg_id, event.data
    for nic, packet in ep.poll(now): ...         # transmit these
    wake = ep.next_wakeup()                      # call poll again no later than this

Packets are the decoded objects of `wire.packets`; times are seconds (float) on any
monotonic clock, the same for every call. A connection is identified on receive by the
destination QP of the packet (our `local_qp`). Nothing here blocks, sleeps, reads a clock or
calls the caller back: events (`host_agent.transport.events`) wait in a list until drained.
"""
from __future__ import annotations

import random
from collections import Counter, deque
from types import MappingProxyType
from typing import Final, Mapping

from wire.endpoint import SansIOEndpoint
from wire.packets import DATA_OVERHEAD, DataPacket, Nack, Probe, ProbeReply, Sack, wire_size
from host_agent.transport import events
from host_agent.transport.peers import ConnectionId, PathInfo
from host_agent.transport.config import TransportConfig
from host_agent.transport.congestion import NsccWindow, RttEstimator
from host_agent.transport.evcontrol import EvControl
from host_agent.transport.evset import EvState
from host_agent.transport.shares import SenderShares
from host_agent.transport.kinds import ReceiverPart, SenderPart, Wiring, builder
from host_agent.transport.nicclock import NicClock
from host_agent.transport.policies import DEFAULT_POLICIES, CongestionControl, Policies
from host_agent.transport.probes import Prober
from host_agent.transport.receiver import MrcReceiver
from host_agent.transport.sender import MrcSender
from host_agent.transport.tally import Tally

_NEVER: Final = float("-inf")           # Connection.quiet_until when its next poll must run
_INF: Final = float("inf")
_IDLE: Final = 1 << 61                  # Connection.wakeup_nic_version of an idle sender: later than any NIC version
                                        # (below 2**62: the compiled build compares it unboxed)
_WALKED: Final = 4                     # Endpoint.receive walks up to this many connections, not the dict
_NO_EVENTS: Final[list[events.TransportEvent]] = []   # Endpoint.drain_events with none: read, never changed


class Connection:
    """One full-duplex connection to a peer: EV set, sender, receiver, prober, RTT and window.

    Its parts come from the registry (`kinds.builder(config.mode)`); they share the
    connection's counters, RTT estimator, window and the endpoint's NIC clock, and report events
    through `emit`.
    """

    __deletable__ = ("evset", "sender", "receiver", "prober", "control")    # by `close` (mypyc lets only these be deleted)

    def __init__(self, ident: ConnectionId, config: TransportConfig, paths: list[PathInfo],
                 reverse_paths: list[PathInfo] | None, rng: random.Random, nic: NicClock, shares: SenderShares,
                 emit, policies: Policies = DEFAULT_POLICIES) -> None:
        self.ident = ident
        self.config = config
        self.mode = config.mode
        self.closed = False                               # by `close`
        if not paths:
            raise ValueError(f"{ident.name}: a connection needs at least one path (none given)")
        self.paths = list(paths)
        self.reverse_paths = list(reverse_paths) if reverse_paths else None
        nic_plane = {p.nic: p.plane for p in paths}
        self.num_nics = len(nic_plane)
        # the plane of each NIC by its index (None: no path of ours leaves from it), read per packet
        self._planes: list[int | None] = [nic_plane.get(nic) for nic in range(max(nic_plane) + 1)]
        self.stats = Tally()
        self._emit = emit
        self._nic = nic
        self.rtt = RttEstimator(config)
        # Typed as MRC's own part or any other (a union): the compiled build calls MRC's natively,
        # after a type check, and anything else (a lab's policy or kind) as Python does.
        self.cc: NsccWindow | CongestionControl = policies.congestion(config, self.rtt,
                                                                      config.mtu_payload + DATA_OVERHEAD)
        self.monitor = policies.path_monitor(config)
        if config.window_penalty and not callable(getattr(self.cc, "on_window_penalty", None)):
            raise TypeError(f"{ident.name}: the congestion control {type(self.cc).__name__} has no "
                            "on_window_penalty(now, penalty), which window_penalty needs (policies.CongestionControl)")
        parts = builder(config.mode)(Wiring(
            ident, config, self.paths, rng, self.stats, emit, self.rtt, self.cc, nic, shares, self.monitor, policies,
            self._ev_changed, self._ev_backup))
        self.evset = parts.evset
        self.sender: MrcSender | SenderPart = parts.sender
        self.receiver: MrcReceiver | ReceiverPart = parts.receiver
        receiver = self.receiver
        self.prober = Prober(ident, config, self.evset, self.rtt, self.stats, self.monitor,
                             lambda: self.sender.idle, lambda: receiver.last_data_at, parts.keepalive, emit)
        self.control = EvControl(ident, self.evset, self.prober, emit, self.touch)
        self.quiet_until = _NEVER     # a poll before this time would change nothing (Endpoint.next_wakeup)
        self._polled_at: float | None = None    # time of the last poll since the last touch (None: touched since)
        self.wakeup = _INF                      # wakeup_at() as Endpoint.next_wakeup last worked it out,
        self.wakeup_nic_version = -1            # ... at this version of the NIC clock (_IDLE: whatever the NIC)

    # --- identity ----------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """"<endpoint>-><peer>:<local qp>"."""
        return self.ident.name

    @property
    def peer(self) -> str:
        """The peer's name."""
        return self.ident.peer

    @property
    def local_qp(self) -> int:
        """Our QP number: packets to us carry it."""
        return self.ident.local_qp

    @property
    def remote_qp(self) -> int:
        """The peer's QP number: our packets carry it (and as R_Key)."""
        return self.ident.remote_qp

    # --- EV set changes, reported as events ---------------------------------------------------------
    def _ev_changed(self, ev, old, cause: str, now: float) -> None:
        path = self.evset.path_of(ev)
        state = ev.state
        self._emit(events.EvStateChanged(now, self.ident, ev.value, ev.plane, ev.path_key, path.dst.hex(),
                                         old.value, state.value, cause, path.nic, ev.drops))
        if state is EvState.ASSUMED_BAD or state is EvState.UNKNOWN:
            self.prober.wake()                      # something to probe
        if state is EvState.ASSUMED_BAD:
            self.stats.add("evs_retired")
        elif old is EvState.ASSUMED_BAD:
            self.stats.add("evs_reinstated")
        elif state is EvState.SKIP:
            self.stats.add(f"evs_skipped_{cause}")

    def _ev_backup(self, new, old, now: float) -> None:
        self.stats.add("ev_backups")
        self._emit(events.EvBackup(now, self.ident, new.value, old.value, new.plane, new.path_key))

    # --- driving ----------------------------------------------------------------------------------
    @property
    def failed(self) -> events.ConnectionFailed | None:
        """The event that failed this connection (a packet ran out of retries), or None."""
        return self.sender.failed

    def close(self) -> None:
        """Let go of its parts, its endpoint closing (`Endpoint.close`): they refer to each other
        and to it through the callbacks that wire them (reference cycles). Its counters can still
        be read; it cannot be used after; closing it again does nothing."""
        if self.closed:
            return
        self.closed = True
        del self.evset, self.sender, self.receiver, self.prober, self.control

    def touch(self) -> None:
        """Something changed this connection outside `poll` (a packet, a message, an EV operation):
        its next poll runs whatever the time."""
        self.quiet_until = _NEVER
        self._polled_at = None
        self.prober.wake()                          # an EV operation may have given it work

    def quiet_time(self, wakeup: float) -> float:
        """Until when a poll of this connection would change nothing, given its `wakeup_at()`
        (`wakeup`, inf for none), computed after a poll with nothing changed since (else -inf: poll at once).

        Untouched since its last poll, the connection's state moves only with time: its timers,
        its pacing clock and the NIC clock (which other connections only push later). Before
        its next wakeup no timer is due and no packet may go; before its pacing clock's next
        tick the sender's poll leaves `cc.backlogged` as the last poll left it; the prober is
        asked at every poll while it has work that does not wait for a time."""
        polled = self._polled_at
        if polled is None or self.prober.busy(_NEVER):       # at -inf: only the work that needs no time
            return _NEVER
        quiet = wakeup
        tick = self.cc.next_send
        if polled < tick < quiet:
            quiet = tick
        return quiet

    def receive(self, now: float, nic: int, pkt, out: list) -> None:
        """Take one packet addressed to this connection; append to `out` the control packets to send
        at once, as (NIC, packet) pairs. A failed connection takes nothing (counted as `rx_after_failure`)."""
        self.quiet_until = _NEVER                   # touch(), inline: per packet
        self._polled_at = None
        if self.sender.failed is not None:          # the attribute, not the property: per packet
            self.stats.add("rx_after_failure")
            return
        planes = self._planes
        plane = planes[nic] if 0 <= nic < len(planes) else None
        if isinstance(pkt, DataPacket):
            self.receiver.on_data(now, plane, pkt, out)
            self.prober.schedule(now)
        elif isinstance(pkt, Sack):
            self.sender.on_sack(now, pkt)
        elif isinstance(pkt, Nack):
            self.sender.on_nack(now, pkt)
        elif isinstance(pkt, Probe):
            out.extend(self.prober.answer(plane, pkt))
        elif isinstance(pkt, ProbeReply):
            self.prober.on_reply(now, pkt)
        else:
            raise TypeError(f"{self.name}: cannot take a {type(pkt).__name__}")

    def poll(self, now: float, out: list) -> None:
        """Run due timers, then append what may be sent now (nothing once failed)."""
        sender = self.sender
        if sender.failed is not None:
            return
        sender.expire(now)
        start = len(out)
        self.receiver.poll(now, out)
        prober = self.prober
        if prober.busy(now):
            prober.poll(now, out)
        nic = self._nic
        if nic.rate and len(out) > start:
            for index, pkt in out[start:]:
                nic.account(index, wire_size(pkt), now)
        sender.poll(now, out)
        self._polled_at = now
        self.quiet_until = _NEVER                   # until the endpoint works it out again

    def next_wakeup(self) -> float | None:
        """The earliest deadline of this connection."""
        t = self.wakeup_at()
        return None if t == _INF else t

    def wakeup_at(self) -> float:
        """`next_wakeup` as a float, inf for none (a time at inf counts as none): what the endpoint
        compares, natively when compiled, where a time or None would be a boxed object."""
        sender = self.sender
        if sender.failed is not None:
            return _INF
        best: float
        if isinstance(sender, MrcSender):           # narrowed for mypyc: MRC's sender's float, unboxed
            best = sender.wakeup_at()
        else:
            first = sender.next_wakeup()
            best = _INF if first is None else first
        t = self.receiver.next_wakeup()
        if t is not None and t < best:
            best = t
        t = self.prober.next_wakeup()
        if t is not None and t < best:
            best = t
        return best

    def describe(self) -> dict:
        """A snapshot of this connection's state, for logs and tests."""
        d = {"name": self.name, "peer": self.peer, "mode": self.mode, "stats": dict(self.stats),
             "cwnd": self.cc.cwnd, "srtt": self.rtt.srtt, "rto": self.rtt.rto,
             "cum_acked": self.sender.cum_acked, "idle": self.sender.idle}
        if self.failed is not None:
            d["error"] = self.failed.error
        if self.mode == "mrc":
            d["ev_states"] = self.evset.counts()
        return d


QP_STRIDE: Final = 0x10000      # QP k of a peer is numbered base + k * QP_STRIDE (both ends do the same)


class Endpoint(SansIOEndpoint):
    """All connections of one host, driven by `receive`, `poll`, `next_wakeup` and `drain_events`
    (the verbs of `wire.endpoint.SansIOEndpoint`, which a compiled simulated host calls natively).

    `policies` (default: MRC's) choose the EV of each packet, read SACKs, judge paths and run the
    window of every connection (`host_agent.transport.policies`).
    """

    def __init__(self, name: str, config: TransportConfig | None = None, rng_seed: int = 0,
                 policies: Policies | None = None) -> None:
        self.name = name
        self.config = config or TransportConfig()
        self.policies = policies or DEFAULT_POLICIES
        self._rng = random.Random((self.config.seed, rng_seed, name).__repr__())
        self._connections: dict[int, Connection] = {}   # local QP -> connection (`connections`)
        self._in_order: list[Connection] = []    # the same connections, as a list: walked per poll
        self._events: deque[events.TransportEvent] = deque()
        self._stats = Tally()
        self._received = self._stats.counter("packets_received")     # counted per packet: no lookup by name
        self._sent = self._stats.counter("packets_sent")
        self._urgent: list = []                  # control packets produced by receive()
        self._urgent_at = 0.0                    # when the first of them was produced
        self._probe_requests = 0                 # probe requests made (their ids)
        self.nic = NicClock(self.config.line_rate_bps,
                            self.config.nic_backlog_pkts * (self.config.mtu_payload + DATA_OVERHEAD))
        self.shares = SenderShares(self.config)  # the senders sharing this host's links (window penalty)

    @property
    def connections(self) -> Mapping[int, Connection]:
        """Local QP -> its connection (read-only: `connect` and `connect_qps` open them)."""
        return MappingProxyType(self._connections)

    # --- set-up ----------------------------------------------------------------------------------
    def connect(self, peer: str, local_qp: int, remote_qp: int, paths: list[PathInfo],
                reverse_paths: list[PathInfo] | None = None) -> Connection:
        """Open a connection to `peer`.

        `paths` lead from this host to the peer (data and probes go on them; acknowledgements and
        probe replies for the peer's data go on them too). `reverse_paths` (the peer's paths to
        us) are kept for information only: the peer answers on its own connection's paths.
        """
        if local_qp in self._connections:
            raise ValueError(f"{self.name}: local QP {local_qp:#x} is already connected "
                             f"(to {self._connections[local_qp].peer})")
        if not paths:
            raise ValueError(f"{self.name}: connect to {peer}: no paths given")
        conn = Connection(ConnectionId(self.name, peer, local_qp, remote_qp), self.config, paths, reverse_paths,
                          self._rng, self.nic, self.shares, self._events.append, self.policies)
        self._connections[local_qp] = conn
        self._in_order.append(conn)
        return conn

    def connect_qps(self, peer: str, local_qp: int, remote_qp: int, paths: list[PathInfo],
                    reverse_paths: list[PathInfo] | None = None) -> list[Connection]:
        """Open `config.qps` connections to `peer` (the RoCE practice of several queue pairs per
        pair of hosts): QP k is `local_qp + k * QP_STRIDE` here and `remote_qp + k * QP_STRIDE`
        there. Each draws its own EV, so the switches' ECMP hash may put each on another path;
        none of them fails over. With qps = 1 this is `[connect(...)]`."""
        count = self.config.qps
        top = max(local_qp, remote_qp) + (count - 1) * QP_STRIDE
        if top > 0xFFFFFF:
            raise ValueError(f"{self.name}: {count} QPs from {local_qp:#x}/{remote_qp:#x} in steps of "
                             f"{QP_STRIDE:#x} go past the 24-bit QP number space")
        return [self.connect(peer, local_qp + k * QP_STRIDE, remote_qp + k * QP_STRIDE, paths, reverse_paths)
                for k in range(count)]

    def connection(self, ident: ConnectionId) -> Connection:
        """The connection an event names (`event.conn`)."""
        conn = self._connections.get(ident.local_qp)
        if conn is None or conn.ident != ident:
            raise KeyError(f"{self.name}: {ident.name} is not a connection of this endpoint")
        return conn

    def close(self) -> None:
        """End the endpoint: its connections let go of their parts and the senders' shares of the
        receivers they count (reference cycles, wired by callbacks), so that reference counting
        frees it all once the last reference to the endpoint goes: the cyclic garbage collector
        need not look for it. Its counters can still be read; it cannot be used after."""
        for conn in self._in_order:
            conn.close()
        self.shares.close()

    # --- application ---------------------------------------------------------------------------
    def send_message(self, conn: Connection, data) -> int:
        """Queue `data` (bytes-like, not copied: keep it unchanged until sent) on `conn`; return its
        message id. A `MessageSent` event reports when every byte has been acknowledged."""
        if self._connections.get(conn.local_qp) is not conn:
            raise ValueError(f"{self.name}: {conn.name} is not a connection of this endpoint")
        if conn.failed is not None:
            raise ValueError(f"{self.name}: cannot send on {conn.name}: {conn.failed.error}")
        if len(data) > conn.config.max_message_bytes:
            raise ValueError(f"{self.name}: a message of {len(data)} bytes is above max_message_bytes "
                             f"{conn.config.max_message_bytes} of {conn.name}")
        conn.touch()
        return conn.sender.send_message(data)

    # --- I/O ---------------------------------------------------------------------------------------
    def receive(self, now: float, nic: int, pkt) -> None:
        """Take one packet that arrived on NIC `nic` at time `now`."""
        self._received.add()
        # narrowed for mypyc: a data packet's and a SACK's read natively, the others' generically
        qp: int = pkt.qp if type(pkt) is DataPacket else pkt.qp if type(pkt) is Sack else pkt.qp
        # a few connections (a permutation's two) are walked comparing their QPs natively; a dict
        # lookup would box the QP (a 24-bit number) per packet. The dict serves many.
        conn: Connection | None = None
        connections = self._in_order
        if len(connections) <= _WALKED:
            for c in connections:
                if c.local_qp == qp:
                    conn = c
                    break
        else:
            conn = self._connections.get(qp)
        if conn is None:
            self._stats.add("unknown_qp")
            return
        urgent = self._urgent                   # the connection appends its answers to it
        waiting = len(urgent)
        conn.receive(now, nic, pkt, urgent)
        if not waiting and urgent:
            self._urgent_at = now

    def poll(self, now: float) -> list[tuple[int, object]]:
        """Run the timers due by `now`; return the (nic, packet) pairs to transmit now."""
        out = self._urgent
        if out:
            self._urgent = []
            nic = self.nic
            if nic.rate:
                for index, pkt in out:
                    nic.account(index, wire_size(pkt), now)
        else:
            out = []
        for conn in self._in_order:
            if now < conn.quiet_until:
                continue                         # nothing of it is due and nothing changed: a no-op
            conn.poll(now, out)
        self._sent.add(len(out))
        return out

    def next_wakeup(self) -> float | None:
        """Earliest time `poll` has something to do (a timer or the pacing clock), or None. A time
        already past means: at once."""
        if self._urgent:
            return self._urgent_at
        connections = self._in_order
        if len(connections) == 1:                   # one connection (an agent's usual case): it is
            return connections[0].next_wakeup()     # polled every time, no quiet time to work out
        best = _INF                                 # the earliest as a float, inf for none (compared natively)
        version = self.nic.version
        never = _NEVER
        for c in connections:
            t: float
            if c.quiet_until == never:              # polled or touched since it was worked out
                t = c.wakeup = c.wakeup_at()
                c.wakeup_nic_version = _IDLE if c.sender.idle else version   # an idle sender asks no NIC
                c.quiet_until = c.quiet_time(t)
            elif c.wakeup_nic_version >= version:   # nothing it depends on changed: the same answer
                t = c.wakeup
            else:                                   # only the NIC clock moved: its quiet time still holds
                t = c.wakeup = c.wakeup_at()
                c.wakeup_nic_version = version
            if t < best:
                best = t
        return None if best == _INF else best

    def drain_events(self) -> list[events.TransportEvent]:
        """The events since the last call, oldest first: messages received (with their data) and
        sent, EV state changes, retransmissions by cause, ... (`host_agent.transport.events`).
        The list is the caller's to read, not to change: with no events it is one shared empty list
        (a host drains twice per service, mostly nothing: no list made for it)."""
        queued = self._events
        if not queued:
            return _NO_EVENTS
        out = list(queued)
        queued.clear()               # the connections hold its `append`: the queue itself stays
        return out

    def next_event(self) -> events.TransportEvent | None:
        """The oldest event not yet taken, or None (one at a time, as `drain_events` all at once)."""
        return self._events.popleft() if self._events else None

    # --- EV control (the OCP MRC operations; `Connection.control` has the rest) -----------------------
    def query_ev(self, conn: Connection, ev) -> dict:
        """QUERY_EV_STATE on `conn`: one EV's state, port, path and drop count."""
        return conn.control.query(ev)

    def query_ev_array(self, conn: Connection) -> list[dict]:
        """QUERY_EV_ARRAY on `conn`: every slot of its EV set."""
        return conn.control.array()

    def modify_ev_state(self, conn: Connection, ev, state, now: float) -> dict:
        """MODIFY_EV_STATE on `conn`: set one EV GOOD, ASSUMED_BAD, DENIED or UNKNOWN."""
        return conn.control.modify(ev, state, now)

    def replace_ev(self, conn: Connection, ev, now: float, new_ev=None) -> dict:
        """REPLACE_EV on `conn`: a new (UNKNOWN, probed before use) EV in the slot of `ev`."""
        return conn.control.replace(ev, now, new_ev)

    def probe_ev(self, conn: Connection, ev, now: float, timeout: float | None = None) -> int:
        """Probe one EV of `conn`; return the request id its `ProbeResult` event will carry."""
        self._probe_requests += 1
        conn.control.probe(ev, self._probe_requests, now, timeout)
        return self._probe_requests

    def min_rtt(self) -> float | None:
        """The smallest RTT of a full-size data packet over all connections (seconds; the configured
        `base_rtt` when one is set), or None before any sample: the base RTT the run measured."""
        seen = [c.rtt.min_rtt for c in self._connections.values() if c.rtt.min_rtt != float("inf")]
        return min(seen) if seen else None

    def stats(self) -> dict:
        """Counters of this endpoint (sent, retransmitted by cause, evs_retired, ...) and per-connection state."""
        total = Counter(self._stats)
        for c in self._connections.values():
            total.update(c.stats)
        out: dict = dict(total)
        out["connections"] = {c.local_qp: c.describe() for c in self._connections.values()}
        return out
