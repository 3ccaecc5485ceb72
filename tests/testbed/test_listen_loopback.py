"""Every server the testbed starts listens only on loopback or a unix socket.

A small network is brought up with the testbed's own bring-up (model target always; BMv2 when
`simple_switch_grpc` is installed). For every process of the run (switch processes, host shells —
all carry the run's marker), the sockets it owns (its /proc/<pid>/fd) are looked up in its
namespace's /proc/<pid>/net/{tcp,tcp6,udp,udp6,unix}: a TCP listener or a bound UDP socket must
be on a loopback address (127.0.0.0/8, ::1). A wildcard address (0.0.0.0, ::) is accepted only
inside a namespace whose every address is a loopback one (BMv2's thrift server inside its
switch's namespace, which has no address: only its own loopback can reach it). Each switch must
have a listening unix socket (P4Runtime), which shows that the check sees the servers at all.
Mininet: root and mnexec; serial.
"""
from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import pytest

from tests.conftest import requires_bmv2, requires_mininet
from controller.installer import DEFAULT_BMV2_JSON
from testbed.network import TestbedNetwork
from testbed.registry import marked_processes
from topologies.builders import leaf_spine

pytestmark = [pytest.mark.integration, pytest.mark.slow, requires_mininet]

TCP_LISTEN = "0A"
UDP_UNCONNECTED = "07"
UNIX_ACCEPTING = 0x00010000          # __SO_ACCEPTCON in /proc/net/unix flags


def socket_inodes(pid: int) -> set[int]:
    """Inodes of the sockets process `pid` holds open."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def decode_address(text: str) -> tuple[ipaddress._BaseAddress, int]:
    """/proc/net/tcp{,6} address ("0100007F:1F90") -> (address, port)."""
    hex_addr, hex_port = text.split(":")
    raw = bytes.fromhex(hex_addr)
    words = [raw[i:i + 4][::-1] for i in range(0, len(raw), 4)]     # each 32-bit word is host-endian
    return ipaddress.ip_address(b"".join(words)), int(hex_port, 16)


def inet_servers(pid: int) -> list[tuple[str, ipaddress._BaseAddress, int]]:
    """(protocol, address, port) of every TCP listener and bound UDP socket of process `pid`."""
    mine = socket_inodes(pid)
    found = []
    for proto, state in (("tcp", TCP_LISTEN), ("tcp6", TCP_LISTEN), ("udp", UDP_UNCONNECTED),
                         ("udp6", UDP_UNCONNECTED)):
        try:
            lines = Path(f"/proc/{pid}/net/{proto}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == state and int(fields[9]) in mine:
                address, port = decode_address(fields[1])
                found.append((proto, address, port))
    return found


def unix_listeners(pid: int) -> list[str]:
    """Paths (or abstract names) of the listening unix sockets of process `pid`."""
    mine = socket_inodes(pid)
    found = []
    for line in Path(f"/proc/{pid}/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[3], 16) & UNIX_ACCEPTING and int(fields[6]) in mine:
            found.append(fields[7] if len(fields) > 7 else "<unnamed>")
    return found


def namespace_addresses(pid: int) -> set[ipaddress._BaseAddress]:
    """Every local address of the network namespace of process `pid` (IPv4 and IPv6)."""
    addresses = set()
    for line in Path(f"/proc/{pid}/net/if_inet6").read_text().splitlines():
        addresses.add(ipaddress.ip_address(bytes.fromhex(line.split()[0])))
    lines = Path(f"/proc/{pid}/net/fib_trie").read_text().splitlines()
    for previous, line in zip(lines, lines[1:]):
        if "/32 host LOCAL" in line:
            addresses.add(ipaddress.ip_address(previous.split()[-1]))
    return addresses


def check_process(pid: int) -> list[str]:
    """What process `pid` serves on a non-loopback address (empty when nothing)."""
    problems = []
    servers = inet_servers(pid)
    if not servers:
        return problems
    only_loopback = all(a.is_loopback for a in namespace_addresses(pid))
    comm = Path(f"/proc/{pid}/comm").read_text().strip()
    for proto, address, port in servers:
        if address.is_loopback:
            continue
        if address.is_unspecified and only_loopback:
            continue
        problems.append(f"{comm} (pid {pid}) serves {proto} on {address}:{port}"
                        f"{'' if only_loopback else ' in a namespace with outside addresses'}")
    return problems


@pytest.fixture(params=["model", pytest.param("bmv2", marks=requires_bmv2)])
def network(request, tmp_path):
    if request.param == "bmv2" and not DEFAULT_BMV2_JSON.exists():
        pytest.skip(f"BMv2 needs the compiled program {DEFAULT_BMV2_JSON} (make -C p4)")
    net = TestbedNetwork(leaf_spine(2, 1, 1), request.param, run_dir=tmp_path, progress=lambda _: None)
    try:
        net.start()
        yield net
    finally:
        assert net.stop() == []


def test_every_server_of_the_run_listens_only_on_loopback_or_unix_sockets(network):
    processes = marked_processes(network.registry.state.run_id)
    switch_pids = {switch.process.pid for switch in network.net.switches}
    assert switch_pids <= {p["pid"] for p in processes}, "switch processes must carry the run marker"
    problems = []
    for proc in processes:
        try:
            problems += check_process(proc["pid"])
        except FileNotFoundError:          # a short-lived process that ended meanwhile
            continue
    assert problems == []
    for switch in network.net.switches:
        listeners = unix_listeners(switch.process.pid)
        assert listeners, f"{switch.name}: no listening unix socket (P4Runtime) found"


def test_the_checker_flags_a_server_on_a_non_loopback_address():
    """The same check, on a listener of our own in the root namespace: a wildcard address is
    refused there (this machine has outside addresses), loopback is accepted."""
    import socket
    if all(a.is_loopback for a in namespace_addresses(os.getpid())):
        pytest.skip("this namespace has no outside address to be exposed on")
    for host, expect_problem in (("127.0.0.1", False), ("0.0.0.0", True)):
        server = socket.socket()
        try:
            server.bind((host, 0))
            server.listen(1)
            problems = check_process(os.getpid())
            assert bool(problems) == expect_problem, problems
        finally:
            server.close()
