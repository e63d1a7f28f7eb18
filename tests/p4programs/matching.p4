/* Conformance: every match kind, priorities, const entries, const default actions,
 * action_run switches and hit/miss branches. Results are written into the probe header. */
#include <core.p4>
#include <v1model.p4>
#include "include/conformance_headers.p4"

struct headers_t { ethernet_t eth; probe_t probe; }
struct meta_t { bit<8> tag; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) { 0x88b5: parse_probe; default: accept; }
    }
    state parse_probe { pkt.extract(hdr.probe); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action set_port(bit<9> port) { sm.egress_spec = port; }
    action tag(bit<32> value) { hdr.probe.r1 = value; }
    action tag2(bit<32> value) { hdr.probe.r2 = value; }
    action tag3(bit<32> value) { hdr.probe.r3 = value; }
    action tag4(bit<32> value) { hdr.probe.r4 = value; }
    action nop() { }
    action drop() { mark_to_drop(sm); }

    table t_exact {
        key = { hdr.eth.dst: exact; hdr.probe.a8: exact; }
        actions = { set_port; drop; }
        default_action = drop();
    }
    table t_lpm {
        key = { hdr.probe.a32: lpm; }
        actions = { tag; nop; }
        default_action = tag(0xdead);
    }
    table t_ternary {
        key = { hdr.probe.a16: ternary; hdr.probe.b8: exact; }
        actions = { tag2; nop; }
        default_action = nop();
    }
    table t_range {
        key = { hdr.probe.b16: range; hdr.probe.b32: optional; }
        actions = { tag3; nop; }
        default_action = nop();
    }
    table t_const {
        key = { hdr.probe.op: exact; }
        actions = { tag4; nop; }
        const default_action = nop();
        const entries = {
            1: tag4(111);
            2: tag4(222);
        }
    }
    table t_const_ternary {
        key = { hdr.probe.b8: ternary; }
        actions = { tag4; nop; }
        const entries = {
            8w0x10 &&& 8w0xf0: tag4(16);
            8w0x11: tag4(17);
            _: tag4(99);
        }
    }
    table t_valid {
        key = { hdr.probe.isValid(): exact; }
        actions = { tag2; nop; }
        default_action = nop();
    }

    apply {
        t_exact.apply();
        switch (t_lpm.apply().action_run) {
            tag: { hdr.probe.a8 = hdr.probe.a8 + 1; }
            nop: { hdr.probe.a8 = hdr.probe.a8 + 2; }
        }
        if (t_ternary.apply().hit) {
            hdr.probe.b8 = hdr.probe.b8 | 0x80;
        } else {
            hdr.probe.b8 = hdr.probe.b8 | 0x40;
        }
        if (!t_range.apply().miss) {
            hdr.probe.a16 = 0xaaaa;
        }
        t_const.apply();
        if (hdr.probe.op == 3) {
            t_const_ternary.apply();
        }
        if (hdr.probe.op == 4) {
            t_valid.apply();
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.probe); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
