"""The TDN notification (ICMP type 7, code 0, TDN id in byte 0 of the rest-of-header) parsed
from frames built and dissected with scapy, and the listener's programmatic path."""

from __future__ import annotations

import os
import socket
import threading

import pytest
from scapy.layers.inet import ICMP, IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw, raw

from workloads.tdtcp.errors import WireFormatError
from workloads.tdtcp.icmp import (
    ICMP_ACTIVE_TDN_ID,
    build_notification,
    inet_checksum,
    parse_notification,
)
from workloads.tdtcp.notify import TdnListener


def notification(tdn: int, *, src: str = "10.0.0.254", **icmp: int) -> bytes:
    """The IPv4 datagram a raw ICMP socket hands over, built by scapy."""
    fields = {"type": ICMP_ACTIVE_TDN_ID, "code": 0, "unused": tdn << 24, **icmp}
    return raw(IP(src=src, dst="10.0.1.1") / ICMP(**fields))


@pytest.mark.parametrize("tdn", [0, 1, 7, 255])
def test_the_tdn_id_comes_from_byte_0_of_the_rest_of_header(tdn: int) -> None:
    note = parse_notification(notification(tdn))
    assert note is not None and note.tdn == tdn and note.src == "10.0.0.254" and note.checksum_ok


def test_other_icmp_types_and_codes_are_not_notifications() -> None:
    assert parse_notification(raw(IP(dst="10.0.1.1") / ICMP(type=8, id=1, seq=1))) is None  # echo request
    assert parse_notification(raw(IP(dst="10.0.1.1") / ICMP(type=3, code=3))) is None  # port unreachable
    assert parse_notification(notification(1, code=1)) is None  # the kernel drops code != 0 too


def test_a_wrong_checksum_is_reported() -> None:
    note = parse_notification(notification(4, chksum=0x1234))
    assert note is not None and note.tdn == 4 and not note.checksum_ok


def test_link_layer_padding_is_ignored() -> None:
    frame = Ether(dst="00:00:00:00:01:01") / IP(src="10.0.0.254", dst="10.0.1.1") / ICMP(type=7, unused=3 << 24)
    padded = raw(frame)[14:] + b"\0" * 18  # a 42-byte frame padded to Ethernet's 60
    note = parse_notification(padded)
    assert note is not None and note.tdn == 3 and note.checksum_ok


def test_options_in_the_ip_header_are_skipped() -> None:
    pkt = raw(IP(src="10.0.0.254", dst="10.0.1.1", options=[b"\x01\x01\x01\x00"]) / ICMP(type=7, unused=9 << 24))
    note = parse_notification(pkt)
    assert note is not None and note.tdn == 9


@pytest.mark.parametrize(("pkt", "words"), [
    (b"\x45" + bytes(10), "shorter than an IPv4 header"),
    (b"\x65" + bytes(27), "IP version 6"),
    (raw(IP(dst="10.0.1.1") / UDP(dport=9) / Raw(b"x")), "IP protocol 17, not ICMP"),
    (raw(IP(dst="10.0.1.1") / ICMP(type=7))[:24], "IPv4 total length 28 in a 24-byte datagram"),
    (raw(IP(dst="10.0.1.1", len=24) / ICMP(type=7))[:24], "ICMP message of 4 bytes"),
])
def test_malformed_datagrams_raise_one_line(pkt: bytes, words: str) -> None:
    with pytest.raises(WireFormatError, match=words):
        parse_notification(pkt)


def test_the_built_message_is_what_scapy_expects() -> None:
    msg = build_notification(42)
    icmp = ICMP(msg)
    assert (icmp.type, icmp.code, icmp.unused) == (7, 0, 42 << 24)
    assert icmp.chksum == ICMP(raw(ICMP(type=7, code=0, unused=42 << 24))).chksum
    assert inet_checksum(msg) == 0
    note = parse_notification(msg, ip_header=False)
    assert note is not None and note.tdn == 42 and note.src is None
    with pytest.raises(WireFormatError, match="TDN id 256"):
        build_notification(256)


def test_the_listener_without_a_socket_is_inert() -> None:
    calls: list[tuple[int, float]] = []
    listener = TdnListener(lambda tdn, t: calls.append((tdn, t)))
    listener.stop()  # never started: nothing to do
    assert listener.stats() == {"received": [], "ignored": {}, "error": None} and calls == []


@pytest.mark.skipif(os.geteuid() != 0, reason="a raw ICMP socket needs root")
def test_the_listener_passes_on_type_7_only() -> None:
    heard = threading.Event()
    calls: list[tuple[int, float]] = []

    def on_tdn(tdn: int, t: float) -> None:
        calls.append((tdn, t))
        heard.set()

    bad = bytearray(build_notification(6))
    bad[2] ^= 0xFF
    with TdnListener(on_tdn) as listener, socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as s:
        s.sendto(raw(ICMP(type=8, id=7, seq=1)), ("127.0.0.1", 0))  # an echo request: filtered out
        s.sendto(bytes(bad), ("127.0.0.1", 0))
        s.sendto(raw(ICMP(type=7, code=0, unused=5 << 24)), ("127.0.0.1", 0))
        assert heard.wait(5)
    assert [tdn for tdn, _ in calls] == [5]
    assert listener.ignored["bad_checksum"] == 1  # sent before the good one, read before it
    [(t, tdn, src)] = listener.stats()["received"]
    assert (tdn, src) == (5, "127.0.0.1") and t == calls[0][1]
