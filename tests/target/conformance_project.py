"""The conformance cases of the project's own programs (p4src/): rail_switch's mirroring,
aggregation and load balancing, circuit_switch and tor_switch, recorded from BMv2 as goldens
like the corpus's (conformance_cases.py, which defines the case's shape)."""

from __future__ import annotations

from conformance_cases import CORPUS, Program, Rule


def tcp_frame(tos: int, *, dport: int = 7008, dst: str = "10.0.1.0", udp_: bool = False) -> bytes:
    """A data segment of a mirrored leg (10.0.1.3 -> dst), built with scapy."""
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.l2 import Ether

    l4 = UDP(sport=40000, dport=dport) if udp_ else TCP(sport=40000, dport=dport, seq=1000, flags="PA")
    return bytes(Ether(dst="02:5f:00:01:00:01", src="02:00:00:00:00:03") /
                 IP(src="10.0.1.3", dst=dst, tos=tos, ttl=64, id=7) / l4 / (b"grad" * 16))


_ROUTE = ("RailIngress.ipv4_lpm", "RailIngress.set_nexthop")
RAIL_MIRROR = Program(
    "rail_switch_mirror", artifact="rail_switch", home=0,
    rules=(
        Rule(_ROUTE[0], {"hdr.ipv4.dst_addr": "10.0.1.0/32"}, _ROUTE[1],
             {"port": 2, "dmac": "02:00:00:00:00:00", "smac": "02:5f:00:01:00:02"}),
        Rule(_ROUTE[0], {"hdr.ipv4.dst_addr": "10.0.1.9/32"}, _ROUTE[1],
             {"port": 4, "dmac": "02:00:00:00:00:09", "smac": "02:5f:00:01:00:04"}),
        Rule("RailIngress.mirror.mirror_select",
             {"hdr.ipv4.src_addr": "10.0.1.3", "hdr.ipv4.dst_addr": "10.0.1.0",
              "hdr.ipv4.diffserv": "0x84&&&0xfc", "meta.l4_dst_port": "7008"},
             "RailIngress.mirror.mirror_to_shadow", {"session": 101}, priority=1),
        Rule("RailIngress.mirror.mirror_select",
             {"hdr.ipv4.src_addr": "10.0.1.3", "hdr.ipv4.dst_addr": "10.0.1.77",
              "hdr.ipv4.diffserv": "0x84&&&0xfc", "meta.l4_dst_port": "7008"},
             "RailIngress.mirror.mirror_to_shadow", {"session": 101}, priority=1),
        Rule("RailEgress.mirror_copy.mirror_rewrite",
             {"standard_metadata.egress_port": "3", "hdr.ipv4.diffserv": "0x84&&&0xfc"},
             "RailEgress.mirror_copy.to_shadow", {"dmac": "02:00:00:00:00:04"}, priority=1),
    ),
    clone_sessions=((101, ((3, 1),)),),
    packets=(
        ("tagged-leg-is-copied", 1, tcp_frame(0x84)),
        ("ecn-bits-do-not-matter", 1, tcp_frame(0x87)),
        ("untagged-same-flow", 1, tcp_frame(0x00)),
        ("other-session", 1, tcp_frame(0x88)),
        ("other-port", 1, tcp_frame(0x84, dport=7009)),
        ("udp-is-never-mirrored", 1, tcp_frame(0x84, udp_=True)),
        ("unrouted-original-dropped-copy-kept", 1, tcp_frame(0x84, dst="10.0.1.77")),
        ("other-flow-routed", 1, tcp_frame(0x84, dst="10.0.1.9")),
    ),
)

