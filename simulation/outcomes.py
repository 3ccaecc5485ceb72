"""What a simulation is asked to carry (`Flow`) and what it reports (`FlowOutcome`, `SimulationResult`)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Flow:
    """`size` bytes from host `src` to host `dst`, from time `start`, in messages of at most
    `message_size` bytes (None: one message); `mode` names the transport (None: the configuration's)."""

    src: str
    dst: str
    size: int
    message_size: int | None = None
    start: float = 0.0
    mode: str | None = None

    def message_sizes(self) -> list[int]:
        """The size of each of its messages, in order (an empty flow is one empty message)."""
        if self.message_size is not None and self.message_size <= 0:
            raise ValueError(f"flow {self.src} -> {self.dst}: message_size {self.message_size} is not positive")
        step = self.message_size or max(self.size, 1)
        return [min(step, self.size - off) for off in range(0, max(self.size, 1), step)]


@dataclass
class FlowOutcome:
    """What the application saw of one flow, and its connections (one per QP at each end)."""

    flow: Flow
    messages: int
    senders: list = field(default_factory=list)      # the sending end's connections
    receivers: list = field(default_factory=list)    # the receiving end's connections
    delivered: int = 0                 # messages handed over intact, the first time
    corrupted: int = 0                 # messages handed over with other bytes
    duplicates: int = 0                # messages handed over again
    acked: int = 0                     # messages the sender saw fully acknowledged
    finish: float | None = None        # when the last of its messages was handed over (None: not yet)
    acked_at: float | None = None      # when its sender saw the last of its messages acknowledged (None: not yet)

    @property
    def sender(self) -> object:
        """The sending connection (the first QP's)."""
        return self.senders[0]

    @property
    def receiver(self) -> object:
        """The receiving connection (the first QP's)."""
        return self.receivers[0]

    @property
    def exactly_once(self) -> bool:
        """Every message delivered once, bit exact, and acknowledged."""
        return (self.delivered == self.messages and not self.corrupted and not self.duplicates
                and self.acked == self.messages)

    @property
    def duration(self) -> float | None:
        """Seconds from its start to its last delivery (None: not finished)."""
        return None if self.finish is None else self.finish - self.flow.start

    @property
    def goodput_bps(self) -> float:
        """Payload bits per second from its start to its last delivery (0 when not all delivered intact)."""
        if self.finish is None or self.delivered < self.messages:
            return 0.0
        return self.flow.size * 8 / (self.finish - self.flow.start)

    @property
    def received_bytes(self) -> int:
        """Payload bytes its receiving connections took so far."""
        return sum(conn.stats["payload_bytes_received"] for conn in self.receivers)


@dataclass
class SimulationResult:
    """What one run carried: each flow's outcome, the collective's ranks, the endpoints, goodput
    samples and every endpoint event's record (`TransportEvent.as_record()` with its "host")."""

    flows: list[FlowOutcome]
    collectives: list = field(default_factory=list)     # the collective of each rank, by rank
    endpoints: dict = field(default_factory=dict)       # host -> its transport Endpoint
    goodput: list = field(default_factory=list)         # (time, bit/s of each flow since the previous sample)
    events: list[dict] = field(default_factory=list)
    end: float = 0.0

    @property
    def all_exactly_once(self) -> bool:
        """True when every flow was delivered exactly once and acknowledged."""
        return all(f.exactly_once for f in self.flows)

    @property
    def results(self) -> list:
        """The `CollectiveResult` of each rank."""
        return [c.result() for c in self.collectives]

    @property
    def ok(self) -> bool:
        """True when every rank finished its collective with a bit-exact result."""
        return all(r.ok for r in self.results)

    def ev_events(self, host: str, **match) -> list[dict]:
        """The EV state changes of `host` whose fields equal `match` (e.g. new="ASSUMED_BAD")."""
        return [e for e in self.events if e["host"] == host and e["kind"] == "ev_state"
                and all(e.get(k) == v for k, v in match.items())]
