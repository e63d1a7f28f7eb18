/* Conformance: nested switch statements on action_run (a table applied inside a case of
 * another table's switch, with its own switch and default), a hit/miss condition inside
 * another case, and a table that is in the P4Info but not in the BMv2 JSON. */
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

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action a1() { hdr.probe.r1 = 1; }
    action a2() { hdr.probe.r1 = 2; }
    action a3() { hdr.probe.r1 = 3; }
    action b1() { hdr.probe.r2 = 1; }
    action b2() { hdr.probe.r2 = 2; }
    action c1() { hdr.probe.r3 = 1; }
    action c2() { hdr.probe.r3 = 2; }
    table outer {
        key = { hdr.probe.op : exact; }
        actions = { a1; a2; a3; }
        const entries = { 1 : a1(); 2 : a2(); }
        default_action = a3();
    }
    table inner {
        key = { hdr.probe.a8 : exact; }
        actions = { b1; b2; }
        const entries = { 1 : b1(); }
        default_action = b2();
    }
    table innermost {
        key = { hdr.probe.b8 : exact; }
        actions = { c1; c2; }
        const entries = { 1 : c1(); }
        default_action = c2();
    }
    table other {
        key = { hdr.probe.b8 : exact; }
        actions = { c1; NoAction; }
        const entries = { 2 : c1(); }
        default_action = NoAction();
    }
    /* applied only where a constant condition is false: p4c leaves it out of the BMv2
     * JSON but not out of the P4Info, a pair BMv2 loads (writes to it fail) */
    table dead {
        key = { hdr.probe.op : exact; }
        actions = { c1; NoAction; }
        default_action = NoAction();
    }
    apply {
        bit<8> never = 1;
        sm.egress_spec = 2;
        switch (outer.apply().action_run) {
            a1: {
                switch (inner.apply().action_run) {
                    b1: {
                        switch (innermost.apply().action_run) {
                            c1: { hdr.probe.r4 = 0x11; }
                            default: { hdr.probe.r4 = 0x12; }
                        }
                    }
                    b2: { hdr.probe.r4 = 0x20; }
                }
            }
            a2: {
                if (other.apply().hit) { hdr.probe.r4 = 0x30; } else { hdr.probe.r4 = 0x31; }
            }
            default: {
                if (never == 2) {
                    switch (dead.apply().action_run) {
                        c1: { hdr.probe.r4 = 0x50; }
                    }
                }
                hdr.probe.r4 = 0x40;
            }
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.probe); }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
