"""One NIC of an agent: a non-blocking AF_PACKET raw socket bound to one interface.

The socket sees only frames that may be MRC (IPv6, UDP, destination port 4791): a classic BPF
filter drops everything else in the kernel (router solicitations, MLD reports, stray traffic).
The agent's own transmissions are not looped back to it. `quiet_kernel` keeps the kernel from
answering MRC packets: with IPv6 disabled on the interface it neither sends ICMPv6 port
unreachable for UDP port 4791 nor any solicitation or report of its own, while raw sockets
still see every frame.
"""
from __future__ import annotations

import ctypes
import errno
import socket
import struct
from pathlib import Path

from wire import constants

ETH_P_IPV6 = constants.ETHERTYPE_IPV6
SO_ATTACH_FILTER = 26
SO_RCVBUFFORCE = 33
SO_SNDBUFFORCE = 32
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
PACKET_OUTGOING = 4
RECV_BUFFER = 1 << 16
_LINK_ERRNOS = (errno.ENETDOWN, errno.ENXIO, errno.ENODEV)    # interface down or gone

SKF_AD_PKTTYPE = -0x1000 + 4                            # BPF ancillary load: the packet type
PACKET_HOST = 0                                         # addressed to this interface's MAC

# BPF: accept frames addressed to this NIC (not broadcast, multicast, other hosts' or our own
# outgoing ones) that are IPv6 / UDP / destination port 4791; drop the rest.
_BPF_PROGRAM = [
    (0x20, 0, 0, SKF_AD_PKTTYPE & 0xFFFFFFFF),          # ld #pkttype
    (0x15, 0, 7, PACKET_HOST),                          # jeq #PACKET_HOST  else drop
    (0x28, 0, 0, 12),                                   # ldh [12]          ethertype
    (0x15, 0, 5, constants.ETHERTYPE_IPV6),                     # jeq #0x86dd       else drop
    (0x30, 0, 0, constants.IPV6_OFFSET + 6),                    # ldb [20]          IPv6 next header
    (0x15, 0, 3, constants.IPPROTO_UDP),                        # jeq #17           else drop
    (0x28, 0, 0, constants.UDP_OFFSET + 2),                     # ldh [56]          UDP destination port
    (0x15, 0, 1, constants.ROCEV2_UDP_PORT),                    # jeq #4791         else drop
    (0x06, 0, 0, 0x40000),                              # ret #262144       accept
    (0x06, 0, 0, 0),                                    # ret #0            drop
]


class NicError(OSError):
    """A NIC that cannot be opened or set up; the message names the interface."""


def interface_mtu(ifname: str) -> int:
    """The MTU of interface `ifname` (from /sys/class/net)."""
    try:
        return int(Path(f"/sys/class/net/{ifname}/mtu").read_text())
    except OSError as err:
        raise NicError(f"interface {ifname}: cannot read its MTU ({err.strerror}); does it exist "
                       f"in this network namespace?") from None


def interface_mac(ifname: str) -> bytes:
    """The MAC address of interface `ifname` (from /sys/class/net)."""
    try:
        text = Path(f"/sys/class/net/{ifname}/address").read_text().strip()
    except OSError as err:
        raise NicError(f"interface {ifname}: cannot read its MAC ({err.strerror}); does it exist "
                       f"in this network namespace?") from None
    return bytes.fromhex(text.replace(":", ""))


def quiet_kernel(ifname: str) -> bool:
    """Disable IPv6 on `ifname` (this namespace) so the kernel never answers MRC packets.

    Returns True when IPv6 is now disabled on it, False when that could not be done.
    """
    knob = Path(f"/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6")
    try:
        if knob.read_text().strip() != "1":
            knob.write_text("1\n")
        return knob.read_text().strip() == "1"
    except OSError:
        return False


def _attach_filter(sock: socket.socket) -> None:
    code = b"".join(struct.pack("HBBI", *insn) for insn in _BPF_PROGRAM)
    program = ctypes.create_string_buffer(code)
    fprog = struct.pack("HL", len(_BPF_PROGRAM), ctypes.addressof(program))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


class RawNic:
    """A raw-socket NIC: send frames, receive frames (MRC candidates only), count what happens."""

    def __init__(self, index: int, ifname: str, mac: bytes, buffer_bytes: int = 4 << 20) -> None:
        self.index = index
        self.ifname = ifname
        self.mac = mac
        self.tx_frames = 0
        self.tx_bytes = 0
        self.tx_errors = 0
        self.rx_frames = 0
        self.rx_bytes = 0
        self.rx_own = 0
        self.rx_errors = 0
        try:
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        except OSError as err:
            raise NicError(f"interface {ifname}: cannot open a raw socket ({err.strerror}; needs root "
                           f"or CAP_NET_RAW)") from None
        try:
            _attach_filter(sock)                 # before bind: nothing unfiltered is ever queued
            self._skip_own = True
            try:
                sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
                self._skip_own = False
            except OSError:
                pass                             # older kernels: skip them by packet type
            for opt, fallback in ((SO_RCVBUFFORCE, socket.SO_RCVBUF), (SO_SNDBUFFORCE, socket.SO_SNDBUF)):
                try:
                    sock.setsockopt(socket.SOL_SOCKET, opt, buffer_bytes)
                except OSError:
                    sock.setsockopt(socket.SOL_SOCKET, fallback, buffer_bytes)
            sock.bind((ifname, ETH_P_IPV6))
        except OSError as err:
            sock.close()
            raise NicError(f"interface {ifname}: cannot bind a raw socket ({err.strerror})") from None
        sock.setblocking(False)
        self.sock = sock
        self._buf = bytearray(RECV_BUFFER)
        self._view = memoryview(self._buf)

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, frame: bytes) -> bool:
        """Transmit one frame; False (and counted) when the kernel would not take it."""
        try:
            self.sock.send(frame)
        except (BlockingIOError, InterruptedError):
            self.tx_errors += 1
            return False
        except OSError as err:
            if err.errno in _LINK_ERRNOS or err.errno in (errno.ENOBUFS, errno.EAGAIN):
                self.tx_errors += 1
                return False
            raise
        self.tx_frames += 1
        self.tx_bytes += len(frame)
        return True

    def receive(self, limit: int = 256):
        """Yield up to `limit` received frames as memoryviews (valid until the next one is read)."""
        sock, buf, view = self.sock, self._buf, self._view
        for _ in range(limit):
            try:
                if self._skip_own:
                    n, addr = sock.recvfrom_into(buf)
                    if addr[2] == PACKET_OUTGOING:
                        self.rx_own += 1
                        continue
                else:
                    n = sock.recv_into(buf)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as err:
                if err.errno in _LINK_ERRNOS:        # the link went down: reported once, then quiet
                    self.rx_errors += 1
                    return
                raise
            self.rx_frames += 1
            self.rx_bytes += n
            yield view[:n]

    def counters(self) -> dict:
        """Frames and bytes sent and received, send errors."""
        return {"ifname": self.ifname, "tx_frames": self.tx_frames, "tx_bytes": self.tx_bytes,
                "tx_errors": self.tx_errors, "rx_frames": self.rx_frames, "rx_bytes": self.rx_bytes,
                "rx_errors": self.rx_errors}

    def close(self) -> None:
        self.sock.close()
