/*
 * rail_switch: the IPv4 forwarding program of mlfabric's packet switches.
 *
 * One program serves every packet-switch role of the fabrics the project emulates: a rail
 * switch of a rail-only fabric, and the leaf (rail) and spine switches of the
 * rail-optimized fat-tree baseline.
 *   - ipv4_lpm: longest-prefix match on the destination, to a next hop (port and MAC
 *     rewrite), to an ECMP group, to the CPU, or drop.
 *   - ecmp_nexthop: the member of a group of equal paths, chosen per run by the route's
 *     action (the load balancing, see controller/routing/rail_routes.py):
 *       set_ecmp_group: per flow, a crc16 hash of the 5-tuple (ECMP);
 *       set_flowlet_group: per flowlet (LetFlow): a flow's packets stay on one member until
 *         the flow pauses longer than the route's gap_us, then the next flowlet is re-hashed
 *         (flowlet_seen/flowlet_id, registers indexed by a crc32 of the 5-tuple);
 *       set_spray_group: per packet, round robin over the members (spray_next, one counter
 *         per group), as adaptive-routing and packet-spraying fabrics do.
 *   - TTL decrement and IPv4 checksum update; packets with TTL <= 1 or a parser error drop.
 *   - per-port rx/tx counters and a direct counter on ipv4_lpm, so that experiments can
 *     read the traffic of every link and route.
 *   - packet-in/packet-out through CPU_PORT with controller headers.
 *   - gradient mirroring (Checkmate): mirror_select clones the selected TCP flows to a
 *     shadow's port; the original is forwarded untouched (see include/mirror.p4).
 *   - in-network aggregation (SwitchML): chunks sent to UDP port AGG_UDP_PORT are summed in
 *     the switch's registers and the sums multicast back to the job's workers (see
 *     include/aggregate.p4).
 */
#include <core.p4>
#include <v1model.p4>

#define MLFABRIC_AGGREGATION
#include "include/headers.p4"

struct metadata_t {
    bit<16> ecmp_group;
    bit<16> ecmp_member;
    bit<16> lb_size;
    bit<48> flowlet_gap;
    bit<16> l4_src_port;
    bit<16> l4_dst_port;
    bit<32> agg_bit;
    bit<8>  agg_workers;
    bit<16> agg_pool_base;
    bit<16> agg_pool_size;
    bit<16> agg_mgid;
    bit<32> agg_epoch;
    bit<32> agg_index;
}

#define LB_GROUPS 1024
#define FLOWLET_SLOTS 4096

#include "include/parser.p4"
#include "include/mirror.p4"
#include "include/aggregate.p4"

control RailIngress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    counter(512, CounterType.packets_and_bytes) port_rx;
    direct_counter(CounterType.packets_and_bytes) ipv4_lpm_hits;
    MirrorSelect() mirror;
    Aggregate() aggregate;
    register<bit<32>>(LB_GROUPS) spray_next;
    register<bit<48>>(FLOWLET_SLOTS) flowlet_seen;
    register<bit<16>>(FLOWLET_SLOTS) flowlet_id;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action set_nexthop(port_t port, mac_addr_t dmac, mac_addr_t smac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.dst_addr = dmac;
        hdr.ethernet.src_addr = smac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    action set_ecmp_group(bit<16> group, bit<16> size) {
        meta.ecmp_group = group;
        hash(meta.ecmp_member, HashAlgorithm.crc16, (bit<16>)0,
             { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
               meta.l4_src_port, meta.l4_dst_port },
             size);
    }

    action set_flowlet_group(bit<16> group, bit<16> size, bit<48> gap_us) {
        meta.ecmp_group = group;
        meta.lb_size = size;
        meta.flowlet_gap = gap_us;
    }

    action set_spray_group(bit<16> group, bit<16> size) {
        meta.ecmp_group = group;
        meta.lb_size = size;
    }

    action send_to_cpu() {
        standard_metadata.egress_spec = CPU_PORT;
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dst_addr: lpm; }
        actions = { set_nexthop; set_ecmp_group; set_flowlet_group; set_spray_group; send_to_cpu; drop; }
        default_action = drop();
        counters = ipv4_lpm_hits;
        size = 65536;
    }

    table ecmp_nexthop {
        key = {
            meta.ecmp_group: exact;
            meta.ecmp_member: exact;
        }
        actions = { set_nexthop; drop; }
        default_action = drop();
        size = 16384;
    }

    apply {
        port_rx.count((bit<32>)standard_metadata.ingress_port);
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            exit;
        }
        if (standard_metadata.parser_error != error.NoError) {
            drop();
            exit;
        }
        if (!hdr.ipv4.isValid()) {
            drop();
            exit;
        }
        if (hdr.ipv4.ttl <= 1) {
            drop();
            exit;
        }
        if (hdr.agg.isValid()) {
            aggregate.apply(hdr, meta, standard_metadata);
            exit;
        }
        if (hdr.tcp.isValid()) {
            meta.l4_src_port = hdr.tcp.src_port;
            meta.l4_dst_port = hdr.tcp.dst_port;
        } else if (hdr.udp.isValid()) {
            meta.l4_src_port = hdr.udp.src_port;
            meta.l4_dst_port = hdr.udp.dst_port;
        }
        mirror.apply(hdr, meta, standard_metadata);
        switch (ipv4_lpm.apply().action_run) {
            set_ecmp_group: {
                ecmp_nexthop.apply();
            }
            set_flowlet_group: {
                bit<32> slot;
                hash(slot, HashAlgorithm.crc32, (bit<32>)0,
                     { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
                       meta.l4_src_port, meta.l4_dst_port },
                     (bit<32>)FLOWLET_SLOTS);
                bit<48> last;
                bit<16> id;
                flowlet_seen.read(last, slot);
                flowlet_id.read(id, slot);
                bit<48> now = standard_metadata.ingress_global_timestamp;
                if (now - last > meta.flowlet_gap) {
                    id = id + 1;
                    flowlet_id.write(slot, id);
                }
                flowlet_seen.write(slot, now);
                hash(meta.ecmp_member, HashAlgorithm.crc16, (bit<16>)0,
                     { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
                       meta.l4_src_port, meta.l4_dst_port, id },
                     meta.lb_size);
                ecmp_nexthop.apply();
            }
            set_spray_group: {
                bit<32> n;
                spray_next.read(n, (bit<32>)meta.ecmp_group);
                spray_next.write((bit<32>)meta.ecmp_group, n + 1);
                hash(meta.ecmp_member, HashAlgorithm.identity, (bit<16>)0, { n }, meta.lb_size);
                ecmp_nexthop.apply();
            }
        }
    }
}

control RailEgress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    counter(512, CounterType.packets_and_bytes) port_tx;
    MirrorRewrite() mirror_copy;
    AggregateEgress() aggregate_result;

    apply {
        port_tx.count((bit<32>)standard_metadata.egress_port);
        mirror_copy.apply(hdr, meta, standard_metadata);
        aggregate_result.apply(hdr, meta, standard_metadata);
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
            hdr.packet_in._pad = 0;
        }
    }
}

V1Switch(FabricParser(), FabricVerifyChecksum(), RailIngress(), RailEgress(),
         FabricComputeChecksum(), FabricDeparser()) main;
