/* Conformance: expression semantics. The probe header's op selects a computation whose
 * results land in r1..r4 and the small fields; the packet goes back out of its port. */
#include <core.p4>
#include <v1model.p4>
#include "include/conformance_headers.p4"

struct headers_t { ethernet_t eth; probe_t probe; }
struct meta_t { int<8> s8; bit<8> u8; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) { 0x88b5: parse_probe; default: accept; }
    }
    state parse_probe { pkt.extract(hdr.probe); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = sm.ingress_port;
        if (!hdr.probe.isValid()) { mark_to_drop(sm); exit; }
        bit<8> op = hdr.probe.op;
        if (op == 0) {            // wrap-around arithmetic
            hdr.probe.a8 = hdr.probe.a8 + hdr.probe.b8;
            hdr.probe.b8 = hdr.probe.b8 - 8w200;
            hdr.probe.a16 = hdr.probe.a16 * hdr.probe.b16;
            hdr.probe.r1 = hdr.probe.a32 - hdr.probe.b32;
            hdr.probe.r2 = hdr.probe.a32 * 3;
            hdr.probe.r3 = -hdr.probe.a32;
            hdr.probe.r4 = ~hdr.probe.b32;
        } else if (op == 1) {     // shifts, slices, concatenation, casts
            hdr.probe.r1 = hdr.probe.a32 << 4;
            hdr.probe.r2 = hdr.probe.a32 >> (bit<8>)hdr.probe.b8;
            hdr.probe.r3 = hdr.probe.a16 ++ hdr.probe.b16;
            hdr.probe.r4 = (bit<32>)hdr.probe.a32[23:8];
            hdr.probe.a16 = (bit<16>)hdr.probe.b32;
            hdr.probe.a8 = hdr.probe.a32[31:24];
            hdr.probe.b8 = (bit<8>)(hdr.probe.a8 >> 9);
        } else if (op == 2) {     // saturating and signed arithmetic
            hdr.probe.a8 = hdr.probe.a8 |+| hdr.probe.b8;
            hdr.probe.b8 = hdr.probe.b8 |-| 8w100;
            meta.s8 = (int<8>)hdr.probe.a16[7:0];
            meta.s8 = meta.s8 |+| (int<8>)hdr.probe.b16[7:0];
            hdr.probe.r1 = (bit<32>)(bit<8>)meta.s8;
            int<8> neg = -8s5;
            hdr.probe.r2 = (bit<32>)(bit<8>)(neg >> 1);
            hdr.probe.r3 = ((int<32>)hdr.probe.a32 < 0) ? 32w1 : 32w0;
            hdr.probe.r4 = (bit<32>)((int<32>)hdr.probe.a32 >> 3);
        } else if (op == 3) {     // comparisons, boolean logic, bitwise
            hdr.probe.r1 = (hdr.probe.a32 > hdr.probe.b32) ? 32w1 : 32w0;
            hdr.probe.r2 = (hdr.probe.a32 == hdr.probe.b32 || hdr.probe.a8 != 0) ? 32w7 : 32w9;
            hdr.probe.r3 = hdr.probe.a32 & hdr.probe.b32 | 32w0x0f0f0000 ^ hdr.probe.a32;
            hdr.probe.r4 = (bit<32>)(hdr.probe.a16 >= hdr.probe.b16 && !(hdr.probe.b8 <= 3) ? 1w1 : 1w0);
        } else {
            mark_to_drop(sm);
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.probe); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
