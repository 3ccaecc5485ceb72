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

from pipeline_contract import names
from pipeline_contract.ecmp import crc16
from refswitch.tables import TableStore
from wire import constants

COUNTER_SIZE = names.COUNTER_SIZE
P4_COUNTERS = names.ALL_COUNTERS        # the P4 program's counters; the model adds its tail-drop count
QUEUE_DROPS = "queue_drops"

PPM = 1_000_000
_TC_OFFSET = constants.IPV6_OFFSET                  # version(4) traffic class(8) flow label(20)
_PLEN_OFFSET = constants.IPV6_OFFSET + 4
_NH_OFFSET = constants.IPV6_OFFSET + 6
_SRC_OFFSET = constants.IPV6_OFFSET + 8
_DST_OFFSET = constants.IPV6_OFFSET + 24
_MRCH_FLAGS_OFFSET = constants.MRCH_OFFSET
_CONTROL = frozenset(constants.CONTROL_OPCODES)
_HIGH_DSCP = frozenset(constants.HIGH_PRIORITY_DSCP)
_TRIMMABLE_DSCP = frozenset(constants.TRIMMABLE_DSCP)
_ECT = frozenset((0b01, constants.ECN_ECT0))
_DEPTH_BUCKETS = names.DEPTH_BUCKETS

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
    out = bytearray(frame[:constants.DATA_HEADERS_LEN])
    dscp = constants.DSCP_TRIMMED_LASTHOP if host_facing else constants.DSCP_TRIMMED
    # traffic class = dscp(6) ecn(2) spans the low nibble of byte 14 and the high nibble of byte 15
    _pack_tc(out, _TC_OFFSET, (b14 & 0xF0) | (dscp >> 2), ((dscp & 0x3) << 6) | (b15 & 0x3F))
    _pack_u16(out, _PLEN_OFFSET, constants.TRIMMED_UDP_LEN)
    _pack_u16x2(out, constants.UDP_OFFSET + 4, constants.TRIMMED_UDP_LEN, 0)      # UDP length, checksum
    out[_MRCH_FLAGS_OFFSET] |= constants.MRCH_FLAG_TRIMMED
    trimmed = TrimmedFrame(out)
    trimmed.untrimmed_length = len(frame)
    return trimmed


