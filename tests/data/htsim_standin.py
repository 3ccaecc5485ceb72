#!/usr/bin/env python3
"""A stand-in for uet-htsim's htsim_uec, so CI runs the htsim backend end to end without it.

Reads the options the backend passes (-topo, -tm, -linkspeed, -mtu, -q, -ecn, -end, ...), checks
the two files it is given the way htsim_uec would need them (a topology with Nodes/Tiers/Podsize
and Tier sections; a matrix whose `Nodes` agrees and whose `Connections` count matches its
lines), and prints the lines htsim_uec prints that the backend reads, in htsim_uec's words: its
packet size, queue size and ECN ramp, one "Flow ... finished at <us>" line per flow, and the
totals. The completion times come from a toy model (each receiver drains its flows at the line
rate, one after another in flow order, plus a 10 µs round trip), not from a simulation.

STANDIN_MODE=fail exits 1 with an error; STANDIN_MODE=fail-<balancer> does so only when run with
that load balancer; STANDIN_MODE=truncated stops before the totals; STANDIN_MODE=unfinished
leaves the last flow out (as htsim_uec does of a flow its -end cut). Like a build with the
measurement switches it says which of MRC_DATA_HEADER_BYTES, MRC_ACK_BYTES and MRC_NACK_BYTES it
was given (a data packet's payload is then -mtu less the header), except with STANDIN_MODE=release.
"""
import os
import sys


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(1)


def options(argv):
    known_flags = {"-disable_trim"}
    out, i = {}, 1
    while i < len(argv):
        name = argv[i]
        if name in known_flags:
            out[name] = True
            i += 1
        elif name == "-ecn":
            out[name] = (int(argv[i + 1]), int(argv[i + 2]))
            i += 3
        elif name.startswith("-") and i + 1 < len(argv):
            out[name] = argv[i + 1]
            i += 2
        else:
            fail(f"Unknown parameter {name}")
    return out


def read_topology(path):
    header, tiers = {}, []
    with open(path) as f:
        for line in f:
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            key = words[0].lower()
            if key == "tier":
                tiers.append({})
            elif tiers:
                tiers[-1][key] = int(words[1])
            else:
                header[key] = int(words[1])
    for key in ("nodes", "tiers", "podsize"):
        if key not in header:
            fail(f"Missing {key} in header")
    if len(tiers) != header["tiers"]:
        fail(f"No configuration found for tier {len(tiers)}")
    return header, tiers


def read_matrix(path):
    nodes, count, flows = None, None, []
    with open(path) as f:
        for line in f:
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            if words[0] == "Nodes":
                nodes = int(words[1])
            elif words[0] == "Connections":
                count = int(words[1])
            elif "->" in words[0]:
                src, dst = map(int, words[0].split("->"))
                fields = dict(zip(words[1::2], words[2::2]))
                flows.append((src, dst, int(fields["id"]), int(fields["size"])))
            else:
                fail(f"Error: unknown token: {words[0]}")
    if count != len(flows):
        fail(f"Connections {count} but {len(flows)} connection lines")
    return nodes, flows


def main():
    mode = os.environ.get("STANDIN_MODE", "")
    opts = options(sys.argv)
    if mode == "fail" or mode == f"fail-{opts.get('-load_balancing_algo')}":
        fail("Failed to load connection matrix (stand-in asked to fail)")
    header, _ = read_topology(opts["-topo"])
    nodes, flows = read_matrix(opts["-tm"])
    if nodes != header["nodes"]:
        fail(f"Mismatch between connection matrix ({nodes} nodes) and topology ({header['nodes']} nodes)")
    mtu = int(opts.get("-mtu", 4150))
    rate = float(opts.get("-linkspeed", 100000)) * 1e6
    queue = int(opts.get("-q", 29))
    low, high = opts.get("-ecn", (6, 24))
    print(f"Packet size (MTU) is {mtu}")
    header = 64
    if mode != "release":
        for name in ("MRC_DATA_HEADER_BYTES", "MRC_ACK_BYTES", "MRC_NACK_BYTES"):
            if name in os.environ:
                print(f"Measurement switch {name}={int(os.environ[name])}")
        header = int(os.environ.get("MRC_DATA_HEADER_BYTES", header))
    print(f"Tier 0 QueueSize Down {queue * mtu} bytes")
    print(f"Setting ECN to parameters low {low * mtu} high {high * mtu} enable on tor downlink 1")
    drained = {}
    shown = flows[:-1] if mode == "unfinished" else flows
    for src, dst, flow_id, size in shown:
        drained[dst] = drained.get(dst, 0) + size
        finish_us = drained[dst] * 8 / rate * 1e6 + 10.0
        print(f"Flow Uec_{src}_{dst} flowId {flow_id} uecSrc {src} finished at {finish_us:.3f} total messages 1 "
              f"total packets {-(-size // (mtu - header))} RTS 0 total bytes {size}")
    if mode == "truncated":
        return
    print("Done")
    print(f"New: {sum(-(-s // (mtu - header)) for *_, s in flows)} Rtx: 0 RTS: 0 Bounced: 0 ACKs: {len(flows)} "
          "NACKs: 0 Pulls: 0 sleek_pkts: 0")


if __name__ == "__main__":
    main()
