"""Collectives on real data, written as state machines over a message transport.

- `RingAllReduce`: sum of numpy arrays, reduce-scatter + all-gather, pipelined in sub-chunks.
- `AllToAll`: a distinct block of bytes between every pair of ranks.
- `BulkTransfer`: one-way bulk transfer between two ranks.

Each checks its outcome bit for bit against the expected result computed locally from the
seeded per-rank inputs and reports a `CollectiveResult`. `driver.EndpointMessenger` runs them
over the transport's Endpoint (the simulation's hosts, raw sockets in the agent process).
"""
from host_agent.collectives.allreduce import RingAllReduce
from host_agent.collectives.alltoall import AllToAll
from host_agent.collectives.base import Collective, CollectiveError, CollectiveResult, Messenger
from host_agent.collectives.transfer import BulkTransfer

KINDS = {"allreduce": RingAllReduce, "alltoall": AllToAll, "transfer": BulkTransfer}

__all__ = ["AllToAll", "BulkTransfer", "Collective", "CollectiveError", "CollectiveResult", "KINDS",
           "Messenger", "RingAllReduce", "make_collective"]


def make_collective(kind: str, rank: int, world: int, messenger: Messenger, **params) -> Collective:
    """The collective `kind` ("allreduce", "alltoall", "transfer") with its parameters."""
    try:
        cls = KINDS[kind]
    except KeyError:
        raise CollectiveError(f"unknown collective {kind!r}; known: {sorted(KINDS)}") from None
    return cls(rank, world, messenger, **params)
