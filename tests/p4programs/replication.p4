/* Conformance: packet replication and re-entry. The probe op selects:
 *   1 I2E clone (session 5) preserving a field list   2 E2E clone (session 6)
 *   3 multicast to group 7 (egress_rid written out)   4 resubmit once, preserving a field
 *   5 recirculate once, preserving a field            6 truncate to 20 bytes
 *   7 digest of (src mac, ingress port)               8 packet-in to the CPU port
 * The egress writes instance_type, egress_rid and egress_port into the probe header. */
#include <core.p4>
#include <v1model.p4>
#include "include/conformance_headers.p4"

struct headers_t { ethernet_t eth; probe_t probe; }
struct meta_t {
    @field_list(1) bit<8> carried;
    bit<8> passes;
}
struct learn_t { bit<48> src; bit<9> port; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) { 0x88b5: parse_probe; default: accept; }
    }
    state parse_probe { pkt.extract(hdr.probe); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 2;
        if (!hdr.probe.isValid()) { mark_to_drop(sm); exit; }
        bit<8> op = hdr.probe.op;
        hdr.probe.a8 = hdr.probe.a8 + 1;   // counts ingress passes on the wire
        if (op == 1) {
            meta.carried = 0x5a;
            clone_preserving_field_list(CloneType.I2E, 5, 1);
        } else if (op == 3) {
            sm.mcast_grp = 7;
        } else if (op == 4 && sm.instance_type == 0) {
            meta.carried = 0x44;
            resubmit_preserving_field_list(1);
        } else if (op == 6) {
            truncate(20);
        } else if (op == 7) {
            digest<learn_t>(1, { hdr.eth.src, sm.ingress_port });
        } else if (op == 8) {
            sm.egress_spec = CPU_PORT;
        }
        hdr.probe.b8 = meta.carried;
        hdr.probe.r4 = (bit<32>)sm.instance_type;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.probe.r1 = (bit<32>)sm.instance_type;
        hdr.probe.r2 = (bit<32>)sm.egress_rid;
        hdr.probe.r3 = (bit<32>)sm.egress_port;
        hdr.probe.a16 = (bit<16>)meta.carried;
        if (hdr.probe.op == 2 && sm.instance_type == 0) {
            meta.carried = 0x66;
            clone_preserving_field_list(CloneType.E2E, 6, 1);
        }
        if (hdr.probe.op == 5 && meta.carried != 0x55) {
            meta.carried = 0x55;
            recirculate_preserving_field_list(1);
        }
    }
}

control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.probe); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
