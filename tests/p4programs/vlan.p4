/* Conformance and veth tests: 802.1Q frames. A tagged frame is bridged out of port 2 as it
 * came in; an untagged IPv4 packet is routed out of port 3 with its TTL decremented; a
 * counter records the bytes each port received. On a real port the kernel removes the tag
 * before a packet socket sees the frame: the switch must put it back. */
#include <core.p4>
#include <v1model.p4>
#include "include/conformance_headers.p4"

header vlan_t {
    bit<3>  pcp;
    bit<1>  dei;
    bit<12> vid;
    bit<16> ether_type;
}

struct headers_t {
    ethernet_t eth;
    vlan_t     vlan;
    ipv4_t     ipv4;
}
struct meta_t { bit<8> unused; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) {
            0x8100: parse_vlan;
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_vlan {
        pkt.extract(hdr.vlan);
        transition select(hdr.vlan.ether_type) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 { pkt.extract(hdr.ipv4); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    counter(8, CounterType.packets_and_bytes) rx;
    apply {
        rx.count((bit<32>)sm.ingress_port);
        if (hdr.vlan.isValid()) {
            sm.egress_spec = 2;
        } else if (hdr.ipv4.isValid()) {
            sm.egress_spec = 3;
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        } else {
            mark_to_drop(sm);
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.vlan); pkt.emit(hdr.ipv4); }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
