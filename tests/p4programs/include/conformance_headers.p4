/* Headers shared by the conformance programs: Ethernet, then a test header whose fields
 * the programs fill with computed values so that every result is visible on the wire. */
#ifndef CONFORMANCE_HEADERS_P4
#define CONFORMANCE_HEADERS_P4

#define CPU_PORT 510

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

/* ether_type 0x88b5 (local experimental) */
header probe_t {
    bit<8>  op;
    bit<8>  a8;
    bit<8>  b8;
    bit<16> a16;
    bit<16> b16;
    bit<32> a32;
    bit<32> b32;
    bit<32> r1;
    bit<32> r2;
    bit<32> r3;
    bit<32> r4;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

header mpls_t {
    bit<20> label;
    bit<3>  tc;
    bit<1>  bos;
    bit<8>  ttl;
}

#endif
