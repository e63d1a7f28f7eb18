/* Conformance: a direct meter on a table. A hit writes the entry's meter colour into
 * meta.color (unconfigured: green); a miss meters nothing and keeps the 3 set before (the
 * default action does not read the meter, or p4c would drop that assignment). */
#include <core.p4>
#include <v1model.p4>
#include "include/conformance_headers.p4"

struct headers_t { ethernet_t eth; probe_t probe; }
struct meta_t { bit<2> color; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) { 0x88b5: parse_probe; default: accept; }
    }
    state parse_probe { pkt.extract(hdr.probe); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    direct_meter<bit<2>>(MeterType.packets) police;

    action mark(bit<9> port) { police.read(meta.color); sm.egress_spec = port; }
    action keep() { police.read(meta.color); }
    action skip() { }
    table policed {
        key = { hdr.eth.src: exact; }
        actions = { mark; keep; skip; }
        default_action = skip();
        meters = police;
    }

    apply {
        sm.egress_spec = 1;
        if (!hdr.probe.isValid()) { exit; }
        meta.color = 3;
        policed.apply();
        hdr.probe.r2 = (bit<32>)meta.color;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.probe); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