def agg_frame(worker: int, slot: int, values: tuple[int, ...], *, job: int = 7, flags: int = 0, exponent: int = 127,
              src: str | None = None) -> bytes:
    """An in-network aggregation request from worker ``worker`` (port worker+1, 10.0.0.worker+1)."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    from workloads.aggregation.wire import AGG_UDP_PORT, LANES, Chunk, encode

    lanes = tuple(values) + (0,) * (LANES - len(values))
    payload = encode(Chunk(job=job, slot=slot, offset=slot * LANES, values=lanes, flags=flags, exponent=exponent))
    return bytes(Ether(dst="02:5f:00:01:00:01", src=f"02:00:00:00:00:{worker + 1:02x}") /
                 IP(src=src or f"10.0.0.{worker + 1}", dst="10.0.255.254", ttl=64, id=9) /
                 UDP(sport=48865, dport=AGG_UDP_PORT) / payload)


_AGG = "RailIngress.aggregate."
RAIL_AGGREGATE = Program(
    "rail_switch_aggregate", artifact="rail_switch", home=0,
    rules=tuple(
        Rule(_AGG + "agg_workers", {"hdr.agg.job": "7", "hdr.ipv4.src_addr": f"10.0.0.{w + 1}"}, _AGG + "set_worker",
             {"worker_bit": 1 << w, "workers": 3, "pool_base": 8, "pool_size": 4, "mgid": 0x4007, "epoch": 5})
        for w in range(3)) + tuple(
        Rule("RailEgress.aggregate_result.agg_result", {"hdr.agg.job": "7", "standard_metadata.egress_rid": str(w + 1)},
             "RailEgress.aggregate_result.to_worker", {"dmac": f"02:00:00:00:00:{w + 1:02x}", "addr": f"10.0.0.{w + 1}"})
        for w in range(3)),
    multicast=((0x4007, ((1, 1), (2, 2), (3, 3))),),
    # every request enters on port 1: a switch process keeps the order of one port's packets
    # only, and each outcome here depends on the ones before (the workers are told apart by
    # their addresses; a duplicate's answer leaves by the port it came in)
    packets=(
        ("w0-first-absorbed", 1, agg_frame(0, 0, (1, -2, 3, 0x7FFFFFFF), exponent=130)),
        ("w1-adds-absorbed", 1, agg_frame(1, 0, (10, -20, 30, 1), exponent=140)),
        ("w0-duplicate-of-incomplete-dropped", 1, agg_frame(0, 0, (1, -2, 3, 0x7FFFFFFF), exponent=130)),
        ("w2-completes-multicast", 1, agg_frame(2, 0, (100, -200, 300, 0), exponent=120)),
        ("w1-duplicate-answered-from-set", 1, agg_frame(1, 0, (10, -20, 30, 1), exponent=140)),
        ("w0-next-round-other-set-absorbed", 1, agg_frame(0, 0, (5,), flags=1)),
        ("w2-late-duplicate-still-answered", 1, agg_frame(2, 0, (100, -200, 300, 0), exponent=120)),
        ("slot-outside-pool-dropped", 1, agg_frame(0, 4, (1,))),
        ("unknown-job-dropped", 1, agg_frame(0, 0, (1,), job=9)),
        ("unknown-worker-dropped", 1, agg_frame(0, 0, (1,), src="10.0.0.9")),
        ("w1-second-slot-absorbed", 1, agg_frame(1, 3, (7,) * 64)),
    ),
)

_OCS_FRAMES = (
    ("p1-to-p2", 1, bytes(range(64))),
    ("p2-to-p1-full-size", 2, (bytes(range(256)) * 6)[:1514]),
    ("p3-to-p4-not-ethernet", 3, b"\x01" * 20),
    ("p4-dark", 4, bytes(range(80))),
)
def _ocs_circuits(version: int = 0, pairs: tuple[tuple[int, int], ...] = ((1, 2), (2, 1), (3, 4))) -> tuple[Rule, ...]:
    return tuple(Rule("OcsIngress.circuit", {"meta.version": str(version), "meta.slice": "0",
                                             "standard_metadata.ingress_port": str(a)},
                      "OcsIngress.forward", {"port": b}) for a, b in pairs)


_OCS_CIRCUITS = _ocs_circuits()
OCS_PINNED = Program("circuit_switch_pinned", artifact="circuit_switch", home=0, rules=_OCS_CIRCUITS,
                     packets=_OCS_FRAMES)
#: the clock path (48-step phase division, range lookup) with one day covering the whole
#: cycle, so that the outcome does not depend on when the packet arrives
OCS_CLOCKED = Program("circuit_switch_clocked", artifact="circuit_switch", home=0, rules=(
    Rule("OcsIngress.clock", {}, "OcsIngress.set_clock", {"version": 0, "offset_us": 123456789, "cycle_us": 33000},
         default=True),
    Rule("OcsIngress.slice_of_phase", {"meta.version": "0", "meta.phase_us": "0..32999"}, "OcsIngress.set_slice",
         {"slice": 0}, priority=1),
    *_OCS_CIRCUITS), packets=_OCS_FRAMES)
#: a clocked switch with no day installed: always night, every frame dropped
OCS_NIGHT = Program("circuit_switch_night", artifact="circuit_switch", home=0, rules=(
    Rule("OcsIngress.clock", {}, "OcsIngress.set_clock", {"version": 0, "offset_us": 5, "cycle_us": 1000},
         default=True),
    *_OCS_CIRCUITS), packets=_OCS_FRAMES[:2])
#: a reconfiguration that has flipped: a range entry on the timestamp from 0 on selects
#: version 1, whose circuits differ; version 0's are still installed and must not be used
OCS_FLIPPED = Program("circuit_switch_flipped", artifact="circuit_switch", home=0, rules=(
    Rule("OcsIngress.clock", {"standard_metadata.ingress_global_timestamp": "0..281474976710655"},
         "OcsIngress.pin", {"version": 1, "slice": 0}, priority=1),
    *_OCS_CIRCUITS, *_ocs_circuits(1, ((1, 3), (3, 1), (2, 4)))), packets=_OCS_FRAMES)


def ip_frame(dst: str, ttl: int = 64) -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    return bytes(Ether(dst="02:5f:00:00:01:00", src="02:c8:00:00:00:01") /
                 IP(src="10.200.0.1", dst=dst, ttl=ttl, id=1) / UDP(sport=5, dport=9000) / (b"t" * 20))


_TOR_STATIC = (
    Rule("TorIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": "10.200.0.1/32"}, "TorIngress.set_nexthop",
         {"port": 1, "dmac": "02:c8:00:00:00:01", "smac": "02:5f:00:00:01:00"}),
    Rule("TorIngress.rack_of", {"hdr.ipv4.dst_addr": "10.200.1.0/24"}, "TorIngress.set_rack", {"rack": 1}),
    Rule("TorIngress.rack_of", {"hdr.ipv4.dst_addr": "10.200.2.0/24"}, "TorIngress.set_rack", {"rack": 2}),
    Rule("TorIngress.uplinks", {"standard_metadata.ingress_port": "3"}, "TorIngress.from_circuit"),
)


def _send(version: int, rack: int, transit: int, port: int, wait: int) -> Rule:
    return Rule("TorIngress.timeflow", {"meta.version": str(version), "meta.rack": str(rack), "meta.slot": "0",
                                        "meta.transit": str(transit)},
                "TorIngress.send", {"port": port, "wait_slots": wait, "wait_us": wait * 1000})


_TOR_TIMEFLOW = (_send(0, 1, 0, 3, 0), _send(0, 1, 1, 4, 0), _send(0, 2, 0, 3, 2))
_TOR_FRAMES = (
    ("own-host-down", 3, ip_frame("10.200.0.1")),
    ("rack1-up-now", 1, ip_frame("10.200.1.7")),
    ("rack1-transit", 3, ip_frame("10.200.1.7")),
    ("rack2-must-wait-dropped", 1, ip_frame("10.200.2.7")),
    ("unknown-rack-dropped", 1, ip_frame("10.200.9.7")),
    ("ttl-1-dropped", 1, ip_frame("10.200.1.7", ttl=1)),
    ("not-ipv4-dropped", 1, bytes(12) + b"\x88\xb5" + bytes(40)),
)
#: an unclocked ToR (a one-shot schedule: every packet arrives in slot 0)
TOR_TIMEFLOW = Program("tor_switch_timeflow", artifact="tor_switch", home=0,
                       rules=(*_TOR_STATIC, *_TOR_TIMEFLOW), packets=_TOR_FRAMES)
_FLIP_ENTRIES = (
    Rule("TorIngress.timeflow_flip", {"meta.rack": "1", "meta.transit": "0"}, "TorIngress.send_at_epoch",
         {"port": 4, "wait_slots": 1, "wait_us": 0}),
    Rule("TorIngress.timeflow_flip", {"meta.rack": "1", "meta.transit": "1"}, "TorIngress.send_at_epoch",
         {"port": 2, "wait_slots": 1, "wait_us": 0}),
    Rule("TorIngress.timeflow_flip", {"meta.rack": "2", "meta.transit": "0"}, "TorIngress.send_at_epoch",
         {"port": 4, "wait_slots": 1, "wait_us": 0}),
)
#: mid-reconfiguration, between the cut and the new epoch (a range from 0 on): every packet
#: for another rack goes by timeflow_flip; this ToR has calendar queues (hold), so BMv2,
#: which has none, sends it at once on the next configuration's port
TOR_BEFORE_EPOCH = Program("tor_switch_before_epoch", artifact="tor_switch", home=0, rules=(
    *_TOR_STATIC, *_TOR_TIMEFLOW, *_FLIP_ENTRIES,
    Rule("TorIngress.clock", {}, "TorIngress.unclocked", {"version": 0, "hold": 1}, default=True),
    Rule("TorIngress.flip", {"standard_metadata.ingress_global_timestamp": "0..281474976710655"},
         "TorIngress.before_epoch", {"next_epoch_us": 7}, priority=1),
), packets=_TOR_FRAMES)
#: the same without calendar queues: the ToR must drop what would wait for the new epoch
TOR_BEFORE_EPOCH_NO_HOLD = Program("tor_switch_before_epoch_no_hold", artifact="tor_switch", home=0, rules=(
    *_TOR_STATIC, *_TOR_TIMEFLOW, *_FLIP_ENTRIES,
    Rule("TorIngress.flip", {"standard_metadata.ingress_global_timestamp": "0..281474976710655"},
         "TorIngress.before_epoch", {"next_epoch_us": 7}, priority=1),
), packets=_TOR_FRAMES[:3])
def _cut_at(cut_us: int) -> Rule:
    return Rule("TorIngress.flip", {"standard_metadata.ingress_global_timestamp": "0..281474976710655"},
                "TorIngress.cut_at", {"cut_us": cut_us, "next_epoch_us": 281474976710655}, priority=1)


_HOLD = Rule("TorIngress.clock", {}, "TorIngress.unclocked", {"version": 0, "hold": 1}, default=True)
#: before the cut, a packet the old entries would send at or after it goes by timeflow_flip:
#: with the cut 1 us after the switch started, that is every packet...
TOR_CUT_PASSED = Program("tor_switch_cut_passed", artifact="tor_switch", home=0, rules=(
    *_TOR_STATIC, *_TOR_TIMEFLOW, *_FLIP_ENTRIES, _HOLD, _cut_at(1)), packets=_TOR_FRAMES)
#: ...and with the cut at the end of time, none: the old entries hold
TOR_CUT_AHEAD = Program("tor_switch_cut_ahead", artifact="tor_switch", home=0, rules=(
    *_TOR_STATIC, *_TOR_TIMEFLOW, *_FLIP_ENTRIES, _HOLD, _cut_at(281474976710654)), packets=_TOR_FRAMES)
#: after the new epoch: the clock's range entry selects version 1, whose entries differ
TOR_FLIPPED = Program("tor_switch_flipped", artifact="tor_switch", home=0, rules=(
    *_TOR_STATIC, *_TOR_TIMEFLOW, _send(1, 1, 0, 4, 0), _send(1, 2, 0, 2, 0),
    Rule("TorIngress.clock", {"standard_metadata.ingress_global_timestamp": "0..281474976710655"},
         "TorIngress.unclocked", {"version": 1, "hold": 0}, priority=1),
), packets=_TOR_FRAMES[:5])

def _notify_host(port: int, host: int) -> Rule:
    return Rule("TorEgress.notify_host", {"standard_metadata.egress_port": str(port)}, "TorEgress.notification",
                {"dmac": f"02:c8:00:00:00:0{host}", "smac": "02:5f:00:00:01:00", "dst": f"10.200.0.{host}",
                 "src": "10.200.0.254"})


#: TDTCP: an unclocked ToR whose one slot is TDN 3 announces it, once, to the two hosts of
#: its clone session (ports 1 and 2) with the first packet for another rack: ICMP type 7,
#: code 0, byte 0 of the rest-of-header 3; the second packet finds TDN 3 announced already.
#: Port 4 has no host entry: a replica there is dropped.
TOR_TDN_NOTIFY = Program("tor_switch_tdn_notify", artifact="tor_switch", home=0, rules=(
    *_TOR_STATIC, *_TOR_TIMEFLOW,
    Rule("TorIngress.tdn_of_slot", {"meta.version": "0", "meta.slot": "0"}, "TorIngress.set_tdn", {"tdn": 3}),
    Rule("TorIngress.notify", {}, "TorIngress.notify_via", {"session": 9}, default=True),
    _notify_host(1, 1), _notify_host(2, 2),
), clone_sessions=((9, ((1, 1), (2, 1), (4, 1))),), packets=(
    ("own-host-no-trigger", 3, ip_frame("10.200.0.1")),
    ("first-remote-announces", 1, ip_frame("10.200.1.7")),
    ("second-remote-silent", 1, ip_frame("10.200.1.8")),
))

def flow_frame(dst: str, sport: int, *, seq: int = 0) -> bytes:
    """A TCP segment of the flow 10.0.1.3:sport -> dst:5201, built with scapy."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    return bytes(Ether(dst="02:5f:00:01:00:01", src="02:00:00:00:00:03") /
                 IP(src="10.0.1.3", dst=dst, ttl=64, id=seq) / TCP(sport=sport, dport=5201, seq=seq, flags="A") /
                 (b"x" * 32))


