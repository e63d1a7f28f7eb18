"""Build test frames without external dependencies (scapy bytes work just as well)."""

from __future__ import annotations

import ipaddress
import struct

from pybmv2.calculations import csum16

__all__ = ["ethernet", "ipv4", "mac", "udp"]


def mac(text: str) -> bytes:
    """``"00:00:00:00:00:01"`` -> 6 bytes."""
    return bytes.fromhex(text.replace(":", "").replace("-", ""))


def ethernet(dst: str, src: str, ether_type: int, payload: bytes = b"") -> bytes:
    return mac(dst) + mac(src) + struct.pack("!H", ether_type) + payload


def ipv4(src: str, dst: str, payload: bytes = b"", *, proto: int = 17, ttl: int = 64,
         ident: int = 1, tos: int = 0, checksum: int | None = None) -> bytes:
    """An IPv4 header (correct checksum unless ``checksum`` is given) and its payload."""
    total = 20 + len(payload)
    head = struct.pack("!BBHHHBBH4s4s", 0x45, tos, total, ident, 0, ttl, proto, 0,
                       ipaddress.IPv4Address(src).packed, ipaddress.IPv4Address(dst).packed)
    value = csum16(head) if checksum is None else checksum
    return head[:10] + struct.pack("!H", value) + head[12:] + payload


def udp(sport: int, dport: int, payload: bytes = b"", checksum: int = 0) -> bytes:
    return struct.pack("!HHHH", sport, dport, 8 + len(payload), checksum) + payload
