/* Conformance: counters, direct counters, registers and meters. Each packet adds a4 to
 * register slot a8 and reports the previous value; an unconfigured meter reports green. */
#include <core.p4>
#include <v1model.p4>
#include "include/conformance_headers.p4"

struct headers_t { ethernet_t eth; probe_t probe; }
struct meta_t { bit<32> old; bit<2> color; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) { 0x88b5: parse_probe; default: accept; }
    }
    state parse_probe { pkt.extract(hdr.probe); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    register<bit<32>>(16) acc;
    counter(16, CounterType.packets_and_bytes) by_op;
    meter(16, MeterType.packets) rate;
    direct_counter(CounterType.packets) flow_hits;

    action fwd(bit<9> port) { sm.egress_spec = port; }
    table flows {
        key = { hdr.eth.src: exact; }
        actions = { fwd; NoAction; }
        default_action = NoAction();
        counters = flow_hits;
    }

    apply {
        sm.egress_spec = 1;
        if (!hdr.probe.isValid()) { exit; }
        flows.apply();
        by_op.count((bit<32>)hdr.probe.op);
        bit<32> idx = (bit<32>)hdr.probe.a8 & 15;
        acc.read(meta.old, idx);
        acc.write(idx, meta.old + hdr.probe.a32);
        rate.execute_meter((bit<32>)hdr.probe.op, meta.color);
        hdr.probe.r1 = meta.old;
        hdr.probe.r2 = (bit<32>)meta.color;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.probe); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
