/* The Python target's holding extensions (--calendar-queue release_us, --port-delay,
 * --port-ingress-delay), seen on the switch's clock: each stamp carries its release time
 * and the timestamps the switch gave it, so a test reads when a packet was held and let go.
 *
 * The release time is the base (the ingress timestamp of the last stamp with flag 2) plus
 * the stamp's offset, so that stamps sent together get release times whose order and ties
 * the test chooses; flag 1: no release time (never held). Stock BMv2 ignores release_us. */
#include <core.p4>
#include <v1model.p4>
#include "include/conformance_headers.p4"

/* ether_type 0x88b6 (local experimental) */
header stamp_t {
    bit<16> seq;
    bit<8>  flags;       /* 1: no release time; 2: this stamp's ingress time is the new base */
    bit<8>  out_port;
    bit<48> offset_us;   /* release time = base + offset_us */
    bit<48> release_us;  /* written by ingress */
    bit<48> ingress_us;  /* ingress_global_timestamp */
    bit<48> enq_us;      /* enq_timestamp: when the packet entered its egress queue */
    bit<48> egress_us;   /* egress_global_timestamp */
}

struct headers_t { ethernet_t eth; stamp_t stamp; }
struct meta_t { bit<48> release_us; bit<48> base; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) { 0x88b6: parse_stamp; default: accept; }
    }
    state parse_stamp { pkt.extract(hdr.stamp); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<48>>(1) base;

    apply {
        if (!hdr.stamp.isValid()) { mark_to_drop(sm); exit; }
        sm.egress_spec = (bit<9>)hdr.stamp.out_port;
        hdr.stamp.ingress_us = sm.ingress_global_timestamp;
        if (hdr.stamp.flags & 2 != 0) { base.write(0, sm.ingress_global_timestamp); }
        base.read(meta.base, 0);
        if (hdr.stamp.flags & 1 == 0) { meta.release_us = meta.base + hdr.stamp.offset_us; }
        hdr.stamp.release_us = meta.release_us;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.stamp.enq_us = (bit<48>)sm.enq_timestamp;
        hdr.stamp.egress_us = sm.egress_global_timestamp;
    }
}

control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.stamp); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
