"""The TDTCP segment format over UDP: DATA and ACK, encoded and decoded (pure).

Every datagram starts with a magic byte and a kind. Integers are big-endian; sequence
numbers count bytes of the stream from 0 and never wrap (64 bits)::

    DATA (28 bytes + payload)
      magic u8 = 0x7D | kind u8 = 1 | flags u8 (FIN, RETX) | tdn u8
      conn u32 | seq u64 | ts_ns u64 | length u16 | reserved u16 | payload
    ACK (32 bytes + 16 per SACK block, at most 4)
      magic u8 = 0x7D | kind u8 = 2 | flags u8 (FIN) | data_tdn u8
      conn u32 | cum_ack u64 | echo_ts_ns u64 | rwnd u32 | nsack u8 | 3 bytes reserved
      nsack x (start u64 | end u64)

``tdn`` is the time-division network the segment was sent in. ``ts_ns`` is the sender's
clock at that transmission; the ACK echoes the ``ts_ns`` and the ``tdn`` of the segment that
triggered it (``echo_ts_ns``, ``data_tdn``), so an RTT sample is unambiguous even for a
retransmission (every transmission carries its own stamp) and is credited to the TDN the
data travelled in: the role of TDTCP's TD_DA option (kind 35) in the kernel artifact.
``cum_ack`` is the next byte the receiver expects; a SACK block ``[start, end)`` is data held
above it. ``FIN`` on DATA marks the stream's last segment; on an ACK, a complete stream.

>>> seg = DataSegment(conn=7, seq=1448, tdn=1, ts_ns=5, payload=b"abc")
>>> decode(encode_data(seg)) == seg
True
>>> ack = Ack(conn=7, cum_ack=1448, echo_ts_ns=5, data_tdn=1, rwnd=65536, sacks=((2896, 4344),))
>>> decode(encode_ack(ack)) == ack
True
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from workloads.tdtcp.errors import WireFormatError

__all__ = [
    "ACK_HEADER",
    "DATA_HEADER",
    "FLAG_FIN",
    "FLAG_RETX",
    "KIND_ACK",
    "KIND_DATA",
    "MAGIC",
    "MAX_SACK_BLOCKS",
    "SACK_BLOCK",
    "Ack",
    "DataSegment",
    "decode",
    "decode_ack",
    "decode_data",
    "encode_ack",
    "encode_data",
    "encode_data_header",
]

MAGIC = 0x7D
KIND_DATA = 1
KIND_ACK = 2
FLAG_FIN = 0x01
FLAG_RETX = 0x02
MAX_SACK_BLOCKS = 4

DATA_HEADER = struct.Struct("!BBBBIQQHH")
ACK_HEADER = struct.Struct("!BBBBIQQIB3x")
SACK_BLOCK = struct.Struct("!QQ")

_U64 = 2**64 - 1
_U32 = 2**32 - 1
_MAX_PAYLOAD = 0xFFFF


@dataclass(frozen=True, slots=True)
class DataSegment:
    """Bytes ``[seq, seq + len(payload))`` of connection ``conn``, sent in TDN ``tdn``."""

    conn: int
    seq: int
    tdn: int
    ts_ns: int
    payload: bytes
    fin: bool = False
    retx: bool = False

    @property
    def end(self) -> int:
        """The sequence number after the last byte."""
        return self.seq + len(self.payload)


@dataclass(frozen=True, slots=True)
class Ack:
    """Everything below ``cum_ack`` arrived, and the ``sacks`` blocks above it."""

    conn: int
    cum_ack: int
    echo_ts_ns: int
    data_tdn: int
    rwnd: int
    sacks: tuple[tuple[int, int], ...] = ()
    fin: bool = False


def _check(name: str, value: int, top: int) -> None:
    if not 0 <= value <= top:
        raise WireFormatError(f"cannot encode {name}={value}: outside 0..{top}")


def encode_data_header(conn: int, seq: int, tdn: int, ts_ns: int, length: int, *,
                       fin: bool = False, retx: bool = False) -> bytes:
    """The 28-byte DATA header alone (the sender sends it and the payload as two buffers).

    >>> len(encode_data_header(1, 0, 0, 0, 1448))
    28
    """
    _check("conn", conn, _U32)
    _check("seq", seq, _U64)
    _check("tdn", tdn, 0xFF)
    _check("ts_ns", ts_ns, _U64)
    _check("length", length, _MAX_PAYLOAD)
    flags = (FLAG_FIN if fin else 0) | (FLAG_RETX if retx else 0)
    return DATA_HEADER.pack(MAGIC, KIND_DATA, flags, tdn, conn, seq, ts_ns, length, 0)


def encode_data(seg: DataSegment) -> bytes:
    """A DATA datagram."""
    return encode_data_header(seg.conn, seg.seq, seg.tdn, seg.ts_ns, len(seg.payload),
                              fin=seg.fin, retx=seg.retx) + bytes(seg.payload)


def encode_ack(ack: Ack) -> bytes:
    """An ACK datagram; at most :data:`MAX_SACK_BLOCKS` SACK blocks, each non-empty."""
    _check("conn", ack.conn, _U32)
    _check("cum_ack", ack.cum_ack, _U64)
    _check("echo_ts_ns", ack.echo_ts_ns, _U64)
    _check("data_tdn", ack.data_tdn, 0xFF)
    _check("rwnd", ack.rwnd, _U32)
    if len(ack.sacks) > MAX_SACK_BLOCKS:
        raise WireFormatError(f"cannot encode {len(ack.sacks)} SACK blocks: at most {MAX_SACK_BLOCKS}")
    out = [ACK_HEADER.pack(MAGIC, KIND_ACK, FLAG_FIN if ack.fin else 0, ack.data_tdn, ack.conn,
                           ack.cum_ack, ack.echo_ts_ns, ack.rwnd, len(ack.sacks))]
    for start, end in ack.sacks:
        _check("SACK start", start, _U64)
        _check("SACK end", end, _U64)
        if start >= end:
            raise WireFormatError(f"cannot encode SACK block [{start}, {end}): empty or reversed")
        out.append(SACK_BLOCK.pack(start, end))
    return b"".join(out)


def _head(buf: bytes | memoryview, kind: int | None) -> int:
    if len(buf) < 2:
        raise WireFormatError(f"datagram of {len(buf)} bytes: too short for a TDTCP header")
    if buf[0] != MAGIC:
        raise WireFormatError(f"bad magic 0x{buf[0]:02x} (expected 0x{MAGIC:02x}): not a TDTCP segment")
    if buf[1] not in (KIND_DATA, KIND_ACK):
        raise WireFormatError(f"unknown segment kind {buf[1]}")
    if kind is not None and buf[1] != kind:
        raise WireFormatError(f"segment kind {buf[1]} where {kind} was expected")
    return buf[1]


def decode_data(buf: bytes | memoryview) -> DataSegment:
    """Decode a DATA datagram; :class:`WireFormatError` if it is malformed."""
    _head(buf, KIND_DATA)
    if len(buf) < DATA_HEADER.size:
        raise WireFormatError(f"DATA of {len(buf)} bytes: shorter than its {DATA_HEADER.size}-byte header")
    _, _, flags, tdn, conn, seq, ts_ns, length, _ = DATA_HEADER.unpack_from(buf)
    if len(buf) - DATA_HEADER.size != length:
        raise WireFormatError(f"DATA length field {length} but {len(buf) - DATA_HEADER.size} payload bytes")
    if flags & ~(FLAG_FIN | FLAG_RETX):
        raise WireFormatError(f"DATA with unknown flags 0x{flags:02x}")
    if seq + length > _U64:
        raise WireFormatError(f"DATA [{seq}, {seq + length}) runs past the 64-bit sequence space")
    return DataSegment(conn=conn, seq=seq, tdn=tdn, ts_ns=ts_ns, payload=bytes(buf[DATA_HEADER.size:]),
                       fin=bool(flags & FLAG_FIN), retx=bool(flags & FLAG_RETX))


def decode_ack(buf: bytes | memoryview) -> Ack:
    """Decode an ACK datagram; :class:`WireFormatError` if it is malformed."""
    _head(buf, KIND_ACK)
    if len(buf) < ACK_HEADER.size:
        raise WireFormatError(f"ACK of {len(buf)} bytes: shorter than its {ACK_HEADER.size}-byte header")
    _, _, flags, tdn, conn, cum, echo, rwnd, nsack = ACK_HEADER.unpack_from(buf)
    if flags & ~FLAG_FIN:
        raise WireFormatError(f"ACK with unknown flags 0x{flags:02x}")
    if nsack > MAX_SACK_BLOCKS:
        raise WireFormatError(f"ACK with {nsack} SACK blocks: at most {MAX_SACK_BLOCKS}")
    want = ACK_HEADER.size + nsack * SACK_BLOCK.size
    if len(buf) != want:
        raise WireFormatError(f"ACK with {nsack} SACK blocks is {len(buf)} bytes, expected {want}")
    sacks = tuple(SACK_BLOCK.unpack_from(buf, ACK_HEADER.size + i * SACK_BLOCK.size) for i in range(nsack))
    for start, end in sacks:
        if start >= end:
            raise WireFormatError(f"ACK with SACK block [{start}, {end}): empty or reversed")
    return Ack(conn=conn, cum_ack=cum, echo_ts_ns=echo, data_tdn=tdn, rwnd=rwnd, sacks=sacks,
               fin=bool(flags & FLAG_FIN))


def decode(buf: bytes | memoryview) -> DataSegment | Ack:
    """Decode a DATA or an ACK datagram, whichever it is."""
    return decode_data(buf) if _head(buf, None) == KIND_DATA else decode_ack(buf)
