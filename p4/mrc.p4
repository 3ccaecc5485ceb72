/* -*- P4_16 -*- */
/*
 * MRC switch pipeline for BMv2 simple_switch_grpc (v1model).
 *
 * Static SRv6 uSID source routes (MRC mode) or ECMP (baseline mode), a
 * per-port fault table, and queue-depth trimming with a strict high-priority
 * egress queue. The names of controls, tables, keys, actions, parameters,
 * counters and registers are the "Switch pipeline contract" of
 * docs/design.md; the numbers repeat wire/constants.py
 * (tests/p4/test_constants_match_p4.py checks both). p4/README.md explains the
 * design. Run BMv2 with `-- --priority-queues 2`.
 */
#include <core.p4>
#include <v1model.p4>

/*************************************************************************
*********************** C O N S T A N T S  *******************************
*************************************************************************/

/* Shared with wire/constants.py (same names, same values). */
const bit<16> ETHERTYPE_IPV6        = 0x86DD;
const bit<8>  IPPROTO_UDP           = 17;
const bit<16> ROCEV2_UDP_PORT       = 4791;
const bit<32> UDP_OFFSET            = 54;     /* Ethernet + IPv6 headers */
const bit<32> DATA_HEADERS_LEN      = 102;    /* a trimmed data packet is this long */
const bit<16> TRIMMED_UDP_LEN       = 48;     /* IPv6 payload length = UDP length after a trim */

const bit<8>  OP_RC_WRITE_ONLY      = 0x0A;
const bit<8>  OP_SACK               = 0xC0;
const bit<8>  OP_NACK               = 0xC1;
const bit<8>  OP_PROBE              = 0xC2;
const bit<8>  OP_PROBE_REPLY        = 0xC3;

const bit<8>  MRCH_FLAG_TRIMMED     = 0x01;

const bit<6>  DSCP_TRIMMABLE        = 10;
const bit<6>  DSCP_NO_TRIM          = 12;
const bit<6>  DSCP_TRIMMABLE_RETX   = 14;
const bit<6>  DSCP_TRIMMED_LASTHOP  = 44;
const bit<6>  DSCP_TRIMMED          = 46;
const bit<6>  DSCP_CONTROL          = 48;

const bit<2>  ECN_NOT_ECT           = 0b00;
const bit<2>  ECN_CE                = 0b11;

const bit<3>  PRIORITY_LOW          = 0;
const bit<3>  PRIORITY_HIGH         = 1;

/* Local to the P4 program. */
const bit<4>  IPV6_VERSION          = 6;
const bit<32> NUM_PORTS             = 512;    /* size of every per-port counter and register */
const bit<32> PPM_MAX               = 999999; /* uniform draw in [0, PPM_MAX] */
const bit<32> DROP_ALWAYS_PPM       = 1000000;
const bit<32> DEPTH_BUCKETS         = 32;     /* queue_depth_seen cells per port: depth 0..30, 31+ */
const bit<32> DEPTH_BUCKET_LAST     = 31;

/*************************************************************************
*********************** H E A D E R S  ***********************************
*************************************************************************/

