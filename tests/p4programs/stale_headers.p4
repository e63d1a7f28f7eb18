/* Conformance: fields of a header that is not valid in the current packet. BMv2 resets only
 * the valid bits between packets and keeps the headers' storage, so a program that reads
 * an unparsed header sees the values the previous packet left there. Here every packet
 * copies the TCP ports (valid or not) into the UDP-or-TCP-agnostic flow key, hashes it to
 * choose an ECMP member, and reports what it read. */
#include <core.p4>
#include <v1model.p4>
#include "include/conformance_headers.p4"

header tcp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq;
    bit<32> ack;
    bit<16> flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent;
}

header report_t {
    bit<16> tcp_src;
    bit<16> tcp_dst;
    bit<16> udp_src;
    bit<8>  tcp_valid;
    bit<8>  member;
}

struct headers_t {
    ethernet_t eth;
    report_t   report;
    ipv4_t     ipv4;
    tcp_t      tcp;
    udp_t      udp;
}
struct meta_t { bit<16> sport; bit<16> dport; bit<16> hash; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            6: parse_tcp;
            17: parse_udp;
            default: accept;
        }
    }
    state parse_tcp { pkt.extract(hdr.tcp); transition accept; }
    state parse_udp { pkt.extract(hdr.udp); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        // read the TCP header whether or not this packet has one
        meta.sport = hdr.tcp.src_port;
        meta.dport = hdr.tcp.dst_port;
        hash(meta.hash, HashAlgorithm.crc16, 16w0,
             { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, meta.sport, meta.dport }, 16w4);
        sm.egress_spec = (bit<9>)meta.hash + 1;
        hdr.report.setValid();
        hdr.report.tcp_src = hdr.tcp.src_port;
        hdr.report.tcp_dst = hdr.tcp.dst_port;
        hdr.report.udp_src = hdr.udp.src_port;
        hdr.report.tcp_valid = hdr.tcp.isValid() ? 8w1 : 8w0;
        hdr.report.member = (bit<8>)meta.hash;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.report); pkt.emit(hdr.ipv4); pkt.emit(hdr.tcp); pkt.emit(hdr.udp); }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
