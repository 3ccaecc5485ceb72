"""A switch between veth pairs in two network namespaces, for tests and benchmarks (needs root).

`VethLab(prefix, nports)` creates namespace `<prefix>sw` holding the switch ends `<prefix>s<N>`
and namespace `<prefix>h` holding the host ends `<prefix>h<N>`, IPv6 disabled on both (no router
solicitations or MLD reports), all links up. `open_port` opens a raw-socket port inside a
namespace; `popen` starts a process inside one. `destroy` removes both namespaces, which
removes the veths with them. Use it as a context manager so that clean-up always runs.
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import threading
from typing import Optional

from refswitch.ports import RawPort

CLONE_NEWNET = 0x40000000


class VethLabError(RuntimeError):
    """A namespace, link or socket of the lab could not be set up."""


def _ip(*args: str, netns: Optional[str] = None) -> None:
    cmd = ["ip"] + (["-n", netns] if netns else []) + list(args)
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise VethLabError(f"{' '.join(cmd)}: {done.stderr.strip()}")


def _sysctl(netns: str, key: str, value: str) -> None:
    done = subprocess.run(["ip", "netns", "exec", netns, "sysctl", "-qw", f"{key}={value}"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise VethLabError(f"sysctl {key}={value} in {netns}: {done.stderr.strip()}")


def in_netns(netns: str, fn):
    """Run `fn()` on a thread that has entered network namespace `netns`; return its result."""
    result: dict = {}

    def body():
        try:
            fd = os.open(f"/var/run/netns/{netns}", os.O_RDONLY)
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    raise VethLabError(f"setns({netns}): {os.strerror(ctypes.get_errno())}")
            finally:
                os.close(fd)
            result["value"] = fn()
        except BaseException as exc:  # handed to the caller's thread
            result["error"] = exc

    t = threading.Thread(target=body, name=f"netns-{netns}")
    t.start()
    t.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


class VethLab:
    """Two namespaces joined by `nports` veth pairs: switch port N <-> host end N."""

    def __init__(self, prefix: str, nports: int):
        if len(prefix) > 8:
            raise ValueError(f"lab prefix {prefix!r} too long (interface names have 15 characters)")
        self.prefix = prefix
        self.nports = nports
        self.switch_ns = f"{prefix}sw"
        self.host_ns = f"{prefix}h"
        self.created: list[str] = []

    def switch_if(self, port: int) -> str:
        """Switch-side interface of port `port`."""
        return f"{self.prefix}s{port}"

    def host_if(self, port: int) -> str:
        """Host-side interface facing port `port`."""
        return f"{self.prefix}h{port}"

    def create(self) -> "VethLab":
        """Create the namespaces and the veth pairs (removing everything again on failure)."""
        try:
            for ns in (self.switch_ns, self.host_ns):
                _ip("netns", "add", ns)
                self.created.append(ns)
                _sysctl(ns, "net.ipv6.conf.all.disable_ipv6", "1")
                _sysctl(ns, "net.ipv6.conf.default.disable_ipv6", "1")
                _ip("link", "set", "lo", "up", netns=ns)
            for port in range(1, self.nports + 1):
                s, h = self.switch_if(port), self.host_if(port)
                _ip("link", "add", s, "netns", self.switch_ns, "type", "veth", "peer", "name", h,
                    "netns", self.host_ns)
                for ns, ifname in ((self.switch_ns, s), (self.host_ns, h)):
                    _ip("link", "set", ifname, "mtu", "9000", netns=ns)
                    _ip("link", "set", ifname, "up", netns=ns)
        except Exception:
            self.destroy()
            raise
        return self

    def destroy(self) -> None:
        """Delete the namespaces this lab created (their veths go with them)."""
        for ns in reversed(self.created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.created = []

    def open_port(self, port: int, side: str = "host") -> RawPort:
        """A raw-socket port on the host end (or switch end) of veth `port`."""
        ns, ifname = ((self.host_ns, self.host_if(port)) if side == "host"
                      else (self.switch_ns, self.switch_if(port)))
        return in_netns(ns, lambda: RawPort(port, ifname).open())

    def popen(self, side: str, argv: list[str], **kwargs) -> subprocess.Popen:
        """Start `argv` inside the switch or host namespace."""
        ns = self.switch_ns if side == "switch" else self.host_ns
        return subprocess.Popen(["ip", "netns", "exec", ns] + argv, **kwargs)

    def __enter__(self) -> "VethLab":
        return self.create()

    def __exit__(self, *exc) -> None:
        self.destroy()
