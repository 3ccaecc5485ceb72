"""Sans-IO MRC transport and its RoCE-style baseline.

The core never touches a socket or a clock: an `Endpoint` is fed packets (`receive`) and the
time (`poll`), and returns the packets to transmit, the time it next wants to be woken and,
drained by the caller, typed events (`events`: messages received and sent, EV state changes,
retransmissions). The same code runs in a Mininet host agent (raw sockets) and on the
in-process network of `netsim`. Transport kinds ("mrc", "roce") come from one registry
(`kinds`); the policies a researcher plugs in (EV selection, SACK processing, dead-path
detection, congestion control) are in `policies`. docs/transport.md describes the algorithm,
its parameters and the extension points. Its per-packet modules may run compiled (`speedups`).
"""
import speedups

speedups.select()                    # before the first compiled module is imported

from host_agent.transport.peers import ConnectionId, PathInfo
from host_agent.transport.config import QP_BASE, QpNumbers, TransportConfig, connection_paths, uses_usid_paths
from host_agent.transport.endpoint import Connection, Endpoint
from host_agent.transport.events import (ConnectionFailed, EvBackup, EvStateChanged, MessageReceived, MessageSent,
                                         Retransmitted, TransportEvent, TrimNack, WentBack)
from host_agent.transport.evset import EvState
from host_agent.transport.kinds import TRANSPORTS, register_transport
from host_agent.transport.policies import Policies

__all__ = ["QP_BASE", "Connection", "ConnectionFailed", "ConnectionId", "Endpoint", "EvBackup", "EvState",
           "EvStateChanged", "MessageReceived", "MessageSent", "PathInfo", "Policies", "QpNumbers", "Retransmitted",
           "TRANSPORTS", "TransportConfig", "TransportEvent", "TrimNack", "WentBack", "connection_paths",
           "register_transport", "uses_usid_paths"]
