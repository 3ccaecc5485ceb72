"""BMv2 trace logs read back per packet: what the pipeline did with each frame it received.

simple_switch_grpc run with `--log-file F --log-level trace --dump-packet-data N` writes one record
per line, `[time] [bmv2] [level] [thread T] [pkt.copy] [cxt 0] message`, some followed by lines of
their own (the key looked up, the entry hit). `parse_log` groups the records of each packet id and
keeps what an engineer asks first: the parser states and headers, each table applied (hit or miss,
the entry), the actions, the egress port, the priority and a truncation set in the pipeline, and
where the packet was dropped or sent. The frames BMv2 dumps on receive and on send ("Received
packet of length ..."; "Sending packet of length ...") are attached to their packets so that traces
can be matched with the frames a case sent and received.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from wire import constants

_RECORD = re.compile(r"^\[(?P<time>[\d:.]+)\] \[[^\]]*\] \[(?P<level>\w)\] \[thread (?P<thread>\d+)\] "
                     r"(?:\[(?P<packet>\d+\.\d+)\] \[cxt \d+\] )?(?P<message>.*)$")
_SOURCE = re.compile(r"^\S+\(\d+\) ")                 # "mrc.p4(315) " before a primitive or condition
_RECEIVED = re.compile(r"^Received packet of length (\d+) on port (\d+): ([0-9a-f]*)")
_SENDING = re.compile(r"^Sending packet of length (\d+) on port (\d+): ([0-9a-f]*)")
_TRUNCATE = re.compile(r"truncate\((.+)\)")
SYNTHETIC_TABLE = re.compile(r"^tbl_")               # tables p4c makes for code outside any table
PRIORITY_NAMES = {constants.PRIORITY_HIGH: "high", constants.PRIORITY_LOW: "low"}
SYNTHETIC_ACTION = re.compile(r"^[A-Za-z_]*\d+$|^NoAction$")    # p4c's mrc345, and NoAction


class LogError(ValueError):
    """A BMv2 log could not be read."""


@dataclass
class TableApplied:
    """One table applied to a packet: its key, hit or miss, the entry hit and the action run."""

    table: str
    key: list[str] = field(default_factory=list)      # "dst_addr : fc00..."
    hit: Optional[bool] = None
    entry: list[str] = field(default_factory=list)    # the entry's match lines and its action line
    action: str = ""

    @property
    def synthetic(self) -> bool:
        """True for a table p4c made to hold straight-line code (tbl_*)."""
        return bool(SYNTHETIC_TABLE.match(self.table))


@dataclass
class PacketTrace:
    """What BMv2 logged for one packet id."""

    packet_id: str
    in_port: Optional[int] = None
    received: bytes = b""                 # the frame as BMv2 dumped it on receive (maybe cut)
    parser_states: list[str] = field(default_factory=list)
    headers: list[str] = field(default_factory=list)
    parser_error: str = ""
    tables: list[TableApplied] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    conditions: list[str] = field(default_factory=list)
    egress_spec: Optional[int] = None     # "Egress port is N" at the end of ingress
    truncate: Optional[str] = None        # the length given to truncate()
    dropped: str = ""                     # where: "end of ingress", "end of egress"
    transmitted: list[tuple[int, int]] = field(default_factory=list)   # (port, size)
    sent: list[bytes] = field(default_factory=list)                    # frames dumped on send

    @property
    def applied(self) -> list[TableApplied]:
        """The program's own tables (not p4c's synthetic ones)."""
        return [t for t in self.tables if not t.synthetic]

    def priority(self, priorities: dict[str, int]) -> Optional[int]:
        """The priority the last action that sets one gave this packet (`priorities`: action_priorities)."""
        value = None
        for action in self.actions:
            value = priorities.get(action, value)
        return value

    @property
    def program_actions(self) -> list[str]:
        """Actions of the program in order, without p4c's synthetic ones and NoAction."""
        return [a for a in self.actions if not SYNTHETIC_ACTION.match(a.split(".")[-1])]


@dataclass
class _Record:
    level: str
    thread: str
    packet: Optional[str]
    message: str
    more: list[str]


def _records(text: str) -> list[_Record]:
    """Log lines grouped into records (a record's continuation lines have no prefix)."""
    records: list[_Record] = []
    for line in text.splitlines():
        m = _RECORD.match(line)
        if m:
            records.append(_Record(m["level"], m["thread"], m["packet"], m["message"], []))
        elif line.strip() and records:
            records[-1].more.append(line.strip())
    return records


def _key_lines(lines: list[str]) -> list[str]:
    return [re.sub(r"\s+:\s+", " : ", line[1:].strip()) for line in lines if line.startswith("*")]


def parse_log(text: str) -> list[PacketTrace]:
    """The packets of a BMv2 trace log, in the order BMv2 first logged them."""
    traces: dict[tuple[int, str], PacketTrace] = {}
    run = 0                                    # bumped when a restarted switch numbers packets from 0 again
    received: list[tuple[int, bytes]] = []     # dumped on receive, not yet given to a packet
    pending_send: dict[str, PacketTrace] = {}  # thread -> packet whose "Transmitting" awaits its dump
    for rec in _records(text):
        msg = rec.message
        if rec.packet is None:
            m = _RECEIVED.match(msg)
            if m:
                received.append((int(m[2]), bytes.fromhex(m[3])))
                continue
            m = _SENDING.match(msg)
            if m and rec.thread in pending_send:
                pending_send.pop(rec.thread).sent.append(bytes.fromhex(m[3]))
            continue
        if msg.startswith("Processing packet received") and (run, rec.packet) in traces:
            run += 1
        trace = traces.get((run, rec.packet))
        if trace is None:
            trace = traces[(run, rec.packet)] = PacketTrace(rec.packet)
        _apply(trace, rec, received)
        if msg.startswith("Transmitting packet"):
            pending_send[rec.thread] = trace
    return list(traces.values())