typedef bit<9>   port_t;
typedef bit<48>  mac_addr_t;
typedef bit<128> ipv6_addr_t;

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header ipv6_t {
    bit<4>      version;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<20>     flow_label;
    bit<16>     payload_len;
    bit<8>      next_hdr;
    bit<8>      hop_limit;
    ipv6_addr_t src_addr;
    ipv6_addr_t dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* InfiniBand Base Transport Header (RoCEv2). */
header bth_t {
    bit<8>  opcode;
    bit<8>  flags;        /* SE, M, pad count, transport version */
    bit<16> p_key;
    bit<8>  reserved;
    bit<24> dest_qp;
    bit<8>  ack_req;      /* A bit and 7 reserved bits */
    bit<24> psn;
}

/* RDMA Extended Transport Header. */
header reth_t {
    bit<64> virtual_addr;
    bit<32> r_key;
    bit<32> dma_len;
}

/* MRC data extension header. */
header mrch_t {
    bit<8>  flags;
    bit<8>  reserved;
    bit<16> message_id;
    bit<32> message_len;
    bit<32> timestamp_us;
}

struct headers_t {
    ethernet_t ethernet;
    ipv6_t     ipv6;
    udp_t      udp;
    bth_t      bth;
    reth_t     reth;
    mrch_t     mrch;
}

struct metadata_t {
    bit<16> ecmp_group;
    bit<16> ecmp_index;
    bit<32> fault_drop_ppm;   /* 0: no fault on the egress port */
    bit<1>  port_configured;  /* port_config hit: trimming and marking enabled */
    bit<19> trim_threshold;
    bit<19> ecn_threshold;
    bit<19> ecn_max_threshold;
    bit<1>  host_facing;
    bit<1>  queued_low;       /* counted in queued_low, released in egress */
}

/*
 * Low-priority packets between ingress and egress, per egress port: the
 * queue estimate that ingress reads (README: "Where the depth is read").
 * Declared at the top level so that egress can release what ingress counted.
 */
@name("MrcIngress.queued_low")
register<bit<32>>(NUM_PORTS) queued_low;

/*************************************************************************
*********************** P A R S E R  *************************************
*************************************************************************/

parser MrcParser(packet_in packet,
                 out headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

    state start {
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV6: parse_ipv6;
            default: accept;
        }
    }

    state parse_ipv6 {
        packet.extract(hdr.ipv6);
        transition select(hdr.ipv6.version, hdr.ipv6.next_hdr) {
            (IPV6_VERSION, IPPROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            ROCEV2_UDP_PORT: parse_bth;
            default: accept;
        }
    }

    state parse_bth {
        packet.extract(hdr.bth);
        transition select(hdr.bth.opcode) {
            OP_RC_WRITE_ONLY: parse_reth;
            default: accept;
        }
    }

    state parse_reth {
        packet.extract(hdr.reth);
        transition parse_mrch;
    }

    state parse_mrch {
        packet.extract(hdr.mrch);
        transition accept;
    }
}

/*************************************************************************
************   C H E C K S U M    V E R I F I C A T I O N   *************
*************************************************************************/

control MrcVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }   /* IPv6 has no header checksum; MRC sends UDP checksum 0 */
}

/*************************************************************************
**************  I N G R E S S   P R O C E S S I N G   *******************
*************************************************************************/

