"""Numbers of the MRC wire format shared by hosts, the switch model and the P4 program.

docs/design.md explains every field; p4/mrc.p4 repeats these values as constants
and tests/p4/test_constants_match_p4.py checks the two agree.
"""
from typing import Final

# --- Ethernet / IPv6 / UDP -------------------------------------------------
ETHERTYPE_IPV6: Final = 0x86DD
IPPROTO_UDP: Final = 17
ROCEV2_UDP_PORT: Final = 4791          # destination port of every MRC and baseline packet

ETH_LEN: Final = 14
IPV6_LEN: Final = 40
UDP_LEN: Final = 8
BTH_LEN: Final = 12
RETH_LEN: Final = 16
MRCH_LEN: Final = 12                   # MRC data extension header, follows RETH
ICRC_LEN: Final = 4                    # RoCEv2 trailer on data packets (zero, not checked)

# Offsets from the start of the Ethernet frame.
IPV6_OFFSET: Final = ETH_LEN
UDP_OFFSET: Final = IPV6_OFFSET + IPV6_LEN              # 54
BTH_OFFSET: Final = UDP_OFFSET + UDP_LEN                # 62
RETH_OFFSET: Final = BTH_OFFSET + BTH_LEN               # 74
MRCH_OFFSET: Final = RETH_OFFSET + RETH_LEN             # 90
DATA_HEADERS_LEN: Final = MRCH_OFFSET + MRCH_LEN        # 102: a trimmed data packet is this long
TRIMMED_UDP_LEN: Final = DATA_HEADERS_LEN - UDP_OFFSET  # 48: IPv6 payload length and UDP length after a trim

# --- BTH opcodes -------------------------------------------------------------
OP_RC_WRITE_ONLY: Final = 0x0A         # every data packet: BTH + RETH + MRCH + payload + ICRC
OP_SACK: Final = 0xC0                  # MRC control opcodes (InfiniBand manufacturer-specific range)
OP_NACK: Final = 0xC1
OP_PROBE: Final = 0xC2
OP_PROBE_REPLY: Final = 0xC3
CONTROL_OPCODES: Final = (OP_SACK, OP_NACK, OP_PROBE, OP_PROBE_REPLY)

# --- Fixed header values and MRC control header sizes (docs/design.md) ---------
IPV6_HOP_LIMIT: Final = 64
BTH_PKEY_DEFAULT: Final = 0xFFFF       # default InfiniBand partition key
BTH_TVER: Final = 0                    # BTH transport header version
SACK_LEN: Final = 28
NACK_LEN: Final = 20
PROBE_LEN: Final = 8
PROBE_REPLY_LEN: Final = 12
SACK_FLAG_ECN_ECHO: Final = 0x01       # SACK flags: the acknowledged data packet arrived with CE
WINDOW_PENALTY_UNITS: Final = 256      # a SACK's window penalty p (0..255) asks for p/256 of the sender's largest window

# --- MRCH flags ----------------------------------------------------------------
MRCH_FLAG_TRIMMED: Final = 0x01        # set by the switch that cut the payload
MRCH_FLAG_RETX: Final = 0x02           # set by the sender on a retransmission

# --- DSCP traffic classes (upper 6 bits of the IPv6 traffic class) -------------
DSCP_TRIMMABLE: Final = 10             # MRC data: trimmed when the egress queue is at the threshold
DSCP_NO_TRIM: Final = 12               # baseline (RoCE-style) data: tail-dropped, never trimmed
DSCP_TRIMMABLE_RETX: Final = 14        # MRC retransmitted data: trimmable
DSCP_TRIMMED_LASTHOP: Final = 44       # set by the switch: trimmed on the port facing the destination host
DSCP_TRIMMED: Final = 46               # set by the switch: trimmed in the fabric
DSCP_CONTROL: Final = 48               # SACK, NACK, probes
HIGH_PRIORITY_DSCP: Final = (DSCP_CONTROL, DSCP_TRIMMED, DSCP_TRIMMED_LASTHOP)
TRIMMABLE_DSCP: Final = (DSCP_TRIMMABLE, DSCP_TRIMMABLE_RETX)

# --- ECN (lower 2 bits of the IPv6 traffic class) ------------------------------
ECN_NOT_ECT: Final = 0b00
ECN_ECT0: Final = 0b10                 # senders mark data ECT(0)
ECN_CE: Final = 0b11                   # switches mark congestion

# --- Switch egress priorities (BMv2: --priority-queues 2) ----------------------
PRIORITY_LOW: Final = 0
PRIORITY_HIGH: Final = 1
NUM_PRIORITIES: Final = 2

# --- NACK reasons ----------------------------------------------------------------
NACK_TRIMMED: Final = 1
NACK_TRIMMED_LASTHOP: Final = 2
NACK_NO_BITMAP: Final = 3
NACK_NO_PKT_BUFFER: Final = 4
NACK_PSN_OUT_OF_WINDOW: Final = 5
NACK_UNEXPECTED: Final = 6

# --- Entropy value -------------------------------------------------------------
EV_BITS: Final = 32                    # low 16 bits -> UDP source port, high 16 bits -> IPv6 flow label


def ev_to_fields(ev: int) -> tuple[int, int]:
    """Return (udp_source_port, flow_label) carrying a 32-bit entropy value."""
    return ev & 0xFFFF, (ev >> 16) & 0xFFFF


def ev_from_fields(udp_sport: int, flow_label: int) -> int:
    """Return the 32-bit entropy value striped across a UDP source port and flow label."""
    return ((flow_label & 0xFFFF) << 16) | (udp_sport & 0xFFFF)


# --- Addressing (see topologies/addressing.py) ------------------------------------
LOCATOR_PREFIX: Final = 0xFC00         # 32-bit locator of plane p is fc00:<p>::/32
USID_BITS: Final = 16
MAX_USIDS: Final = 6                   # 128 - 32 bits of locator = six 16-bit uSIDs
SWITCH_USID_BASE: Final = 0x0100       # switch i (in topology order) has uSID 0x0100 + i
HOST_USID_BASE: Final = 0x1000         # host i (in topology order) has uSID 0x1000 + i
