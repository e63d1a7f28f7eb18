/* Conformance: action parameters used inside expressions, which p4c emits as "local"
 * operands: a conditional on a parameter around a saturating subtraction, a slice
 * assignment from a parameter, arithmetic and a comparison on parameters, and counter and
 * register indices computed from parameters and fields; mark_to_drop on a copy of
 * standard_metadata passed to an action. */
#include <core.p4>
#include <v1model.p4>
#include "include/conformance_headers.p4"

struct headers_t {
    ethernet_t eth;
    probe_t    probe;
}
struct meta_t { bit<8> unused; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        pkt.extract(hdr.probe);
        transition accept;
    }
}

/* an action that takes standard_metadata as a parameter: p4c copies it in and out, and
 * mark_to_drop must write the copy it is given */
action drop_via(inout standard_metadata_t smeta) { mark_to_drop(smeta); }

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    counter(8, CounterType.packets_and_bytes) hits;
    register<bit<32>>(8) seen;

    action dec(bit<1> flag) {
        hdr.probe.a8 = (flag == 1) ? (hdr.probe.a8 |-| 1) : hdr.probe.a8;
    }
    action slice(bit<8> v, bit<4> nib) {
        hdr.probe.r1[15:8] = v;
        hdr.probe.r1[3:0] = nib;
        hdr.probe.r2 = (bit<32>)v + (bit<32>)nib * 3;
        hdr.probe.r3 = (v > 100) ? 32w1 : 32w2;
    }
    action count_at(bit<3> base) {
        hits.count((bit<32>)hdr.probe.b8 + (bit<32>)base);
        seen.write((bit<32>)base ^ (bit<32>)hdr.probe.b8[2:0], (bit<32>)hdr.probe.a16 + (bit<32>)base);
        bit<32> old;
        seen.read(old, (bit<32>)base);
        hdr.probe.r4 = old;
    }
    table t {
        key = { hdr.probe.op : exact; }
        actions = { dec; slice; count_at; NoAction; }
        const entries = {
            1 : dec(1);
            2 : dec(0);
            3 : slice(0xab, 0x5);
            4 : slice(7, 0xf);
            5 : count_at(2);
        }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 2;
        t.apply();
        if (hdr.probe.op == 6) {
            drop_via(sm);
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.probe); }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