def _members(group: int) -> tuple[Rule, ...]:
    return tuple(Rule("RailIngress.ecmp_nexthop", {"meta.ecmp_group": str(group), "meta.ecmp_member": str(m)},
                      "RailIngress.set_nexthop", {"port": 2 + m, "dmac": f"02:5f:00:0{m + 2}:00:01",
                                                 "smac": f"02:5f:00:01:00:0{m + 2}"}) for m in range(3))


#: the fat-tree's load balancing (controller/routing/rail_routes.py): three groups of three
#: uplinks (ports 2-4), one per way of picking a member. Spraying goes round robin per packet
#: (one counter per group); a flowlet with a gap of 0 is re-hashed at every packet (each comes
#: more than a microsecond after the last), with the largest gap never; ECMP hashes the flow
RAIL_BALANCE = Program(
    "rail_switch_balance", artifact="rail_switch", home=0,
    rules=(
        Rule(_ROUTE[0], {"hdr.ipv4.dst_addr": "10.1.0.0/16"}, "RailIngress.set_spray_group", {"group": 1, "size": 3}),
        Rule(_ROUTE[0], {"hdr.ipv4.dst_addr": "10.2.0.0/16"}, "RailIngress.set_flowlet_group",
             {"group": 2, "size": 3, "gap_us": 0}),
        Rule(_ROUTE[0], {"hdr.ipv4.dst_addr": "10.3.0.0/16"}, "RailIngress.set_flowlet_group",
             {"group": 3, "size": 3, "gap_us": (1 << 48) - 1}),
        Rule(_ROUTE[0], {"hdr.ipv4.dst_addr": "10.4.0.0/16"}, "RailIngress.set_ecmp_group", {"group": 4, "size": 3}),
        *_members(1), *_members(2), *_members(3), *_members(4),
    ),
    packets=(
        *((f"spray-{i}", 1, flow_frame("10.1.0.9", 40000, seq=i)) for i in range(4)),
        ("spray-other-flow-next", 1, flow_frame("10.1.0.7", 40001, seq=9)),
        *((f"flowlet-gap-0-{i}", 1, flow_frame("10.2.0.9", 40002, seq=i)) for i in range(4)),
        *((f"flowlet-never-{i}", 1, flow_frame("10.3.0.9", 40003, seq=i)) for i in range(3)),
        *((f"ecmp-flow-{sport}", 1, flow_frame("10.4.0.9", sport)) for sport in (40004, 40005, 40006, 40007)),
    ),
)


PROGRAMS = (*CORPUS, RAIL_MIRROR, RAIL_AGGREGATE, RAIL_BALANCE, OCS_PINNED, OCS_CLOCKED, OCS_NIGHT, OCS_FLIPPED,
            TOR_TIMEFLOW, TOR_BEFORE_EPOCH, TOR_BEFORE_EPOCH_NO_HOLD, TOR_CUT_PASSED, TOR_CUT_AHEAD, TOR_FLIPPED,
            TOR_TDN_NOTIFY)
