"""Compile BMv2 JSON operands and expressions into Python closures.

An operand such as ``{"type": "field", "value": ["ipv4", "ttl"]}`` or an expression tree
becomes a function ``fn(state) -> int``. Arithmetic follows BMv2: expressions are evaluated
on unbounded integers (BMv2's Bignum) and p4c inserts the masks that give P4 its width
semantics; truncation happens when a value is written to a field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pybmv2.errors import JsonFormatError, PacketError, UnsupportedJsonError
from pybmv2.layout import FieldSlot, PhvLayout, StackLayout
from pybmv2.state import PacketState

__all__ = [
    "Eval",
    "compile_expression",
    "compile_field_writer",
    "compile_header_ref",
    "compile_operand",
    "compile_stack_ref",
    "compile_union_ref",
    "field_writer",
    "parse_hexstr",
    "slot_reader",
    "static_header_id",
    "unwrap",
    "valid_reader",
    "valid_writer",
]

Eval = Callable[[PacketState], int]
HeaderRef = Callable[[PacketState], int]


def parse_hexstr(text: str) -> int:
    """BMv2's hexstr: an optionally negative hexadecimal literal.

    >>> parse_hexstr("-0x1"), parse_hexstr("0x0800")
    (-1, 2048)
    """
    try:
        return int(text, 16)
    except (TypeError, ValueError):
        raise JsonFormatError(f"bad hexstr {text!r}") from None


def slot_reader(index: int, mask: int | None = None) -> Eval:
    """Read field slot ``index`` (ANDed with a static ``mask`` when given)."""
    if mask is None:
        def read(s: PacketState) -> int:
            return s.values[index]

        return read

    def read_masked(s: PacketState) -> int:
        return s.values[index] & mask

    return read_masked


def field_writer(slot: FieldSlot) -> Callable[[PacketState, int], None]:
    """A function that stores a value into a field with BMv2's truncation (and sign)."""
    i, mask = slot.index, slot.mask
    if slot.signed:
        top = 1 << (slot.width - 1)
        full = 1 << slot.width

        def write_signed(s: PacketState, value: int) -> None:
            v = value & mask
            s.values[i] = v - full if v & top else v

        return write_signed

    def write(s: PacketState, value: int) -> None:
        s.values[i] = value & mask

    return write


def valid_reader(header_id: int) -> Eval:
    """1 when header ``header_id`` is valid, else 0."""
    def read(s: PacketState) -> int:
        return 1 if s.valid[header_id] else 0

    return read


def unwrap(operand: dict[str, Any]) -> dict[str, Any]:
    """Strip the ``{"type": "expression", "value": ...}`` layers p4c wraps around operands.

    >>> unwrap({"type": "expression", "value": {"type": "expression", "value": {"op": "+"}}})
    {'type': 'expression', 'value': {'op': '+'}}
    >>> unwrap({"type": "expression", "value": {"type": "header", "value": "h"}})
    {'type': 'header', 'value': 'h'}
    """
    while operand.get("type") == "expression":
        inner = operand.get("value")
        if not isinstance(inner, dict) or "op" in inner:
            break
        operand = inner
    return operand


def compile_operand(layout: PhvLayout, operand: dict[str, Any]) -> Eval:
    """Compile one typed operand (field, hexstr, bool, runtime_data, expression...)."""
    operand = unwrap(operand)
    kind = operand.get("type")
    value: Any = operand.get("value")
    if kind == "field":
        header, name = value[0], value[1]
        if name == "$valid$":
            return valid_reader(layout.header(header).id)
        return slot_reader(layout.field(header, name).index)
    if kind == "hexstr":
        const = parse_hexstr(value)
        return lambda s: const
    if kind == "bool":
        bconst = 1 if value else 0
        return lambda s: bconst
    if kind in ("runtime_data", "local"):  # "local": an action parameter inside an expression
        idx = int(value)
        return lambda s: s.args[idx]
    if kind == "expression":
        return compile_expression(layout, value)
    if kind == "stack_field":
        stack = layout.stack(value[0])
        ids = stack.header_ids
        slots = [layout.field(layout.headers[h].name, value[1]).index for h in ids]
        nxt = stack.next_index

        def read_last(s: PacketState) -> int:
            n = s.stack_next[nxt]
            if n == 0:
                return 0
            return s.values[slots[n - 1]]

        return read_last
    raise UnsupportedJsonError(f"operand type {kind!r} is not supported: {operand}")


def _element(stack: StackLayout, index: Eval) -> Callable[[PacketState], int]:
    """The position a run-time index selects in ``stack``; PacketError when out of bounds
    (BMv2 throws std::out_of_range there and the switch aborts)."""
    size = len(stack.elements)

    def element(s: PacketState) -> int:
        i = index(s)
        if not 0 <= i < size:
            raise PacketError(f"index {i} out of bounds of header stack {stack.name!r} "
                              f"(size {size})")
        return i

    return element


