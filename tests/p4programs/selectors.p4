/* Conformance: action profiles and action selectors (BMv2 "indirect" and "indirect_ws"
 * tables). The selector picks a group member from a hash of the selector key fields. */
#include <core.p4>
#include <v1model.p4>
#include "include/conformance_headers.p4"

struct headers_t { ethernet_t eth; probe_t probe; }
struct meta_t { bit<8> unused; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) { 0x88b5: parse_probe; default: accept; }
    }
    state parse_probe { pkt.extract(hdr.probe); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action_selector(HashAlgorithm.crc16, 32w1024, 32w14) ecmp_sel;
    action_selector(HashAlgorithm.crc32, 32w64, 32w16) wide_sel;
    action_profile(32w128) prof;

    action fwd(bit<9> port, bit<32> value) { sm.egress_spec = port; hdr.probe.r1 = value; }
    action tag2(bit<32> value) { hdr.probe.r2 = value; }
    action tag3(bit<32> value) { hdr.probe.r3 = value; }
    action drop() { mark_to_drop(sm); }
    action nop() { }

    table ecmp {
        key = {
            hdr.probe.a32: lpm;
            hdr.probe.b32: selector;
            hdr.probe.a16: selector;
            hdr.probe.b8: selector;
        }
        actions = { fwd; drop; }
        implementation = ecmp_sel;
        default_action = drop();
    }
    table wide {
        key = { hdr.probe.a8: exact; hdr.probe.b16: selector; hdr.eth.src: selector; }
        actions = { tag3; nop; }
        implementation = wide_sel;
        default_action = nop();
    }
    table by_op {
        key = { hdr.probe.op: exact; }
        actions = { tag2; nop; }
        implementation = prof;
        default_action = nop();
    }

    apply {
        sm.egress_spec = 1;
        if (!hdr.probe.isValid()) { exit; }
        ecmp.apply();
        wide.apply();
        by_op.apply();
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.probe); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