class Counters:
    """Packet and byte counts by counter name and cell (the port, or a port's depth bucket)."""

    def __init__(self, counter_names=P4_COUNTERS + (QUEUE_DROPS,), size: int = COUNTER_SIZE):
        self.sizes = {n: names.COUNTER_SIZES.get(n, size) for n in counter_names}
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
        self._usid = tables.table(names.USID_LOCAL)
        self._routing = tables.table(names.ROUTING)
        self._ecmp = tables.table(names.ECMP_MEMBER)
        self._fault = tables.table(names.PORT_FAULT)
        self._config = tables.table(names.PORT_CONFIG)
        self._bind_counters()

    def _bind_counters(self) -> None:
        p, b = self.counters.packets, self.counters.bytes
        self._rx = (p[names.RX], b[names.RX])
        self._malformed = (p[names.MALFORMED_DROPS], b[names.MALFORMED_DROPS])
        self._no_route = (p[names.NO_ROUTE_DROPS], b[names.NO_ROUTE_DROPS])
        self._fault_drops = (p[names.FAULT_DROPS], b[names.FAULT_DROPS])
        self._trimmed = (p[names.TRIMMED], b[names.TRIMMED])
        self._ecn = (p[names.ECN_MARKED], b[names.ECN_MARKED])
        self._tx = (p[names.TX], b[names.TX])
        self._depth_seen = (p[names.QUEUE_DEPTH_SEEN], b[names.QUEUE_DEPTH_SEEN])
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
        if n < constants.BTH_OFFSET:
            return self._drop(self._malformed, in_port, n)
        ethertype, b14, b15, plen, nh, sport, dport, ulen = _unpack_head(frame, 12)
        if (ethertype != constants.ETHERTYPE_IPV6 or b14 >> 4 != 6 or nh != constants.IPPROTO_UDP
                or plen != n - constants.UDP_OFFSET or ulen != plen):
            return self._drop(self._malformed, in_port, n)
        opcode = -1
        if dport == constants.ROCEV2_UDP_PORT:
            if n < constants.RETH_OFFSET:
                return self._drop(self._malformed, in_port, n)
            opcode = frame[constants.BTH_OFFSET]
            if opcode == constants.OP_RC_WRITE_ONLY and n < constants.DATA_HEADERS_LEN:
                return self._drop(self._malformed, in_port, n)
        # 2. uSID shift
        dst = frame[_DST_OFFSET:_DST_OFFSET + 16]
        hit = self._usid.exact.get(int.from_bytes(dst[:6], "big"))
        if hit is not None and hit[0] == names.USID_SHIFT:
            dst = dst[:4] + dst[6:] + b"\x00\x00"
            frame = frame[:_DST_OFFSET] + dst + frame[_DST_OFFSET + 16:]
        # 3./4. routing, ECMP
        action, params = self._routing.lookup_lpm(int.from_bytes(dst, "big"))
        if action == names.ECMP_SELECT:
            size = params["size"]
            index = 0 if size == 0 else crc16(
                frame[_SRC_OFFSET:_SRC_OFFSET + 16] + dst + frame[_NH_OFFSET:_NH_OFFSET + 1]
                + frame[constants.UDP_OFFSET:constants.UDP_OFFSET + 4]) % size
            action, params = self._ecmp.lookup_exact((params["group"], index))
        if action != names.FORWARD:
            return self._drop(self._no_route, in_port, n)
        port = params["port"]
        # 5. port fault
        fault = self._fault.exact.get(port)
        if fault is not None:
            if fault[0] == names.FAULT_DROP or (
                    fault[0] == names.FAULT_DROP_RANDOM
                    and self.rng.randrange(PPM) < fault[1]["drop_ppm"]):
                return self._drop(self._fault_drops, port, n)
        # 6./7. port config, queue estimate, trim / ECN / priority
        tc = ((b14 & 0x0F) << 4) | (b15 >> 4)
        dscp = tc >> 2
        if opcode in _CONTROL or dscp in _HIGH_DSCP:
            return port, frame, constants.PRIORITY_HIGH
        config = self._config.exact.get(port)
        if config is None or config[0] != names.SET_PORT_CONFIG:
            return port, frame, constants.PRIORITY_LOW
        cfg = config[1]
        q = queued_low[port]
        cell = port * _DEPTH_BUCKETS + (q if q < _DEPTH_BUCKETS else _DEPTH_BUCKETS - 1)
        self._depth_seen[0][cell] += 1
        self._depth_seen[1][cell] += n
        if (opcode == constants.OP_RC_WRITE_ONLY and dscp in _TRIMMABLE_DSCP
                and not frame[_MRCH_FLAGS_OFFSET] & constants.MRCH_FLAG_TRIMMED and q >= cfg["trim_threshold"]):
            self._trimmed[0][port] += 1
            self._trimmed[1][port] += n
            return port, _trim(frame, b14, b15, cfg["host_facing"]), constants.PRIORITY_HIGH
        low = cfg["ecn_threshold"]
        if (tc & 3) in _ECT and not cfg["host_facing"] and q >= low and (
                q >= cfg["ecn_max_threshold"]
                or self.rng.randrange(cfg["ecn_max_threshold"] - low) < q - low):
            self._ecn[0][port] += 1
            self._ecn[1][port] += n
            frame = bytearray(frame)
            frame[_TC_OFFSET + 1] |= constants.ECN_CE << 4
            frame = bytes(frame)
        return port, frame, constants.PRIORITY_LOW

    @staticmethod
    def _drop(counter, index: int, length: int) -> None:
        counter[0][index] += 1
        counter[1][index] += length
        return None
