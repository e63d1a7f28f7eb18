"""Packet I/O and digest payloads: controller headers and P4Data, as PI converts them.

A PacketOut becomes the bytes of the ``packet_out`` controller header (its metadata fields
packed in P4Info order, most significant bit first, missing fields zero) followed by the
payload; the switch injects that frame on its CPU port. A frame the switch emits on the CPU
port starts with the ``packet_in`` header: its fields become PacketIn metadata (canonical
bytestrings) and are stripped from the payload; a frame shorter than the header is dropped.
Without a controller header in the P4Info the payload passes unchanged (PI's
``packet_io_mgr.cpp``). Digest samples become P4Data structs/tuples of canonical
bitstrings (PI's ``digest_mgr.cpp``).
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from p4.v1 import p4data_pb2, p4runtime_pb2

from pybmv2.runtime.codec import decode_bytestring, encode_bytestring, invalid
from pybmv2.runtime.errors import P4RuntimeError
from pybmv2.runtime.p4info import ControllerHeader, DigestInfo

__all__ = [
    "PACKET_IN",
    "PACKET_OUT",
    "digest_data",
    "pack_header",
    "packet_in_message",
    "packet_out_frame",
    "unpack_header",
]

PACKET_IN = "packet_in"
PACKET_OUT = "packet_out"


def pack_header(header: ControllerHeader, values: Sequence[int]) -> bytes:
    """The wire bytes of a controller header with one value per field.

    >>> from pybmv2.runtime.p4info import ParamInfo
    >>> h = ControllerHeader(1, "packet_out", (ParamInfo(1, "port", 9), ParamInfo(2, "pad", 7)))
    >>> pack_header(h, [3, 0]).hex()
    '0180'
    """
    acc = 0
    for f, v in zip(header.fields, values, strict=True):
        acc = (acc << f.bitwidth) | v
    acc <<= header.nbytes * 8 - header.nbits
    return acc.to_bytes(header.nbytes, "big")


def unpack_header(header: ControllerHeader, data: bytes) -> list[int]:
    """The field values of a controller header at the start of ``data``."""
    acc = int.from_bytes(data[: header.nbytes], "big") >> (header.nbytes * 8 - header.nbits)
    values = []
    shift = header.nbits
    for f in header.fields:
        shift -= f.bitwidth
        values.append((acc >> shift) & ((1 << f.bitwidth) - 1))
    return values


def packet_out_frame(header: ControllerHeader | None, msg: p4runtime_pb2.PacketOut) -> bytes:
    """The frame to inject on the CPU port for a PacketOut (PI's ``PacketOutMutate``)."""
    if header is None:
        if len(msg.metadata):
            raise invalid("Unexpected metadata in PacketOut message")
        return bytes(msg.payload)
    values = [0] * len(header.fields)
    positions = {f.id: i for i, f in enumerate(header.fields)}
    for md in msg.metadata:
        pos = positions.get(md.metadata_id)
        if pos is None:
            raise invalid(f"Unknown metadata id in PacketOut message: {md.metadata_id}")
        f = header.fields[pos]
        values[pos] = decode_bytestring(md.value, f.bitwidth, f"packet_out.{f.name}")
    return pack_header(header, values) + bytes(msg.payload)


def packet_in_message(header: ControllerHeader | None,
                      frame: bytes) -> p4runtime_pb2.PacketIn | None:
    """The PacketIn for a frame emitted on the CPU port; None if it is too short."""
    if header is None:
        return p4runtime_pb2.PacketIn(payload=frame)
    if len(frame) < header.nbytes:
        return None
    msg = p4runtime_pb2.PacketIn(payload=frame[header.nbytes:])
    for f, v in zip(header.fields, unpack_header(header, frame), strict=True):
        msg.metadata.add(metadata_id=f.id, value=encode_bytestring(v))
    return msg


def digest_data(info: DigestInfo, values: Sequence[int], out: p4data_pb2.P4Data) -> None:
    """Fill one DigestList ``data`` element from a sample's field values."""
    if len(values) != len(info.bitwidths):
        raise P4RuntimeError(
            grpc.StatusCode.INTERNAL,
            f"digest {info.name!r}: sample has {len(values)} values, expected "
            f"{len(info.bitwidths)}")
    if info.kind == "bitstring":
        out.bitstring = encode_bytestring(values[0])
        return
    members = out.struct.members if info.kind == "struct" else out.tuple.members
    for v in values:
        members.add().bitstring = encode_bytestring(v)
