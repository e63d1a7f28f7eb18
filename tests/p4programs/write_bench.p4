/* Three tables for `make bench`'s table writes (bench/p4runtime_bench.py), one per match
 * kind a control plane writes most: exact (a MAC and a byte, 56 bits), LPM (an IPv4-sized
 * 32-bit prefix) and ternary (a 32-bit value under a mask, then an exact byte; entries have
 * priorities). Every entry sets a port and a MAC, as a forwarding entry does. */
#include <core.p4>
#include <v1model.p4>
#include "include/conformance_headers.p4"

struct headers_t { ethernet_t eth; probe_t probe; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) { 0x88b5: parse_probe; default: accept; }
    }
    state parse_probe { pkt.extract(hdr.probe); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action fwd(bit<9> port, bit<48> mac) { sm.egress_spec = port; hdr.eth.dst = mac; }
    action miss() { mark_to_drop(sm); }
    table exact_t {
        key = { hdr.eth.dst: exact; hdr.probe.a8: exact; }
        actions = { fwd; miss; }
        default_action = miss();
        size = 65536;
    }
    table lpm_t {
        key = { hdr.probe.a32: lpm; }
        actions = { fwd; miss; }
        default_action = miss();
        size = 65536;
    }
    table ternary_t {
        key = { hdr.probe.b32: ternary; hdr.probe.b8: exact; }
        actions = { fwd; miss; }
        default_action = miss();
        size = 65536;
    }
    apply {
        if (!hdr.probe.isValid()) { exit; }
        if (hdr.probe.op == 1) { exact_t.apply(); }
        else if (hdr.probe.op == 2) { lpm_t.apply(); }
        else { ternary_t.apply(); }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.probe); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
