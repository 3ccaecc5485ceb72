"""All connections of one host: the sans-IO façade the agent process and the network model drive.

Usage (one host; the peer does the same with the QPs swapped)::

    ep = Endpoint("h0", TransportConfig())
    conn = ep.connect("h1", local_qp=0x11, remote_qp=0x22, paths=paths_h0_to_h1)
    ep.on_message(lambda conn, msg_id, data: ...)
    msg_id = ep.send_message(conn, b"..." , on_complete=lambda msg_id: ...)
    # then, forever:
    ep.receive(now, nic, packet)                 # for every packet arriving on a NIC
    for nic, packet in ep.poll(now): ...         # transmit these
    wake = ep.next_wakeup()                      # call poll again no later than this

Packets are the decoded objects of `wire.packets`; times are seconds (float) on any
monotonic clock, the same for every call. A connection is identified on receive by the
destination QP of the packet (our `local_qp`). Nothing here blocks, sleeps or reads a clock.
"""
from __future__ import annotations

import random
from collections import Counter
from typing import Callable

from wire.packets import DATA_OVERHEAD, DataPacket, Nack, Probe, ProbeReply, Sack, wire_size
from host_agent.transport import events as E
from host_agent.transport.baseline import BaselineReceiver, BaselineSender
from host_agent.transport.config import PathInfo, TransportConfig
from host_agent.transport.congestion import NsccWindow, RttEstimator
from host_agent.transport.events import Event, EventLog
from host_agent.transport.evset import EvSet
from host_agent.transport.probes import Prober
from host_agent.transport.receiver import MrcReceiver
from host_agent.transport.sender import MrcSender


class Connection:
    """One full-duplex connection to a peer: EV set, sender, receiver, prober, RTT and window."""

    def __init__(self, endpoint: "Endpoint", peer: str, local_qp: int, remote_qp: int,
                 paths: list[PathInfo], reverse_paths: list[PathInfo] | None, rng: random.Random) -> None:
        cfg = endpoint.config
        self.endpoint = endpoint
        self.config = cfg
        self.mode = cfg.mode
        self.peer = peer
        self.local_qp = local_qp
        self.remote_qp = remote_qp
        self.rkey = remote_qp                      # R_Key carried in RETH: the peer's QP
        self.name = f"{endpoint.name}->{peer}:{local_qp:#x}"
        self.paths = list(paths)
        self.reverse_paths = list(reverse_paths) if reverse_paths else None
        self.nic_plane = {p.nic: p.plane for p in paths}
        self.num_nics = len(self.nic_plane)
        self.stats: Counter = Counter()
        self.rtt = RttEstimator(cfg)
        self.cc = NsccWindow(cfg, self.rtt, cfg.mtu_payload + DATA_OVERHEAD)
        if cfg.mode == "mrc":
            self.evset = EvSet(paths, cfg.num_evs, cfg.min_active_evs, rng, cfg.share_fate_by_path,
                               on_change=self._ev_changed, on_backup=self._ev_backup)
            self.sender = MrcSender(self)
            self.receiver = MrcReceiver(self)
        else:
            self.evset = EvSet(paths[:1], 1, 1, rng, False)
            self.sender = BaselineSender(self)
            self.receiver = BaselineReceiver(self)
        self.prober = Prober(self)

    # --- helpers used by the parts -------------------------------------------------------------
    def log(self, t: float, kind: str, **info) -> None:
        """Record an event of this connection."""
        self.endpoint._log.add(t, kind, self.name, **info)

    def deliver(self, msg_id: int, data: bytes) -> None:
        """Hand a complete message to the application."""
        self.endpoint._deliver(self, msg_id, data)

    def _ev_changed(self, ev, old, cause: str) -> None:
        now = self.endpoint._now
        path = self.evset.path_of(ev)
        self.log(now, E.EV_STATE, ev=ev.value, plane=ev.plane, path=ev.path_key, dst=path.dst.hex(),
                 old=old.value, new=ev.state.value, cause=cause)
        if ev.state.value == "ASSUMED_BAD":
            self.stats["evs_retired"] += 1
        elif old.value == "ASSUMED_BAD":
            self.stats["evs_reinstated"] += 1
        elif ev.state.value == "SKIP":
            self.stats[f"evs_skipped_{cause}"] += 1

    def _ev_backup(self, new, old) -> None:
        self.stats["ev_backups"] += 1
        self.log(self.endpoint._now, E.EV_BACKUP, ev=new.value, replaces=old.value, plane=new.plane,
                 path=new.path_key)

    # --- driving ----------------------------------------------------------------------------------
    def receive(self, now: float, nic: int, pkt) -> list:
        """Take one packet addressed to this connection; return control packets to send at once."""
        out: list = []
        plane = self.nic_plane.get(nic)
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
        return out

    def poll(self, now: float, out: list) -> None:
        """Run due timers, then append what may be sent now."""
        self.sender.expire(now)
        start = len(out)
        self.receiver.poll(now, out)
        if self.prober.busy(now):
            self.prober.poll(now, out)
        if self.endpoint.nic_rate and len(out) > start:
            for nic, pkt in out[start:]:
                self.endpoint.account(nic, wire_size(pkt), now)
        self.sender.poll(now, out)

    def next_wakeup(self) -> float | None:
        """The earliest deadline of this connection."""
        best = self.sender.next_wakeup()
        for t in (self.receiver.next_wakeup(), self.prober.next_wakeup()):
            if t is not None and (best is None or t < best):
                best = t
        return best

    def describe(self) -> dict:
        """A snapshot of this connection's state, for logs and tests."""
        d = {"name": self.name, "peer": self.peer, "mode": self.mode, "stats": dict(self.stats),
             "cwnd": self.cc.cwnd, "srtt": self.rtt.srtt, "rto": self.rtt.rto,
             "cum_acked": self.sender.cum_acked, "idle": self.sender.idle}
        if self.mode == "mrc":
            d["ev_states"] = self.evset.counts()
        return d


