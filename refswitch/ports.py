"""Switch ports on AF_PACKET raw sockets, one per network interface.

A `RawPort` receives every frame arriving on its interface (not the ones it sends itself) and
sends whole Ethernet frames. Sockets are non-blocking; the switch's event loop polls them.
"""
from __future__ import annotations

import logging
import socket

log = logging.getLogger("mrc.refswitch")

ETH_P_ALL = 0x0003
PACKET_IGNORE_OUTGOING = 23     # linux/if_packet.h, Linux >= 4.20
PACKET_OUTGOING = 4             # sll_pkttype of frames this host sent
SOL_PACKET = 263               # linux/socket.h
SOCKET_BUFFER = 4 * 1024 * 1024
MAX_FRAME = 65536


class PortError(OSError):
    """A port could not be opened."""


class RawPort:
    """One switch port: P4 port number `number` bound to interface `ifname`."""

    def __init__(self, number: int, ifname: str):
        self.number = number
        self.ifname = ifname
        self.sock: socket.socket | None = None
        self._filter_outgoing = False

    def open(self) -> "RawPort":
        """Open and bind the raw socket."""
        try:
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        except PermissionError:
            raise PortError(f"port {self.number}: raw sockets need root (CAP_NET_RAW)") from None
        try:
            sock.bind((self.ifname, 0))
        except OSError as exc:
            sock.close()
            raise PortError(f"port {self.number}: cannot bind interface {self.ifname!r}: {exc.strerror}") from None
        try:
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        except OSError:
            self._filter_outgoing = True
        for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
            try:
                sock.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER)
            except OSError:
                pass
        sock.setblocking(False)
        self.sock = sock
        return self

    @property
    def raw_recv(self):
        """The socket's own recv (call with MAX_FRAME; raises BlockingIOError when empty), or None when
        this kernel cannot filter out our own frames and `recv()` must be used."""
        return None if self._filter_outgoing or self.sock is None else self.sock.recv

    def fileno(self) -> int:
        """The socket's file descriptor."""
        return self.sock.fileno()

    def recv(self) -> bytes | None:
        """One received frame, or None when none is waiting."""
        try:
            if self._filter_outgoing:
                while True:
                    frame, addr = self.sock.recvfrom(MAX_FRAME)
                    if addr[2] != PACKET_OUTGOING:
                        return frame
            return self.sock.recv(MAX_FRAME)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError as exc:       # e.g. ENETDOWN once when the link goes down: the port lives on
            log.info("port %d (%s): %s", self.number, self.ifname, exc.strerror)
            return None

    def send(self, frame: bytes) -> bool:
        """Send a frame; False when the kernel refused it (buffer full, interface down)."""
        try:
            self.sock.send(frame)
            return True
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as exc:
            log.debug("port %d (%s): send failed: %s", self.number, self.ifname, exc)
            return False

    def close(self) -> None:
        """Close the socket."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def __repr__(self) -> str:
        return f"RawPort({self.number}, {self.ifname!r})"
