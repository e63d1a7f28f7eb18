/* Conformance: parser features. Header stacks (MPLS), lookahead, select on masks and
 * multiple fields, verify, parser errors, and the payload left after a parser error. */
#include <core.p4>
#include <v1model.p4>
#include "include/conformance_headers.p4"

error { BadTtl }

struct headers_t {
    ethernet_t eth;
    mpls_t[3]  mpls;
    probe_t    probe;
    ipv4_t     ipv4;
}
struct meta_t { bit<32> peek; bit<8> depth; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) {
            0x8847: parse_mpls;
            0x88b5: parse_probe;
            0x0800 &&& 0xff00: parse_ipv4;
            default: accept;
        }
    }
    state parse_mpls {
        pkt.extract(hdr.mpls.next);
        meta.depth = meta.depth + 1;
        transition select(hdr.mpls.last.bos) {
            0: parse_mpls;
            1: after_mpls;
        }
    }
    state after_mpls {
        meta.peek = pkt.lookahead<bit<32>>();
        transition select(pkt.lookahead<bit<4>>()) {
            4: parse_ipv4;
            default: accept;
        }
    }
    state parse_probe {
        pkt.extract(hdr.probe);
        verify(hdr.probe.op != 0xff, error.BadTtl);
        transition select(hdr.probe.op, hdr.probe.a8) {
            (1, 0x00 &&& 0x0f): parse_ipv4;
            (2, _): accept;
            default: reject;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        // Report what the parser saw in a fresh probe header when there is none.
        if (!hdr.probe.isValid()) {
            hdr.probe.setValid();
            hdr.probe.op = 0x77;
        }
        if (sm.parser_error == error.NoError) { hdr.probe.r1 = 0; }
        else if (sm.parser_error == error.PacketTooShort) { hdr.probe.r1 = 1; }
        else if (sm.parser_error == error.NoMatch) { hdr.probe.r1 = 2; }
        else if (sm.parser_error == error.StackOutOfBounds) { hdr.probe.r1 = 3; }
        else if (sm.parser_error == error.BadTtl) { hdr.probe.r1 = 9; }
        else { hdr.probe.r1 = 0xff; }
        hdr.probe.r2 = meta.peek;
        hdr.probe.r3 = (bit<32>)meta.depth;
        hdr.probe.r4 = (hdr.ipv4.isValid() ? 32w1 : 32w0) | (hdr.mpls[2].isValid() ? 32w2 : 32w0);
        if (hdr.mpls[0].isValid()) {
            hdr.mpls[0].ttl = hdr.mpls[0].ttl - 1;
        }
        if (hdr.probe.op == 5) {
            hdr.mpls.push_front(1);
            hdr.mpls[0].setValid();
            hdr.mpls[0].label = 1000;
            hdr.mpls[0].ttl = 64;
        }
        if (hdr.probe.op == 6) {
            hdr.mpls.pop_front(1);
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.probe); pkt.emit(hdr.mpls); pkt.emit(hdr.ipv4); }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
