/*
 * In-network aggregation (SwitchML, NSDI'21) for the rail switches: the protocol's rules are
 * those of p4app-switchML's Tofino pipeline, on v1model registers.
 *
 *   - agg_workers (job, source address) names the worker: its bit, the job's worker count,
 *     its slot pool (base and size in the switch's AGG_SLOTS), its multicast group and the
 *     pool's epoch. Anything else sent to AGG_UDP_PORT is dropped: an unknown job or worker.
 *   - Each slot has two sets (the packet's AGG_FLAG_SET): a worker alternates them when it
 *     reuses a slot, so the previous round's result stays readable in the other set (the
 *     shadow copy) while the new round fills this one.
 *   - A contribution to set s: its bit is added to bitmap[s] and cleared from bitmap[1-s].
 *     The first contribution of a round (bitmap[s] was empty) overwrites the values, the
 *     others add; the remaining count falls from workers-1; at 0 the sum is complete and goes
 *     to the job's multicast group, each copy rewritten to its worker in egress.
 *   - A duplicate (the worker's bit is already in bitmap[s]: a retransmission after a lost
 *     result) is answered from the set, unicast to the sender, when the round is complete,
 *     and dropped when it is not: it is never added twice.
 *   - The epoch: `aggregate add` gives every pool a new one. The first packet of a slot whose
 *     stored epoch differs clears the slot, so a new job never reads a previous job's state
 *     (the registers are the data plane's; P4Runtime cannot reset them on BMv2).
 *   - agg_events counts per switch: 0 contributions, 1 completions, 2 duplicates answered,
 *     3 duplicates dropped, 4 unknown job or worker, 5 slot outside the pool.
 */
#ifndef MLFABRIC_AGGREGATE_P4
#define MLFABRIC_AGGREGATE_P4

#define AGG_SLOTS 1024
#define AGG_EVENT_CONTRIBUTION 0
#define AGG_EVENT_COMPLETION 1
#define AGG_EVENT_DUP_ANSWERED 2
#define AGG_EVENT_DUP_DROPPED 3
#define AGG_EVENT_UNKNOWN 4
#define AGG_EVENT_OUTSIDE_POOL 5

#define AGG_REGISTER(i) register<bit<32>>(2 * AGG_SLOTS) agg_lane_##i;
#define AGG_WRITE(i) agg_lane_##i.write(meta.agg_index, hdr.agg_values.v##i);
#define AGG_ADD(i) agg_lane_##i.read(sum, meta.agg_index); \
    hdr.agg_values.v##i = hdr.agg_values.v##i + sum; \
    agg_lane_##i.write(meta.agg_index, hdr.agg_values.v##i);
#define AGG_READ(i) agg_lane_##i.read(hdr.agg_values.v##i, meta.agg_index);

