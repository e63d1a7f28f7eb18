/* Conformance: the conditional operator whose operands are headers (whole-header copies
 * chosen at run time, valid and invalid sources) and whose operands are structs. */
#include <core.p4>
#include <v1model.p4>
#include "include/conformance_headers.p4"

header pair_t { bit<16> x; bit<16> y; }

struct headers_t {
    ethernet_t eth;
    probe_t    probe;
    pair_t     p1;
    pair_t     p2;
    pair_t     res;
}
struct meta_t { bit<8> unused; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        pkt.extract(hdr.probe);
        pkt.extract(hdr.p1);
        transition select(hdr.probe.a8) {
            0: accept;
            default: parse_p2;
        }
    }
    state parse_p2 { pkt.extract(hdr.p2); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action pick(bit<8> which) {
        hdr.res = (which == 1) ? hdr.p1 : hdr.p2;
    }
    table t {
        key = { hdr.probe.op : exact; }
        actions = { pick; NoAction; }
        const entries = { 1 : pick(1); 2 : pick(2); }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 2;
        hdr.res = hdr.probe.b8 == 0 ? hdr.p1 : hdr.p2;
        hdr.probe.r1 = hdr.res.isValid() ? 32w1 : 32w0;
        t.apply();
        hdr.probe.r2 = hdr.res.isValid() ? 32w1 : 32w0;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.probe); pkt.emit(hdr.res); pkt.emit(hdr.p1); pkt.emit(hdr.p2); }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
