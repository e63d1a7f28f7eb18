"""Headers with a varbit field: packing and unpacking at the varbit's current length.

Fixed-size headers never come here: the parser and deparser keep their precomputed plans for
those. A varbit header's layout (see :mod:`pybmv2.layout`) records each field's shift as if
the varbit were empty; the fields before the varbit are shifted further by its current
length, which lives in the header's length slot.
"""

from __future__ import annotations

from pybmv2.errors import UnsupportedJsonError
from pybmv2.layout import HeaderLayout

__all__ = ["VarbitPlan"]


class VarbitPlan:
    """How to pack and unpack one varbit header instance."""

    __slots__ = (
        "_after",
        "_before",
        "_varbit_shift",
        "first",
        "header",
        "length_index",
        "nfields",
        "varbit_index",
    )

    def __init__(self, header: HeaderLayout) -> None:
        vb = header.varbit
        if vb is None or header.length_index is None:
            raise ValueError(f"header {header.name!r} has no varbit field")
        if any(s.signed for s in header.fields):
            raise UnsupportedJsonError(f"header {header.name!r}: signed fields next to a varbit")
        self.header = header
        self.first = header.first_index
        self.nfields = len(header.fields)
        self.length_index: int = header.length_index
        self.varbit_index = vb.index
        pos = vb.index - self.first
        #: (shift, mask) of the fixed fields before and after the varbit
        self._before = tuple((s.shift, s.mask) for s in header.fields[:pos])
        self._after = tuple((s.shift, s.mask) for s in header.fields[pos + 1 :])
        self._varbit_shift = vb.shift

    def unpack(self, x: int, vl_bits: int) -> list[int]:
        """The field values (without the length slot) of the header whose bits are ``x``."""
        vals = [(x >> (shift + vl_bits)) & mask for shift, mask in self._before]
        vals.append((x >> self._varbit_shift) & ((1 << vl_bits) - 1))
        vals.extend((x >> shift) & mask for shift, mask in self._after)
        return vals

    def pack(self, values: list[int]) -> tuple[int, int]:
        """The header's bits and their count (a whole number of bytes)."""
        vl_bits = values[self.length_index]
        x = 0
        first = self.first
        for i, (shift, mask) in enumerate(self._before):
            x |= (values[first + i] & mask) << (shift + vl_bits)
        x |= (values[self.varbit_index] & ((1 << vl_bits) - 1)) << self._varbit_shift
        after = self.varbit_index + 1
        for i, (shift, mask) in enumerate(self._after):
            x |= (values[after + i] & mask) << shift
        return x, self.header.nbits + vl_bits

    def to_bytes(self, values: list[int]) -> bytes:
        x, nbits = self.pack(values)
        return x.to_bytes(nbits // 8, "big")
