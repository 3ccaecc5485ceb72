"""The switch pipeline of docs/design.md ("Switch pipeline contract") as a function of tables and queue state.

`Pipeline.process(frame, in_port, queued_low)` returns where a raw Ethernet frame goes:
`(egress_port, frame_out, priority)`, or None when it is dropped (and counted). It reads the
tables of a `TableStore`, the per-port count of queued low-priority packets (the queue
estimate of the contract), and draws fault drops from a seeded RNG. Counters are named as in
the P4Info and indexed by port (packets and bytes).
"""
from __future__ import annotations

import random
import struct

from pipeline_contract import names as N
from pipeline_contract.ecmp import crc16
from refswitch.tables import TableStore
from wire import constants as C

COUNTER_SIZE = N.COUNTER_SIZE
P4_COUNTERS = N.ALL_COUNTERS        # the P4 program's counters; the model adds its tail-drop count
QUEUE_DROPS = "queue_drops"

PPM = 1_000_000
_TC_OFFSET = C.IPV6_OFFSET                  # version(4) traffic class(8) flow label(20)
_PLEN_OFFSET = C.IPV6_OFFSET + 4
_NH_OFFSET = C.IPV6_OFFSET + 6
_SRC_OFFSET = C.IPV6_OFFSET + 8
_DST_OFFSET = C.IPV6_OFFSET + 24
_MRCH_FLAGS_OFFSET = C.MRCH_OFFSET
_CONTROL = frozenset(C.CONTROL_OPCODES)
_HIGH_DSCP = frozenset(C.HIGH_PRIORITY_DSCP)
_TRIMMABLE_DSCP = frozenset(C.TRIMMABLE_DSCP)
_ECT = frozenset((0b01, C.ECN_ECT0))
_DEPTH_BUCKETS = N.DEPTH_BUCKETS

# From byte 12: EtherType, first two IPv6 bytes (version, traffic class), payload length, next header,
# then UDP source port, destination port, length.
_unpack_head = struct.Struct("!HBB2xHB33xHHH").unpack_from
_pack_tc = struct.Struct("!BB").pack_into
_pack_u16 = struct.Struct("!H").pack_into
_pack_u16x2 = struct.Struct("!HH").pack_into


class TrimmedFrame(bytes):
    """A trimmed frame that remembers its length before the cut: v1model cuts a packet as it leaves,
    so MrcEgress.tx counts the untrimmed length (BMv2 does)."""

    untrimmed_length: int


def _trim(frame: bytes, b14: int, b15: int, host_facing: int) -> bytes:
    """The first 102 bytes of a data frame, marked trimmed, with its length fields rewritten."""
    out = bytearray(frame[:C.DATA_HEADERS_LEN])
    dscp = C.DSCP_TRIMMED_LASTHOP if host_facing else C.DSCP_TRIMMED
    # traffic class = dscp(6) ecn(2) spans the low nibble of byte 14 and the high nibble of byte 15
    _pack_tc(out, _TC_OFFSET, (b14 & 0xF0) | (dscp >> 2), ((dscp & 0x3) << 6) | (b15 & 0x3F))
    _pack_u16(out, _PLEN_OFFSET, C.TRIMMED_UDP_LEN)
    _pack_u16x2(out, C.UDP_OFFSET + 4, C.TRIMMED_UDP_LEN, 0)      # UDP length, checksum
    out[_MRCH_FLAGS_OFFSET] |= C.MRCH_FLAG_TRIMMED
    trimmed = TrimmedFrame(out)
    trimmed.untrimmed_length = len(frame)
    return trimmed


class Counters:
    """Packet and byte counts by counter name and cell (the port, or a port's depth bucket)."""

    def __init__(self, names=P4_COUNTERS + (QUEUE_DROPS,), size: int = COUNTER_SIZE):
        self.sizes = {n: N.COUNTER_SIZES.get(n, size) for n in names}
        self.packets: dict[str, list[int]] = {n: [0] * s for n, s in self.sizes.items()}
        self.bytes: dict[str, list[int]] = {n: [0] * s for n, s in self.sizes.items()}

    def read(self, name: str, index: int) -> tuple[int, int]:
        """(packets, bytes) of counter `name` at `index`."""
        return self.packets[name][index], self.bytes[name][index]

    def nonzero(self) -> dict[str, dict[int, tuple[int, int]]]:
        """Every non-zero cell: {counter: {port: (packets, bytes)}}."""
        out = {}
        for name, pk in self.packets.items():
            cells = {i: (p, self.bytes[name][i]) for i, p in enumerate(pk) if p}
            if cells:
                out[name] = cells
        return out

    def reset(self) -> None:
        """Zero every counter."""
        for name, size in self.sizes.items():
            self.packets[name] = [0] * size
            self.bytes[name] = [0] * size


