"""Sans-IO MRC transport and its RoCE-style baseline.

The core never touches a socket or a clock: an `Endpoint` is fed packets (`receive`) and the
time (`poll`), and returns the packets to transmit and the time it next wants to be woken.
The same code runs in a Mininet host agent (raw sockets) and on the in-process network of
`netsim`. docs/transport.md describes the algorithm and its parameters.
"""
from host_agent.transport.config import PathInfo, TransportConfig
from host_agent.transport.endpoint import Connection, Endpoint
from host_agent.transport.events import Event
from host_agent.transport.evset import EvState

__all__ = ["Connection", "Endpoint", "Event", "EvState", "PathInfo", "TransportConfig"]
