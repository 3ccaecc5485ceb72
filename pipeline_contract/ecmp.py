"""The ECMP member choice of the P4 program, in Python: CRC-16 over the 5-tuple, modulo the group size.

The switch model forwards with it, and netsim's switches and fault planning (following the
baseline's flows) through `entropy_member`; the conformance runner and tests predict BMv2 with it.
"""
from __future__ import annotations

import struct

from wire.constants import IPPROTO_UDP, ROCEV2_UDP_PORT


def _crc16_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC16_TABLE = _crc16_table()


def crc16(data: bytes) -> int:
    """CRC-16/ARC (BMv2 `HashAlgorithm.crc16`): poly 0x8005 reflected, init 0, no final xor."""
    crc = 0
    table = _CRC16_TABLE
    for b in data:
        crc = (crc >> 8) ^ table[(crc ^ b) & 0xFF]
    return crc


def ecmp_hash_input(src: bytes, dst: bytes, next_header: int, sport: int, dport: int) -> bytes:
    """The 37 bytes the ECMP hash covers: src addr, dst addr, next header, UDP sport, UDP dport."""
    return src + dst + struct.pack("!BHH", next_header, sport, dport)


def ecmp_index(src: bytes, dst: bytes, next_header: int, sport: int, dport: int, size: int) -> int:
    """The ECMP member index the P4 program picks for these header fields in a group of `size`."""
    if size == 0:
        return 0
    return crc16(ecmp_hash_input(src, dst, next_header, sport, dport)) % size


def entropy_member(src: bytes, dst: bytes, ev: int, size: int) -> int:
    """The member index a data packet from `src` to `dst` with entropy value `ev` takes in a group
    of `size`: MRC and the baseline send UDP to the RoCEv2 port with the EV's low 16 bits as the
    source port (docs/design.md), so the hash sees those."""
    return ecmp_index(src, dst, IPPROTO_UDP, ev & 0xFFFF, ROCEV2_UDP_PORT, size)
