"""Super-packets on the per-frame path: what a port with ``PACKET_VNET_HDR`` hands over, made
into the frames the wire would carry (pure; no sockets).

With ``mlfabric-switch --super-packets`` every port's socket carries a ``virtio_net_hdr``
before each frame: a TCP (or UDP) segment of up to 64 KB that the sender's stack has not cut
into frames (``gso_type``, ``gso_size``: the MSS) and whose L4 checksum holds only the
pseudo-header's sum (``NEEDS_CSUM``). The native engine forwards such a super-packet whole
(``native/csrc/rt_offload.c``); the Python engine, which runs a program frame by frame, cuts
it here first, as the kernel's GSO would (:func:`segment`), and completes partial checksums
(:func:`complete_checksum`). The tests use the same functions to check what the native
engine sends against what the wire should carry.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["GSO_NONE", "GSO_TCPV4", "GSO_TCPV6", "GSO_UDP_L4", "NEEDS_CSUM", "VNET_HDR", "VnetHeader",
           "complete_checksum", "frames_of", "internet_checksum", "segment"]

#: struct virtio_net_hdr, in the host's byte order as AF_PACKET gives it
VNET_HDR = struct.Struct("=BBHHHH")
NEEDS_CSUM = 1
DATA_VALID = 2
GSO_NONE, GSO_TCPV4, GSO_UDP, GSO_TCPV6, GSO_UDP_L4 = 0, 1, 3, 4, 5
GSO_ECN = 0x80


@dataclass(frozen=True, slots=True)
class VnetHeader:
    """One frame's ``virtio_net_hdr``."""

    flags: int = 0
    gso_type: int = GSO_NONE
    hdr_len: int = 0
    gso_size: int = 0
    csum_start: int = 0
    csum_offset: int = 0

    @classmethod
    def unpack(cls, data: bytes) -> VnetHeader:
        return cls(*VNET_HDR.unpack_from(data))

    def pack(self) -> bytes:
        return VNET_HDR.pack(self.flags, self.gso_type, self.hdr_len, self.gso_size, self.csum_start,
                             self.csum_offset)

    @property
    def is_gso(self) -> bool:
        return (self.gso_type & ~GSO_ECN) != GSO_NONE and self.gso_size > 0


def internet_checksum(data: bytes | bytearray | memoryview, start: int = 0) -> int:
    """RFC 1071's one's-complement sum of ``data`` added to ``start``, folded, not
    complemented.

    >>> hex(internet_checksum(bytes.fromhex("4500003c1c4640004006")))
    '0xe188'
    """
    b = bytes(data)
    if len(b) % 2:
        b += b"\0"
    total = start + sum(struct.unpack(f"!{len(b) // 2}H", b))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def complete_checksum(frame: bytes, csum_start: int, csum_offset: int) -> bytes:
    """``frame`` with its partial L4 checksum completed: the field holds the pseudo-header
    sum; the device adds every byte from ``csum_start`` and stores the complement."""
    out = bytearray(frame)
    field = csum_start + csum_offset
    total = internet_checksum(out[csum_start:])  # includes the field's pseudo-header sum
    value = (~total) & 0xFFFF
    out[field:field + 2] = struct.pack("!H", value or (0xFFFF if csum_offset == 6 else 0))
    return bytes(out)


def _l3_offset(frame: bytes) -> tuple[int, int]:
    at, kind = 12, int.from_bytes(frame[12:14], "big")
    while kind in (0x8100, 0x88A8):
        at += 4
        kind = int.from_bytes(frame[at:at + 2], "big")
    return at + 2, kind


def _pseudo(frame: bytes, l3: int, version: int, proto: int, length: int) -> int:
    words = frame[l3 + 12:l3 + 20] if version == 4 else frame[l3 + 8:l3 + 40]
    return internet_checksum(words, proto + length)


def segment(frame: bytes, hdr: VnetHeader) -> list[bytes]:
    """The frames a super-packet stands for, each with complete checksums (the kernel's
    GSO for TCP over IPv4 or IPv6, and UDP's L4 segmentation); a plain frame with a
    partial checksum, completed; anything else as it is.

    >>> import struct
    >>> ip = bytes.fromhex("45000000000140004006") + bytes(2) + bytes([10, 0, 0, 1, 10, 0, 0, 2])
    >>> tcp = struct.pack("!HHIIBBHHH", 1, 2, 100, 0, 0x50, 0x18, 512, 0, 0)
    >>> frame = bytes(12) + b"\\x08\\x00" + ip[:2] + struct.pack("!H", 20 + 20 + 25) + ip[4:] + tcp + bytes(25)
    >>> parts = segment(frame, VnetHeader(NEEDS_CSUM, GSO_TCPV4, 54, 10, 34, 16))
    >>> [len(p) - 54 for p in parts], [struct.unpack_from("!I", p, 38)[0] for p in parts]
    ([10, 10, 5], [100, 110, 120])
    """
    if not hdr.is_gso and not hdr.flags & NEEDS_CSUM:
        return [frame]
    l3, kind = _l3_offset(frame)  # from the frame: a tag put back moved what csum_start says
    version = 4 if kind == 0x0800 else 6
    if version == 4:
        l4 = l3 + (frame[l3] & 0xF) * 4
        proto = frame[l3 + 9]
    else:
        l4 = l3 + 40
        proto = frame[l3 + 6]
    if not hdr.is_gso:
        return [complete_checksum(frame, l4, 16 if proto == 6 else 6)]
    end = l4 + ((frame[l4 + 12] >> 4) * 4 if proto == 6 else 8)
    head, payload, mss = frame[:end], frame[end:], hdr.gso_size
    pieces = [payload[i:i + mss] for i in range(0, len(payload), mss)] or [b""]
    out = []
    for k, piece in enumerate(pieces):
        last = k == len(pieces) - 1
        f = bytearray(head + piece)
        l4_len = end - l4 + len(piece)
        if version == 4:
            struct.pack_into("!H", f, l3 + 2, l4 - l3 + l4_len)
            ident = (int.from_bytes(head[l3 + 4:l3 + 6], "big") + k) & 0xFFFF
            struct.pack_into("!H", f, l3 + 4, ident)
            struct.pack_into("!H", f, l3 + 10, 0)
            struct.pack_into("!H", f, l3 + 10, (~internet_checksum(f[l3:l4])) & 0xFFFF)
        else:
            struct.pack_into("!H", f, l3 + 4, l4_len)
        if proto == 6:
            seq = (int.from_bytes(head[l4 + 4:l4 + 8], "big") + k * mss) & 0xFFFFFFFF
            struct.pack_into("!I", f, l4 + 4, seq)
            if not last:  # FIN and PSH only on the last frame; CWR only on the first
                f[l4 + 13] &= ~0x09 & 0xFF
            if k:
                f[l4 + 13] &= ~0x80 & 0xFF
            field = l4 + 16
        else:
            struct.pack_into("!H", f, l4 + 4, l4_len)
            field = l4 + 6
        struct.pack_into("!H", f, field, _pseudo(bytes(f), l3, version, proto, l4_len))
        out.append(complete_checksum(bytes(f), l4, field - l4))
    return out


def frames_of(data: bytes) -> list[bytes]:
    """What a super-packet port handed over (a ``virtio_net_hdr`` and a frame) as the
    frames the wire carries."""
    hdr = VnetHeader.unpack(data)
    return segment(data[VNET_HDR.size:], hdr)
