"""Numbers of the MRC wire format shared by hosts, the switch model and the P4 program.

docs/design.md explains every field; p4/mrc.p4 repeats these values as constants
and tests/p4/test_constants_match_p4.py checks the two agree.
"""

# --- Ethernet / IPv6 / UDP -------------------------------------------------
ETHERTYPE_IPV6 = 0x86DD
IPPROTO_UDP = 17
ROCEV2_UDP_PORT = 4791          # destination port of every MRC and baseline packet

ETH_LEN = 14
IPV6_LEN = 40
UDP_LEN = 8
BTH_LEN = 12
RETH_LEN = 16
MRCH_LEN = 12                   # MRC data extension header, follows RETH
ICRC_LEN = 4                    # RoCEv2 trailer on data packets (zero, not checked)

# Offsets from the start of the Ethernet frame.
IPV6_OFFSET = ETH_LEN
UDP_OFFSET = IPV6_OFFSET + IPV6_LEN              # 54
BTH_OFFSET = UDP_OFFSET + UDP_LEN                # 62
RETH_OFFSET = BTH_OFFSET + BTH_LEN               # 74
MRCH_OFFSET = RETH_OFFSET + RETH_LEN             # 90
DATA_HEADERS_LEN = MRCH_OFFSET + MRCH_LEN        # 102: a trimmed data packet is this long
TRIMMED_UDP_LEN = DATA_HEADERS_LEN - UDP_OFFSET  # 48: IPv6 payload length and UDP length after a trim

# --- BTH opcodes -------------------------------------------------------------
OP_RC_WRITE_ONLY = 0x0A         # every data packet: BTH + RETH + MRCH + payload + ICRC
OP_SACK = 0xC0                  # MRC control opcodes (InfiniBand manufacturer-specific range)
OP_NACK = 0xC1
OP_PROBE = 0xC2
OP_PROBE_REPLY = 0xC3
CONTROL_OPCODES = (OP_SACK, OP_NACK, OP_PROBE, OP_PROBE_REPLY)

# --- Fixed header values and MRC control header sizes (docs/design.md) ---------
IPV6_HOP_LIMIT = 64
BTH_PKEY_DEFAULT = 0xFFFF       # default InfiniBand partition key
BTH_TVER = 0                    # BTH transport header version
SACK_LEN = 28
NACK_LEN = 20
PROBE_LEN = 8
PROBE_REPLY_LEN = 12
SACK_FLAG_ECN_ECHO = 0x01       # SACK flags: the acknowledged data packet arrived with CE

# --- MRCH flags ----------------------------------------------------------------
MRCH_FLAG_TRIMMED = 0x01        # set by the switch that cut the payload
MRCH_FLAG_RETX = 0x02           # set by the sender on a retransmission

# --- DSCP traffic classes (upper 6 bits of the IPv6 traffic class) -------------
DSCP_TRIMMABLE = 10             # MRC data: trimmed when the egress queue is at the threshold
DSCP_NO_TRIM = 12               # baseline (RoCE-style) data: tail-dropped, never trimmed
DSCP_TRIMMABLE_RETX = 14        # MRC retransmitted data: trimmable
DSCP_TRIMMED_LASTHOP = 44       # set by the switch: trimmed on the port facing the destination host
DSCP_TRIMMED = 46               # set by the switch: trimmed in the fabric
DSCP_CONTROL = 48               # SACK, NACK, probes
HIGH_PRIORITY_DSCP = (DSCP_CONTROL, DSCP_TRIMMED, DSCP_TRIMMED_LASTHOP)
TRIMMABLE_DSCP = (DSCP_TRIMMABLE, DSCP_TRIMMABLE_RETX)

# --- ECN (lower 2 bits of the IPv6 traffic class) ------------------------------
ECN_NOT_ECT = 0b00
ECN_ECT0 = 0b10                 # senders mark data ECT(0)
ECN_CE = 0b11                   # switches mark congestion

# --- Switch egress priorities (BMv2: --priority-queues 2) ----------------------
PRIORITY_LOW = 0
PRIORITY_HIGH = 1
NUM_PRIORITIES = 2

# --- NACK reasons ----------------------------------------------------------------
NACK_TRIMMED = 1
NACK_TRIMMED_LASTHOP = 2
NACK_NO_BITMAP = 3
NACK_NO_PKT_BUFFER = 4
NACK_PSN_OUT_OF_WINDOW = 5
NACK_UNEXPECTED = 6

# --- Entropy value -------------------------------------------------------------
EV_BITS = 32                    # low 16 bits -> UDP source port, high 16 bits -> IPv6 flow label


def ev_to_fields(ev: int) -> tuple[int, int]:
    """Return (udp_source_port, flow_label) carrying a 32-bit entropy value."""
    return ev & 0xFFFF, (ev >> 16) & 0xFFFF


def ev_from_fields(udp_sport: int, flow_label: int) -> int:
    """Return the 32-bit entropy value striped across a UDP source port and flow label."""
    return ((flow_label & 0xFFFF) << 16) | (udp_sport & 0xFFFF)


# --- Addressing (see topologies/addressing.py) ------------------------------------
LOCATOR_PREFIX = 0xFC00         # 32-bit locator of plane p is fc00:<p>::/32
USID_BITS = 16
MAX_USIDS = 6                   # 128 - 32 bits of locator = six 16-bit uSIDs
SWITCH_USID_BASE = 0x0100       # switch i (in topology order) has uSID 0x0100 + i
HOST_USID_BASE = 0x1000         # host i (in topology order) has uSID 0x1000 + i
