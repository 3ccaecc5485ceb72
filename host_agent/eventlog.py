"""The agent's event log: one JSON object per line.

Every record has `t` (UNIX time in seconds, float, so that logs of several agents line up) and
`kind`. Kinds written by the agent:

- `start`: rank, host, mode, workload, NICs (written once the NICs are open, before any wait for
  the start).
- `begin`: the workload began; `start_at`: the UNIX time it was asked to begin at (0: at once).
- `ev_state`, `ev_backup`, `retransmit`, `trim_nack`, `go_back`, `send_complete`, `recv_complete`,
  `ev_replace`, `probe_result`: transport events (`host_agent.transport.events`, each `as_record()`),
  with their fields (`retransmit` has `cause`; the last two follow control-socket requests).
- `goodput`: every `goodput_interval`: `interval` (s); `rx_bytes`: payload bytes the transport
  placed (first copies, packet by packet); `rx_msg_bytes`: bytes of whole messages delivered;
  `tx_bytes`: bytes of own messages fully acknowledged; `rx_bps`/`tx_bps` from rx_bytes/tx_bytes;
  `rx_first`/`rx_last` (UNIX time, only when rx_bytes > 0): the interval's first and last receive
  that brought new payload.
- `counters`: frames sent/received, malformed and stray frames dropped, retransmissions by cause.
- `result`: the collective's CollectiveResult fields, plus `cpu_s` (agent CPU seconds from the
  workload's start to its end), and `error` when a connection failed (a packet ran out of its
  retries; the `conn_failed` event has the details).
- `malformed`: the first few dropped malformed frames (`nic`, `reason`, `length`).
- `rejected`: the first few well-formed packets the transport refused (`nic`, `reason`, `packet`).
- `stop`: why the agent stopped (`reason`) and its exit status.
"""
from __future__ import annotations

import enum
import json
import math
from pathlib import Path
from typing import IO, Any


def _clean(value: Any) -> Any:
    """JSON-safe value: NaN/inf become None, bytes become hex, sets become lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, (set, frozenset, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, enum.Enum):
        return value.value          # EvState and the like
    return value


def _default(value: Any) -> Any:
    """JSON form of what json does not know: bytes as hex, sets as lists, enums by value."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, (set, frozenset)):
        return list(value)
    raise TypeError(f"cannot write {type(value).__name__} to the event log")


_ENCODE = json.JSONEncoder(separators=(",", ":"), default=_default, allow_nan=False).encode   # built once:
_ENCODE_CLEAN = json.JSONEncoder(separators=(",", ":")).encode       # json.dumps with options builds one per call


class LogWriter:
    """Appends JSON-lines records to a file (or any text stream)."""

    def __init__(self, stream: IO[str], close: bool = False) -> None:
        self._stream = stream
        self._close = close
        self.records = 0

    @classmethod
    def open(cls, path: str) -> "LogWriter":
        """A log writing to `path` (truncated), line-buffered-ish: flushed by `flush`/`close`."""
        return cls(open(path, "w", buffering=1 << 16), close=True)

    def write(self, t: float, kind: str, **fields: Any) -> None:
        """Append one record."""
        record = {"t": t, "kind": kind}
        record.update(fields)
        try:                                   # fast path: plain values (bytes/sets/enums via _default)
            line = _ENCODE(record)
        except ValueError:                     # NaN or infinity somewhere: write them as null
            line = _ENCODE_CLEAN(_clean(record))
        self._stream.write(line + "\n")
        self.records += 1

    def flush(self) -> None:
        """Push buffered records to the file."""
        self._stream.flush()

    def close(self) -> None:
        """Flush and, when the log owns its file, close it."""
        self.flush()
        if self._close:
            self._stream.close()


def _records(lines) -> list[dict]:
    """The JSON objects among `lines`; a line that is not one (cut short, garbled) is skipped."""
    records = []
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def read_log(path: str | Path) -> list[dict]:
    """Every record of a JSON-lines log; a missing file has none, and a line that is not a JSON
    object (the last one of a killed agent, say) is skipped."""
    try:
        with open(path, "rb") as f:
            return _records(f.read().splitlines())
    except FileNotFoundError:
        return []


class LogFollower:
    """Reads a log while its agent still writes it: each `read()` returns the records of the whole
    lines written since the last one."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._offset = 0

    def read(self) -> list[dict]:
        """The records added since the last call (none while the file does not exist)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except OSError:
            return []
        complete = chunk[:chunk.rfind(b"\n") + 1]
        self._offset += len(complete)
        return _records(complete.splitlines())
