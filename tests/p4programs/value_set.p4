/* Conformance: a parser value set. Over P4Runtime BMv2 cannot fill one (PI answers
 * UNIMPLEMENTED to ValueSetEntry writes), so the set is empty and its transition never
 * matches: the other cases and the default decide. */
#include <core.p4>
#include <v1model.p4>
#include "include/conformance_headers.p4"

struct headers_t {
    ethernet_t eth;
    probe_t    probe;
}
struct meta_t { bit<8> unused; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    value_set<bit<16>>(4) tunnel_types;
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) {
            tunnel_types: parse_tunnel;
            0x88b5: parse_probe;
            default: accept;
        }
    }
    state parse_tunnel {
        pkt.extract(hdr.probe);
        hdr.probe.r1 = 0x7777;
        transition accept;
    }
    state parse_probe {
        pkt.extract(hdr.probe);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = hdr.probe.isValid() ? 9w2 : 9w3;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.probe); }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
