/*
 * tor_switch: the top-of-rack switch of an optical fabric, with OpenOptics-style time-flow
 * tables on stock v1model.
 *
 *   - ipv4_lpm: this rack's hosts (/32) go down, rewritten to the host's MAC.
 *   - Anything else is for another rack: rack_of (LPM on the destination) names the rack;
 *     the switch's clock (as circuit_switch's: offset to the fabric's epoch, phase by
 *     restoring division, slot by range lookup) gives the arrival slot; uplinks says
 *     whether the packet came down from a circuit (transit) or from a host.
 *   - timeflow: (version, rack, arrival slot, transit) -> (uplink port, slots to wait).
 *     The packet's release time, the start of its send slot on the switch's clock, goes in
 *     meta.release_us. Stock BMv2 has no calendar queue, so a packet whose circuit is not
 *     up in its arrival slot (wait > 0) is dropped and counted in calendar_drops; where the
 *     target holds packets until meta.release_us (the Python target's calendar-queue
 *     extension), the controller sets the clock's hold flag and the packet waits instead.
 *   - Versions, for consistent reconfiguration (controller/reconfigure/): clock, slot
 *     windows and time-flow entries carry a configuration version (0 or 1), and the
 *     version is a function of time (TimeFlip, Mizrahi et al., 2015). While the controller
 *     switches configurations, the flip table (a range on the timestamp) holds a cut T and
 *     the next configuration's epoch E: a packet the old configuration would send at or
 *     after T, and every packet that arrives in [T, E), is sent by timeflow_flip instead
 *     (the next configuration's entries for a packet arriving at E), so no packet is sent
 *     into a circuit switch under the other configuration's matching. The circuit switches
 *     flip between T and E; from E on, the clock's range entry selects the next version.
 *   - TDTCP notification (controller/tdtcp/): tdn_of_slot names the time-division network
 *     (TDN) of each slot. When the ToR sees a slot whose TDN differs from the last one it
 *     announced (register notified_tdn), it clones the packet to the notification session
 *     the controller configured (replicas: every host of the rack, one host, or no session
 *     at all), and egress turns each copy into ICMP type 7, code 0, the TDN id in byte 0 of
 *     the rest-of-header (Etalon's icmptdnupdate), addressed to the host behind its port.
 *     Any packet for another rack is a trigger, and so is a tick: a packet-out with probe
 *     == 0xFE that the controller sends just after each change, so a rack without traffic
 *     is told too. The register makes it one notification per change, whatever the number
 *     of triggers.
 *   - Clock probe: a packet-out with probe in 1..0xFD comes back as a packet-in carrying the
 *     ingress timestamp (controller/schedule/clock.py); probe == 0 is an ordinary
 *     packet-out to egress_port.
 */
#include <core.p4>
#include <v1model.p4>

#include "include/clock.p4"

#define CPU_PORT 510
#define ETHERTYPE_IPV4 0x0800
#define IP_PROTO_TCP 6
#define IP_PROTO_UDP 17
#define IP_PROTO_ICMP 1
#define PROBE_TICK 0xFE
#define ICMP_ACTIVE_TDN_ID 7
#define PKT_INSTANCE_INGRESS_CLONE 1
#define NOTIFY_FIELDS 3

typedef bit<9>  port_t;
typedef bit<48> mac_addr_t;

@controller_header("packet_out")
header packet_out_t {
    port_t egress_port;
    bit<7> _pad;
    bit<8> probe;
}

@controller_header("packet_in")
header packet_in_t {
    port_t  ingress_port;
    bit<7>  _pad;
    bit<48> timestamp_us;
    bit<8>  probe;
}

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
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

header icmp_t {
    bit<8>  type;
    bit<8>  code;
    bit<16> checksum;
    bit<32> rest;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    ipv4_t       ipv4;
    icmp_t       icmp;
}

struct metadata_t {
    bit<96> phase;
    bit<96> cycle;
    bit<48> phase_us;
    bit<16> slot;
    bit<16> rack;
    bit<1>  transit;
    bit<1>  clocked;
    bit<16> wait_slots;
    bit<48> probe_us;
    bit<48> slot_start_us;
    bit<48> release_us;
    bit<1>  hold;
    bit<1>  version;
    bit<1>  flipping;
    bit<48> cut_us;
    bit<48> next_epoch_us;
    bit<1>  tick;
    bit<1>  remote;
    bit<1>  slot_known;
    bit<1>  tdn_known;
    bit<1>  notify;
    bit<32> notify_session;
    @field_list(NOTIFY_FIELDS)
    bit<8>  tdn;
}

parser TorParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

control TorVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control TorIngress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    counter(512, CounterType.packets_and_bytes) port_rx;
    counter(512, CounterType.packets_and_bytes) calendar_drops;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action set_nexthop(port_t port, mac_addr_t dmac, mac_addr_t smac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.dst_addr = dmac;
        hdr.ethernet.src_addr = smac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dst_addr: lpm; }
        actions = { set_nexthop; drop; NoAction; }
        default_action = NoAction();
        size = 4096;
    }

    action set_rack(bit<16> rack) {
        meta.rack = rack;
    }

    table rack_of {
        key = { hdr.ipv4.dst_addr: lpm; }
        actions = { set_rack; drop; }
        default_action = drop();
        size = 1024;
    }

    action set_clock(bit<1> version, bit<48> offset_us, bit<48> cycle_us, bit<1> hold) {
        meta.version = version;
        meta.phase = (bit<96>)standard_metadata.ingress_global_timestamp + (bit<96>)offset_us;
        meta.cycle = (bit<96>)cycle_us;
        meta.clocked = 1;
        meta.hold = hold;
    }

    action unclocked(bit<1> version, bit<1> hold) {
        meta.version = version;
        meta.slot = 0;
        meta.slot_known = 1;
        meta.clocked = 0;
        meta.hold = hold;
    }

    table clock {
        key = { standard_metadata.ingress_global_timestamp: range; }
        actions = { set_clock; unclocked; }
        default_action = unclocked(0, 0);
        size = 4;
    }

    action cut_at(bit<48> cut_us, bit<48> next_epoch_us) {
        meta.cut_us = cut_us;
        meta.next_epoch_us = next_epoch_us;
    }

    action before_epoch(bit<48> next_epoch_us) {
        meta.flipping = 1;
        meta.next_epoch_us = next_epoch_us;
    }

    table flip {
        key = { standard_metadata.ingress_global_timestamp: range; }
        actions = { cut_at; before_epoch; NoAction; }
        default_action = NoAction();
        size = 4;
    }

    action set_slot(bit<16> slot, bit<48> start_us) {
        meta.slot = slot;
        meta.slot_start_us = start_us;
        meta.slot_known = 1;
    }

    table slot_of_phase {
        key = {
            meta.version: exact;
            meta.phase_us: range;
        }
        actions = { set_slot; NoAction; }
        default_action = NoAction();
        size = 65536;
    }

    action from_circuit() {
        meta.transit = 1;
    }

    table uplinks {
        key = { standard_metadata.ingress_port: exact; }
        actions = { from_circuit; NoAction; }
        default_action = NoAction();
        size = 64;
    }

    action send(port_t port, bit<16> wait_slots, bit<48> wait_us) {
        standard_metadata.egress_spec = port;
        meta.wait_slots = wait_slots;
        meta.release_us = standard_metadata.ingress_global_timestamp - (meta.phase_us - meta.slot_start_us)
                          + wait_us;
    }

    table timeflow {
        key = {
            meta.version: exact;
            meta.rack: exact;
            meta.slot: exact;
            meta.transit: exact;
        }
        actions = { send; drop; }
        default_action = drop();
        size = 1048576;
    }

    action send_at_epoch(port_t port, bit<16> wait_slots, bit<48> wait_us) {
        standard_metadata.egress_spec = port;
        meta.wait_slots = wait_slots;
        meta.release_us = meta.next_epoch_us + wait_us;
    }

    table timeflow_flip {
        key = {
            meta.rack: exact;
            meta.transit: exact;
        }
        actions = { send_at_epoch; drop; }
        default_action = drop();
        size = 4096;
    }

    register<bit<8>>(1) notified_tdn;  // TDN id + 1 of the last notification; 0: none yet
    counter(1, CounterType.packets) notifications;

    action set_tdn(bit<8> tdn) {
        meta.tdn = tdn;
        meta.tdn_known = 1;
    }

    table tdn_of_slot {
        key = {
            meta.version: exact;
            meta.slot: exact;
        }
        actions = { set_tdn; NoAction; }
        default_action = NoAction();
        size = 65536;
    }

    action notify_via(bit<32> session) {
        meta.notify = 1;
        meta.notify_session = session;
    }

    table notify {
        key = { }
        actions = { notify_via; NoAction; }
        default_action = NoAction();
    }

    apply {
        port_rx.count((bit<32>)standard_metadata.ingress_port);
        if (hdr.packet_out.isValid() && hdr.packet_out.probe == PROBE_TICK) {
            meta.tick = 1;
        } else if (hdr.packet_out.isValid()) {
            if (hdr.packet_out.probe != 0) {
                meta.probe_us = standard_metadata.ingress_global_timestamp;
                standard_metadata.egress_spec = CPU_PORT;
            } else {
                standard_metadata.egress_spec = hdr.packet_out.egress_port;
                hdr.packet_out.setInvalid();
            }
            exit;
        }
        if (meta.tick == 0) {
            if (!hdr.ipv4.isValid() || hdr.ipv4.ttl <= 1) {
                drop();
                exit;
            }
            switch (ipv4_lpm.apply().action_run) {
                NoAction: {
                    meta.remote = 1;
                }
            }
        }
        if (meta.tick == 1 || meta.remote == 1) {
            if (meta.remote == 1) {
                rack_of.apply();
                uplinks.apply();
            }
            clock.apply();
            flip.apply();
            if (meta.flipping == 0) {
                if (meta.clocked == 1) {
                    PHASE_MOD_CYCLE
                    meta.phase_us = (bit<48>)meta.phase;
                    slot_of_phase.apply();
                }
                if (meta.remote == 1) {
                    timeflow.apply();
                    if (meta.cut_us != 0 && meta.release_us >= meta.cut_us) {
                        meta.flipping = 1;
                    }
                }
            }
            if (meta.remote == 1) {
                if (meta.flipping == 1) {
                    timeflow_flip.apply();
                }
                hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
                if (meta.wait_slots != 0 && meta.hold == 0) {
                    calendar_drops.count((bit<32>)standard_metadata.ingress_port);
                    drop();
                }
            }
            // TDTCP: announce a new TDN once (not while configurations are switching)
            if (meta.flipping == 0 && meta.slot_known == 1) {
                tdn_of_slot.apply();
                if (meta.tdn_known == 1) {
                    notify.apply();
                    if (meta.notify == 1) {
                        bit<8> last;
                        notified_tdn.read(last, 0);
                        if (last != meta.tdn + 1) {
                            notified_tdn.write(0, meta.tdn + 1);
                            notifications.count(0);
                            clone_preserving_field_list(CloneType.I2E, meta.notify_session, NOTIFY_FIELDS);
                        }
                    }
                }
            }
            if (meta.tick == 1) {
                drop();
            }
        }
    }
}

