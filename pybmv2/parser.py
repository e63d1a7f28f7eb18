"""Compile a BMv2 JSON parser into a state machine over the received bytes.

Errors follow simple_switch: the parser stops at the first error, records its code in
``standard_metadata.parser_error`` and the packet still enters the ingress pipeline with the
headers extracted so far; the bytes not consumed become the payload.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pybmv2.errors import JsonFormatError, UnsupportedJsonError
from pybmv2.expressions import (
    compile_field_writer,
    compile_operand,
    parse_hexstr,
    slot_reader,
    valid_reader,
)
from pybmv2.layout import HeaderLayout, StackLayout
from pybmv2.primitives import Externs, assign_varbit, compile_primitive
from pybmv2.state import PacketState
from pybmv2.varbit import VarbitPlan

__all__ = ["CompiledParser", "ParserError"]


class ParserError(Exception):
    """Raised inside the parser to stop it with a P4 error code."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


Op = Callable[[PacketState], None]
KeyFn = Callable[[PacketState], int]


@dataclass(slots=True)
class _Transition:
    value: int
    mask: int | None
    next_state: str | None  # resolved to _State after compilation
    target: Any = None
    #: a parser value set: the transition matches a key in its members
    value_set: set[int] | None = None


@dataclass(slots=True)
class _State:
    name: str
    ops: tuple[Op, ...]
    key: KeyFn | None
    transitions: list[_Transition]
    default: Any = None  # _State | None | the sentinel _NO_DEFAULT
    has_default: bool = False


def _extractor(header: HeaderLayout, too_short: int, siblings: tuple[int, ...] = ()) -> Op:
    """Extract a fixed-size header; a union member invalidates the other members."""
    if header.length_index is not None:
        raise UnsupportedJsonError(f"header {header.name!r} has a varbit field: use extract_VL")
    nbytes = header.nbytes
    hid = header.id
    first = header.first_index
    nfields = len(header.fields)
    plan = tuple((s.shift, s.mask, s.signed, s.width) for s in header.fields)
    any_signed = any(s.signed for s in header.fields)

    def extract(s: PacketState) -> None:
        start = s.offset
        end = start + nbytes
        if end > len(s.data):
            raise ParserError(too_short)
        x = int.from_bytes(s.data[start:end], "big")
        vals = [(x >> shift) & mask for shift, mask, _, _ in plan]
        if any_signed:
            for i, (_, _, signed, width) in enumerate(plan):
                if signed and vals[i] >> (width - 1):
                    vals[i] -= 1 << width
        s.values[first : first + nfields] = vals
        s.valid[hid] = True
        s.offset = end

    if not siblings:
        return extract

    def extract_member(s: PacketState) -> None:
        extract(s)
        for o in siblings:
            s.valid[o] = False

    return extract_member


def _vl_extractor(header: HeaderLayout, length: KeyFn, errors: dict[str, int],
                  siblings: tuple[int, ...] = ()) -> Op:
    """BMv2's extract_VL: ``length`` is the varbit's size in bits, a multiple of 8.

    The checks come in BMv2's order: ParserInvalidArgument for a length that is not a whole
    number of bytes, PacketTooShort when the packet ends first, then HeaderTooShort when the
    header would exceed its type's ``max_length``.
    """
    plan = VarbitPlan(header)
    fixed_bytes = header.nbytes
    max_bytes = (header.nbits + header.fields[plan.varbit_index - plan.first].width) // 8
    hid, first, nfields, length_index = header.id, plan.first, plan.nfields, plan.length_index
    invalid = errors.get("ParserInvalidArgument", 6)
    too_short = errors.get("PacketTooShort", 1)
    header_too_short = errors.get("HeaderTooShort", 4)

    def extract_vl(s: PacketState) -> None:
        nbits = length(s) & 0xFFFFFFFF
        if nbits >= 1 << 31:  # BMv2 reads the length as a C int
            nbits -= 1 << 32
        if nbits % 8:
            raise ParserError(invalid)
        nbytes = fixed_bytes + nbits // 8
        start = s.offset
        end = start + nbytes
        if nbits < 0 or end > len(s.data):
            raise ParserError(too_short)
        if nbytes > max_bytes:
            raise ParserError(header_too_short)
        x = int.from_bytes(s.data[start:end], "big")
        s.values[first : first + nfields] = plan.unpack(x, nbits)
        s.values[length_index] = nbits
        for o in siblings:
            s.valid[o] = False
        s.valid[hid] = True
        s.offset = end

    return extract_vl


