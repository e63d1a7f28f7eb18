"""Conformance cases for v1model constructs beyond the basics: run-time stack indices, header
unions and union stacks, varbit fields in stacks, header-valued conditionals, action
parameters inside expressions, nested switches on action_run, 802.1Q frames, and the header
storage BMv2 keeps from one packet to the next. Goldens are recorded from BMv2 like the rest
of the corpus (see conformance_cases.py)."""

from __future__ import annotations

import struct

from conformance_cases import DST, SRC, Program, probe

from packettest.frames import ethernet, ipv4, udp


def mpls(*labels: int, ttl: int = 64) -> bytes:
    out = b""
    for i, label in enumerate(labels):
        out += struct.pack("!I", (label << 12) | ((i == len(labels) - 1) << 8) | (ttl + i))
    return out


STACK_INDEX = Program("stack_index", packets=(
    ("read-by-field-index", 1, probe(1, 1, 2) + mpls(10, 20, 30)),
    ("read-invalid-element", 1, probe(1, 3, 2) + mpls(11)),
    ("write-by-field-index", 1, probe(2, 0, 1, 0x42) + mpls(10, 20)),
    ("write-invalid-element", 1, probe(2, 3, 3, 0x43) + mpls(10, 20)),
    ("invalidate-element", 1, probe(4, 0, 1) + mpls(1, 2, 3)),
    ("no-entry", 1, probe(9, 1, 0) + mpls(5, 6)),
    ("stack-full", 1, probe(1, 1, 0) + mpls(1, 2, 3, 4, 5)),
), phv_reuse=("read-invalid-element",))


def union_a(a: int) -> bytes:
    return struct.pack("!BH", 1, a)


def union_b(b: int) -> bytes:
    return struct.pack("!BI", 2, b)


END = b"\x00"
HEADER_UNIONS = Program("header_unions", packets=(
    ("none", 1, probe(0) + END),
    ("member-a", 1, probe(0) + union_a(0x1111) + END),
    ("member-b", 1, probe(0) + union_b(0x22222222) + END),
    ("union-stack", 1, probe(0) + union_a(1) + union_b(2) + union_a(3) + END),
    ("union-stack-full", 1, probe(0) + union_a(1) + union_a(2) + union_b(3) + union_b(4) + END),
    ("a-made-valid-over-b", 1, probe(1) + union_b(0x0B0B0B0B) + END),
    ("b-invalidated", 1, probe(2) + union_b(0x0B0B0B0B) + union_a(5) + END),
    ("copy-member-into-stack", 1, probe(3) + union_b(0x01020304) + union_a(9) + END),
    ("read-stack-members", 1, probe(4) + union_a(0x10) + union_b(0x20) + union_a(0x30) + END),
    ("write-stack-members", 1, probe(5) + union_a(0x10) + union_b(0x20) + union_a(0x30) + END),
    ("pop-union-stack", 1, probe(6) + union_a(0x10) + union_b(0x20) + union_a(0x30) + END),
    ("push-union-stack", 1, probe(7) + union_b(0x10) + union_b(0x20) + END),
    ("truncated-member", 1, probe(0) + b"\x02\x00"),
))


def tlv(kind: int, data: bytes) -> bytes:
    return bytes((kind, len(data))) + data


VARBIT_STACK = Program("varbit_stack", packets=(
    ("no-options", 1, probe(0) + END),
    ("one-option", 1, probe(0) + tlv(1, b"\xaa\xbb") + END + b"tail"),
    ("three-options", 1, probe(0) + tlv(1, b"") + tlv(2, b"\x01\x02\x03\x04\x05\x06") + tlv(3, b"z") + END),
    ("stack-overflow", 1, probe(0) + tlv(1, b"a") + tlv(2, b"b") + tlv(3, b"c") + tlv(4, b"d") + END),
    ("option-too-long", 1, probe(0) + tlv(1, b"a") + tlv(2, bytes(7)) + END),
    ("option-truncated", 1, probe(0) + tlv(1, b"abc")[:3]),
    ("pop-front", 1, probe(1) + tlv(1, b"12") + tlv(2, b"3456") + tlv(3, b"") + END),
    ("push-front", 1, probe(2) + tlv(1, b"12") + tlv(2, b"3456") + END),
    ("copy-element", 1, probe(3) + tlv(1, b"xyz") + tlv(2, b"") + END),
    ("invalidate-element", 1, probe(4) + tlv(1, b"xyz") + tlv(2, b"q") + END),
))


def pair(x: int, y: int) -> bytes:
    return struct.pack("!HH", x, y)


