/* Conformance: header stacks indexed by a run-time value (a header field), read and
 * written in actions: p4c's dereference_header_stack as an operand, as an assignment
 * target and in setInvalid. BMv2 1.15.5 refuses two neighbours at load time, so they are
 * not here: an action parameter as the index (p4c emits a "runtime_data" operand inside the
 * expression) and a copy into a dereferenced element (an unwrapped expression operand). */
#include <core.p4>
#include <v1model.p4>
#include "include/conformance_headers.p4"

struct headers_t {
    ethernet_t eth;
    probe_t    probe;
    mpls_t[4]  mpls;
}
struct meta_t { bit<8> unused; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        pkt.extract(hdr.probe);
        transition parse_mpls;
    }
    state parse_mpls {
        pkt.extract(hdr.mpls.next);
        transition select(hdr.mpls.last.bos) {
            0: parse_mpls;
            default: accept;
        }
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action read_at() {
        hdr.probe.r1 = (bit<32>)hdr.mpls[hdr.probe.a8].label;
        hdr.probe.r2 = (bit<32>)hdr.mpls[hdr.probe.b8].ttl;
    }
    action write_at(bit<20> label) {
        hdr.mpls[hdr.probe.a8].label = label;
        hdr.mpls[hdr.probe.b8].ttl = hdr.probe.a16[7:0];
    }
    action invalidate_at() {
        hdr.mpls[hdr.probe.b8].setInvalid();
    }
    table t {
        key = { hdr.probe.op : exact; }
        actions = { read_at; write_at; invalidate_at; NoAction; }
        const entries = {
            1 : read_at();
            2 : write_at(0xabcde);
            4 : invalidate_at();
        }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 2;
        t.apply();
        hdr.probe.r3 = (bit<32>)hdr.mpls[hdr.probe.a8 & 3].label;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.probe); pkt.emit(hdr.mpls); }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
