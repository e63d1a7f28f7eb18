/* Conformance: hash algorithms and checksums. Hash results go into the probe header;
 * the IPv4 checksum is verified (checksum_error reported) and updated, and the UDP
 * checksum is updated over the pseudo-header and the payload. */
#include <core.p4>
#include <v1model.p4>
#include "include/conformance_headers.p4"

struct headers_t { ethernet_t eth; probe_t probe; ipv4_t ipv4; udp_t udp; }
struct meta_t { bit<16> h16; bit<32> h32; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) { 0x88b5: parse_probe; 0x0800: parse_ipv4; default: accept; }
    }
    state parse_probe { pkt.extract(hdr.probe); transition accept; }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) { 17: parse_udp; default: accept; }
    }
    state parse_udp { pkt.extract(hdr.udp); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset,
              hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.probe.isValid()) {
            hash(hdr.probe.r1, HashAlgorithm.crc32, 32w0, { hdr.probe.a32, hdr.probe.b32 }, 32w0xffffffff);
            hash(hdr.probe.a16, HashAlgorithm.crc16, 16w0, { hdr.probe.a32, hdr.probe.b8 }, 16w0xffff);
            hash(hdr.probe.r2, HashAlgorithm.identity, 32w0, { hdr.probe.b32 }, 32w0xffffffff);
            hash(hdr.probe.b16, HashAlgorithm.csum16, 16w0, { hdr.probe.a32, hdr.probe.b32 }, 16w0xffff);
            hash(hdr.probe.r3, HashAlgorithm.crc32, 32w100, { hdr.probe.a8, hdr.probe.a32 }, 32w1000);
            hash(hdr.probe.r4, HashAlgorithm.crc16, 32w0, { hdr.probe.a32[12:0], hdr.probe.b8[2:0] }, 32w65536);
            hash(hdr.probe.b8, HashAlgorithm.xor16, 8w0, { hdr.probe.a32 }, 8w255);
        }
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.diffserv = (bit<8>)sm.checksum_error;
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

control CC(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset,
              hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        update_checksum_with_payload(hdr.udp.isValid(),
            { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, hdr.udp.length,
              hdr.udp.src_port, hdr.udp.dst_port, hdr.udp.length },
            hdr.udp.checksum, HashAlgorithm.csum16);
    }
}

control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.probe); pkt.emit(hdr.ipv4); pkt.emit(hdr.udp); }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
