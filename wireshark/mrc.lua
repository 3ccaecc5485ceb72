-- Wireshark/tshark dissector for MRC (Multipath Reliable Connection) over RoCEv2, UDP port 4791.
--
-- Install:  cp wireshark/mrc.lua ~/.local/lib/wireshark/plugins/      (Wireshark, tshark)
--   or, for one run:  tshark -X lua_script:wireshark/mrc.lua -r capture.pcap
--
-- A postdissector: Wireshark's own RoCEv2 dissector still decodes BTH and RETH (the infiniband.*
-- fields keep working); then, for every UDP packet to port 4791, this adds an "MRC" tree:
--   data (BTH opcode 0x0A): the MRC header after the RETH (flags TRIMMED and RETX, message id,
--     message length, sender timestamp), the EV, the payload length;
--   control (0xC0 SACK, 0xC1 NACK, 0xC2 PROBE, 0xC3 PROBE_REPLY): every field of the header.
-- Layout: docs/design.md, "Wire format"; every field as wire/codec.py encodes it.
-- Being a postdissector, it also decodes packets whose EV put a well-known port (53, 123, ...) in the
-- UDP source port, which Wireshark hands to that port's dissector instead of RoCE, and it replaces
-- the Info column of packets cut by the capture's snapshot length, which RoCE's dissector calls
-- "[Malformed Packet]" because their payload is missing. Such a well-known port's dissector may
-- still call the packet malformed: with `-o udp.try_heuristic_first:TRUE` (Preferences > UDP >
-- "Try heuristic sub-dissectors first") a heuristic of this file gives MRC packets to RoCE first.
-- Filters: mrc, mrc.psn, mrc.qp, mrc.ev, mrc.mrch.trimmed, mrc.sack.bitmap, mrc.nack.reason, ...
-- Works with Wireshark 3.x and 4.x (Lua 5.2 to 5.4; no bit operators).

-- constants: wire/constants.py (tests/wire/test_wireshark_dissector.py checks they agree)
local C = {
    ROCEV2_UDP_PORT = 4791,
    BTH_LEN = 12,
    RETH_LEN = 16,
    MRCH_LEN = 12,
    ICRC_LEN = 4,
    OP_RC_WRITE_ONLY = 0x0A,
    OP_SACK = 0xC0,
    OP_NACK = 0xC1,
    OP_PROBE = 0xC2,
    OP_PROBE_REPLY = 0xC3,
    SACK_LEN = 28,
    NACK_LEN = 20,
    PROBE_LEN = 8,
    PROBE_REPLY_LEN = 12,
    SACK_FLAG_ECN_ECHO = 0x01,
    MRCH_FLAG_TRIMMED = 0x01,
    MRCH_FLAG_RETX = 0x02,
    NACK_TRIMMED = 1,
    NACK_TRIMMED_LASTHOP = 2,
    NACK_NO_BITMAP = 3,
    NACK_NO_PKT_BUFFER = 4,
    NACK_PSN_OUT_OF_WINDOW = 5,
    NACK_UNEXPECTED = 6,
    DSCP_TRIMMABLE = 10,
    DSCP_NO_TRIM = 12,
    DSCP_TRIMMABLE_RETX = 14,
    DSCP_TRIMMED_LASTHOP = 44,
    DSCP_TRIMMED = 46,
    DSCP_CONTROL = 48,
}
-- end constants

