/* Conformance: header unions and a header union stack. The parser extracts one member of
 * a union by a selector byte, and a stack of unions until a terminator; the controls test
 * member and union validity, make a member valid (which invalidates the others), copy
 * a member, read and write a union stack element by a run-time index, and the deparser
 * emits whichever member is valid. Not here, as the toolchain cannot run them: a run-time
 * index into a union stack (p4c 1.2.4.8 crashes) and isValid() on a union stack element
 * (p4c emits a "header" operand that BMv2 1.15.5 refuses to load). */
#include <core.p4>
#include <v1model.p4>
#include "include/conformance_headers.p4"

header sel_t { bit<8> kind; }
header ha_t { bit<8> kind; bit<16> a; }
header hb_t { bit<8> kind; bit<32> b; }
header_union ab_t { ha_t ha; hb_t hb; }

struct headers_t {
    ethernet_t eth;
    probe_t    probe;
    ab_t       u;
    ab_t[3]    us;
}
struct meta_t { bit<8> n; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        pkt.extract(hdr.probe);
        transition select(pkt.lookahead<bit<8>>()) {
            1: parse_a;
            2: parse_b;
            default: accept;
        }
    }
    state parse_a { pkt.extract(hdr.u.ha); transition parse_stack; }
    state parse_b { pkt.extract(hdr.u.hb); transition parse_stack; }
    state parse_stack {
        transition select(pkt.lookahead<bit<8>>()) {
            1: stack_a;
            2: stack_b;
            default: accept;
        }
    }
    state stack_a { pkt.extract(hdr.us.next.ha); meta.n = meta.n + 1; transition parse_stack; }
    state stack_b { pkt.extract(hdr.us.next.hb); meta.n = meta.n + 1; transition parse_stack; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action read_us() {
        hdr.probe.r3 = (bit<32>)hdr.us[1].ha.a;
        hdr.probe.r4 = hdr.us[0].hb.b;
    }
    action write_us(bit<32> b) {
        hdr.us[0].hb.b = b;
        hdr.us[1].ha.a = 0xbeef;
    }
    table t {
        key = { hdr.probe.op : exact; }
        actions = { read_us; write_us; NoAction; }
        const entries = { 4 : read_us(); 5 : write_us(0x01020304); }
        default_action = NoAction();
    }
    apply {
        sm.egress_spec = 2;
        hdr.probe.r1 = (hdr.u.isValid() ? 32w1 : 0) | (hdr.u.ha.isValid() ? 32w2 : 0)
                     | (hdr.u.hb.isValid() ? 32w4 : 0) | (hdr.us[0].hb.isValid() ? 32w8 : 0)
                     | (hdr.us[1].hb.isValid() ? 32w16 : 0);
        hdr.probe.r2 = (bit<32>)meta.n;
        if (hdr.probe.op == 1) {
            // a becomes valid: b becomes invalid
            hdr.u.ha.setValid();
            hdr.u.ha.kind = 1;
            hdr.u.ha.a = 0x1234;
        } else if (hdr.probe.op == 2) {
            hdr.u.hb.setInvalid();
        } else if (hdr.probe.op == 3) {
            hdr.us[0].hb = hdr.u.hb;
        } else if (hdr.probe.op == 6) {
            hdr.us.pop_front(1);
        } else if (hdr.probe.op == 7) {
            hdr.us.push_front(1);
            hdr.us[0].ha.setValid();
            hdr.us[0].ha.kind = 1;
            hdr.us[0].ha.a = 7;
        }
        t.apply();
        hdr.probe.r1 = hdr.probe.r1 | (hdr.u.ha.isValid() ? 32w0x100 : 0)
                     | (hdr.u.hb.isValid() ? 32w0x200 : 0) | (hdr.us[0].ha.isValid() ? 32w0x400 : 0);
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.probe); pkt.emit(hdr.u); pkt.emit(hdr.us); }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
