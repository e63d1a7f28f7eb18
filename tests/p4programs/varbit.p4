/* Conformance: varbit header fields. IPv4 options extracted with a length computed from
 * ihl, a TLV-style header whose varbit length is given in bits by a preceding header,
 * parser errors of variable-length extraction (PacketTooShort, HeaderTooShort,
 * ParserInvalidArgument), varbit assignment, header copies, deparsing and checksums
 * computed over the options. */
#include <core.p4>
#include <v1model.p4>
#include "include/conformance_headers.p4"

error { IPv4IHLBad }

header ipv4_options_t {
    varbit<320> options;
}

/* ether_type 0x88b6: a length in bits, then a header with a varbit in the middle */
header vl_len_t {
    bit<8> nbits;
    bit<8> op;
}

header vl_t {
    bit<8>      tag;
    varbit<64>  data;
    bit<8>      trailer;
}

header report_t {
    bit<8>  err;
    bit<8>  flags;
    bit<16> checksum_ok;
}

struct headers_t {
    ethernet_t     eth;
    report_t       report;
    ipv4_t         ipv4;
    ipv4_options_t ipv4_options;
    vl_len_t       vl_len;
    vl_t           vl;
    vl_t           vl_copy;
}
struct meta_t { bit<8> unused; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) {
            0x0800: parse_ipv4;
            0x88b6: parse_vl;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        verify(hdr.ipv4.ihl >= 5, error.IPv4IHLBad);
        pkt.extract(hdr.ipv4_options, (bit<32>)(((bit<16>)hdr.ipv4.ihl - 5) * 32));
        transition accept;
    }
    state parse_vl {
        pkt.extract(hdr.vl_len);
        pkt.extract(hdr.vl, (bit<32>)hdr.vl_len.nbits);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr,
              hdr.ipv4_options.options },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.report.setValid();
        if (sm.parser_error == error.NoError) { hdr.report.err = 0; }
        else if (sm.parser_error == error.PacketTooShort) { hdr.report.err = 1; }
        else if (sm.parser_error == error.HeaderTooShort) { hdr.report.err = 4; }
        else if (sm.parser_error == error.ParserInvalidArgument) { hdr.report.err = 5; }
        else if (sm.parser_error == error.IPv4IHLBad) { hdr.report.err = 9; }
        else { hdr.report.err = 0xff; }
        hdr.report.flags = (hdr.ipv4.isValid() ? 8w1 : 8w0) | (hdr.ipv4_options.isValid() ? 8w2 : 8w0)
                         | (hdr.vl_len.isValid() ? 8w4 : 8w0) | (hdr.vl.isValid() ? 8w8 : 8w0);
        hdr.report.checksum_ok = sm.checksum_error == 0 ? 16w1 : 16w0;
        sm.egress_spec = sm.parser_error == error.NoError ? 9w1 : 9w2;
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
            if (hdr.ipv4.diffserv == 1) {
                // strip the options
                hdr.ipv4_options.setInvalid();
                hdr.ipv4.total_len = hdr.ipv4.total_len - ((bit<16>)hdr.ipv4.ihl - 5) * 4;
                hdr.ipv4.ihl = 5;
            }
        }
        if (hdr.vl.isValid()) {
            if (hdr.vl_len.op == 1) {
                hdr.vl_copy.setValid();
                hdr.vl_copy.tag = hdr.vl.tag + 1;
                hdr.vl_copy.data = hdr.vl.data;
                hdr.vl_copy.trailer = 0xee;
            } else if (hdr.vl_len.op == 2) {
                hdr.vl_copy = hdr.vl;
            } else if (hdr.vl_len.op == 3) {
                hdr.vl_copy.setValid();
                hdr.vl_copy.tag = 0x33;
            } else if (hdr.vl_len.op == 4) {
                hdr.vl.setInvalid();
            }
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

control CC(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr,
              hdr.ipv4_options.options },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control D(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.eth); pkt.emit(hdr.report); pkt.emit(hdr.ipv4); pkt.emit(hdr.ipv4_options);
        pkt.emit(hdr.vl_len); pkt.emit(hdr.vl); pkt.emit(hdr.vl_copy);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