control MrcIngress(inout headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {

    counter(NUM_PORTS, CounterType.packets_and_bytes) rx;
    counter(NUM_PORTS, CounterType.packets_and_bytes) malformed_drops;
    counter(NUM_PORTS, CounterType.packets_and_bytes) no_route_drops;
    counter(NUM_PORTS, CounterType.packets_and_bytes) fault_drops;
    counter(NUM_PORTS, CounterType.packets_and_bytes) trimmed;
    counter(NUM_PORTS, CounterType.packets_and_bytes) ecn_marked;
    /* Low-priority packets by the queue depth they saw at the trim/ECN decision:
     * cell port * DEPTH_BUCKETS + min(depth, DEPTH_BUCKET_LAST). */
    counter(NUM_PORTS * DEPTH_BUCKETS, CounterType.packets_and_bytes) queue_depth_seen;

    /* --- forwarding ---------------------------------------------------- */

    action usid_shift() {
        hdr.ipv6.dst_addr = hdr.ipv6.dst_addr[127:96] ++ hdr.ipv6.dst_addr[79:0] ++ 16w0;
    }

    action forward(port_t port) {
        standard_metadata.egress_spec = port;
    }

    action ecmp_select(bit<16> group, bit<16> size) {
        meta.ecmp_group = group;
        hash(meta.ecmp_index, HashAlgorithm.crc16, 16w0,
             { hdr.ipv6.src_addr, hdr.ipv6.dst_addr, hdr.ipv6.next_hdr,
               hdr.udp.src_port, hdr.udp.dst_port },
             size);
    }

    action drop_no_route() {
        no_route_drops.count((bit<32>) standard_metadata.ingress_port);
        mark_to_drop(standard_metadata);
    }

    table usid_local {
        key = { hdr.ipv6.dst_addr[127:80] : exact @name("dst_usid_prefix"); }
        actions = { usid_shift; NoAction; }
        const default_action = NoAction();
        size = 64;
    }

    table routing {
        key = { hdr.ipv6.dst_addr : lpm @name("dst_addr"); }
        actions = { forward; ecmp_select; @defaultonly drop_no_route; }
        const default_action = drop_no_route();
        size = 1024;
    }

    table ecmp_member {
        key = {
            meta.ecmp_group : exact @name("group");
            meta.ecmp_index : exact @name("index");
        }
        actions = { forward; @defaultonly drop_no_route; }
        const default_action = drop_no_route();
        size = 1024;
    }

    /* --- per-port fault and queue configuration ------------------------ */

    action fault_drop() {
        meta.fault_drop_ppm = DROP_ALWAYS_PPM;
    }

    action fault_drop_random(bit<32> drop_ppm) {
        meta.fault_drop_ppm = drop_ppm;
    }

    /* ECN marks with a probability that rises from 0 at ecn_threshold to 1 at
     * ecn_max_threshold (equal thresholds: a step). */
    action set_port_config(bit<19> trim_threshold, bit<19> ecn_threshold, bit<1> host_facing,
                           bit<19> ecn_max_threshold) {
        meta.port_configured = 1;
        meta.trim_threshold = trim_threshold;
        meta.ecn_threshold = ecn_threshold;
        meta.ecn_max_threshold = ecn_max_threshold;
        meta.host_facing = host_facing;
    }

    table port_fault {
        key = { standard_metadata.egress_spec : exact @name("port"); }
        actions = { fault_drop; fault_drop_random; NoAction; }
        const default_action = NoAction();
        size = NUM_PORTS;
    }

    table port_config {
        key = { standard_metadata.egress_spec : exact @name("port"); }
        actions = { set_port_config; NoAction; }
        const default_action = NoAction();
        size = NUM_PORTS;
    }

    /* --- drops ----------------------------------------------------------- */

    @hidden action drop_malformed() {
        malformed_drops.count((bit<32>) standard_metadata.ingress_port);
        mark_to_drop(standard_metadata);
    }

    @hidden action drop_fault() {
        fault_drops.count((bit<32>) standard_metadata.egress_spec);
        mark_to_drop(standard_metadata);
    }

    /* --- queueing: trim, mark, or enqueue ------------------------------ */

    @hidden action trim() {
        truncate(DATA_HEADERS_LEN);
        hdr.mrch.flags = hdr.mrch.flags | MRCH_FLAG_TRIMMED;
        hdr.ipv6.dscp = (meta.host_facing == 1) ? DSCP_TRIMMED_LASTHOP : DSCP_TRIMMED;
        hdr.ipv6.payload_len = TRIMMED_UDP_LEN;
        hdr.udp.length = TRIMMED_UDP_LEN;
        hdr.udp.checksum = 0;
        standard_metadata.priority = PRIORITY_HIGH;
        trimmed.count((bit<32>) standard_metadata.egress_spec);
    }

    @hidden action mark_ecn() {
        hdr.ipv6.ecn = ECN_CE;
        ecn_marked.count((bit<32>) standard_metadata.egress_spec);
    }

    @hidden action count_depth_seen(bit<32> depth) {
        bit<32> bucket = (depth < DEPTH_BUCKET_LAST) ? depth : DEPTH_BUCKET_LAST;
        queue_depth_seen.count((bit<32>) standard_metadata.egress_spec * DEPTH_BUCKETS + bucket);
    }

    @hidden action enqueue_high() {
        standard_metadata.priority = PRIORITY_HIGH;
    }

    /* Read and write in one action: BMv2 makes an action's register accesses atomic. */
    @hidden action enqueue_low() {
        bit<32> port = (bit<32>) standard_metadata.egress_spec;
        bit<32> depth;
        queued_low.read(depth, port);
        queued_low.write(port, depth + 1);
        standard_metadata.priority = PRIORITY_LOW;
        meta.queued_low = 1;
    }

    apply {
        rx.count((bit<32>) standard_metadata.ingress_port);

        /* 1. Malformed or unknown: never forwarded half-parsed. */
        if (standard_metadata.parser_error != error.NoError
                || !hdr.ipv6.isValid()
                || hdr.ipv6.version != IPV6_VERSION
                || !hdr.udp.isValid()
                || (bit<32>) hdr.ipv6.payload_len + UDP_OFFSET != standard_metadata.packet_length
                || hdr.udp.length != hdr.ipv6.payload_len) {
            drop_malformed();
            return;
        }

        /* 2-4. Source route (uSID shift) or ECMP, then the egress port. */
        usid_local.apply();
        bool routed = false;
        switch (routing.apply().action_run) {
            forward: { routed = true; }
            ecmp_select: { routed = ecmp_member.apply().hit; }
        }
        if (!routed) {
            return;    /* dropped and counted by drop_no_route */
        }

        /* 5. Fault injection on the egress port. */
        port_fault.apply();
        if (meta.fault_drop_ppm != 0) {
            bit<32> draw;
            random(draw, 32w0, PPM_MAX);
            if (draw < meta.fault_drop_ppm) {
                drop_fault();
                return;
            }
        }

        /* 6-7. Queue estimate: trim, mark ECN, choose the priority. */
        port_config.apply();
        bit<32> depth;
        queued_low.read(depth, (bit<32>) standard_metadata.egress_spec);

        bool high_priority = hdr.ipv6.dscp == DSCP_CONTROL
                || hdr.ipv6.dscp == DSCP_TRIMMED
                || hdr.ipv6.dscp == DSCP_TRIMMED_LASTHOP
                || (hdr.bth.isValid()
                    && (hdr.bth.opcode == OP_SACK || hdr.bth.opcode == OP_NACK
                        || hdr.bth.opcode == OP_PROBE || hdr.bth.opcode == OP_PROBE_REPLY));
        bool trimmable = hdr.mrch.isValid()
                && (hdr.ipv6.dscp == DSCP_TRIMMABLE || hdr.ipv6.dscp == DSCP_TRIMMABLE_RETX)
                && (hdr.mrch.flags & MRCH_FLAG_TRIMMED) == 0;
        bool ect = hdr.ipv6.ecn != ECN_NOT_ECT && hdr.ipv6.ecn != ECN_CE;

        if (high_priority) {
            enqueue_high();
        } else {
            if (meta.port_configured == 1) {
                count_depth_seen(depth);
            }
            if (trimmable && meta.port_configured == 1
                    && depth >= (bit<32>) meta.trim_threshold) {
                trim();
            } else {
                /* ECN ramp: below ecn_threshold never, from ecn_max_threshold always,
                 * in between with probability (depth - low) / (high - low). */
                if (ect && meta.port_configured == 1 && meta.host_facing == 0
                        && depth >= (bit<32>) meta.ecn_threshold) {
                    if (depth >= (bit<32>) meta.ecn_max_threshold) {
                        mark_ecn();
                    } else {
                        bit<32> span = (bit<32>) meta.ecn_max_threshold - (bit<32>) meta.ecn_threshold;
                        bit<32> draw;
                        random(draw, 32w0, span - 1);
                        if (draw < depth - (bit<32>) meta.ecn_threshold) {
                            mark_ecn();
                        }
                    }
                }
                enqueue_low();
            }
        }
    }
}

/*************************************************************************
****************  E G R E S S   P R O C E S S I N G   *******************
*************************************************************************/

control MrcEgress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {

    counter(NUM_PORTS, CounterType.packets_and_bytes) tx;

    /*
     * Release the slot this packet held in queued_low. The estimate is also
     * capped by what BMv2 reports still queued (+1 for a packet between the
     * ingress count and its enqueue), so that packets tail-dropped by a full
     * queue, which never reach egress, cannot inflate it for ever.
     */
    @hidden action release_low_slot() {
        bit<32> port = (bit<32>) standard_metadata.egress_port;
        bit<32> depth;
        queued_low.read(depth, port);
        bit<32> left = (depth == 0) ? 32w0 : depth - 1;
        bit<32> bound = (bit<32>) standard_metadata.deq_qdepth + 1;
        queued_low.write(port, (left < bound) ? left : bound);
    }

    apply {
        tx.count((bit<32>) standard_metadata.egress_port);
        if (meta.queued_low == 1) {
            release_low_slot();
        }
    }
}

/*************************************************************************
*************   C H E C K S U M    C O M P U T A T I O N   **************
*************************************************************************/

control MrcComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }   /* UDP checksum stays 0: a trim would invalidate it */
}

/*************************************************************************
***********************  D E P A R S E R  *******************************
*************************************************************************/

control MrcDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv6);
        packet.emit(hdr.udp);
        packet.emit(hdr.bth);
        packet.emit(hdr.reth);
        packet.emit(hdr.mrch);
    }
}

/*************************************************************************
***********************  S W I T C H  ***********************************
*************************************************************************/

V1Switch(
    MrcParser(),
    MrcVerifyChecksum(),
    MrcIngress(),
    MrcEgress(),
    MrcComputeChecksum(),
    MrcDeparser()
) main;