class CompiledParser:
    """The parser of a program, ready to run on packets."""

    def __init__(self, ext: Externs, spec: dict[str, Any], errors: dict[str, int],
                 value_sets: dict[str, set[int]] | None = None) -> None:
        self.name: str = spec["name"]
        #: parser value sets by name, their members as keys (empty unless a test adds some)
        self.value_sets: dict[str, set[int]] = value_sets if value_sets is not None else {}
        self._layout = ext.layout
        self._errors = errors
        self._too_short = errors.get("PacketTooShort", 1)
        self._no_match = errors.get("NoMatch", 2)
        self._stack_oob = errors.get("StackOutOfBounds", 3)
        states: dict[str, _State] = {}
        for st in spec.get("parse_states", []):
            states[st["name"]] = self._compile_state(ext, st)
        for st in states.values():
            for t in st.transitions:
                t.target = self._resolve(states, t.next_state)
            st.default = self._resolve(states, st.default) if st.has_default else None
        init = spec.get("init_state")
        if init not in states:
            raise JsonFormatError(f"parser {self.name!r}: unknown init_state {init!r}")
        self._start = states[init]

    @staticmethod
    def _resolve(states: dict[str, _State], name: str | None) -> _State | None:
        if name is None:
            return None
        try:
            return states[name]
        except KeyError:
            raise JsonFormatError(f"parser: unknown state {name!r}") from None

    def _compile_state(self, ext: Externs, st: dict[str, Any]) -> _State:
        name = st["name"]
        try:
            ops = tuple(self._compile_op(ext, op) for op in st.get("parser_ops", []))
        except UnsupportedJsonError as exc:
            raise UnsupportedJsonError(f"parser state {name!r}: {exc}") from exc
        key = self._compile_key(st.get("transition_key", []))
        transitions = []
        default: str | None = None
        has_default = False
        for t in st.get("transitions", []):
            kind = t.get("type", "hexstr")
            if kind == "default" or t.get("value") == "default":
                if not has_default:
                    default, has_default = t.get("next_state"), True
                continue
            mask = parse_hexstr(t["mask"]) if t.get("mask") else None
            if kind == "parse_vset":
                if t["value"] not in self.value_sets:
                    raise JsonFormatError(f"parser state {name!r}: unknown value set {t['value']!r}")
                transitions.append(_Transition(0, mask, t.get("next_state"), None, self.value_sets[t["value"]]))
                continue
            if kind != "hexstr":
                raise UnsupportedJsonError(f"parser state {name!r}: transition type {kind!r}")
            value = parse_hexstr(t["value"])
            transitions.append(_Transition(value if mask is None else value & mask, mask, t.get("next_state")))
        if key is None and transitions:
            raise JsonFormatError(f"parser state {name!r}: transitions without a key")
        return _State(name, ops, key, transitions, default, has_default)

    def _compile_op(self, ext: Externs, op: dict[str, Any]) -> Op:
        kind = op.get("op")
        params = op.get("parameters", [])
        layout = self._layout
        if kind in ("extract", "extract_VL"):
            p = params[0]
            length = compile_operand(layout, params[1]) if kind == "extract_VL" else None

            def extractor(hl: HeaderLayout) -> Op:
                siblings = layout.siblings[hl.id]
                if length is None:
                    return _extractor(hl, self._too_short, siblings)
                return _vl_extractor(hl, length, self._errors, siblings)

            if p["type"] == "regular":
                return extractor(layout.header(p["value"]))
            if p["type"] == "stack":
                stack = layout.stack(p["value"])
                return self._extract_next(stack, [extractor(layout.headers[h]) for h in stack.header_ids])
            if p["type"] == "union_stack":
                stack = layout.union_stack(p["value"][0])
                member = p["value"][1]
                ids = []
                for uid in stack.union_ids:
                    ids.append(layout.header(f"{layout.unions[uid].name}.{member}").id)
                return self._extract_next(stack, [extractor(layout.headers[h]) for h in ids])
            raise UnsupportedJsonError(f"{kind} of {p['type']!r}")
        if kind == "set":
            dst = params[0]
            if dst.get("type") == "field" and layout.field(*dst["value"]).varbit:
                assign_vl = assign_varbit(layout, dst, params[1])

                def set_varbit(s: PacketState) -> None:
                    assign_vl(s)

                return set_varbit
            write = compile_field_writer(layout, dst)
            src_spec = params[1]
            if src_spec.get("type") == "lookahead":
                src = self._lookahead(*src_spec["value"])
            else:
                src = compile_operand(layout, src_spec)

            def set_(s: PacketState) -> None:
                write(s, src(s))

            return set_
        if kind == "verify":
            cond = compile_operand(layout, params[0])
            code = compile_operand(layout, params[1])

            def verify(s: PacketState) -> None:
                if not cond(s):
                    raise ParserError(code(s))

            return verify
        if kind == "primitive":
            prim = compile_primitive(ext, params[0])

            def run_primitive(s: PacketState) -> None:
                prim(s)

            return run_primitive
        if kind in ("shift", "advance"):
            if kind == "shift":
                nbytes = parse_hexstr(params[0]["value"]) if params[0].get("type") == "hexstr" else int(params[0]["value"])
                amount: Callable[[PacketState], int] = lambda s: nbytes * 8  # noqa: E731
            else:
                amount = compile_operand(layout, params[0])
            too_short = self._too_short

            def advance(s: PacketState) -> None:
                bits = amount(s)
                end = s.offset + bits // 8
                if end > len(s.data):
                    raise ParserError(too_short)
                s.offset = end

            return advance
        raise UnsupportedJsonError(f"parser op {kind!r}")

    def _extract_next(self, stack: StackLayout, extractors: list[Op]) -> Op:
        """Extract into a stack's next element (StackOutOfBounds when it is full)."""
        nxt, oob = stack.next_index, self._stack_oob

        def extract_next(s: PacketState) -> None:
            n = s.stack_next[nxt]
            if n >= len(extractors):
                raise ParserError(oob)
            extractors[n](s)
            s.stack_next[nxt] = n + 1

        return extract_next

    def _lookahead(self, offset: int, width: int) -> KeyFn:
        too_short = self._too_short

        def look(s: PacketState) -> int:
            start_bit = s.offset * 8 + offset
            end_bit = start_bit + width
            if end_bit > len(s.data) * 8:
                raise ParserError(too_short)
            first, last = start_bit // 8, (end_bit + 7) // 8
            chunk = int.from_bytes(s.data[first:last], "big")
            return (chunk >> (last * 8 - end_bit)) & ((1 << width) - 1)

        return look

    def _compile_key(self, key_spec: list[dict[str, Any]]) -> KeyFn | None:
        if not key_spec:
            return None
        parts: list[tuple[KeyFn, int]] = []
        for k in key_spec:
            kind = k.get("type")
            if kind == "lookahead":
                offset, width = k["value"]
                parts.append((self._lookahead(offset, width), (width + 7) // 8 * 8))
            elif kind == "field":
                hname, fname = k["value"]
                if fname == "$valid$":
                    hid = self._layout.header(hname).id
                    parts.append((valid_reader(hid), 8))
                else:
                    slot = self._layout.field(hname, fname)
                    parts.append((slot_reader(slot.index, slot.mask), (slot.width + 7) // 8 * 8))
            elif kind in ("stack_field", "expression"):
                fn = compile_operand(self._layout, k)
                width = int(k.get("bitwidth", 32))
                parts.append((fn, (width + 7) // 8 * 8))
            else:
                raise UnsupportedJsonError(f"parser transition key of type {kind!r}")
        if len(parts) == 1:
            return parts[0][0]

        def key(s: PacketState) -> int:
            acc = 0
            for fn, bits in parts:
                acc = (acc << bits) | (fn(s) & ((1 << bits) - 1))
            return acc

        return key

    def parse(self, s: PacketState) -> None:
        """Run the parser on ``s.data``; sets ``s.error`` (0 when parsing succeeded)."""
        state: _State | None = self._start
        try:
            while state is not None:
                for op in state.ops:
                    op(s)
                if state.key is None:
                    state = state.default if state.has_default else None
                    continue
                k = state.key(s)
                for t in state.transitions:
                    masked = k if t.mask is None else k & t.mask
                    if masked == t.value if t.value_set is None else masked in t.value_set:
                        state = t.target
                        break
                else:
                    if not state.has_default:
                        raise ParserError(self._no_match)
                    state = state.default
        except ParserError as err:
            s.error = err.code
