/* Conformance: varbit fields inside header stacks. A stack of TLV options whose data is a
 * varbit sized by the preceding length byte (extract_VL into the next element), reading
 * and writing elements, pop_front/push_front with varbit elements, copying an element and
 * deparsing the whole stack; parser errors inside the stack. */
#include <core.p4>
#include <v1model.p4>
#include "include/conformance_headers.p4"

header tlv_len_t { bit<8> kind; bit<8> len; }
header tlv_t { bit<8> kind; bit<8> len; varbit<48> data; }

struct headers_t {
    ethernet_t eth;
    probe_t    probe;
    tlv_t[3]   opts;
}
struct meta_t { bit<8> n; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        pkt.extract(hdr.probe);
        transition next_opt;
    }
    state next_opt {
        transition select(pkt.lookahead<bit<8>>()) {
            0: accept;
            default: parse_opt;
        }
    }
    state parse_opt {
        tlv_len_t l = pkt.lookahead<tlv_len_t>();
        pkt.extract(hdr.opts.next, (bit<32>)l.len * 8);
        meta.n = meta.n + 1;
        transition next_opt;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 2;
        hdr.probe.r1 = (bit<32>)meta.n;
        if (sm.parser_error == error.NoError) { hdr.probe.r2 = 0; }
        else if (sm.parser_error == error.PacketTooShort) { hdr.probe.r2 = 1; }
        else if (sm.parser_error == error.StackOutOfBounds) { hdr.probe.r2 = 3; }
        else if (sm.parser_error == error.HeaderTooShort) { hdr.probe.r2 = 4; }
        else { hdr.probe.r2 = 0xff; }
        if (hdr.opts[0].isValid()) { hdr.probe.r3 = (bit<32>)hdr.opts[0].len; }
        if (hdr.opts[1].isValid()) {
            hdr.opts[1].kind = hdr.opts[1].kind + 0x10;
            hdr.probe.r4 = (bit<32>)hdr.opts[1].len;
        }
        if (hdr.probe.op == 1) {
            hdr.opts.pop_front(1);
        } else if (hdr.probe.op == 2) {
            hdr.opts.push_front(1);
        } else if (hdr.probe.op == 3) {
            hdr.opts[2] = hdr.opts[0];
        } else if (hdr.probe.op == 4) {
            hdr.opts[0].setInvalid();
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.probe); pkt.emit(hdr.opts); }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