local OPCODE_NAMES = {
    [C.OP_RC_WRITE_ONLY] = "DATA",
    [C.OP_SACK] = "SACK",
    [C.OP_NACK] = "NACK",
    [C.OP_PROBE] = "PROBE",
    [C.OP_PROBE_REPLY] = "PROBE_REPLY",
}
local CONTROL_LEN = {
    [C.OP_SACK] = C.SACK_LEN,
    [C.OP_NACK] = C.NACK_LEN,
    [C.OP_PROBE] = C.PROBE_LEN,
    [C.OP_PROBE_REPLY] = C.PROBE_REPLY_LEN,
}
local NACK_REASONS = {
    [C.NACK_TRIMMED] = "TRIMMED",
    [C.NACK_TRIMMED_LASTHOP] = "TRIMMED_LASTHOP",
    [C.NACK_NO_BITMAP] = "NO_BITMAP",
    [C.NACK_NO_PKT_BUFFER] = "NO_PKT_BUFFER",
    [C.NACK_PSN_OUT_OF_WINDOW] = "PSN_OUT_OF_WINDOW",
    [C.NACK_UNEXPECTED] = "UNEXPECTED",
}
local DSCP_NAMES = {
    [C.DSCP_TRIMMABLE] = "TRIMMABLE",
    [C.DSCP_NO_TRIM] = "NO_TRIM (baseline)",
    [C.DSCP_TRIMMABLE_RETX] = "TRIMMABLE_RETX",
    [C.DSCP_TRIMMED_LASTHOP] = "TRIMMED_LASTHOP",
    [C.DSCP_TRIMMED] = "TRIMMED",
    [C.DSCP_CONTROL] = "CONTROL",
}
local DATA_HEADERS = C.BTH_LEN + C.RETH_LEN + C.MRCH_LEN   -- UDP payload of a trimmed packet
local SACK_BITMAP_BITS = 64
local PSN_MODULO = 16777216                                  -- PSNs are 24-bit

local mrc = Proto("mrc", "MRC (Multipath Reliable Connection)")

