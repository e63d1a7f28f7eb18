"""The conformance corpus: programs, the P4Runtime state to install, and the packets to send.

Expected outputs are not written by hand: they are recorded from simple_switch_grpc
(``pytest tests/target/test_conformance.py --target bmv2 --record-golden``) into
``golden/<program>.json`` and committed, so every target is compared byte for byte with
what BMv2 emitted for the same program, entries and packets.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from packettest.frames import ethernet, ipv4, udp
from pybmv2.calculations import csum16

PROBE_TYPE = 0x88B5
SRC = "00:00:00:00:00:01"
DST = "00:00:00:00:00:02"


def probe(op: int = 0, a8: int = 0, b8: int = 0, a16: int = 0, b16: int = 0, a32: int = 0,
          b32: int = 0, r: tuple[int, int, int, int] = (0, 0, 0, 0), *, dst: str = DST, src: str = SRC,
          trailer: bytes = b"") -> bytes:
    body = struct.pack("!BBBHHII4I", op, a8, b8, a16, b16, a32, b32, *r)
    return ethernet(dst, src, PROBE_TYPE, body + trailer)


def mpls(*labels: int, ttl: int = 64) -> bytes:
    out = b""
    for i, label in enumerate(labels):
        bos = 1 if i == len(labels) - 1 else 0
        out += struct.pack("!I", (label << 12) | (bos << 8) | ttl)
    return out


@dataclass(frozen=True)
class Rule:
    """A table entry in natural notation (match values as strings)."""

    table: str
    match: dict[str, str]
    action: str
    params: dict[str, str | int] = field(default_factory=dict)
    priority: int = 0
    default: bool = False
    member: int | None = None  # entries of action-profile tables point to a member...
    group: int | None = None  # ...or to a selector group...
    #: ...or hold a one-shot action set: (action, params, weight) each
    oneshot: tuple[tuple[str, dict[str, int], int], ...] = ()


@dataclass(frozen=True)
class Member:
    profile: str
    id: int
    action: str
    params: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Group:
    profile: str
    id: int
    members: tuple[tuple[int, int], ...]  # (member id, weight)


@dataclass(frozen=True)
class Program:
    name: str
    rules: tuple[Rule, ...] = ()
    members: tuple[Member, ...] = ()
    groups: tuple[Group, ...] = ()
    multicast: tuple[tuple[int, tuple[tuple[int, int], ...]], ...] = ()
    clone_sessions: tuple[tuple[int, tuple[tuple[int, int], ...]], ...] = ()
    packets: tuple[tuple[str, int, bytes], ...] = ()  # (name, ingress port, frame)
    #: DirectMeterEntry MODIFYs after the rules: (the rule's entry, (cir, cburst, pir, pburst))
    direct_meters: tuple[tuple[Rule, tuple[int, int, int, int]], ...] = ()
    #: table-entry updates written after all of the above, in a second batch: (kind, rule)
    after: tuple[tuple[str, Rule], ...] = ()
    #: where the program lives: 0 the project's programs (p4src/), 1 the conformance corpus
    home: int = 1
    #: the compiled program, when the case's name is not the program's
    artifact: str = ""
    #: packets whose outputs show fields an earlier packet left in BMv2's pooled PHVs: on
    #: BMv2 they hold only when the earlier packet's PHV went back to the pool before this
    #: packet arrived, which a loaded machine does not guarantee; the Python target's pool
    #: is deterministic, so only the Python target is held to them
    phv_reuse: tuple[str, ...] = ()

    @property
    def program(self) -> str:
        return self.artifact or self.name


ARITH = Program("arith", packets=(
    ("wrap-1", 1, probe(0, 200, 100, 300, 400, 5, 10)),
    ("wrap-2", 2, probe(0, 1, 255, 0xFFFF, 2, 0, 0xFFFFFFFF)),
    ("shift-1", 1, probe(1, 0, 4, 0xABCD, 0x1234, 0x12345678, 0xDEADBEEF)),
    ("shift-2", 3, probe(1, 0, 40, 1, 2, 0x80000000, 7)),
    ("signed-1", 1, probe(2, 200, 100, 0x00F0, 0x0080, 0x80000010, 0)),
    ("signed-2", 1, probe(2, 10, 50, 0x007F, 0x0001, 5, 0)),
    ("compare-1", 1, probe(3, 0, 4, 2, 2, 5, 3)),
    ("compare-2", 1, probe(3, 1, 3, 1, 2, 3, 3)),
    ("unknown-op-dropped", 1, probe(9)),
    ("not-a-probe-dropped", 1, ethernet(DST, SRC, 0x0800, b"\x00" * 30)),
))

MATCHING = Program(
    "matching",
    rules=(
        Rule("t_exact", {"hdr.eth.dst": DST, "hdr.probe.a8": "1"}, "set_port", {"port": 3}),
        Rule("t_exact", {"hdr.eth.dst": DST, "hdr.probe.a8": "2"}, "set_port", {"port": 4}),
        Rule("t_exact", {"hdr.eth.dst": DST, "hdr.probe.a8": "3"}, "set_port", {"port": 2}),
        Rule("t_exact", {"hdr.eth.dst": DST, "hdr.probe.a8": "4"}, "set_port", {"port": 1}),
        Rule("t_lpm", {"hdr.probe.a32": "10.0.0.0/8"}, "tag", {"value": 8}),
        Rule("t_lpm", {"hdr.probe.a32": "10.1.0.0/16"}, "tag", {"value": 16}),
        Rule("t_lpm", {"hdr.probe.a32": "10.1.2.3/32"}, "nop"),
        Rule("t_lpm", {"hdr.probe.a32": "0.0.0.0/0"}, "tag", {"value": 0}),
        Rule("t_ternary", {"hdr.probe.a16": "0x0800&&&0xff00", "hdr.probe.b8": "5"}, "tag2", {"value": 1}, priority=10),
        Rule("t_ternary", {"hdr.probe.a16": "0&&&0", "hdr.probe.b8": "5"}, "tag2", {"value": 2}, priority=1),
        Rule("t_range", {"hdr.probe.b16": "100..200", "hdr.probe.b32": "7"}, "tag3", {"value": 3}, priority=5),
        Rule("t_range", {"hdr.probe.b16": "150..300"}, "tag3", {"value": 4}, priority=2),
        Rule("t_valid", {"hdr.probe.$valid$": "1"}, "tag2", {"value": 0x77}),
        Rule("t_exact", {}, "set_port", {"port": 1}, default=True),
    ),
    packets=(
        ("exact-hit-port3", 1, probe(0, 1, a32=0x0A020304)),
        ("exact-hit-port4", 1, probe(0, 2, a32=0x0A010203)),
        ("exact-miss-default", 1, probe(0, 9, a32=0x0A010505)),
        ("lpm-16", 2, probe(0, 3, a32=0x0A01FFFF)),
        ("lpm-32-nop", 2, probe(0, 3, a32=0x0A010203)),
        ("lpm-default-route", 2, probe(0, 3, a32=0x0B000000)),
        ("ternary-prio-10", 1, probe(0, 1, 5, 0x0842, 0, 0x0A000001)),
        ("ternary-prio-1", 1, probe(0, 1, 5, 0x0942, 0, 0x0A000001)),
        ("ternary-miss", 1, probe(0, 1, 6, 0x0842, 0, 0x0A000001)),
        ("range-both", 1, probe(0, 1, 0, 0, 160, 0x0A000001, 7)),
        ("range-second", 1, probe(0, 1, 0, 0, 250, 0x0A000001, 7)),
        ("range-optional-mismatch", 1, probe(0, 1, 0, 0, 120, 0x0A000001, 8)),
        ("const-entry-1", 1, probe(1, 1)),
        ("const-entry-2", 1, probe(2, 1)),
        ("const-ternary-16", 1, probe(3, 1, 0x1A)),
        ("const-ternary-17", 1, probe(3, 1, 0x11)),
        ("const-ternary-wildcard", 1, probe(3, 1, 0x42)),
        ("valid-key", 1, probe(4, 1)),
    ),
)

IPV4_AFTER_MPLS = ipv4("10.0.0.1", "10.0.0.2", udp(1000, 2000, b"xyz"))
PARSING = Program("parsing", packets=(
    ("mpls-1", 1, ethernet(DST, SRC, 0x8847, mpls(100) + b"\x60" + b"\x00" * 20)),
    ("mpls-2-ipv4", 1, ethernet(DST, SRC, 0x8847, mpls(100, 200) + IPV4_AFTER_MPLS)),
    ("mpls-3", 1, ethernet(DST, SRC, 0x8847, mpls(1, 2, 3) + b"\x45" + b"\x00" * 19)),
    ("mpls-4-stack-overflow", 1, ethernet(DST, SRC, 0x8847, mpls(1, 2, 3, 4) + b"\x00" * 20)),
    ("mpls-truncated", 1, ethernet(DST, SRC, 0x8847, b"\x00\x01")),
    ("masked-ethertype-0801", 1, ethernet(DST, SRC, 0x0801, IPV4_AFTER_MPLS)),
    ("probe-to-ipv4", 1, probe(1, 0x30, trailer=IPV4_AFTER_MPLS)),
    ("probe-accept", 1, probe(2, 0x31, trailer=b"tail")),
    ("probe-reject", 1, probe(3, 0x31, trailer=b"tail")),
    ("probe-verify-fails", 1, probe(0xFF, trailer=b"tail")),
    ("probe-truncated", 1, probe(1)[:20]),
    ("ipv4-truncated", 1, ethernet(DST, SRC, 0x0800, IPV4_AFTER_MPLS[:12])),
    ("push-front", 1, probe(5, 0x31)),
    ("pop-front", 1, ethernet(DST, SRC, 0x8847, mpls(7, 8) + b"\x00" * 8)),
    ("ethernet-only", 1, ethernet(DST, SRC, 0x1234)),
))

REPLICATION = Program(
    "replication",
    multicast=((7, ((1, 1), (2, 2), (3, 3))),),
    clone_sessions=((5, ((3, 0),)), (6, ((4, 0),))),
    packets=(
        ("plain", 1, probe(0)),
        ("i2e-clone", 1, probe(1)),
        ("e2e-clone", 1, probe(2)),
        ("multicast", 1, probe(3)),
        ("resubmit", 1, probe(4)),
        ("recirculate", 1, probe(5)),
        ("truncate", 1, probe(6, trailer=b"0123456789")),
        ("digest", 1, probe(7)),
        ("to-cpu", 3, probe(8)),
        ("no-probe-dropped", 1, ethernet(DST, SRC, 0x1234, b"zz")),
    ),
)

UDP_PAYLOAD = b"payload bytes for the udp checksum!"
HASHING = Program("hashing", packets=(
    ("hashes-1", 1, probe(0, 1, 2, 3, 4, 0x01020304, 0x05060708)),
    ("hashes-2", 1, probe(0, 0xFF, 0x7F, 0, 0, 0xFFFFFFFF, 0)),
    ("hashes-3", 1, probe(0, 0, 0, 0, 0, 0, 0)),
    ("ipv4-udp-good-checksum", 1, ethernet(DST, SRC, 0x0800, ipv4("10.1.2.3", "10.4.5.6", udp(53, 5353, UDP_PAYLOAD)))),
    ("ipv4-udp-odd-payload", 1, ethernet(DST, SRC, 0x0800, ipv4("10.1.2.3", "10.4.5.6", udp(1, 2, b"abc")))),
    ("ipv4-bad-checksum", 1, ethernet(DST, SRC, 0x0800, ipv4("10.1.2.3", "10.4.5.6", udp(1, 2, b"x"), checksum=0x1234))),
    ("ipv4-tcp", 1, ethernet(DST, SRC, 0x0800, ipv4("1.2.3.4", "5.6.7.8", b"\x00" * 20, proto=6))),
))

STATEFUL = Program(
    "stateful",
    rules=(Rule("flows", {"hdr.eth.src": "00:00:00:00:00:09"}, "fwd", {"port": 4}),),
    packets=(
        ("reg-first", 1, probe(1, 3, a32=100)),
        ("reg-accumulates", 1, probe(1, 3, a32=23)),
        ("reg-other-slot", 1, probe(2, 4, a32=7)),
        ("reg-index-masked", 1, probe(2, 19, a32=1)),
        ("flow-hit", 1, probe(3, 3, a32=1, src="00:00:00:00:00:09")),
    ),
)

SELECTORS = Program(
    "selectors",
    members=(
        Member("prof", 1, "tag2", {"value": 111}), Member("prof", 2, "tag2", {"value": 222}),
        Member("ecmp_sel", 10, "fwd", {"port": 2, "value": 10}), Member("ecmp_sel", 11, "fwd", {"port": 3, "value": 11}),
        Member("ecmp_sel", 12, "fwd", {"port": 4, "value": 12}), Member("ecmp_sel", 13, "fwd", {"port": 2, "value": 13}),
        Member("wide_sel", 20, "tag3", {"value": 20}), Member("wide_sel", 21, "tag3", {"value": 21}),
    ),
    groups=(
        Group("ecmp_sel", 100, ((10, 1), (11, 1), (12, 1))),
        Group("ecmp_sel", 101, ((11, 2), (13, 1))),
        Group("wide_sel", 200, ((20, 1), (21, 1))),
    ),
    rules=(
        Rule("ecmp", {"hdr.probe.a32": "10.0.0.0/8"}, "", group=100),
        Rule("ecmp", {"hdr.probe.a32": "11.0.0.0/8"}, "", group=101),
        Rule("ecmp", {"hdr.probe.a32": "12.0.0.0/8"}, "", member=10),
        Rule("wide", {"hdr.probe.a8": "1"}, "", group=200),
        Rule("wide", {"hdr.probe.a8": "2"}, "", member=21),
        Rule("by_op", {"hdr.probe.op": "1"}, "", member=1),
        Rule("by_op", {"hdr.probe.op": "2"}, "", member=2),
    ),
    packets=(
        *((f"spread-{i}", 1, probe(1 + i % 3, 1 + i % 2, i * 37 % 256, 100 + i, i * 7919 % 65536,
                                   ((10 + i % 3) << 24) | i, i * 2654435761 % (1 << 32),
                                   src=f"00:00:00:00:{i:02x}:01"))
          for i in range(24)),
        ("miss-no-route", 1, probe(1, 1, a32=0x0D000001)),
    ),
)


#: the same program and packets with its selectors programmed one-shot (PI creates a hidden
#: group per entry), then changed: a set replaced (MODIFY), an entry deleted and one
#: inserted in the handles it freed
SELECTORS_ONESHOT = Program(
    "selectors_oneshot",
    artifact="selectors",
    members=(Member("prof", 1, "tag2", {"value": 111}), Member("prof", 2, "tag2", {"value": 222})),
    rules=(
        Rule("ecmp", {"hdr.probe.a32": "10.0.0.0/8"}, "", oneshot=(
            ("fwd", {"port": 2, "value": 10}, 1), ("fwd", {"port": 3, "value": 11}, 2),
            ("fwd", {"port": 4, "value": 12}, 1))),
        Rule("ecmp", {"hdr.probe.a32": "11.0.0.0/8"}, "", oneshot=(
            ("fwd", {"port": 3, "value": 13}, 1), ("drop", {}, 1), ("fwd", {"port": 2, "value": 14}, 2))),
        Rule("ecmp", {"hdr.probe.a32": "12.0.0.0/8"}, "", oneshot=(("fwd", {"port": 4, "value": 15}, 3),)),
        Rule("wide", {"hdr.probe.a8": "1"}, "", oneshot=(("tag3", {"value": 20}, 1), ("tag3", {"value": 21}, 1))),
        Rule("wide", {"hdr.probe.a8": "2"}, "", oneshot=(("tag3", {"value": 22}, 2), ("nop", {}, 1))),
        Rule("by_op", {"hdr.probe.op": "1"}, "", member=1),
        Rule("by_op", {"hdr.probe.op": "2"}, "", member=2),
    ),
    after=(
        ("modify", Rule("ecmp", {"hdr.probe.a32": "12.0.0.0/8"}, "", oneshot=(
            ("fwd", {"port": 2, "value": 16}, 1), ("fwd", {"port": 3, "value": 17}, 1)))),
        ("delete", Rule("ecmp", {"hdr.probe.a32": "10.0.0.0/8"}, "")),
        ("insert", Rule("ecmp", {"hdr.probe.a32": "10.0.0.0/9"}, "", oneshot=(
            ("fwd", {"port": 4, "value": 18}, 2), ("fwd", {"port": 2, "value": 19}, 1)))),
    ),
    packets=(
        *((f"spread-{i}", 1, probe(1 + i % 3, 1 + i % 2, i * 37 % 256, 100 + i, i * 7919 % 65536,
                                   ((10 + i % 3) << 24) | (i * 0x01010101 % (1 << 24)),
                                   i * 2654435761 % (1 << 32), src=f"00:00:00:00:{i:02x}:01"))
          for i in range(30)),
        ("deleted-route-half-missing", 1, probe(1, 1, a32=0x0A800001)),
    ),
)


def ipv4_with_options(options: bytes, payload: bytes = b"", *, ihl: int | None = None, tos: int = 0,
                      good_checksum: bool = True) -> bytes:
    """An IPv4 packet with ``options`` after the fixed header; ihl, total length and
    checksum follow the options unless ``ihl`` forces a (possibly inconsistent) value."""
    plain = bytearray(ipv4("10.0.0.1", "10.0.0.2", tos=tos)[:20])
    words = ihl if ihl is not None else 5 + len(options) // 4
    plain[0] = 0x40 | words
    plain[2:4] = struct.pack("!H", 20 + len(options) + len(payload))
    plain[10:12] = b"\x00\x00"
    head = bytes(plain) + options
    checksum = csum16(head[: 4 * words] if words >= 5 else head[:20])
    plain[10:12] = struct.pack("!H", checksum if good_checksum else checksum ^ 0x5A5A)
    return bytes(plain) + options + payload


def vl(nbits: int, op: int = 0, tag: int = 0x11, body: bytes = b"", trailer: int = 0x99) -> bytes:
    """varbit.p4's 0x88b6 header pair: a length in bits and an op, then tag, data, trailer."""
    return ethernet(DST, SRC, 0x88B6, bytes((nbits, op, tag)) + body + bytes((trailer,)))