QP_STRIDE = 0x10000      # QP k of a peer is numbered base + k * QP_STRIDE (both ends do the same)


class Endpoint:
    """All connections of one host, driven by `receive`, `poll` and `next_wakeup`."""

    def __init__(self, name: str, config: TransportConfig | None = None, rng_seed: int = 0) -> None:
        self.name = name
        self.config = config or TransportConfig()
        self._rng = random.Random((self.config.seed, rng_seed, name).__repr__())
        self.connections: dict[int, Connection] = {}
        self._on_message: Callable | None = None
        self._log = EventLog()
        self._stats: Counter = Counter()
        self._now = 0.0
        self._urgent: list = []                  # control packets produced by receive()
        self.nic_rate = self.config.line_rate_bps / 8     # bytes/s of each NIC (0: unknown, no NIC clock)
        self._nic_free: dict[int, float] = {}    # NIC -> when what we handed it will have left
        self._nic_backlog = (self.config.nic_backlog_pkts * (self.config.mtu_payload + DATA_OVERHEAD)
                             / self.nic_rate) if self.nic_rate else 0.0

    # --- NIC clock -------------------------------------------------------------------------------
    def account(self, nic: int, nbytes: int, now: float) -> None:
        """Note `nbytes` handed to NIC `nic` at `now` (keeps data from overrunning the line)."""
        if self.nic_rate:
            self._nic_free[nic] = max(self._nic_free.get(nic, 0.0), now) + nbytes / self.nic_rate

    def nic_free_at(self, nic: int) -> float:
        """When NIC `nic` may take another data packet: when what was handed to it, less a
        backlog of `nic_backlog_pkts` full packets, will have left (by our clock)."""
        return self._nic_free.get(nic, 0.0) - self._nic_backlog

    # --- set-up ----------------------------------------------------------------------------------
    def connect(self, peer: str, local_qp: int, remote_qp: int, paths: list[PathInfo],
                reverse_paths: list[PathInfo] | None = None) -> Connection:
        """Open a connection to `peer`.

        `paths` lead from this host to the peer (data and probes go on them; acknowledgements and
        probe replies for the peer's data go on them too). `reverse_paths` (the peer's paths to
        us) are kept for information only: the peer answers on its own connection's paths.
        """
        if local_qp in self.connections:
            raise ValueError(f"{self.name}: local QP {local_qp:#x} is already connected "
                             f"(to {self.connections[local_qp].peer})")
        if not paths:
            raise ValueError(f"{self.name}: connect to {peer}: no paths given")
        conn = Connection(self, peer, local_qp, remote_qp, paths, reverse_paths, self._rng)
        self.connections[local_qp] = conn
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

    def on_message(self, callback: Callable) -> None:
        """Call `callback(conn, msg_id, data)` once for every whole message received."""
        self._on_message = callback

    def _deliver(self, conn: Connection, msg_id: int, data: bytes) -> None:
        if self._on_message is not None:
            self._on_message(conn, msg_id, data)

    # --- application ---------------------------------------------------------------------------
    def send_message(self, conn: Connection, data, on_complete: Callable | None = None) -> int:
        """Queue `data` (bytes-like) on `conn`; return its message id. `on_complete(msg_id)` runs
        when every byte has been acknowledged."""
        if self.connections.get(conn.local_qp) is not conn:
            raise ValueError(f"{self.name}: {conn.name} is not a connection of this endpoint")
        if len(data) > conn.config.max_message_bytes:
            raise ValueError(f"{self.name}: a message of {len(data)} bytes is above max_message_bytes "
                             f"{conn.config.max_message_bytes} of {conn.name}")
        return conn.sender.send_message(data, on_complete)

    # --- I/O ---------------------------------------------------------------------------------------
    def receive(self, now: float, nic: int, pkt) -> None:
        """Take one packet that arrived on NIC `nic` at time `now`."""
        self._now = now
        self._stats["packets_received"] += 1
        conn = self.connections.get(pkt.qp)
        if conn is None:
            self._stats["unknown_qp"] += 1
            return
        self._urgent.extend(conn.receive(now, nic, pkt))

    def poll(self, now: float) -> list[tuple[int, object]]:
        """Run the timers due by `now`; return the (nic, packet) pairs to transmit now."""
        self._now = now
        out, self._urgent = self._urgent, []
        if self.nic_rate:
            for nic, pkt in out:
                self.account(nic, wire_size(pkt), now)
        for conn in self.connections.values():
            conn.poll(now, out)
        self._stats["packets_sent"] += len(out)
        return out

    def next_wakeup(self) -> float | None:
        """Earliest time `poll` has something to do (a timer or the pacing clock), or None."""
        if self._urgent:
            return self._now
        best = None
        for c in self.connections.values():
            t = c.next_wakeup()
            if t is not None and (best is None or t < best):
                best = t
        return best

    def drain_events(self) -> list[Event]:
        """EV state changes, retransmissions by cause, completions, recorded since the last call."""
        return self._log.drain()

    def stats(self) -> dict:
        """Counters of this endpoint (sent, retransmitted by cause, evs_retired, ...) and per-connection state."""
        total = Counter(self._stats)
        for c in self.connections.values():
            total.update(c.stats)
        out = dict(total)
        out["connections"] = {c.local_qp: c.describe() for c in self.connections.values()}
        return out
