"""A switch following the pipeline contract of docs/design.md, on decoded packet objects."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Mapping, final

from mypy_extensions import i64

from pipeline_contract import names
from pipeline_contract.ecmp import entropy_member
from wire import constants
from wire.packets import DataPacket, Packet, Sack
from netsim.link import SimLink
from netsim.sim import Simulator

ADDR_BITS: Final = 128
MAX_REMEMBERED: Final = 1 << 16          # forwarding decisions a switch keeps before starting afresh
_HIGH: Final = constants.PRIORITY_HIGH
_LOW: Final = constants.PRIORITY_LOW
_HIGH_DSCP: Final = constants.HIGH_PRIORITY_DSCP
_TRIMMABLE_DSCP: Final = constants.TRIMMABLE_DSCP
_TRIMMED: Final = constants.MRCH_FLAG_TRIMMED
ADDR_BYTES: Final = ADDR_BITS // 8
LOCAL_BYTES: Final = 6                   # locator (4 bytes) and one uSID (2): what usid_local matches
_USID_FILL: Final = bytes(2)             # what a uSID shift fills the address's end with
# the contract's table and action names, read as constants by install (a fat-tree switch takes
# an entry per host; the compiled build would look each up in the names module per entry)
_USID_LOCAL: Final = names.USID_LOCAL
_ROUTING: Final = names.ROUTING
_ECMP_MEMBER: Final = names.ECMP_MEMBER
_PORT_CONFIG: Final = names.PORT_CONFIG
_PORT_FAULT: Final = names.PORT_FAULT
_FORWARD: Final = names.FORWARD
_ECMP_SELECT: Final = names.ECMP_SELECT


@dataclass
class PortConfig:
    """Trim and ECN thresholds (packets in the LOW queue) of one egress port: ECN marks with a
    probability rising from 0 at `ecn_threshold` to 1 at `ecn_max_threshold` (a step when equal)."""

    trim_threshold: int
    ecn_threshold: int
    host_facing: bool = False
    ecn_max_threshold: int = 0


@dataclass
class PortFault:
    """A fault on an egress port: drop everything, or drop with probability `drop_prob`."""

    drop_all: bool = False
    drop_prob: float = 0.0


@final
class _Route:
    """What a switch does with the packets to one destination address, worked out once (`SimSwitch._decide`):
    the address after its uSID shift (None: unchanged), and either the one egress port (`forward`)
    with its link and thresholds (None where the port has none), read per packet from here, not from
    the switch's lists by port, or the ECMP group's member ports, or neither (no route)."""

    __slots__ = ("shifted", "forward", "port", "link", "config", "members")

    def __init__(self, shifted: bytes | None, forward: bool, port: i64, link: SimLink | None,
                 config: PortConfig | None, members: list[int] | None) -> None:
        self.shifted = shifted
        self.forward = forward
        self.port = port
        self.link = link
        self.config = config
        self.members = members


def usid_shift(addr: bytes) -> bytes:
    """dst = (dst[127:96], dst[79:0] << 16) on a 16-byte address: consume the uSID after the locator."""
    return addr[:4] + addr[LOCAL_BYTES:] + _USID_FILL


def prefix_key(addr: bytes, length: int) -> bytes:
    """The first `length` bits of address `addr`, as the bytes they span (the last one's spare bits
    zero): how the routing table keys a prefix, and how a lookup reads an address for it."""
    spanned = (length + 7) >> 3
    key = addr[:spanned]
    spare = spanned * 8 - length
    if spare:
        key = key[:-1] + bytes((key[-1] >> spare << spare,))
    return key


class SimSwitch:
    """A simulated switch of one plane. Ports are numbered from 1; `links[port]` is the egress link of
    that port (`plug`) and `port_config[port]` its trim and ECN thresholds (`configure_port`, or
    the port_config table: `install`).

    Tables (filled by `install`, from the programs `netsim.from_topology` is given, or by `add_local`
    and `add_route`): `usid_local` (48-bit prefixes this switch consumes), `routes` (LPM: prefix
    length -> {the prefix's bytes (`prefix_key`): action}), `ecmp_groups` (group -> ports); an action is ("forward", port)
    or ("ecmp", group). Tables change only through these methods and `clear_routes`: the switch
    remembers the forwarding decision of every destination address and ECMP flow it has seen, and
    forgets them when a table changes or a port is plugged or configured.
    """

    def __init__(self, sim: Simulator, name: str, usid: int, plane: int = 0) -> None:
        # first (laid out first when compiled, in one cache line): what `receive` reads per packet
        self._rx: i64 = 0
        self._faulty = False                     # whether any port has a fault
        self._decisions: dict[bytes, _Route] = {}    # dst address -> what to do with its packets
        self._flows: dict[tuple, int] = {}          # (src, dst, ev) -> ECMP egress port
        self._egress: list[SimLink | None] = [None]  # the links by port (`_links`, read per ECMP packet)
        self._configs: list[PortConfig | None] = [None]  # the thresholds by port (`_port_config`, the same)
        self.sim = sim
        self.name = name
        self.usid = usid
        self.plane = plane
        self._links: dict[int, SimLink] = {}
        self._local_heads: set[bytes] = set()    # usid_local's prefixes, as an address's first LOCAL_BYTES
        self.routes: dict[int, dict[bytes, tuple]] = {}
        self.ecmp_groups: dict[int, list[int]] = {}
        self._port_config: dict[int, PortConfig] = {}
        self._faults: dict[int, PortFault] = {}
        self._counts: Counter = Counter()
        self._lengths: list[int] = []

    # --- ports ---------------------------------------------------------------------------------------
    @property
    def links(self) -> Mapping[int, SimLink]:
        """port -> its egress link (read-only: `plug` plugs one in)."""
        return MappingProxyType(self._links)

    @property
    def port_config(self) -> Mapping[int, PortConfig]:
        """port -> its trim and ECN thresholds (read-only: `configure_port` sets them)."""
        return MappingProxyType(self._port_config)

    def plug(self, port: object, link: SimLink) -> None:
        """Make `link` the egress link of `port` (from 1)."""
        port = self._port_number(port)
        self._links[port] = link
        self._egress.extend([None] * (port + 1 - len(self._egress)))
        self._egress[port] = link
        self._forget()                           # the remembered decisions hold the links they send to

    def configure_port(self, port: object, config: PortConfig) -> None:
        """Trim and mark the packets leaving by `port` (from 1) by `config`'s thresholds."""
        port = self._port_number(port)
        self._port_config[port] = config
        self._configs.extend([None] * (port + 1 - len(self._configs)))
        self._configs[port] = config
        self._forget()                           # the remembered decisions hold their ports' thresholds

    def _port_number(self, port: object) -> int:
        """`port`, checked to be a port number."""
        if not isinstance(port, int) or isinstance(port, bool) or port < 1:
            raise ValueError(f"switch {self.name}: port {port!r} is not a port number (an int from 1)")
        return port

    @property
    def faults(self) -> Mapping[int, PortFault]:
        """port -> its fault (read-only: `set_fault` sets and clears them)."""
        return MappingProxyType(self._faults)

    @property
    def counters(self) -> Counter:
        """A snapshot of the switch's counters: rx, no_route_drops, fault_drops(_data), queue_drops,
        trimmed, ecn_marked (those that ever counted)."""
        snapshot: Counter = Counter()
        if self._rx:
            snapshot["rx"] = self._rx
        snapshot.update(self._counts)
        return snapshot

    # --- tables ----------------------------------------------------------------------------------
    @property
    def usid_local(self) -> frozenset:
        """The 48-bit locator+uSID prefixes this switch consumes (shifts past)."""
        return frozenset(int.from_bytes(head, "big") for head in self._local_heads)

    def add_local(self, prefix: int) -> None:
        """Consume the uSID of 48-bit locator+uSID `prefix` (the usid_local table)."""
        self._local_heads.add(self._local_head(prefix))
        self._forget()

    def _local_head(self, prefix: int) -> bytes:
        """The first LOCAL_BYTES of the addresses 48-bit usid_local `prefix` matches."""
        if not 0 <= prefix < 1 << (8 * LOCAL_BYTES):
            raise ValueError(f"switch {self.name}: usid_local prefix {prefix:#x} is not {8 * LOCAL_BYTES} bits")
        return prefix.to_bytes(LOCAL_BYTES, "big")

    def add_route(self, prefix: int, length: int, action: tuple) -> None:
        """LPM entry: `prefix` is the full 128-bit value with its top `length` bits significant."""
        self._put_route(prefix, length, action)
        self._routes_changed()

    def _put_route(self, prefix: int, length: int, action: tuple) -> None:
        """Store an LPM entry; `_routes_changed` must follow before the next lookup."""
        if not 0 <= prefix < 1 << ADDR_BITS or not 0 <= length <= ADDR_BITS:
            raise ValueError(f"switch {self.name}: route {prefix:#x}/{length} is not an IPv6 prefix")
        table = self.routes.get(length)
        if table is None:
            table = self.routes[length] = {}
        table[prefix_key(prefix.to_bytes(ADDR_BYTES, "big"), length)] = action

    def _routes_changed(self) -> None:
        """The prefix lengths in lookup order, and no remembered decision: after routes were stored."""
        self._lengths = sorted(self.routes, reverse=True)
        self._forget()

    def clear_routes(self) -> None:
        """Empty the routing and ECMP tables."""
        self.routes = {}
        self.ecmp_groups = {}
        self._lengths = []
        self._forget()

    def lookup(self, dst: int) -> tuple | None:
        """The action of the longest matching prefix of IPv6 address `dst`, or None."""
        if not 0 <= dst < 1 << ADDR_BITS:
            raise ValueError(f"switch {self.name}: {dst:#x} is not an IPv6 address")
        return self._lookup_address(dst.to_bytes(ADDR_BYTES, "big"))

    def _lookup_address(self, addr: bytes) -> tuple | None:
        """`lookup` of the 16-byte address `addr`: each prefix is read from the bytes it spans (a
        /48 from six), not from the whole address as one 128-bit integer."""
        for length in self._lengths:
            action = self.routes[length].get(prefix_key(addr, length))
            if action is not None:
                return action
        return None

    def install(self, entries) -> None:
        """Apply controller TableEntry objects (docs/design.md table and action names). The lookup
        order and the remembered decisions are made over once, after the last entry (or the first
        bad one): a fat-tree switch is given an entry per host."""
        actions: dict[tuple, tuple] = {}
        try:
            for e in entries:
                self._install_entry(e, actions)
        finally:
            self._routes_changed()

    def _install_entry(self, e, actions: dict[tuple, tuple]) -> None:
        """Apply one TableEntry; `_routes_changed` must follow before the next lookup. `actions`:
        the route actions stored so far, each kept once (most of a switch's routes share a few)."""
        table: str = e.table
        if table == _ROUTING:
            self._install_route(e, actions)
        elif table == _USID_LOCAL:
            self._local_heads.add(self._local_head(e.match["dst_usid_prefix"]))
        elif table == _ECMP_MEMBER:
            members = self.ecmp_groups.setdefault(e.match["group"], [])
            index = e.match["index"]
            members.extend([0] * (index + 1 - len(members)))
            members[index] = e.params["port"]
        elif table == _PORT_CONFIG:
            p = e.params
            self.configure_port(e.match["port"], PortConfig(p["trim_threshold"], p["ecn_threshold"],
                                                            bool(p["host_facing"]), p["ecn_max_threshold"]))
        elif table == _PORT_FAULT:
            drop = e.params.get("drop_ppm")
            self.set_fault(e.match["port"], drop_all=drop is None, drop_prob=(drop or 0) / 1e6)
        else:
            raise ValueError(f"switch {self.name}: table {table} is not in the contract")

    def _install_route(self, e, actions: dict[tuple, tuple]) -> None:
        value, length = e.match["dst_addr"]
        kind: str = e.action
        if kind == _FORWARD:
            action: tuple = ("forward", e.params["port"])
        elif kind == _ECMP_SELECT:
            action = ("ecmp", e.params["group"])
        else:
            raise ValueError(f"switch {self.name}: routing action {kind} is not in the contract")
        self._put_route(value, length, actions.setdefault(action, action))

    def set_fault(self, port: int, drop_all: bool = False, drop_prob: float = 0.0) -> None:
        """Install (or, with the defaults, clear) a fault on egress `port`."""
        if not drop_all and not drop_prob:
            self._faults.pop(port, None)
        else:
            self._faults[port] = PortFault(drop_all, drop_prob)
        self._faulty = bool(self._faults)

    def _forget(self) -> None:
        """Drop the remembered forwarding decisions (a table changed, or a port was plugged or configured)."""
        self._decisions = {}
        self._flows = {}

    # --- pipeline ------------------------------------------------------------------------------------
    def receive(self, pkt: Packet, in_port: int) -> None:
        """Ingress: uSID shift, routing, ECMP, faults, trim/ECN, then the egress queue."""
        self._rx += 1
        route = self._decisions.get(pkt.dst)
        if route is None:
            route = self._decide(pkt.dst)
        shifted = route.shifted
        if shifted is not None:
            if isinstance(pkt, DataPacket):             # written natively when compiled (most packets)
                pkt.dst = shifted
            elif isinstance(pkt, Sack):                 # and a SACK's (most of the rest)
                pkt.dst = shifted
            else:
                pkt.dst = shifted
        port = route.port
        if route.forward:                                # one egress port: its link and thresholds at hand
            link = route.link
            cfg = route.config
        else:
            members = route.members
            if members is None:
                self._counts["no_route_drops"] += 1
                return
            port = self._ecmp_port(pkt, members)
            egress = self._egress
            link = egress[port] if 0 < port < len(egress) else None
            configs = self._configs
            cfg = configs[port] if 0 < port < len(configs) else None
        if self._faulty:
            fault = self._faults.get(port)
            if fault is not None and (fault.drop_all or self.sim.rng.random() < fault.drop_prob):
                self._counts["fault_drops"] += 1
                if isinstance(pkt, DataPacket):
                    self._counts["fault_drops_data"] += 1
                return
        if link is None:
            raise KeyError(f"switch {self.name}: port {port} has no link")
        if pkt.dscp in _HIGH_DSCP:                       # control and trimmed headers: nothing to classify
            priority = _HIGH
        else:
            priority = self._classify(pkt, cfg, link)
        if not link.send(pkt, priority):
            self._counts["queue_drops"] += 1

    def _decide(self, dst_bytes: bytes) -> _Route:
        """What to do with the packets to address `dst_bytes`: the uSID shift and the routing lookup,
        with the egress port's link and thresholds, remembered until a table or a port changes."""
        addr = dst_bytes
        shifted: bytes | None = None
        if addr[:LOCAL_BYTES] in self._local_heads:
            addr = shifted = usid_shift(addr)
        action = self._lookup_address(addr)
        route: _Route
        if action is None:
            route = _Route(shifted, False, 0, None, None, None)
        elif action[0] == "ecmp":
            route = _Route(shifted, False, 0, None, None, self.ecmp_groups[action[1]])
        else:
            port: int = action[1]
            egress = self._egress
            configs = self._configs
            if 0 < port < len(egress):
                route = _Route(shifted, True, port, egress[port], configs[port] if port < len(configs) else None,
                               None)
            else:                                        # no such port: refused per packet, naming it
                route = _Route(shifted, True, port, None, None, None)
        if len(self._decisions) >= MAX_REMEMBERED:
            self._decisions = {}
        self._decisions[dst_bytes] = route
        return route

    def _ecmp_port(self, pkt: Packet, members: list[int]) -> int:
        """The member port the packet's flow (source, destination, entropy) hashes to, remembered."""
        key = (pkt.src, pkt.dst, pkt.ev)
        port = self._flows.get(key)
        if port is None:
            port = members[entropy_member(pkt.src, pkt.dst, pkt.ev, len(members))]   # the P4 program's hash
            if len(self._flows) >= MAX_REMEMBERED:
                self._flows = {}
            self._flows[key] = port
        return port

    def _classify(self, pkt: Packet, cfg: PortConfig | None, link: SimLink) -> int:
        """Trim or mark `pkt` (not of a HIGH priority DSCP: `receive` sent those on) by the LOW queue
        occupancy of `link` and its port's thresholds `cfg` (None: neither); return its egress priority."""
        if not isinstance(pkt, DataPacket):
            return _HIGH
        if cfg is None:
            return _LOW
        queued: int = link.low_queued                   # link.low_depth_now, without the call
        if pkt.dscp in _TRIMMABLE_DSCP and not pkt.flags & _TRIMMED and queued >= cfg.trim_threshold:
            pkt.payload = b""
            pkt.flags |= constants.MRCH_FLAG_TRIMMED
            pkt.dscp = constants.DSCP_TRIMMED_LASTHOP if cfg.host_facing else constants.DSCP_TRIMMED
            self._counts["trimmed"] += 1
            return _HIGH
        low = cfg.ecn_threshold
        if pkt.ecn != constants.ECN_NOT_ECT and not cfg.host_facing and queued >= low and (
                queued >= cfg.ecn_max_threshold
                or self.sim.rng.random() * (cfg.ecn_max_threshold - low) < queued - low):
            pkt.ecn = constants.ECN_CE
            self._counts["ecn_marked"] += 1
        return _LOW
