"""What every part of the C generator shares: the program, its layout, extern indices and
the functions generated on demand (calculations)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pybmv2.layout import FieldSlot, PhvLayout
from pybmv2.native.cvalues import M64, Val
from pybmv2.native.errors import NativeUnsupported
from pybmv2.program import Program

__all__ = ["STD_FIELDS", "GenCtx", "index_code", "value_set_ids", "words_of"]

#: the standard_metadata fields simple_switch reads and writes (pybmv2.switch._StdSlots)
STD_FIELDS = (
    "ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length",
    "enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth",
    "ingress_global_timestamp", "egress_global_timestamp", "mcast_grp", "egress_rid",
    "checksum_error", "parser_error",
)


def words_of(width: int) -> int:
    """64-bit words that hold a ``width``-bit value (at most 128 bits)."""
    if width > 128:
        raise NativeUnsupported(f"a {width}-bit key or action parameter (at most 128 bits)")
    return 1 if width <= 64 else 2


def index_code(v: Val) -> str:
    """An extern index as u64; values outside 0..2**64-1 become ~0 (out of every range)."""
    if v.lo >= 0 and v.hi <= M64:
        return v.code if v.ty == "u64" else f"((u64)({v.code}))"
    return (f"({{ {v.ty} _i = {v.code}; (_i >= 0 && _i <= ({v.ty}){M64}ULL) ? "
            f"(u64)_i : ~(u64)0; }})")


def value_set_ids(doc: dict[str, Any]) -> dict[str, int]:
    """The engine's number of every parser value set, by name."""
    return {v["name"]: i for i, v in enumerate(doc.get("parse_vsets", []))}


@dataclass
class GenCtx:
    """The program being compiled and the names the generated C uses for its parts."""

    program: Program
    counters: dict[str, int] = field(default_factory=dict)
    registers: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (id, width)
    meters: dict[str, int] = field(default_factory=dict)
    #: calculation key -> (C function name, its definition)
    calc_fns: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: action id -> words of action data per parameter: [(first word, bit width)]
    action_args: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    max_argw: int = 1

    @property
    def layout(self) -> PhvLayout:
        return self.program.layout

    @property
    def doc(self) -> dict[str, Any]:
        return self.program.doc

    def std(self, name: str) -> FieldSlot | None:
        if self.layout.has_field("standard_metadata", name):
            return self.layout.field("standard_metadata", name)
        return None

    def error_code(self, name: str, default: int) -> int:
        return self.program.errors.get(name, default)

    @classmethod
    def for_program(cls, program: Program) -> GenCtx:
        g = cls(program)
        ext = program.externs
        g.counters = {name: i for i, name in enumerate(ext.counters)}
        for i, (name, reg) in enumerate(ext.registers.items()):
            if reg.bitwidth > 128:
                raise NativeUnsupported(f"register {name!r} of {reg.bitwidth} bits")
            g.registers[name] = (i, reg.bitwidth)
        g.meters = {name: i for i, name in enumerate(ext.meters)}
        for aid, action in program.actions.items():
            words, at = [], 0
            for pname, width in action.params:
                if width > 128:
                    raise NativeUnsupported(f"action {action.name!r}: parameter {pname!r} of "
                                            f"{width} bits")
                words.append((at, width))
                at += words_of(width)
            g.action_args[aid] = words
            g.max_argw = max(g.max_argw, at)
        return g