OPTIONS_4 = b"\x94\x04\x00\x00"  # router alert
OPTIONS_40 = bytes(range(1, 41))
VARBIT = Program("varbit", packets=(
    ("ipv4-no-options", 1, ethernet(DST, SRC, 0x0800, ipv4_with_options(b"", b"payload"))),
    ("ipv4-4-options", 1, ethernet(DST, SRC, 0x0800, ipv4_with_options(OPTIONS_4, b"payload"))),
    ("ipv4-40-options", 1, ethernet(DST, SRC, 0x0800, ipv4_with_options(OPTIONS_40, b"payload"))),
    ("ipv4-8-options-no-payload", 1, ethernet(DST, SRC, 0x0800, ipv4_with_options(OPTIONS_40[:8]))),
    ("ipv4-bad-checksum", 1, ethernet(DST, SRC, 0x0800,
                                      ipv4_with_options(OPTIONS_4, b"x", good_checksum=False))),
    ("ipv4-strip-options", 1, ethernet(DST, SRC, 0x0800, ipv4_with_options(OPTIONS_40[:12], b"pp", tos=1))),
    ("ipv4-options-truncated", 1, ethernet(DST, SRC, 0x0800, ipv4_with_options(OPTIONS_40[:8], ihl=15))),
    ("ipv4-ihl-too-small", 1, ethernet(DST, SRC, 0x0800, ipv4_with_options(b"", b"abcd", ihl=3))),
    ("vl-empty", 1, vl(0)),
    ("vl-16", 1, vl(16, body=b"\xab\xcd", trailer=0x42)),
    ("vl-64-with-tail", 1, vl(64, body=bytes(range(8))) + b"tail"),
    ("vl-header-too-short", 1, vl(72, body=bytes(range(9))) + b"more"),
    ("vl-packet-too-short", 1, vl(64, body=b"\x01\x02")),
    ("vl-not-whole-bytes", 1, vl(12, body=b"\x01\x02")),
    ("vl-assign-varbit", 1, vl(24, 1, body=b"\x0a\x0b\x0c")),
    ("vl-copy-header", 1, vl(40, 2, body=b"\x05\x04\x03\x02\x01") + b"p"),
    ("vl-set-valid-empty", 1, vl(16, 3, body=b"\x77\x88")),
    ("vl-set-invalid", 1, vl(16, 4, body=b"\x77\x88")),
))

