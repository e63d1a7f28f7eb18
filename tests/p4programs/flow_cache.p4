/* A flow cache: the first program people write with idle timeouts. `flows` (exact on the
 * probe's a32, with support_timeout) forwards what it knows; `ports` has no timeout support,
 * so PI refuses an idle_timeout_ns there. A hit in either table writes the entry's port to
 * r2; the default action marks a miss with 0xff. Egress has a flow table of its own
 * (`egress_flows`, with support_timeout), hit on b32, so that an entry hit only in egress is
 * kept alive too. `pinned` has const entries and support_timeout: PI reads its entries back
 * without time_since_last_hit. */
#include <core.p4>
#include <v1model.p4>
#include "include/conformance_headers.p4"

struct headers_t { ethernet_t eth; probe_t probe; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) { 0x88b5: parse_probe; default: accept; }
    }
    state parse_probe { pkt.extract(hdr.probe); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action fwd(bit<9> port) { sm.egress_spec = port; hdr.probe.r2 = (bit<32>)port; }
    action miss() { sm.egress_spec = 1; hdr.probe.r2 = 0xff; }
    table flows {
        key = { hdr.probe.a32: exact; }
        actions = { fwd; miss; }
        default_action = miss();
        support_timeout = true;
        size = 65536; /* make bench sweeps 65,536 entries (bench/idle_sweep.py) */
    }
    table ports {
        key = { hdr.probe.b32: exact; }
        actions = { fwd; miss; }
        default_action = miss();
    }

    table pinned {
        key = { hdr.probe.a8: exact; }
        actions = { fwd; miss; }
        default_action = miss();
        support_timeout = true;
        const entries = { 1 : fwd(4); 2 : fwd(5); }
    }

    apply {
        sm.egress_spec = 1;
        if (!hdr.probe.isValid()) { exit; }
        if (!flows.apply().hit) { ports.apply(); }
        pinned.apply();
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action seen(bit<32> tag) { hdr.probe.r3 = tag; }
    action unseen() { }
    table egress_flows {
        key = { hdr.probe.b32: ternary; }
        actions = { seen; unseen; }
        default_action = unseen();
        support_timeout = true;
    }
    apply { if (hdr.probe.isValid()) { egress_flows.apply(); } }
}

control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.probe); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
