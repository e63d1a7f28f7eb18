"""C values with a statically known range: the width semantics of the native engine.

BMv2 evaluates expressions on unbounded integers and p4c inserts the masks that give P4
its widths. The native engine evaluates them on fixed-width C integers instead, so every
intermediate value carries either

- its exact range ``[lo, hi]``, and lives in the narrowest of ``u64``, ``i64``, ``u128``,
  ``i128`` that holds the whole range (then C computes the exact value), or
- a modulus ``2**mod``: only its low ``mod`` bits are right, which is all a consumer that
  masks or truncates to ``mod`` bits needs (a field store, ``& mask``, ``two_comp_mod``).

A value that would need more than 128 bits raises :class:`NativeUnsupported`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pybmv2.native.errors import NativeUnsupported

__all__ = ["BITS", "Val", "cast", "const", "ctype_for", "literal", "uint_for"]

M64 = (1 << 64) - 1
BITS = {"u64": 64, "i64": 64, "u128": 128, "i128": 128}
UNSIGNED = {"u64": "u64", "i64": "u64", "u128": "u128", "i128": "u128"}


@dataclass(frozen=True, slots=True)
class Val:
    """A C expression ``code`` of C type ``ty``.

    Exact (``mod`` None): its value is in ``[lo, hi]``. Modular: only its low ``mod`` bits
    are meaningful and ``ty`` is unsigned.
    """

    code: str
    ty: str
    lo: int
    hi: int
    mod: int | None = None

    @property
    def exact(self) -> bool:
        return self.mod is None

    @property
    def is_const(self) -> bool:
        return self.mod is None and self.lo == self.hi


def ctype_for(lo: int, hi: int, what: str = "a value") -> str:
    """The narrowest C type holding every integer in ``[lo, hi]``.

    >>> ctype_for(0, 255), ctype_for(-1, 1), ctype_for(0, 1 << 64), ctype_for(-(1 << 64), 0)
    ('u64', 'i64', 'u128', 'i128')
    """
    if lo >= 0:
        if hi <= M64:
            return "u64"
        if hi < 1 << 128:
            return "u128"
    else:
        if lo >= -(1 << 63) and hi < 1 << 63:
            return "i64"
        if lo >= -(1 << 127) and hi < 1 << 127:
            return "i128"
    raise NativeUnsupported(f"{what} needs more than 128 bits (range {lo:#x}..{hi:#x})")


def uint_for(width: int) -> str:
    """The unsigned C type that holds ``width`` bits (at most 128)."""
    if width > 128:
        raise NativeUnsupported(f"a {width}-bit value (at most 128 bits are supported)")
    return "u64" if width <= 64 else "u128"


def literal(value: int, ty: str) -> str:
    """A C literal of ``value`` as type ``ty``.

    >>> literal(5, "u64"), literal(-1, "i64"), literal(1 << 64, "u128")
    ('5ULL', '(-1LL)', '(((u128)1ULL << 64) | 0ULL)')
    """
    if ty == "u64":
        return f"{value}ULL"
    if ty == "i64":
        return "(-9223372036854775807LL-1)" if value == -(1 << 63) else f"({value}LL)"
    bits = value % (1 << 128)
    hi, lo = bits >> 64, bits & M64
    text = f"((u128){lo}ULL)" if hi == 0 else f"(((u128){hi}ULL << 64) | {lo}ULL)"
    return text if ty == "u128" else f"((i128){text})"


def const(value: int) -> Val:
    ty = ctype_for(value, value, f"the constant {value:#x}")
    return Val(literal(value, ty), ty, value, value)


def cast(v: Val, ty: str) -> str:
    """``v``'s code converted to ``ty`` (modular for narrowing or sign changes, exact when
    ``ty`` holds ``v``'s range)."""
    if v.ty == ty:
        return v.code
    if v.is_const and v.lo == v.hi:
        if ty.startswith("u"):
            return literal(v.lo % (1 << BITS[ty]), ty)
        if -(1 << (BITS[ty] - 1)) <= v.lo < 1 << (BITS[ty] - 1):
            return literal(v.lo, ty)
    return f"(({ty})({v.code}))"


def unsigned(ty: str) -> str:
    return UNSIGNED[ty]