# Colours are time-dependent: only deterministic ones are tested, an unconfigured meter
# (green) and rates of 0 that never refill the buckets (BMv2 adds tokens at whole-second
# marks since the meter's origin, so even 1 packet/s may refill between two packets):
# bursts of 1 give green then red, a committed burst of 0 yellow then red.
LIMITED = Rule("policed", {"hdr.eth.src": "00:00:00:00:00:0a"}, "mark", {"port": 3})
NO_COMMIT = Rule("policed", {"hdr.eth.src": "00:00:00:00:00:0c"}, "keep")
DIRECT_METER = Program(
    "direct_meter",
    rules=(Rule("policed", {"hdr.eth.src": "00:00:00:00:00:09"}, "mark", {"port": 2}), LIMITED,
           NO_COMMIT),
    direct_meters=((LIMITED, (0, 1, 0, 1)), (NO_COMMIT, (0, 0, 0, 1))),
    packets=(
        ("unconfigured-green", 1, probe(1, src="00:00:00:00:00:09")),
        ("unconfigured-green-again", 1, probe(2, src="00:00:00:00:00:09")),
        ("miss-not-metered", 1, probe(3, src="00:00:00:00:00:0b")),
        ("limited-first-green", 1, probe(4, src="00:00:00:00:00:0a")),
        ("limited-second-red", 1, probe(5, src="00:00:00:00:00:0a")),
        ("limited-third-red", 1, probe(6, src="00:00:00:00:00:0a")),
        ("no-commit-yellow", 1, probe(7, src="00:00:00:00:00:0c")),
        ("no-commit-then-red", 1, probe(8, src="00:00:00:00:00:0c")),
    ),
)


#: the conformance corpus's own programs (tests/p4programs); the project's programs' cases are
#: in conformance_project.py, which adds them to these
CORPUS = (ARITH, MATCHING, PARSING, REPLICATION, HASHING, STATEFUL, SELECTORS, SELECTORS_ONESHOT, VARBIT,
          DIRECT_METER)