control TorEgress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    counter(512, CounterType.packets_and_bytes) port_tx;

    action notification(mac_addr_t dmac, mac_addr_t smac, bit<32> dst, bit<32> src) {
        hdr.packet_out.setInvalid();
        hdr.ethernet.setValid();
        hdr.ethernet.dst_addr = dmac;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.ether_type = ETHERTYPE_IPV4;
        hdr.ipv4.setValid();
        hdr.ipv4.version = 4;
        hdr.ipv4.ihl = 5;
        hdr.ipv4.diffserv = 0;
        hdr.ipv4.total_len = 28;
        hdr.ipv4.identification = 0;
        hdr.ipv4.flags = 0;
        hdr.ipv4.frag_offset = 0;
        hdr.ipv4.ttl = 64;
        hdr.ipv4.protocol = IP_PROTO_ICMP;
        hdr.ipv4.src_addr = src;
        hdr.ipv4.dst_addr = dst;
        hdr.icmp.setValid();
        hdr.icmp.type = ICMP_ACTIVE_TDN_ID;
        hdr.icmp.code = 0;
        hdr.icmp.checksum = 0;
        hdr.icmp.rest = (bit<32>)meta.tdn << 24;
        truncate(42);  // Ethernet, IPv4 and ICMP headers: the trigger's payload goes
    }

    action drop_copy() {
        mark_to_drop(standard_metadata);
    }

    table notify_host {
        key = { standard_metadata.egress_port: exact; }
        actions = { notification; drop_copy; }
        default_action = drop_copy();
        size = 512;
    }

    apply {
        if (standard_metadata.instance_type == PKT_INSTANCE_INGRESS_CLONE) {
            notify_host.apply();
        }
        port_tx.count((bit<32>)standard_metadata.egress_port);
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
            hdr.packet_in._pad = 0;
            hdr.packet_in.timestamp_us = meta.probe_us;
            hdr.packet_in.probe = 0;
            if (hdr.packet_out.isValid()) {
                hdr.packet_in.probe = hdr.packet_out.probe;
                hdr.packet_out.setInvalid();
            }
        }
    }
}

control TorComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset,
              hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        update_checksum(hdr.icmp.isValid(), { hdr.icmp.type, hdr.icmp.code, hdr.icmp.rest },
            hdr.icmp.checksum, HashAlgorithm.csum16);
    }
}

control TorDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.icmp);
    }
}

V1Switch(TorParser(), TorVerifyChecksum(), TorIngress(), TorEgress(), TorComputeChecksum(),
         TorDeparser()) main;