def _apply(trace: PacketTrace, rec: _Record, received: list[tuple[int, bytes]]) -> None:
    """Add one record of a packet to its trace."""
    msg = _SOURCE.sub("", rec.message)
    if m := re.match(r"Processing packet received on port (\d+)", msg):
        trace.in_port = int(m[1])
        for i, (port, frame) in enumerate(received):       # the oldest dump of this port is this packet's
            if port == trace.in_port:
                trace.received = frame
                del received[i]
                break
    elif m := re.match(r"Parser '[^']*' entering state '([^']*)'", msg):
        trace.parser_states.append(m[1])
    elif m := re.match(r"Extracting header '([^']*)'", msg):
        trace.headers.append(m[1])
    elif m := re.match(r"Exception while parsing: (\S+)", msg):
        trace.parser_error = m[1]
    elif m := re.match(r"Applying table '([^']*)'", msg):
        trace.tables.append(TableApplied(m[1]))
    elif msg.startswith("Looking up key") and trace.tables:
        trace.tables[-1].key = _key_lines(rec.more)
    elif m := re.match(r"Table '([^']*)': (hit|miss)", msg):
        if not trace.tables or trace.tables[-1].table != m[1]:
            trace.tables.append(TableApplied(m[1]))
        trace.tables[-1].hit = m[2] == "hit"
    elif msg.startswith("Dumping entry") and trace.tables:
        trace.tables[-1].entry = [" ".join(line.split()) for line in rec.more if line != "Match key:"]
    elif m := re.match(r"Action entry is (\S+)", msg):
        if trace.tables:
            trace.tables[-1].action = m[1]
    elif m := re.match(r"Action (\S+)$", msg):
        trace.actions.append(m[1])
    elif m := re.match(r'Condition "(.*)" \(\w+\) is (true|false)', msg):
        trace.conditions.append(f"{m[1]}: {m[2]}")
    elif msg.startswith("Primitive "):
        if m := _TRUNCATE.search(msg):
            trace.truncate = m[1]
    elif m := re.match(r"Egress port is (\d+)", msg):
        trace.egress_spec = int(m[1])
    elif m := re.match(r"Dropping packet at the (.*)", msg):
        trace.dropped = m[1]
    elif m := re.match(r"Transmitting packet of size (\d+) out of port (\d+)", msg):
        trace.transmitted.append((int(m[2]), int(m[1])))


def read_log(path) -> list[PacketTrace]:
    """parse_log of a file; a missing or empty file is a LogError naming it."""
    from pathlib import Path
    p = Path(path)
    if not p.exists():
        raise LogError(f"no BMv2 log at {p} (was the switch started with --log-file?)")
    traces = parse_log(p.read_text(errors="replace"))
    return traces


def action_priorities(program: dict) -> dict[str, int]:
    """Action name -> the constant it assigns to standard_metadata.priority, from a BMv2 JSON program
    (BMv2 logs that assignment without its value)."""
    out = {}
    for action in program.get("actions", []):
        for prim in action.get("primitives", []):
            params = prim.get("parameters") or []
            if (prim.get("op") == "assign" and len(params) == 2
                    and params[0].get("value") == ["standard_metadata", "priority"]
                    and params[1].get("type") == "hexstr"):
                out[action["name"]] = int(params[1]["value"], 16)
    return out


def format_trace(trace: PacketTrace, label: str = "", priorities: Optional[dict[str, int]] = None) -> str:
    """A few lines an engineer reads: parser path, tables, actions, port, priority, truncation, fate."""
    head = f"packet {trace.packet_id}" + (f" ({label})" if label else "")
    lines = [f"{head}: in on port {trace.in_port}, {len(trace.received)} bytes dumped"]
    path = " -> ".join(trace.parser_states) or "-"
    lines.append(f"  parser: {path}; headers {', '.join(trace.headers) or '-'}"
                 + (f"; error {trace.parser_error}" if trace.parser_error else ""))
    for t in trace.applied:
        state = "hit" if t.hit else "miss" if t.hit is not None else "?"
        key = "; ".join(t.key)
        lines.append(f"  table {t.table}: {state}" + (f" on {key}" if key else "") + f" -> {t.action or '-'}")
        if t.hit and t.entry:
            lines.append(f"    entry: {' | '.join(t.entry)}")
    lines.append(f"  actions: {', '.join(trace.program_actions) or '-'}")
    fate = []
    if trace.egress_spec is not None:
        fate.append(f"egress port {trace.egress_spec}" + (" (drop)" if trace.egress_spec == 511 else ""))
    prio = trace.priority(priorities or {})
    fate.append(f"priority {prio} ({PRIORITY_NAMES.get(prio, '?')})" if prio is not None
                else "priority not set (0)")
    fate.append(f"truncated to {trace.truncate}" if trace.truncate else "not truncated")
    lines.append("  " + ", ".join(fate))
    if trace.dropped:
        lines.append(f"  dropped at the {trace.dropped}")
    for port, size in trace.transmitted:
        lines.append(f"  sent out of port {port}, {size} bytes")
    return "\n".join(lines)
