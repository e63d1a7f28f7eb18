/*
 * circuit_switch: an optical circuit switch (OCS) of a reconfigurable fabric, on stock
 * v1model. It forwards frames port to port along the matching of the active time slice and
 * never looks inside them (nothing is parsed, so any payload passes unchanged).
 *
 *   - clock: the controller either pins a slice (one-shot, like a patch panel) or gives the
 *     switch its offset to the fabric's common epoch and the schedule's cycle. The phase in
 *     the cycle is (ingress_global_timestamp + offset) mod cycle; p4c has no run-time
 *     modulo, so it is computed by restoring division, 48 conditional subtractions. Both
 *     actions also say which configuration *version* (0 or 1) is active. The default action
 *     is the running configuration; during a reconfiguration (controller/reconfigure/) a
 *     range entry on the timestamp, [flip, end of time), switches to the other version at
 *     the flip: the version is a function of time, as in TimeFlip (Mizrahi et al., 2015).
 *   - slice_of_phase: (version, range [start, end) of the phase) -> slice; a phase in no
 *     range is the night (reconfiguration): the frame is dropped and counted.
 *   - circuit: (version, slice, ingress port) -> egress port; a port that is dark in that
 *     slice drops.
 *   - clock probe: a packet-out from the controller comes straight back as a packet-in
 *     carrying the switch's ingress timestamp, so the controller can measure the switch's
 *     clock against its own (controller/schedule/clock.py) and correct it with the offset.
 */
#include <core.p4>
#include <v1model.p4>

#include "include/clock.p4"

#define CPU_PORT 510
typedef bit<9> port_t;

@controller_header("packet_out")
header packet_out_t {
    bit<8> probe;
}

@controller_header("packet_in")
header packet_in_t {
    bit<48> timestamp_us;
    bit<8>  probe;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
}

struct metadata_t {
    bit<96> phase;
    bit<96> cycle;
    bit<48> phase_us;
    bit<16> slice;
    bit<1>  pinned;
    bit<1>  version;
    bit<48> probe_us;
}

parser OcsParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: accept;
        }
    }
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition accept;
    }
}

control OcsVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control OcsIngress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    counter(512, CounterType.packets_and_bytes) port_rx;
    counter(512, CounterType.packets_and_bytes) night_drops;

    action drop() {
        mark_to_drop(standard_metadata);
    }

    action set_clock(bit<1> version, bit<48> offset_us, bit<48> cycle_us) {
        meta.version = version;
        meta.phase = (bit<96>)standard_metadata.ingress_global_timestamp + (bit<96>)offset_us;
        meta.cycle = (bit<96>)cycle_us;
        meta.pinned = 0;
    }

    action pin(bit<1> version, bit<16> slice) {
        meta.version = version;
        meta.slice = slice;
        meta.pinned = 1;
    }

    table clock {
        key = { standard_metadata.ingress_global_timestamp: range; }
        actions = { set_clock; pin; }
        default_action = pin(0, 0);
        size = 4;
    }

    action set_slice(bit<16> slice) {
        meta.slice = slice;
    }

    action night() {
        port_rx.count((bit<32>)standard_metadata.ingress_port);
        night_drops.count((bit<32>)standard_metadata.ingress_port);
        mark_to_drop(standard_metadata);
        exit;
    }

    table slice_of_phase {
        key = {
            meta.version: exact;
            meta.phase_us: range;
        }
        actions = { set_slice; night; }
        default_action = night();
        size = 4096;
    }

    action forward(port_t port) {
        standard_metadata.egress_spec = port;
    }

    table circuit {
        key = {
            meta.version: exact;
            meta.slice: exact;
            standard_metadata.ingress_port: exact;
        }
        actions = { forward; drop; }
        default_action = drop();
        size = 65536;
    }

    apply {
        if (hdr.packet_out.isValid()) {
            meta.probe_us = standard_metadata.ingress_global_timestamp;
            standard_metadata.egress_spec = CPU_PORT;
            exit;
        }
        clock.apply();
        if (meta.pinned == 0) {
            PHASE_MOD_CYCLE
            meta.phase_us = (bit<48>)meta.phase;
            slice_of_phase.apply();
        }
        port_rx.count((bit<32>)standard_metadata.ingress_port);
        circuit.apply();
    }
}

control OcsEgress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    counter(512, CounterType.packets_and_bytes) port_tx;

    apply {
        port_tx.count((bit<32>)standard_metadata.egress_port);
        if (standard_metadata.egress_port == CPU_PORT && hdr.packet_out.isValid()) {
            hdr.packet_in.setValid();
            hdr.packet_in.timestamp_us = meta.probe_us;
            hdr.packet_in.probe = hdr.packet_out.probe;
            hdr.packet_out.setInvalid();
        }
    }
}

control OcsComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control OcsDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
    }
}

V1Switch(OcsParser(), OcsVerifyChecksum(), OcsIngress(), OcsEgress(), OcsComputeChecksum(),
         OcsDeparser()) main;