def compile_stack_ref(layout: PhvLayout, operand: dict[str, Any]) -> StackLayout:
    """The header stack or header union stack an operand names."""
    operand = unwrap(operand)
    kind = operand.get("type")
    if kind == "header_stack":
        return layout.stack(operand["value"])
    if kind == "header_union_stack":
        return layout.union_stack(operand["value"])
    raise UnsupportedJsonError(f"stack reference {operand} is not supported")


def compile_union_ref(layout: PhvLayout, operand: dict[str, Any]) -> HeaderRef:
    """Compile an operand that denotes a header union into a function giving its id."""
    operand = unwrap(operand)
    kind = operand.get("type")
    value: Any = operand.get("value")
    if kind in ("header_union", "header"):  # p4c names a union stack element as a "header"
        uid = layout.union(value).id
        return lambda s: uid
    if kind == "expression":
        op = value.get("op")
        if op == "dereference_union_stack":
            stack = compile_stack_ref(layout, value["left"])
            at = _element(stack, compile_operand(layout, value["right"]))
            uids = stack.union_ids
            return lambda s: uids[at(s)]
        if op == "?":
            return _choose(layout, value, compile_union_ref)
    raise UnsupportedJsonError(f"header union reference {operand} is not supported")


def _choose(layout: PhvLayout, expr: dict[str, Any],
            compile_ref: Callable[[PhvLayout, dict[str, Any]], HeaderRef]) -> HeaderRef:
    """The conditional operator over headers or unions: the id of the one ``cond`` picks."""
    cond = compile_operand(layout, expr["cond"])
    a, b = compile_ref(layout, expr["left"]), compile_ref(layout, expr["right"])
    return lambda s: a(s) if cond(s) else b(s)


def compile_header_ref(layout: PhvLayout, operand: dict[str, Any]) -> HeaderRef:
    """Compile an operand that denotes a header instance into a function giving its id:
    a header, the last element of a stack, a stack element at a run-time index, a union
    member, or a conditional between headers."""
    operand = unwrap(operand)
    kind = operand.get("type")
    value: Any = operand.get("value")
    if kind == "header":
        hid = layout.header(value).id
        return lambda s: hid
    if kind == "expression":
        op = value.get("op")
        if op == "dereference_header_stack":
            stack = compile_stack_ref(layout, value["left"])
            at = _element(stack, compile_operand(layout, value["right"]))
            ids = stack.header_ids
            return lambda s: ids[at(s)]
        if op == "access_union_header":
            union = compile_union_ref(layout, value["left"])
            offset = int(value["right"])
            members = [u.header_ids[offset] for u in layout.unions]
            return lambda s: members[union(s)]
        if op == "?":
            return _choose(layout, value, compile_header_ref)
    if kind == "stack_field" and value[1] == "last":  # p4c's `stack.last` as a header
        kind, value = "stack_header", value[0]
    if kind == "stack_header":
        stack = layout.stack(value)
        ids = stack.header_ids
        nxt = stack.next_index
        return lambda s: ids[max(s.stack_next[nxt] - 1, 0)]
    raise UnsupportedJsonError(f"header reference {operand} is not supported")


def static_header_id(layout: PhvLayout, operand: dict[str, Any]) -> int | None:
    """The id of the header an operand names when it does not depend on the packet."""
    operand = unwrap(operand)
    return layout.header(operand["value"]).id if operand.get("type") == "header" else None


def valid_writer(layout: PhvLayout, header: HeaderRef) -> Callable[[PacketState, int], None]:
    """Set a header's validity; making a union member valid invalidates its siblings."""
    siblings = layout.siblings

    def set_valid(s: PacketState, v: int) -> None:
        h = header(s)
        if v:
            for o in siblings[h]:
                s.valid[o] = False
            s.valid[h] = True
        else:
            s.valid[h] = False

    return set_valid


def compile_field_writer(layout: PhvLayout, operand: dict[str, Any]) -> Callable[[PacketState, int], None]:
    """The store into an assignment target: a field (``$valid$`` included) or a field of a
    header chosen at packet time (``access_field``, e.g. of a stack element)."""
    operand = unwrap(operand)
    kind = operand.get("type")
    value: Any = operand.get("value")
    if kind == "field":
        header, name = value
        if name == "$valid$":
            hid = layout.header(header).id
            return valid_writer(layout, lambda s: hid)
        return field_writer(layout.field(header, name))
    if kind == "expression" and value.get("op") == "access_field":
        hdr = compile_header_ref(layout, value["left"])
        offset = int(value["right"])
        writers = {hl.id: field_writer(hl.fields[offset]) for hl in layout.headers
                   if len(hl.fields) > offset}

        def write_dynamic(s: PacketState, v: int) -> None:
            writers[hdr(s)](s, v)

        return write_dynamic
    raise UnsupportedJsonError(f"cannot assign to operand {operand}")