local F = {
    opcode = ProtoField.uint8("mrc.opcode", "Kind", base.HEX, OPCODE_NAMES),
    qp = ProtoField.uint24("mrc.qp", "Destination QP", base.HEX),
    psn = ProtoField.uint24("mrc.psn", "PSN", base.DEC),
    ev = ProtoField.uint32("mrc.ev", "Entropy value (EV)", base.HEX),
    dscp = ProtoField.uint8("mrc.dscp", "Traffic class", base.DEC, DSCP_NAMES),

    mrch = ProtoField.bytes("mrc.mrch", "MRC header (MRCH)"),
    mrch_flags = ProtoField.uint8("mrc.mrch.flags", "Flags", base.HEX),
    mrch_trimmed = ProtoField.bool("mrc.mrch.trimmed", "Trimmed", 8, nil, C.MRCH_FLAG_TRIMMED),
    mrch_retx = ProtoField.bool("mrc.mrch.retx", "Retransmission", 8, nil, C.MRCH_FLAG_RETX),
    mrch_reserved = ProtoField.uint8("mrc.mrch.reserved", "Reserved", base.HEX),
    mrch_msg_id = ProtoField.uint16("mrc.mrch.msg_id", "Message id", base.DEC),
    mrch_msg_len = ProtoField.uint32("mrc.mrch.msg_len", "Message length", base.DEC),
    mrch_tsval = ProtoField.uint32("mrc.mrch.tsval", "Sender timestamp (us)", base.DEC),
    payload_len = ProtoField.uint32("mrc.payload_len", "Payload length", base.DEC),

    sack = ProtoField.bytes("mrc.sack", "SACK header"),
    sack_cum_psn = ProtoField.uint32("mrc.sack.cum_psn", "Cumulative PSN", base.DEC),
    sack_base = ProtoField.uint32("mrc.sack.base", "SACK base PSN", base.DEC),
    sack_bitmap = ProtoField.uint64("mrc.sack.bitmap", "Bitmap", base.HEX),
    sack_received = ProtoField.string("mrc.sack.received", "PSNs received (bitmap)"),
    sack_ev_echo = ProtoField.uint32("mrc.sack.ev_echo", "EV echo", base.HEX),
    sack_flags = ProtoField.uint8("mrc.sack.flags", "Flags", base.HEX),
    sack_ecn_echo = ProtoField.bool("mrc.sack.ecn_echo", "ECN echo", 8, nil, C.SACK_FLAG_ECN_ECHO),
    sack_window_penalty = ProtoField.uint8("mrc.sack.window_penalty", "Window penalty (/256 of the largest window)",
                                          base.DEC),
    sack_reserved = ProtoField.uint16("mrc.sack.reserved", "Reserved", base.HEX),
    sack_ts_echo = ProtoField.uint32("mrc.sack.ts_echo", "Timestamp echo (us)", base.DEC),

    nack = ProtoField.bytes("mrc.nack", "NACK header"),
    nack_psn = ProtoField.uint32("mrc.nack.psn", "NACKed PSN", base.DEC),
    nack_cum_psn = ProtoField.uint32("mrc.nack.cum_psn", "Cumulative PSN", base.DEC),
    nack_ev_echo = ProtoField.uint32("mrc.nack.ev_echo", "EV echo", base.HEX),
    nack_reason = ProtoField.uint8("mrc.nack.reason", "Reason", base.DEC, NACK_REASONS),
    nack_reserved = ProtoField.uint24("mrc.nack.reserved", "Reserved", base.HEX),
    nack_ts_echo = ProtoField.uint32("mrc.nack.ts_echo", "Timestamp echo (us)", base.DEC),

    probe = ProtoField.bytes("mrc.probe", "PROBE header"),
    probe_id = ProtoField.uint32("mrc.probe.id", "Probe id", base.DEC),
    probe_tsval = ProtoField.uint32("mrc.probe.tsval", "Sender timestamp (us)", base.DEC),

    reply = ProtoField.bytes("mrc.reply", "PROBE_REPLY header"),
    reply_id = ProtoField.uint32("mrc.reply.id", "Probe id", base.DEC),
    reply_ev_echo = ProtoField.uint32("mrc.reply.ev_echo", "EV echo", base.HEX),
    reply_ts_echo = ProtoField.uint32("mrc.reply.ts_echo", "Timestamp echo (us)", base.DEC),
}
local field_list = {}
for _, field in pairs(F) do
    field_list[#field_list + 1] = field
end
mrc.fields = field_list

local E = {
    bad_length = ProtoExpert.new("mrc.bad_length", "MRC packet length disagrees with its kind",
                                 expert.group.MALFORMED, expert.severity.ERROR),
    cut = ProtoExpert.new("mrc.cut", "Packet cut by the capture's snapshot length",
                          expert.group.UNDECODED, expert.severity.NOTE),
    dma_length = ProtoExpert.new("mrc.dma_length", "RETH DMA length differs from the payload carried",
                                 expert.group.PROTOCOL, expert.severity.WARN),
    trimmed = ProtoExpert.new("mrc.trimmed", "Trimmed by a switch",
                              expert.group.SEQUENCE, expert.severity.NOTE),
    unknown_reason = ProtoExpert.new("mrc.nack.unknown_reason", "Unknown NACK reason",
                                     expert.group.PROTOCOL, expert.severity.WARN),
}
mrc.experts = { E.bad_length, E.cut, E.dma_length, E.trimmed, E.unknown_reason }

local ipv6_flow = Field.new("ipv6.flow")
local ipv6_dscp = Field.new("ipv6.tclass.dscp")
local udp_srcport = Field.new("udp.srcport")   -- not pinfo.src_port: the RoCE dissector resets it
local udp_dstport = Field.new("udp.dstport")
local udp_length = Field.new("udp.length")
local UDP_DSTPORT_TO_PAYLOAD = 6                -- destination port at UDP offset 2, payload at 8
local UDP_HEADER_LEN = 8

--- The value of the last instance of a field in this packet (the innermost header), or nil.
local function last_value(field)
    local all = { field() }
    if #all == 0 then
        return nil
    end
    return all[#all].value
end

--- True when bit `flag` (a power of two) is set in `value`.
local function has_flag(value, flag)
    return math.floor(value / flag) % 2 == 1
end

--- The 32-bit EV: IPv6 flow label (low 16 bits) above the UDP source port.
local function entropy_value()
    local flow, sport = last_value(ipv6_flow), last_value(udp_srcport)
    if flow == nil or sport == nil then
        return nil
    end
    return (flow % 65536) * 65536 + sport
end

--- PSNs whose bit is set in the 64-bit SACK bitmap (bit i = base + i), as "a, b, c".
local function received_psns(base_psn, range)
    local high, low = range(0, 4):uint(), range(4, 4):uint()
    local psns = {}
    for i = 0, SACK_BITMAP_BITS - 1 do
        local word, bit = low, i
        if i >= 32 then
            word, bit = high, i - 32
        end
        if has_flag(word, 2 ^ bit) then
            psns[#psns + 1] = string.format("%d", (base_psn + i) % PSN_MODULO)
        end
    end
    if #psns == 0 then
        return "none"
    end
    return table.concat(psns, ", ")
end

--- Adds the fields every MRC packet has (kind, QP, PSN, EV, traffic class), taken from the
--- BTH, the IPv6 header and the UDP header.
local function add_common(tree, tvb)
    tree:add(F.opcode, tvb(0, 1)):set_generated()
    tree:add(F.qp, tvb(5, 3)):set_generated()
    tree:add(F.psn, tvb(9, 3)):set_generated()
    local ev = entropy_value()
    if ev ~= nil then
        tree:add(F.ev, tvb(0, 0), ev):append_text(" (IPv6 flow label << 16 | UDP source port)")
            :set_generated()
    end
    local dscp = last_value(ipv6_dscp)
    if dscp ~= nil then
        tree:add(F.dscp, tvb(0, 0), dscp):set_generated()
    end
    return ev
end

local MRCH_AT = C.BTH_LEN + C.RETH_LEN
local RETH_VA_AT = C.BTH_LEN
local RETH_DMA_LEN_AT = C.BTH_LEN + 12

--- Adds the MRCH subtree; returns the names of the flags that are set.
local function add_mrch(tree, tvb)
    local flags = tvb(MRCH_AT, 1):uint()
    local names = {}
    if has_flag(flags, C.MRCH_FLAG_TRIMMED) then
        names[#names + 1] = "TRIMMED"
    end
    if has_flag(flags, C.MRCH_FLAG_RETX) then
        names[#names + 1] = "RETX"
    end
    local sub = tree:add(F.mrch, tvb(MRCH_AT, C.MRCH_LEN))
    sub:set_text("MRC header (MRCH)")
    local flags_item = sub:add(F.mrch_flags, tvb(MRCH_AT, 1))
    if #names > 0 then
        flags_item:append_text(" (" .. table.concat(names, ", ") .. ")")
    end
    flags_item:add(F.mrch_trimmed, tvb(MRCH_AT, 1))
    flags_item:add(F.mrch_retx, tvb(MRCH_AT, 1))
    sub:add(F.mrch_reserved, tvb(MRCH_AT + 1, 1))
    sub:add(F.mrch_msg_id, tvb(MRCH_AT + 2, 2))
    sub:add(F.mrch_msg_len, tvb(MRCH_AT + 4, 4))
    sub:add(F.mrch_tsval, tvb(MRCH_AT + 8, 4))
    return names
end

--- Adds the payload length (0 when trimmed) and what disagrees with the RETH or the flags.
local function add_payload(tree, tvb, size)
    local dma_length = tvb(RETH_DMA_LEN_AT, 4):uint()
    local payload
    if has_flag(tvb(MRCH_AT, 1):uint(), C.MRCH_FLAG_TRIMMED) then
        payload = 0
        tree:add_proto_expert_info(E.trimmed, string.format(
            "Trimmed by a switch: %d payload bytes cut (RETH DMA length), no ICRC (Wireshark's "
            .. "InfiniBand dissector shows the MRCH timestamp as 'Invariant CRC')", dma_length))
        if size ~= DATA_HEADERS then
            tree:add_proto_expert_info(E.bad_length, string.format(
                "a trimmed packet ends after the MRCH (%d bytes of UDP payload), this one has %d",
                DATA_HEADERS, size))
        end
    else
        payload = size - DATA_HEADERS - C.ICRC_LEN
        if payload ~= dma_length then
            tree:add_proto_expert_info(E.dma_length, string.format(
                "RETH DMA length %d, payload %d bytes", dma_length, payload))
        end
    end
    if payload >= 0 then
        tree:add(F.payload_len, tvb(0, 0), payload):set_generated()
    end
    if tvb:len() < size then
        tree:add_proto_expert_info(E.cut, string.format(
            "%d of the %d bytes of UDP payload captured (snapshot length)", tvb:len(), size))
    end
end

--- The RETH virtual address in hex (Lua 5.2 numbers hold 53 bits: printed from two words).
local function virtual_address(tvb)
    local high, low = tvb(RETH_VA_AT, 4):uint(), tvb(RETH_VA_AT + 4, 4):uint()
    if high == 0 then
        return string.format("0x%x", low)
    end
    return string.format("0x%x%08x", high, low)
end

--- Data packet: MRCH after BTH and RETH, then payload and ICRC (none when trimmed).
--- `tvb` holds the captured part of the UDP payload, `size` is its length on the wire.
local function dissect_data(tvb, size, tree, ev)
    if size < DATA_HEADERS then
        tree:add_proto_expert_info(E.bad_length, string.format(
            "a data packet has %d bytes of BTH, RETH and MRCH, this one carries %d", DATA_HEADERS, size))
        return "DATA (too short for its headers)"
    end
    if tvb:len() < DATA_HEADERS then
        tree:add_proto_expert_info(E.cut, string.format("only %d of the %d header bytes were captured",
                                                         tvb:len(), DATA_HEADERS))
        return "DATA (headers cut by the capture)"
    end
    local names = add_mrch(tree, tvb)
    add_payload(tree, tvb, size)
    local info = string.format("DATA qp=0x%06x psn=%d msg=%d va=%s len=%d",
                               tvb(5, 3):uint(), tvb(9, 3):uint(), tvb(MRCH_AT + 2, 2):uint(),
                               virtual_address(tvb), tvb(RETH_DMA_LEN_AT, 4):uint())
    if ev ~= nil then
        info = info .. string.format(" ev=0x%08x", ev)
    end
    if #names > 0 then
        info = info .. " " .. table.concat(names, " ")
    end
    return info
end

local function dissect_sack(tvb, tree, at)
    local sub = tree:add(F.sack, tvb(at, C.SACK_LEN))
    sub:set_text("SACK header")
    local base_psn = tvb(at + 4, 4):uint()
    sub:add(F.sack_cum_psn, tvb(at, 4))
    sub:add(F.sack_base, tvb(at + 4, 4))
    sub:add(F.sack_bitmap, tvb(at + 8, 8))
    sub:add(F.sack_received, tvb(at + 8, 8), received_psns(base_psn, tvb(at + 8, 8))):set_generated()
    sub:add(F.sack_ev_echo, tvb(at + 16, 4))
    local ecn_echo = has_flag(tvb(at + 20, 1):uint(), C.SACK_FLAG_ECN_ECHO)
    local flags_item = sub:add(F.sack_flags, tvb(at + 20, 1))
    if ecn_echo then
        flags_item:append_text(" (ECN_ECHO)")
    end
    flags_item:add(F.sack_ecn_echo, tvb(at + 20, 1))
    sub:add(F.sack_window_penalty, tvb(at + 21, 1))
    sub:add(F.sack_reserved, tvb(at + 22, 2))
    sub:add(F.sack_ts_echo, tvb(at + 24, 4))
    local info = string.format("SACK qp=0x%06x cum=%d base=%d bitmap=0x%08x%08x ev_echo=0x%08x",
                               tvb(5, 3):uint(), tvb(at, 4):uint(), base_psn, tvb(at + 8, 4):uint(),
                               tvb(at + 12, 4):uint(), tvb(at + 16, 4):uint())
    if ecn_echo then
        info = info .. " ECN_ECHO"
    end
    local penalty = tvb(at + 21, 1):uint()
    if penalty > 0 then
        info = info .. string.format(" penalty=%d/256", penalty)
    end
    return info
end

local function dissect_nack(tvb, tree, at)
    local sub = tree:add(F.nack, tvb(at, C.NACK_LEN))
    sub:set_text("NACK header")
    sub:add(F.nack_psn, tvb(at, 4))
    sub:add(F.nack_cum_psn, tvb(at + 4, 4))
    sub:add(F.nack_ev_echo, tvb(at + 8, 4))
    local reason = tvb(at + 12, 1):uint()
    local reason_item = sub:add(F.nack_reason, tvb(at + 12, 1))
    if NACK_REASONS[reason] == nil then
        reason_item:add_proto_expert_info(E.unknown_reason, string.format("Unknown NACK reason %d", reason))
    end
    sub:add(F.nack_reserved, tvb(at + 13, 3))
    sub:add(F.nack_ts_echo, tvb(at + 16, 4))
    return string.format("NACK qp=0x%06x psn=%d reason=%s cum=%d ev_echo=0x%08x", tvb(5, 3):uint(),
                         tvb(at, 4):uint(), NACK_REASONS[reason] or tostring(reason),
                         tvb(at + 4, 4):uint(), tvb(at + 8, 4):uint())
end

local function dissect_probe(tvb, tree, at, ev)
    local sub = tree:add(F.probe, tvb(at, C.PROBE_LEN))
    sub:set_text("PROBE header")
    sub:add(F.probe_id, tvb(at, 4))
    sub:add(F.probe_tsval, tvb(at + 4, 4))
    return string.format("PROBE qp=0x%06x id=%d ev=0x%08x", tvb(5, 3):uint(), tvb(at, 4):uint(), ev or 0)
end

local function dissect_probe_reply(tvb, tree, at)
    local sub = tree:add(F.reply, tvb(at, C.PROBE_REPLY_LEN))
    sub:set_text("PROBE_REPLY header")
    sub:add(F.reply_id, tvb(at, 4))
    sub:add(F.reply_ev_echo, tvb(at + 4, 4))
    sub:add(F.reply_ts_echo, tvb(at + 8, 4))
    return string.format("PROBE_REPLY qp=0x%06x id=%d ev_echo=0x%08x", tvb(5, 3):uint(),
                         tvb(at, 4):uint(), tvb(at + 4, 4):uint())
end

local CONTROL_DISSECTORS = {
    [C.OP_SACK] = dissect_sack,
    [C.OP_NACK] = dissect_nack,
    [C.OP_PROBE] = dissect_probe,
    [C.OP_PROBE_REPLY] = dissect_probe_reply,
}

--- Control packet: its header follows the BTH and fills the rest of the packet (no ICRC).
local function dissect_control(tvb, size, tree, opcode, ev)
    local name = OPCODE_NAMES[opcode]
    local expected = CONTROL_LEN[opcode]
    if size - C.BTH_LEN ~= expected then
        tree:add_proto_expert_info(E.bad_length, string.format(
            "%s header is %d bytes, this packet carries %d after the BTH", name, expected,
            size - C.BTH_LEN))
    end
    if size < C.BTH_LEN + expected then
        return name .. " (too short for its header)"
    end
    if tvb:len() < C.BTH_LEN + expected then
        tree:add_proto_expert_info(E.cut, string.format("the %s header was not captured whole", name))
        return name .. " (header cut by the capture)"
    end
    return CONTROL_DISSECTORS[opcode](tvb, tree, C.BTH_LEN, ev)
end

--- The last (innermost) UDP header's destination port field, when it is MRC's.
local function mrc_udp_port()
    local ports = { udp_dstport() }
    local port = ports[#ports]
    if port == nil or port.value ~= C.ROCEV2_UDP_PORT then
        return nil
    end
    return port
end

function mrc.dissector(tvb, pinfo, tree)
    local port = mrc_udp_port()
    if port == nil then
        return
    end
    local at = port.offset + UDP_DSTPORT_TO_PAYLOAD
    local udp_len = last_value(udp_length)
    if udp_len == nil or tvb:len() < at + C.BTH_LEN or udp_len - UDP_HEADER_LEN < C.BTH_LEN then
        return                    -- no whole BTH: nothing of MRC's to show
    end
    local size = udp_len - UDP_HEADER_LEN      -- UDP payload on the wire (captured or not)
    local payload = tvb(at):tvb()
    local opcode = payload(0, 1):uint()
    if OPCODE_NAMES[opcode] == nil then
        return                    -- another RoCE packet: Wireshark's dissector has shown it
    end
    pinfo.cols.protocol:set("MRC")
    local root = tree:add(mrc, tvb(at), string.format("MRC (Multipath Reliable Connection), %s",
                                                       OPCODE_NAMES[opcode]))
    local ev = add_common(root, payload)
    local info
    if opcode == C.OP_RC_WRITE_ONLY then
        info = dissect_data(payload, size, root, ev)
    else
        info = dissect_control(payload, size, root, opcode, ev)
    end
    pinfo.cols.info:clear_fence()
    pinfo.cols.info:set(info)
end

register_postdissector(mrc)

local roce = DissectorTable.get("udp.port"):get_dissector(C.ROCEV2_UDP_PORT)

--- UDP heuristic (used before port numbers only with udp.try_heuristic_first): an MRC packet
--- goes to Wireshark's RoCEv2 dissector even when its source port is another protocol's.
local function roce_before_well_known_ports(tvb, pinfo, tree)
    if roce == nil or pinfo.dst_port ~= C.ROCEV2_UDP_PORT or tvb:len() < C.BTH_LEN then
        return false
    end
    if OPCODE_NAMES[tvb(0, 1):uint()] == nil then
        return false
    end
    roce:call(tvb, pinfo, tree)
    return true
end
mrc:register_heuristic("udp", roce_before_well_known_ports)
