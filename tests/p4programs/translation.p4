/* @p4runtime_translation: a match key and an action parameter of a type the P4Runtime API
 * sees as 32 bits (its SDN width) while the data plane holds 9. PI on BMv2 translates nothing:
 * it takes values at the P4Info's width and hands them to the target, so what simple_switch_grpc
 * does with a value wider than 9 bits is what the Python target must do. */
#include <core.p4>
#include <v1model.p4>
#include "include/conformance_headers.p4"

@p4runtime_translation("mlfabric.test/PortId_t", 32)
type bit<9> port_id_t;

struct headers_t { ethernet_t eth; probe_t probe; }
struct meta_t { port_id_t port; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) { 0x88b5: parse_probe; default: accept; }
    }
    state parse_probe { pkt.extract(hdr.probe); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action to(port_id_t port) { meta.port = port; hdr.probe.r2 = (bit<32>)(bit<9>)port; }
    action none() { hdr.probe.r2 = 0xff; }
    table by_port {
        key = { meta.port: exact; }
        actions = { to; none; }
        default_action = none();
    }
    table by_tag {
        key = { hdr.probe.a8: exact; }
        actions = { to; none; }
        default_action = none();
    }
    apply {
        sm.egress_spec = 1;
        if (!hdr.probe.isValid()) { exit; }
        meta.port = (port_id_t)(bit<9>)hdr.probe.a16;
        by_port.apply();
        by_tag.apply();
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.probe); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
