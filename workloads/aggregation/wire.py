"""The aggregation packet, as ``p4src/include/aggregate_headers.p4`` defines it: a 16-byte
header and 64 signed 32-bit values, the UDP payload of every request and result."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from workloads.errors import ProtocolError

__all__ = [
    "AGG_UDP_PORT",
    "EXPONENT_BIAS",
    "FLAG_RESULT",
    "FLAG_RETRANSMIT",
    "FLAG_SET",
    "FRAME_BYTES",
    "HEADER_BYTES",
    "LANES",
    "PAYLOAD_BYTES",
    "WORKER_PORT",
    "Chunk",
    "decode",
    "encode",
    "service_address",
]

#: the UDP port the switch aggregates on
AGG_UDP_PORT = 48864
#: the UDP port every worker of a job sends from and receives its results on
WORKER_PORT = AGG_UDP_PORT + 1
LANES = 64
FLAG_SET = 1
FLAG_RESULT = 2
FLAG_RETRANSMIT = 4
EXPONENT_BIAS = 127
_HEADER = struct.Struct("!BBHIBBHI")
_VALUES = struct.Struct(f"!{LANES}i")
HEADER_BYTES = _HEADER.size
PAYLOAD_BYTES = _HEADER.size + _VALUES.size
#: the bytes of one aggregation packet on the wire: Ethernet, IPv4, UDP and the payload
FRAME_BYTES = 14 + 20 + 8 + PAYLOAD_BYTES


@dataclass(frozen=True, slots=True)
class Chunk:
    """One packet's worth: ``values`` are LANES signed 32-bit integers."""

    job: int
    slot: int
    offset: int
    values: tuple[int, ...] = field(default=(0,) * LANES)
    flags: int = 0
    exponent: int = EXPONENT_BIAS
    workers: int = 0
    bitmap: int = 0

    @property
    def set(self) -> int:
        return self.flags & FLAG_SET

    @property
    def is_result(self) -> bool:
        return bool(self.flags & FLAG_RESULT)


def encode(chunk: Chunk) -> bytes:
    if len(chunk.values) != LANES:
        raise ProtocolError(f"an aggregation chunk holds {LANES} values, not {len(chunk.values)}")
    return _HEADER.pack(chunk.job, chunk.flags, chunk.slot, chunk.offset, chunk.exponent, chunk.workers, 0,
                        chunk.bitmap) + _VALUES.pack(*chunk.values)


def decode(payload: bytes) -> Chunk:
    if len(payload) != PAYLOAD_BYTES:
        raise ProtocolError(f"an aggregation packet carries {PAYLOAD_BYTES} bytes, not {len(payload)}")
    job, flags, slot, offset, exponent, workers, _, bitmap = _HEADER.unpack_from(payload)
    return Chunk(job=job, slot=slot, offset=offset, values=_VALUES.unpack_from(payload, _HEADER.size), flags=flags,
                 exponent=exponent, workers=workers, bitmap=bitmap)


def service_address(rail: int) -> str:
    """Where the workers of rail ``rail`` send their chunks: the rail's switch-side address
    (the same the hosts' source routes use as their gateway)."""
    return f"10.{rail}.255.254"
