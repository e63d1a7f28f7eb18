"""Hash and checksum calculations, bit for bit as BMv2 computes them.

A calculation concatenates its inputs bitwise (fields of invalid headers are skipped, as
BMv2's BufBuilder does), pads the last byte with zeros and applies an algorithm to the bytes.
A varbit field contributes its current length's worth of bits.
"""

from __future__ import annotations

import array
import sys
import zlib
from collections.abc import Callable
from typing import Any

from pybmv2.errors import JsonFormatError, UnsupportedJsonError
from pybmv2.expressions import parse_hexstr
from pybmv2.layout import FieldSlot, HeaderLayout, PhvLayout
from pybmv2.state import PacketState

__all__ = ["ALGORITHMS", "Calculation", "crc16", "csum16", "identity"]


def _reflect(value: int, nbits: int) -> int:
    out = 0
    for _ in range(nbits):
        out = (out << 1) | (value & 1)
        value >>= 1
    return out


def _crc16_table() -> list[int]:
    table = []
    for byte in range(256):
        rem = byte << 8
        for _ in range(8):
            rem = ((rem << 1) ^ 0x8005) if rem & 0x8000 else (rem << 1)
        table.append(rem & 0xFFFF)
    return table


_LITTLE_ENDIAN = sys.byteorder == "little"
_CRC16_TABLE = _crc16_table()
_REFLECT8 = [_reflect(b, 8) for b in range(256)]


def crc16(data: bytes) -> int:
    """BMv2's crc16 (polynomial 0x8005, reflected in and out: CRC-16/ARC).

    >>> hex(crc16(b"123456789"))
    '0xbb3d'
    """
    rem = 0
    table, refl = _CRC16_TABLE, _REFLECT8
    for byte in data:
        rem = table[refl[byte] ^ (rem >> 8)] ^ ((rem << 8) & 0xFFFF)
    return _reflect(rem, 16)


def crc32(data: bytes) -> int:
    """BMv2's crc32: the standard reflected CRC-32 (zlib's)."""
    return zlib.crc32(data) & 0xFFFFFFFF


def _crc_ccitt_table() -> list[int]:
    table = []
    for byte in range(256):
        rem = byte << 8
        for _ in range(8):
            rem = ((rem << 1) ^ 0x1021) if rem & 0x8000 else (rem << 1)
        table.append(rem & 0xFFFF)
    return table


_CCITT_TABLE = _crc_ccitt_table()


def crc_ccitt(data: bytes) -> int:
    rem = 0xFFFF
    for byte in data:
        rem = _CCITT_TABLE[byte ^ (rem >> 8)] ^ ((rem << 8) & 0xFFFF)
    return rem


def csum16(data: bytes) -> int:
    """The Internet checksum (ones' complement of the ones' complement sum).

    >>> hex(csum16(bytes.fromhex("450000730000400040110000c0a80001c0a800c7")))
    '0xb861'
    """
    if len(data) % 2:
        data += b"\x00"
    # The ones' complement sum is byte-order independent (RFC 1071 section 2): sum native
    # 16-bit words, fold, and swap the result into network order if the host is little-endian.
    words = array.array("H")
    words.frombytes(data)
    total = sum(words)
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    result = ~total & 0xFFFF
    if _LITTLE_ENDIAN:
        result = ((result & 0xFF) << 8) | (result >> 8)
    return result


def identity(data: bytes) -> int:
    """BMv2's identity hash: the first (at most) 8 bytes as a big-endian number."""
    return int.from_bytes(data[:8], "big")


def _xor(width_bytes: int) -> Callable[[bytes], int]:
    def xor_hash(data: bytes) -> int:
        out = 0
        for i in range(0, len(data), width_bytes):
            chunk = data[i : i + width_bytes].ljust(width_bytes, b"\x00")
            out ^= int.from_bytes(chunk, "big")
        return out

    return xor_hash


ALGORITHMS: dict[str, Callable[[bytes], int]] = {
    "crc16": crc16,
    "crc32": crc32,
    "crcCCITT": crc_ccitt,
    "csum16": csum16,
    "cksum16": csum16,
    "identity": identity,
    "xor16": _xor(2),
    "xor32": _xor(4),
}


class Calculation:
    """A named calculation of the JSON's ``calculations`` section."""

    def __init__(self, layout: PhvLayout, spec: dict[str, Any]) -> None:
        self.name: str = spec["name"]
        algo = spec.get("algo")
        if algo not in ALGORITHMS:
            raise UnsupportedJsonError(f"calculation {self.name!r}: hash algorithm {algo!r}")
        self.algo: Callable[[bytes], int] = ALGORITHMS[algo]
        # Each input: (header id or -1 for constants, slot index, width, constant value)
        self._inputs: list[tuple[int, int, int, int]] = []
        #: input position -> slot of the varbit length, for inputs that are varbit fields
        self._varbit_lengths: dict[int, int] = {}
        self._with_payload = False
        for item in spec.get("input", []):
            kind = item.get("type")
            if kind == "field":
                hname, fname = item["value"]
                header = layout.header(hname)
                if fname == "$valid$":
                    raise UnsupportedJsonError(f"calculation {self.name!r}: $valid$ input")
                self._add_field(header, layout.field(hname, fname))
            elif kind == "hexstr":
                width = int(item.get("bitwidth", 0))
                if width <= 0:
                    raise JsonFormatError(f"calculation {self.name!r}: hexstr without bitwidth")
                self._inputs.append((-1, 0, width, parse_hexstr(item["value"])))
            elif kind == "header":
                header = layout.header(item["value"])
                for slot in header.fields:
                    self._add_field(header, slot)
            elif kind == "payload":
                self._with_payload = True
            else:
                raise UnsupportedJsonError(f"calculation {self.name!r}: input type {kind!r}")

    def _add_field(self, header: HeaderLayout, slot: FieldSlot) -> None:
        if slot.varbit and header.length_index is not None:
            self._varbit_lengths[len(self._inputs)] = header.length_index
        self._inputs.append((header.id, slot.index, slot.width, 0))

    def _widths(self, s: PacketState) -> list[tuple[int, int, int, int]]:
        """The inputs with each varbit's width set to its current length."""
        inputs = list(self._inputs)
        for pos, length_index in self._varbit_lengths.items():
            hid, idx, _, const = inputs[pos]
            inputs[pos] = (hid, idx, s.values[length_index], const)
        return inputs

    def input_bytes(self, s: PacketState, payload: bytes = b"") -> bytes:
        """The bytes BMv2's BufBuilder feeds to the algorithm for this packet."""
        acc = 0
        nbits = 0
        values, valid = s.values, s.valid
        inputs = self._widths(s) if self._varbit_lengths else self._inputs
        for hid, idx, width, const in inputs:
            if hid < 0:
                v = const
            elif not valid[hid]:
                continue
            else:
                v = values[idx]
            acc = (acc << width) | (v & ((1 << width) - 1))
            nbits += width
        pad = (-nbits) % 8
        out = (acc << pad).to_bytes((nbits + pad) // 8, "big")
        if self._with_payload:
            out += payload
        return out

    @property
    def with_payload(self) -> bool:
        return self._with_payload

    def output(self, s: PacketState, payload: bytes = b"") -> int:
        return self.algo(self.input_bytes(s, payload))
