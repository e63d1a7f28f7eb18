"""The PHV in C: one struct member per field slot, typed by the field's width and sign.

Slot ``i`` of :class:`pybmv2.layout.PhvLayout` is ``p->v.f<i>``: ``u64``/``i64`` up to 64
bits, ``u128``/``i128`` up to 128. Header validity is ``p->valid[<header id>]`` and a
stack's next index ``p->sn[<its next_index>]`` (header stacks, then union stacks).
"""

from __future__ import annotations

from pybmv2.layout import FieldSlot, HeaderLayout, PhvLayout
from pybmv2.native.cvalues import Val, cast, literal, uint_for
from pybmv2.native.errors import NativeUnsupported

__all__ = ["field_val", "phv_struct", "slot_type", "store_field", "store_raw",
           "varbit_bytes", "varbit_start"]


def varbit_bytes(slot: FieldSlot) -> int:
    """Bytes a varbit field's value can take (its maximum width)."""
    return (slot.width + 7) // 8


def slot_type(slot: FieldSlot) -> str:
    """The C type of a field slot; a varbit field's value is its bytes as on the wire
    (``vb<N>_t``), its current length in bits the header's length slot."""
    if slot.varbit:
        return f"vb{varbit_bytes(slot)}_t"
    if slot.width > 128:
        raise NativeUnsupported(f"field {slot.header}.{slot.name} of {slot.width} bits "
                                "(at most 128 are supported)")
    if slot.signed:
        return "i64" if slot.width <= 64 else "i128"
    return "u64" if slot.width <= 64 else "u128"


def field_val(slot: FieldSlot, pkt: str = "p") -> Val:
    """Reading a field: its value range follows its width and sign."""
    if slot.varbit:
        raise NativeUnsupported(f"varbit field {slot.header}.{slot.name} in an expression")
    ty = slot_type(slot)
    if slot.signed:
        lo, hi = -(1 << (slot.width - 1)), (1 << (slot.width - 1)) - 1
    else:
        lo, hi = 0, (1 << slot.width) - 1
    return Val(f"{pkt}->v.f{slot.index}", ty, lo, hi)


def _sext(code: str, width: int) -> str:
    """Sign-extend the low ``width`` bits of the unsigned ``code``."""
    big = 64 if width <= 64 else 128
    sty = "i64" if big == 64 else "i128"
    if width == big:
        return f"(({sty})({code}))"
    return f"((({sty})(({code}) << {big - width})) >> {big - width})"


def store_field(slot: FieldSlot, v: Val, pkt: str = "p") -> str:
    """``field_writer``: the low ``width`` bits of ``v`` (sign-extended for signed fields)."""
    if slot.varbit:
        raise NativeUnsupported(f"assignment of a value to varbit field {slot.header}.{slot.name}")
    ty = slot_type(slot)
    u = uint_for(slot.width)
    bits = cast(v, u)
    if slot.width < (64 if u == "u64" else 128):
        bits = f"({bits} & {literal((1 << slot.width) - 1, u)})"
    if slot.signed:
        bits = _sext(bits, slot.width)
    elif ty != u:
        bits = f"(({ty}){bits})"
    return f"{pkt}->v.f{slot.index} = {bits};"


def store_raw(slot: FieldSlot, code: str, pkt: str = "p") -> str:
    """Store ``code`` unmasked, as V1Switch's ``_set`` does for standard metadata."""
    return f"{pkt}->v.f{slot.index} = ({slot_type(slot)})({code});"


def varbit_start(header: HeaderLayout) -> int:
    """The byte where a header's varbit field starts (the fields before it are fixed)."""
    vb = header.varbit
    assert vb is not None
    start = header.nbits - vb.shift
    if start % 8:
        raise NativeUnsupported(f"header {header.name}: a varbit field {start} bits in, not on "
                                "a byte boundary")
    if any(s.signed for s in header.fields):
        raise NativeUnsupported(f"header {header.name}: signed fields next to a varbit")
    return start // 8


def header_slots(header: HeaderLayout) -> range:
    """The slot indices of a header (its fields and a varbit's length slot)."""
    first = header.first_index
    return range(first, first + header.nslots)


def phv_struct(layout: PhvLayout) -> str:
    """The ``phv_t`` typedef: wide members first so the struct packs without holes."""
    members = []
    for hl in layout.headers:
        for slot in hl.fields:
            members.append((slot_type(slot), slot.index, f"{hl.name}.{slot.name}"))
        if hl.length_index is not None:
            members.append(("u64", hl.length_index, f"{hl.name} varbit length"))
    members.sort(key=lambda m: (m[0] not in ("u128", "i128"), m[1]))
    varbits = sorted({ty for ty, _, _ in members if ty.startswith("vb")}, key=lambda t: int(t[2:-2]))
    lines = [f"typedef struct {{ u8 b[{t[2:-2]}]; }} {t};" for t in varbits]
    lines.append("typedef struct {")
    lines += [f"    {ty} f{idx}; /* {what} */" for ty, idx, what in members]
    if not members:
        lines.append("    u64 unused;")
    lines.append("} phv_t;")
    return "\n".join(lines)