def _binary(op: str, left: Eval, right: Eval) -> Eval:
    if op == "+":
        return lambda s: left(s) + right(s)
    if op == "-":
        return lambda s: left(s) - right(s)
    if op == "*":
        return lambda s: left(s) * right(s)
    if op == "/":
        return lambda s: left(s) // right(s)
    if op == "%":
        return lambda s: left(s) % right(s)
    if op == "<<":
        return lambda s: left(s) << right(s)
    if op == ">>":
        return lambda s: left(s) >> right(s)
    if op == "&":
        return lambda s: left(s) & right(s)
    if op == "|":
        return lambda s: left(s) | right(s)
    if op == "^":
        return lambda s: left(s) ^ right(s)
    if op == "==":
        return lambda s: 1 if left(s) == right(s) else 0
    if op == "!=":
        return lambda s: 1 if left(s) != right(s) else 0
    if op == ">":
        return lambda s: 1 if left(s) > right(s) else 0
    if op == ">=":
        return lambda s: 1 if left(s) >= right(s) else 0
    if op == "<":
        return lambda s: 1 if left(s) < right(s) else 0
    if op == "<=":
        return lambda s: 1 if left(s) <= right(s) else 0
    if op == "and":
        return lambda s: 1 if (left(s) and right(s)) else 0
    if op == "or":
        return lambda s: 1 if (left(s) or right(s)) else 0
    raise UnsupportedJsonError(f"expression operator {op!r} is not supported")


def _two_comp_mod(value: Eval, width: int) -> Eval:
    full, mask, top = 1 << width, (1 << width) - 1, 1 << (width - 1) if width else 0

    def conv(s: PacketState) -> int:
        v = value(s) & mask
        return v - full if v & top else v

    return conv


def compile_expression(layout: PhvLayout, expr: dict[str, Any]) -> Eval:
    """Compile an expression tree (the ``value`` of an ``expression`` operand)."""
    if "op" not in expr:
        # A bare operand where an expression was expected.
        return compile_operand(layout, expr)
    op = expr["op"]
    left_j: Any = expr.get("left")
    right_j: Any = expr.get("right")
    if op == "not":
        r = compile_operand(layout, right_j)
        return lambda s: 0 if r(s) else 1
    if op == "~":
        r = compile_operand(layout, right_j)
        return lambda s: ~r(s)
    if op == "d2b":
        r = compile_operand(layout, right_j)
        return lambda s: 1 if r(s) else 0
    if op == "b2d":
        return compile_operand(layout, right_j)
    if op == "valid":
        hdr = compile_header_ref(layout, right_j)
        return lambda s: 1 if s.valid[hdr(s)] else 0
    if op == "valid_union":
        union = compile_union_ref(layout, right_j)
        members = [u.header_ids for u in layout.unions]
        return lambda s: 1 if any(s.valid[h] for h in members[union(s)]) else 0
    if op == "?":
        cond = compile_operand(layout, expr["cond"])
        a, b = compile_operand(layout, left_j), compile_operand(layout, right_j)
        return lambda s: a(s) if cond(s) else b(s)
    if op == "two_comp_mod":
        width = int(compile_operand(layout, right_j)(None))  # type: ignore[arg-type]
        return _two_comp_mod(compile_operand(layout, left_j), width)
    if op in ("usat_cast", "sat_cast"):
        width = int(compile_operand(layout, right_j)(None))  # type: ignore[arg-type]
        value = compile_operand(layout, left_j)
        if op == "usat_cast":
            hi = (1 << width) - 1
            return lambda s: min(max(value(s), 0), hi)
        lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
        return lambda s: min(max(value(s), lo), hi)
    if op == "access_field":
        hdr = compile_header_ref(layout, left_j)
        offset = int(right_j)
        slot_of = {hl.id: hl.fields[offset].index for hl in layout.headers if len(hl.fields) > offset}
        return lambda s: s.values[slot_of[hdr(s)]]
    if op == "last_stack_index":
        nxt = compile_stack_ref(layout, right_j).next_index
        return lambda s: s.stack_next[nxt] - 1
    if op == "size_stack":
        nxt = compile_stack_ref(layout, right_j).next_index
        return lambda s: s.stack_next[nxt]
    if left_j is None or right_j is None:
        raise UnsupportedJsonError(f"expression operator {op!r} is not supported: {expr}")
    return _binary(op, compile_operand(layout, left_j), compile_operand(layout, right_j))
