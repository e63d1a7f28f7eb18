"""The ToR's TDN change notification: ICMP type 7, code 0, the new TDN id in byte 0 of the
rest-of-header (pure).

The format is the one of the TDTCP artifacts (click-etalon's ``ICMPTDNUpdate`` element and
the linux-tdtcp kernel, ``ICMP_ACTIVE_TDN_ID``)::

    type u8 = 7 | code u8 = 0 | checksum u16 | tdn u8 | 3 bytes unused

A raw ``IPPROTO_ICMP`` socket receives the whole IPv4 datagram: :func:`parse_notification`
takes that by default. Any other ICMP type or code is not a notification (``None``), as in
the kernel; a datagram too short to be one, or not IPv4/ICMP, raises
:class:`~workloads.tdtcp.errors.WireFormatError`.

>>> msg = build_notification(3)
>>> msg.hex(), inet_checksum(msg)
('0700f5ff03000000', 0)
>>> parse_notification(msg, ip_header=False)
TdnNotification(tdn=3, src=None, checksum_ok=True)
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

from workloads.tdtcp.errors import WireFormatError

__all__ = ["ICMP_ACTIVE_TDN_ID", "TdnNotification", "build_notification", "inet_checksum", "parse_notification"]

ICMP_ACTIVE_TDN_ID = 7
_ICMP = struct.Struct("!BBHB3x")
_PROTO_ICMP = 1


@dataclass(frozen=True)
class TdnNotification:
    """The network is now TDN ``tdn``; announced by ``src`` (``None`` without an IP header)."""

    tdn: int
    src: str | None
    checksum_ok: bool


def inet_checksum(data: bytes | memoryview) -> int:
    """The Internet checksum (RFC 1071) of ``data``: 0 over a message that carries a right one."""
    if len(data) % 2:
        data = bytes(data) + b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def build_notification(tdn: int) -> bytes:
    """The 8-byte ICMP message announcing TDN ``tdn``, checksum included."""
    if not 0 <= tdn <= 0xFF:
        raise WireFormatError(f"cannot encode TDN id {tdn}: outside 0..255")
    body = _ICMP.pack(ICMP_ACTIVE_TDN_ID, 0, 0, tdn)
    return _ICMP.pack(ICMP_ACTIVE_TDN_ID, 0, inet_checksum(body), tdn)


def parse_notification(packet: bytes | memoryview, *, ip_header: bool = True) -> TdnNotification | None:
    """The notification ``packet`` carries, or ``None`` if it is another ICMP message."""
    src = None
    icmp = memoryview(packet)
    if ip_header:
        if len(icmp) < 20:
            raise WireFormatError(f"IPv4 datagram of {len(icmp)} bytes: shorter than an IPv4 header")
        if icmp[0] >> 4 != 4:
            raise WireFormatError(f"IP version {icmp[0] >> 4}, not 4")
        ihl = (icmp[0] & 0x0F) * 4
        if ihl < 20 or len(icmp) < ihl:
            raise WireFormatError(f"IPv4 header length {ihl} in a {len(icmp)}-byte datagram")
        if icmp[9] != _PROTO_ICMP:
            raise WireFormatError(f"IP protocol {icmp[9]}, not ICMP")
        total = int.from_bytes(icmp[2:4], "big")
        if not ihl <= total <= len(icmp):
            raise WireFormatError(f"IPv4 total length {total} in a {len(icmp)}-byte datagram")
        src = str(ipaddress.IPv4Address(bytes(icmp[12:16])))
        icmp = icmp[ihl:total]  # without link-layer padding
    if len(icmp) < _ICMP.size:
        raise WireFormatError(f"ICMP message of {len(icmp)} bytes: shorter than 8")
    kind, code, _, tdn = _ICMP.unpack_from(icmp)
    if kind != ICMP_ACTIVE_TDN_ID or code != 0:
        return None
    return TdnNotification(tdn=tdn, src=src, checksum_ok=inet_checksum(icmp) == 0)
