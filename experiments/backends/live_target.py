"""The faults' view of a running testbed network (`experiments.faults.FaultTarget`), and how it
reaches the host agents' EV control operations.

Links, port faults, switch kills and slow switches are `testbed.network.TestbedNetwork` verbs. The
switch_ev_deny fault (`experiments.ev_deny`) talks to the agents: `LiveTarget.ev_controls` opens
each `AgentControl` it was given, one at a time, and hands out (host, its `EvControls`). An
`AgentControl` is anything with a `host` and an `open()` that returns a context manager giving
`request(op, **fields)` (`wire.control.ControlClient`'s verb) or raises ControlError when
the agent cannot be reached. On one machine that is `ControlSocket`, a unix socket the agent
serves (`ControlSockets` makes them for a case); agents on the servers of a cluster need another
kind, reaching their sockets there.
"""
from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import dataclass
from typing import ContextManager, Iterator, Protocol

from experiments.ev_deny import EvControls
from wire.control import ControlClient, ControlError

log = logging.getLogger("mrc.experiments")


class AgentControl(Protocol):
    """How to reach one host agent's EV control operations while it runs."""

    host: str

    def open(self) -> ContextManager[EvControls]:
        """A connection to the agent's operations (closed on leaving it); ControlError when the
        agent cannot be reached (it finished already, say)."""


@dataclass(frozen=True)
class ControlSocket:
    """The control socket (`path`) of an agent of `host` on this machine (`host_agent.agent --control`)."""

    host: str
    path: str

    def open(self) -> ControlClient:
        return ControlClient(self.path)


class ControlSockets:
    """The control sockets of one case's agents, in a folder of their own with a short path (a
    unix socket path holds at most 107 bytes); `remove` deletes it."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="mrc-ctl-")
        self.agents: list[ControlSocket] = []

    def add(self, net, host: str, agent: str) -> str:
        """The socket path agent `agent` of `host` serves (to pass it as `--control`); this machine
        reaches it where `net.agent_control` says (the same path, or one forwarded from a server)."""
        served, reached = net.agent_control(host, agent, self.folder)
        self.agents.append(ControlSocket(host, reached))
        return served

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class LiveTarget:
    """The faults' view of a running TestbedNetwork; `agents` are the agents serving the EV
    control operations (`AgentControl`s)."""

    def __init__(self, net, agents: list[AgentControl] | None = None) -> None:
        self.net = net
        self.topo = net.topology
        self.agents = list(agents or [])

    def set_link(self, a: str, b: str, up: bool) -> None:
        self.net.set_link(a, b, up)

    def set_port_fault(self, switch: str, port: int, drop_all: bool, drop_prob: float) -> None:
        self.net.set_port_fault(switch, port, drop_all, drop_prob)

    def switch_ports(self, switch: str) -> list[int]:
        return self.topo.ports_of(switch)

    def port_towards(self, switch: str, neighbour: str) -> int:
        if not self.topo.is_switch(switch):
            raise KeyError(f"{switch} is not a switch")
        return self.topo.port_towards(switch, neighbour)

    def ev_controls(self) -> Iterator[tuple[str, EvControls]]:
        """Each agent's EV control operations, open while handed out; an agent that cannot be
        reached is passed over with a warning."""
        for agent in self.agents:
            try:
                connection = agent.open()
            except ControlError as err:
                log.warning("%s: %s", agent.host, err)
                continue
            with connection as controls:
                yield agent.host, controls

    def set_switch_alive(self, switch: str, alive: bool) -> None:
        if alive:
            raise RuntimeError("restarting a killed switch is not supported on the mininet backend")
        self.net.kill_switch(switch)

    def set_switch_rate(self, switch: str, share: float) -> None:
        """Through the egress queue rates of the switch and of its neighbour switches
        (`testbed.network.TestbedNetwork.set_switch_rate`)."""
        self.net.set_switch_rate(switch, share)
