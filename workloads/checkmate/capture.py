"""Capturing the mirrored copies on the shadow's NICs: AF_PACKET sockets and a TCP parser.

:func:`parse_segment` is pure (an Ethernet frame in, the TCP segment's fields out);
:class:`Capture` holds one raw socket per NIC and hands back parsed segments. Frames the
host sends itself are skipped, so the shadow's own side-channel traffic is never read.
"""

from __future__ import annotations

import select
import socket
import struct
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Capture", "Segment", "parse_segment"]

_ETH_P_ALL = 0x0003
_PACKET_OUTGOING = 4
_IPV4 = struct.Struct("!BBHHHBBH4s4s")
_TCP = struct.Struct("!HHIIBB")


@dataclass(frozen=True)
class Segment:
    src: str
    dst: str
    sport: int
    dport: int
    tos: int
    seq: int
    syn: bool
    payload: bytes
    wire_bytes: int


def parse_segment(frame: bytes) -> Segment | None:
    """The TCP segment in an Ethernet frame; None for anything else (or a truncated frame).

    >>> import struct
    >>> ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0x84, 44, 0, 0, 64, 6, 0,
    ...                  bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
    >>> tcp = struct.pack("!HHIIBBHHH", 5000, 7100, 42, 0, 5 << 4, 0x18, 100, 0, 0)
    >>> s = parse_segment(bytes(12) + b"\\x08\\x00" + ip + tcp + b"abcd")
    >>> s.src, s.dport, s.tos, s.seq, s.syn, s.payload
    ('10.0.0.1', 7100, 132, 42, False, b'abcd')
    """
    if len(frame) < 14 + 20 + 20 or frame[12:14] != b"\x08\x00":
        return None
    vihl, tos, total, _, frag, _, proto, _, src, dst = _IPV4.unpack_from(frame, 14)
    ihl = (vihl & 0x0F) * 4
    if vihl >> 4 != 4 or proto != 6 or frag & 0x1FFF or ihl < 20 or len(frame) < 14 + total:
        return None
    t = 14 + ihl
    if total < ihl + 20:
        return None
    sport, dport, seq, _, off, flags = _TCP.unpack_from(frame, t)
    data = t + (off >> 4) * 4
    end = 14 + total
    if data > end:
        return None
    return Segment(socket.inet_ntoa(src), socket.inet_ntoa(dst), sport, dport, tos, seq,
                   bool(flags & 0x02), bytes(frame[data:end]), len(frame))


class Capture:
    """Raw sockets on ``interfaces``; :meth:`read` returns what arrived within a timeout."""

    def __init__(self, interfaces: Iterable[str], *, rcvbuf: int = 16 << 20) -> None:
        self.socks: list[socket.socket] = []
        try:
            for name in interfaces:
                # protocol 0 until bound: no other interface's frames queue in between
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
                s.bind((name, _ETH_P_ALL))
                s.setblocking(False)
                self.socks.append(s)
        except OSError:
            self.close()
            raise
        self.frames = 0

    def read(self, timeout_s: float, limit: int = 4096) -> list[Segment]:
        ready, _, _ = select.select(self.socks, [], [], timeout_s)
        out: list[Segment] = []
        for s in ready:
            while len(out) < limit:
                try:
                    frame, addr = s.recvfrom(65535)
                except BlockingIOError:
                    break
                if addr[2] == _PACKET_OUTGOING:
                    continue
                self.frames += 1
                seg = parse_segment(frame)
                if seg is not None:
                    out.append(seg)
        return out

    def close(self) -> None:
        for s in self.socks:
            s.close()
        self.socks = []
