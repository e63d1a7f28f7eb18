/*
 * Gradient mirroring (Checkmate, NSDI'26) for the packet switches.
 *
 * A sender marks the TCP connection whose segments the shadow must see by its IPv4 ToS
 * byte, as Checkmate encodes it: bit 7 is the mirror tag, bits 6..2 the 5-bit storage
 * session id, bits 1..0 ECN (left to the hosts, hence the ternary match).
 *
 *   - MirrorSelect (ingress): mirror_select matches the flow (source, destination, ToS tag
 *     and session, TCP destination port) and clones the packet, ingress to egress, to a
 *     clone session whose replica is the port toward the job's shadow. The original
 *     continues through ipv4_lpm exactly as it would without mirroring.
 *   - MirrorRewrite (egress): on the copy only, mirror_rewrite (egress port, session bits)
 *     rewrites the destination MAC to the shadow NIC's, so the copy is addressed to it.
 *     IP and TCP are left as they were: the shadow captures passively and reassembles the
 *     sender's stream; its kernel never treats the copy as its own traffic.
 */
#ifndef MLFABRIC_MIRROR_P4
#define MLFABRIC_MIRROR_P4

#define PKT_INSTANCE_TYPE_INGRESS_CLONE 1

control MirrorSelect(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {
    direct_counter(CounterType.packets_and_bytes) mirror_select_hits;

    action mirror_to_shadow(bit<32> session) {
        clone(CloneType.I2E, session);
    }

    table mirror_select {
        key = {
            hdr.ipv4.src_addr: exact;
            hdr.ipv4.dst_addr: exact;
            hdr.ipv4.diffserv: ternary;
            meta.l4_dst_port: exact;
        }
        actions = { mirror_to_shadow; NoAction; }
        default_action = NoAction();
        counters = mirror_select_hits;
        size = 1024;
    }

    apply {
        if (hdr.tcp.isValid()) {
            mirror_select.apply();
        }
    }
}

control MirrorRewrite(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    action to_shadow(mac_addr_t dmac) {
        hdr.ethernet.dst_addr = dmac;
    }

    table mirror_rewrite {
        key = {
            standard_metadata.egress_port: exact;
            hdr.ipv4.diffserv: ternary;
        }
        actions = { to_shadow; NoAction; }
        default_action = NoAction();
        size = 1024;
    }

    apply {
        if (standard_metadata.instance_type == PKT_INSTANCE_TYPE_INGRESS_CLONE &&
                hdr.ipv4.isValid()) {
            mirror_rewrite.apply();
        }
    }
}

#endif