class Pipeline:
    """Parse, uSID shift, routing/ECMP, port fault, trim/ECN decision and counters."""

    def __init__(self, tables: TableStore, seed: int = 0):
        self.tables = tables
        self.counters = Counters()
        self.rng = random.Random(seed)
        self._usid = tables.table(N.USID_LOCAL)
        self._routing = tables.table(N.ROUTING)
        self._ecmp = tables.table(N.ECMP_MEMBER)
        self._fault = tables.table(N.PORT_FAULT)
        self._config = tables.table(N.PORT_CONFIG)
        self._bind_counters()

    def _bind_counters(self) -> None:
        p, b = self.counters.packets, self.counters.bytes
        self._rx = (p[N.RX], b[N.RX])
        self._malformed = (p[N.MALFORMED_DROPS], b[N.MALFORMED_DROPS])
        self._no_route = (p[N.NO_ROUTE_DROPS], b[N.NO_ROUTE_DROPS])
        self._fault_drops = (p[N.FAULT_DROPS], b[N.FAULT_DROPS])
        self._trimmed = (p[N.TRIMMED], b[N.TRIMMED])
        self._ecn = (p[N.ECN_MARKED], b[N.ECN_MARKED])
        self._tx = (p[N.TX], b[N.TX])
        self._depth_seen = (p[N.QUEUE_DEPTH_SEEN], b[N.QUEUE_DEPTH_SEEN])
        self._qdrops = (p[QUEUE_DROPS], b[QUEUE_DROPS])

    def reset_counters(self) -> None:
        """Zero all counters."""
        self.counters.reset()
        self._bind_counters()

    def seed(self, seed: int) -> None:
        """Restart the fault-drop RNG from `seed`."""
        self.rng.seed(seed)

    # --- egress-side counts (called by the queues' owner) ---------------------------------
    def count_tx(self, port: int, length: int) -> None:
        """Count a frame leaving `port` (MrcEgress.tx)."""
        self._tx[0][port] += 1
        self._tx[1][port] += length

    def count_queue_drop(self, port: int, length: int) -> None:
        """Count a frame tail-dropped at the egress queue of `port`."""
        self._qdrops[0][port] += 1
        self._qdrops[1][port] += length

    # --- the pipeline ------------------------------------------------------------------------
    def process(self, frame: bytes, in_port: int, queued_low) -> tuple[int, bytes, int] | None:
        """Run one frame through ingress; `queued_low[port]` is the low-priority queue length of a port."""
        n = len(frame)
        rx = self._rx
        rx[0][in_port] += 1
        rx[1][in_port] += n
        # 1. parse and validate
        if n < C.BTH_OFFSET:
            return self._drop(self._malformed, in_port, n)
        ethertype, b14, b15, plen, nh, sport, dport, ulen = _unpack_head(frame, 12)
        if (ethertype != C.ETHERTYPE_IPV6 or b14 >> 4 != 6 or nh != C.IPPROTO_UDP
                or plen != n - C.UDP_OFFSET or ulen != plen):
            return self._drop(self._malformed, in_port, n)
        opcode = -1
        if dport == C.ROCEV2_UDP_PORT:
            if n < C.RETH_OFFSET:
                return self._drop(self._malformed, in_port, n)
            opcode = frame[C.BTH_OFFSET]
            if opcode == C.OP_RC_WRITE_ONLY and n < C.DATA_HEADERS_LEN:
                return self._drop(self._malformed, in_port, n)
        # 2. uSID shift
        dst = frame[_DST_OFFSET:_DST_OFFSET + 16]
        hit = self._usid.exact.get(int.from_bytes(dst[:6], "big"))
        if hit is not None and hit[0] == N.USID_SHIFT:
            dst = dst[:4] + dst[6:] + b"\x00\x00"
            frame = frame[:_DST_OFFSET] + dst + frame[_DST_OFFSET + 16:]
        # 3./4. routing, ECMP
        action, params = self._routing.lookup_lpm(int.from_bytes(dst, "big"))
        if action == N.ECMP_SELECT:
            size = params["size"]
            index = 0 if size == 0 else crc16(
                frame[_SRC_OFFSET:_SRC_OFFSET + 16] + dst + frame[_NH_OFFSET:_NH_OFFSET + 1]
                + frame[C.UDP_OFFSET:C.UDP_OFFSET + 4]) % size
            action, params = self._ecmp.lookup_exact((params["group"], index))
        if action != N.FORWARD:
            return self._drop(self._no_route, in_port, n)
        port = params["port"]
        # 5. port fault
        fault = self._fault.exact.get(port)
        if fault is not None:
            if fault[0] == N.FAULT_DROP or (
                    fault[0] == N.FAULT_DROP_RANDOM
                    and self.rng.randrange(PPM) < fault[1]["drop_ppm"]):
                return self._drop(self._fault_drops, port, n)
        # 6./7. port config, queue estimate, trim / ECN / priority
        tc = ((b14 & 0x0F) << 4) | (b15 >> 4)
        dscp = tc >> 2
        if opcode in _CONTROL or dscp in _HIGH_DSCP:
            return port, frame, C.PRIORITY_HIGH
        config = self._config.exact.get(port)
        if config is None or config[0] != N.SET_PORT_CONFIG:
            return port, frame, C.PRIORITY_LOW
        cfg = config[1]
        q = queued_low[port]
        cell = port * _DEPTH_BUCKETS + (q if q < _DEPTH_BUCKETS else _DEPTH_BUCKETS - 1)
        self._depth_seen[0][cell] += 1
        self._depth_seen[1][cell] += n
        if (opcode == C.OP_RC_WRITE_ONLY and dscp in _TRIMMABLE_DSCP
                and not frame[_MRCH_FLAGS_OFFSET] & C.MRCH_FLAG_TRIMMED and q >= cfg["trim_threshold"]):
            self._trimmed[0][port] += 1
            self._trimmed[1][port] += n
            return port, _trim(frame, b14, b15, cfg["host_facing"]), C.PRIORITY_HIGH
        low = cfg["ecn_threshold"]
        if (tc & 3) in _ECT and not cfg["host_facing"] and q >= low and (
                q >= cfg["ecn_max_threshold"]
                or self.rng.randrange(cfg["ecn_max_threshold"] - low) < q - low):
            self._ecn[0][port] += 1
            self._ecn[1][port] += n
            frame = bytearray(frame)
            frame[_TC_OFFSET + 1] |= C.ECN_CE << 4
            frame = bytes(frame)
        return port, frame, C.PRIORITY_LOW

    @staticmethod
    def _drop(counter, index: int, length: int) -> None:
        counter[0][index] += 1
        counter[1][index] += length
        return None
