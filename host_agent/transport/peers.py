"""A connection's peer: the paths to it (`PathInfo`) and who the connection is, with whom (`ConnectionId`).

Both are read per packet (a data packet's and a SACK's addresses, the peer's QP), so they are
compiled with the per-packet modules (`speedups`): the compiled build reads their fields natively.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PathInfo:
    """One path from this host to a peer.

    For MRC, `dst` is the uSID path address (``fc00:<plane>:<switch uSIDs>:<host uSID>::``);
    for the baseline it is the peer NIC address, which switches route by ECMP.
    """

    plane: int
    nic: int          # local NIC index the packets leave by
    src: bytes        # 16-byte address of that local NIC
    dst: bytes        # 16-byte destination address

    def __reduce__(self) -> tuple:
        # rebuilt from its fields: compiled, a frozen dataclass cannot be copied or unpickled by
        # setting them one by one
        return PathInfo, (self.plane, self.nic, self.src, self.dst)


@dataclass(frozen=True, slots=True)
class ConnectionId:
    """Who a connection is: the endpoint it belongs to, its peer and its queue pair numbers.

    Events carry it (`event.conn`); packets of the connection carry `remote_qp` (the peer's QP,
    also the R_Key of RETH)."""

    endpoint: str
    peer: str
    local_qp: int
    remote_qp: int
    name: str = field(init=False, compare=False)     # "<endpoint>-><peer>:<local qp>"

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", f"{self.endpoint}->{self.peer}:{self.local_qp:#x}")

    def __reduce__(self) -> tuple:
        # rebuilt from its fields, as PathInfo
        return ConnectionId, (self.endpoint, self.peer, self.local_qp, self.remote_qp)