HEADER_MUX = Program("header_mux", packets=(
    ("pick-p1", 1, probe(0, 1, 0) + pair(1, 2) + pair(3, 4)),
    ("pick-p2", 1, probe(0, 1, 1) + pair(1, 2) + pair(3, 4)),
    ("pick-invalid-p2", 1, probe(0, 0, 1) + pair(5, 6)),
    ("action-pick-1", 1, probe(1, 1, 1) + pair(7, 8) + pair(9, 10)),
    ("action-pick-2", 1, probe(2, 1, 0) + pair(7, 8) + pair(9, 10)),
    ("action-pick-invalid", 1, probe(2, 0, 0) + pair(7, 8)),
))

ACTION_LOCALS = Program("action_locals", packets=(
    ("dec-flag-set", 1, probe(1, 10)),
    ("dec-flag-set-saturates", 1, probe(1, 0)),
    ("dec-flag-clear", 1, probe(2, 10)),
    ("slices", 1, probe(3, r=(0xFFFFFFFF, 0, 0, 0))),
    ("slices-other", 1, probe(4, r=(0x12345678, 0, 0, 0))),
    ("register-index-1", 1, probe(5, 0, 1, 0x100)),
    ("register-index-2", 1, probe(5, 0, 0, 0x200)),
    ("register-read-back", 1, probe(5, 0, 7, 0x300)),
    ("drop-through-parameter", 1, probe(6)),
))

NESTED_SWITCH = Program("nested_switch", packets=(
    ("a1-b1-c1", 1, probe(1, 1, 1)),
    ("a1-b1-c2", 1, probe(1, 1, 9)),
    ("a1-b2", 1, probe(1, 5, 1)),
    ("a2-hit", 1, probe(2, 0, 2)),
    ("a2-miss", 1, probe(2, 0, 3)),
    ("a3-default", 1, probe(7)),
))


def vlan(vid: int, ether_type: int, pcp: int = 0) -> bytes:
    return struct.pack("!HH", (pcp << 13) | vid, ether_type)


IP_PACKET = ipv4("10.0.0.1", "10.0.0.2", udp(1000, 2000, b"vlan payload"))
VLAN_FRAMES = (
    ("tagged-ipv4-bridged", 1, ethernet(DST, SRC, 0x8100, vlan(5, 0x0800) + IP_PACKET)),
    ("priority-tagged", 1, ethernet(DST, SRC, 0x8100, vlan(0, 0x0800, pcp=3) + IP_PACKET)),
    ("tagged-not-ip", 1, ethernet(DST, SRC, 0x8100, vlan(4094, 0x88B5) + bytes(30))),
    ("untagged-ipv4-routed", 1, ethernet(DST, SRC, 0x0800, IP_PACKET)),
    ("untagged-other-dropped", 1, ethernet(DST, SRC, 0x88B5, bytes(30))),
)
VLAN = Program("vlan", packets=VLAN_FRAMES)


def tcp_packet(src: str, sport: int, dport: int) -> bytes:
    segment = struct.pack("!HHIIHHHH", sport, dport, 1, 0, 0x5010, 512, 0, 0) + b"tcp data"
    return ethernet(DST, SRC, 0x0800, ipv4(src, "10.9.9.9", segment, proto=6))


def udp_packet(src: str, sport: int, dport: int) -> bytes:
    return ethernet(DST, SRC, 0x0800, ipv4(src, "10.9.9.9", udp(sport, dport, b"udp data")))


#: a sequence through one switch: the UDP packets read the TCP ports the TCP packet before
#: them left in the (invalid) TCP header, and hash them into their ECMP choice
STALE_HEADERS = Program("stale_headers", packets=(
    ("tcp-first", 1, tcp_packet("10.0.0.1", 1111, 2222)),
    ("udp-sees-last-tcp-ports", 1, udp_packet("10.0.0.1", 53, 5353)),
    ("udp-again", 1, udp_packet("10.0.0.3", 54, 5354)),
    ("tcp-second", 2, tcp_packet("10.0.0.1", 3333, 4444)),
    ("udp-after-second-tcp", 1, udp_packet("10.0.0.1", 53, 5353)),
    ("not-ip-stale-ipv4", 1, ethernet(DST, SRC, 0x88B5, bytes(20))),
), phv_reuse=("udp-sees-last-tcp-ports", "udp-again", "tcp-second", "udp-after-second-tcp",
              "not-ip-stale-ipv4"))

VALUE_SET = Program("value_set", packets=(
    ("probe", 1, probe(1)),
    ("would-be-tunnel", 1, ethernet(DST, SRC, 0x1234, probe(2)[14:])),
    ("other", 1, ethernet(DST, SRC, 0x0800, bytes(20))),
))

PROGRAMS = (STACK_INDEX, HEADER_UNIONS, VARBIT_STACK, HEADER_MUX, ACTION_LOCALS, NESTED_SWITCH,
            VLAN, STALE_HEADERS, VALUE_SET)
