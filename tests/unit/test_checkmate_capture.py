"""Parsing mirrored copies: scapy-built frames in, TCP segment fields out."""

from __future__ import annotations

from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether

from workloads.checkmate.capture import parse_segment
from workloads.checkmate.tagging import mirror_tos, session_of


def test_a_tagged_data_segment() -> None:
    pkt = (Ether(dst="02:00:00:00:00:04", src="02:00:00:00:00:03") /
           IP(src="10.0.1.3", dst="10.0.1.0", tos=mirror_tos(5)) /
           TCP(sport=40000, dport=7008, seq=123456789, flags="PA") / (b"x" * 100))
    seg = parse_segment(bytes(pkt))
    assert seg is not None
    assert (seg.src, seg.dst, seg.sport, seg.dport, seg.seq) == ("10.0.1.3", "10.0.1.0", 40000, 7008, 123456789)
    assert session_of(seg.tos) == 5 and not seg.syn and seg.payload == b"x" * 100


def test_syn_with_options_and_ethernet_padding() -> None:
    pkt = (Ether() / IP(src="10.0.0.1", dst="10.0.0.2", tos=0x84) /
           TCP(sport=1, dport=2, seq=2**32 - 5, flags="S", options=[("MSS", 1460), ("WScale", 7)]))
    raw = bytes(pkt) + b"\0" * 6  # a short frame padded by the link
    seg = parse_segment(raw)
    assert seg is not None and seg.syn and seg.seq == 2**32 - 5 and seg.payload == b""


def test_not_tcp_or_truncated_is_none() -> None:
    assert parse_segment(bytes(Ether() / IP() / UDP() / b"abc")) is None
    full = bytes(Ether() / IP() / TCP() / (b"y" * 40))
    assert parse_segment(full[:50]) is None
    assert parse_segment(b"") is None