control Aggregate(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    counter(8, CounterType.packets_and_bytes) agg_events;
    direct_counter(CounterType.packets_and_bytes) agg_workers_hits;
    register<bit<32>>(2 * AGG_SLOTS) agg_bitmap;
    register<bit<8>>(2 * AGG_SLOTS) agg_remaining;
    register<bit<8>>(2 * AGG_SLOTS) agg_exponent;
    register<bit<32>>(AGG_SLOTS) agg_epoch;
    AGG_LANES_DO(AGG_REGISTER)

    action set_worker(bit<32> worker_bit, bit<8> workers, bit<16> pool_base, bit<16> pool_size,
                      bit<16> mgid, bit<32> epoch) {
        meta.agg_bit = worker_bit;
        meta.agg_workers = workers;
        meta.agg_pool_base = pool_base;
        meta.agg_pool_size = pool_size;
        meta.agg_mgid = mgid;
        meta.agg_epoch = epoch;
    }

    action reject() {
        agg_events.count(AGG_EVENT_UNKNOWN);
        mark_to_drop(standard_metadata);
    }

    table agg_workers {
        key = {
            hdr.agg.job: exact;
            hdr.ipv4.src_addr: exact;
        }
        actions = { set_worker; reject; }
        default_action = reject();
        counters = agg_workers_hits;
        size = 1024;
    }

    action write_first() {
        AGG_LANES_DO(AGG_WRITE)
    }

    action add_values() {
        bit<32> sum;
        AGG_LANES_DO(AGG_ADD)
    }

    action read_values() {
        AGG_LANES_DO(AGG_READ)
    }

    /* The packet becomes a result: from the service address (the request's destination) to
     * the port the workers send from; multicast copies get their worker's addresses in egress. */
    action to_result(bit<8> flags) {
        hdr.agg.flags = hdr.agg.flags | flags;
        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
        hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
        hdr.ipv4.ttl = 64;
        hdr.udp.dst_port = hdr.udp.src_port;
        hdr.udp.src_port = AGG_UDP_PORT;
        hdr.udp.checksum = 0;
    }

    apply {
        if (!agg_workers.apply().hit) {
            exit;
        }
        if (hdr.agg.slot >= meta.agg_pool_size) {
            agg_events.count(AGG_EVENT_OUTSIDE_POOL);
            mark_to_drop(standard_metadata);
            exit;
        }
        bit<32> slot = (bit<32>)meta.agg_pool_base + (bit<32>)hdr.agg.slot;
        bit<32> this_set = slot * 2 + (bit<32>)(hdr.agg.flags & AGG_FLAG_SET);
        bit<32> other_set = slot * 2 + (bit<32>)((hdr.agg.flags & AGG_FLAG_SET) ^ AGG_FLAG_SET);
        meta.agg_index = this_set;

        bit<32> epoch;
        agg_epoch.read(epoch, slot);
        if (epoch != meta.agg_epoch) {  /* a new pool on this slot: forget the last job's rounds */
            agg_epoch.write(slot, meta.agg_epoch);
            agg_bitmap.write(slot * 2, 0);
            agg_bitmap.write(slot * 2 + 1, 0);
            agg_remaining.write(slot * 2, 0);
            agg_remaining.write(slot * 2 + 1, 0);
        }

        bit<32> seen;
        bit<32> seen_other;
        bit<8> remaining;
        bit<8> exponent;
        agg_bitmap.read(seen, this_set);
        agg_bitmap.read(seen_other, other_set);
        agg_remaining.read(remaining, this_set);
        agg_exponent.read(exponent, this_set);
        agg_bitmap.write(other_set, seen_other & ~meta.agg_bit);

        if ((seen & meta.agg_bit) != 0) {  /* a retransmission */
            if (remaining == 0) {
                agg_events.count(AGG_EVENT_DUP_ANSWERED);
                mac_addr_t sender_mac = hdr.ethernet.src_addr;
                ipv4_addr_t sender_ip = hdr.ipv4.src_addr;
                read_values();
                hdr.agg.exponent = exponent;
                hdr.agg.workers = meta.agg_workers;
                hdr.agg.bitmap = seen;
                to_result(AGG_FLAG_RESULT | AGG_FLAG_RETRANSMIT);
                hdr.ethernet.dst_addr = sender_mac;
                hdr.ipv4.dst_addr = sender_ip;
                standard_metadata.egress_spec = standard_metadata.ingress_port;
            } else {
                agg_events.count(AGG_EVENT_DUP_DROPPED);
                mark_to_drop(standard_metadata);
            }
            exit;
        }

        agg_events.count(AGG_EVENT_CONTRIBUTION);
        seen = seen | meta.agg_bit;
        agg_bitmap.write(this_set, seen);
        if ((seen & ~meta.agg_bit) == 0) {  /* the round's first contribution */
            write_first();
            remaining = meta.agg_workers - 1;
        } else {
            add_values();
            remaining = remaining - 1;
            if (hdr.agg.exponent < exponent) {
                hdr.agg.exponent = exponent;
            }
        }
        agg_exponent.write(this_set, hdr.agg.exponent);
        agg_remaining.write(this_set, remaining);
        if (remaining == 0) {
            agg_events.count(AGG_EVENT_COMPLETION);
            hdr.agg.workers = meta.agg_workers;
            hdr.agg.bitmap = seen;
            to_result(AGG_FLAG_RESULT);
            standard_metadata.mcast_grp = meta.agg_mgid;
        } else {
            mark_to_drop(standard_metadata);
        }
    }
}

/* Each multicast copy of a result goes to its worker: rid = the worker's index + 1. */
control AggregateEgress(inout headers_t hdr, inout metadata_t meta,
                        inout standard_metadata_t standard_metadata) {
    action to_worker(mac_addr_t dmac, ipv4_addr_t addr) {
        hdr.ethernet.dst_addr = dmac;
        hdr.ipv4.dst_addr = addr;
    }

    table agg_result {
        key = {
            hdr.agg.job: exact;
            standard_metadata.egress_rid: exact;
        }
        actions = { to_worker; NoAction; }
        default_action = NoAction();
        size = 1024;
    }

    apply {
        if (hdr.agg.isValid() && standard_metadata.egress_rid != 0) {
            agg_result.apply();
        }
    }
}

#endif
