"""Action primitives on whole headers, header unions and stacks, as BMv2's core primitives.

BMv2 details that show on the wire (or in the stale fields of invalid headers, which BMv2
keeps from packet to packet):

- ``assign_header`` from an invalid header only invalidates the destination: its fields
  keep their values;
- making a union member valid invalidates the other members;
- ``push_front``/``pop_front`` (BMv2's P4_16 stacks) *swap* elements, so the element that
  becomes invalid holds what was at the other end, and invalidating a union stack element
  is a no-op (``HeaderUnion::mark_invalid``): a union pushed to the front keeps its valid
  member.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pybmv2.expressions import (
    Eval,
    compile_header_ref,
    compile_stack_ref,
    compile_union_ref,
    static_header_id,
)
from pybmv2.layout import HeaderLayout, PhvLayout, StackLayout
from pybmv2.state import PacketState

__all__ = [
    "add_header",
    "assign_header",
    "assign_header_stack",
    "assign_union",
    "remove_header",
    "stack_shift",
]

Op = Callable[[PacketState], None]


def _copy_header(layout: PhvLayout) -> Callable[[PacketState, int, int], None]:
    """``copy(s, dst, src)``: BMv2's assign_header between header ids."""
    spans = [(hl.first_index, hl.nslots) for hl in layout.headers]
    siblings = layout.siblings

    def copy(s: PacketState, d: int, r: int) -> None:
        if not s.valid[r]:
            s.valid[d] = False
            return
        for o in siblings[d]:
            s.valid[o] = False
        s.valid[d] = True
        d0, n = spans[d]
        r0 = spans[r][0]
        s.values[d0 : d0 + n] = s.values[r0 : r0 + n]

    return copy


def assign_header(layout: PhvLayout, dst: dict[str, Any], src: dict[str, Any]) -> Op:
    copy = _copy_header(layout)
    d_static, r_static = static_header_id(layout, dst), static_header_id(layout, src)
    if d_static is not None and r_static is not None:
        d, r = d_static, r_static
        return lambda s: copy(s, d, r)
    dst_ref, src_ref = compile_header_ref(layout, dst), compile_header_ref(layout, src)
    return lambda s: copy(s, dst_ref(s), src_ref(s))


def assign_union(layout: PhvLayout, dst: dict[str, Any], src: dict[str, Any]) -> Op:
    """Member by member, as BMv2's assign_union."""
    copy = _copy_header(layout)
    dst_ref, src_ref = compile_union_ref(layout, dst), compile_union_ref(layout, src)
    members = [u.header_ids for u in layout.unions]

    def assign(s: PacketState) -> None:
        for d, r in zip(members[dst_ref(s)], members[src_ref(s)], strict=True):
            copy(s, d, r)

    return assign


def assign_header_stack(layout: PhvLayout, dst: dict[str, Any], src: dict[str, Any]) -> Op:
    """A whole stack (of headers or of unions): ``next``, then element by element."""
    copy = _copy_header(layout)
    d_stack, r_stack = compile_stack_ref(layout, dst), compile_stack_ref(layout, src)
    pairs = tuple(zip(d_stack.header_ids, r_stack.header_ids, strict=True))
    d_next, r_next = d_stack.next_index, r_stack.next_index

    def assign(s: PacketState) -> None:
        s.stack_next[d_next] = s.stack_next[r_next]
        for d, r in pairs:
            copy(s, d, r)

    return assign


def add_header(layout: PhvLayout, operand: dict[str, Any], *, count_length: bool) -> Op:
    """setValid(): a header that was invalid gets zeroed fields (``add_header``; a varbit
    keeps its length) and, for ``add_header``, counts in the packet length."""
    ref = compile_header_ref(layout, operand)
    headers = layout.headers
    siblings = layout.siblings

    def add(s: PacketState) -> None:
        h = ref(s)
        if s.valid[h]:
            return
        hl = headers[h]
        if count_length:
            first, n = hl.first_index, len(hl.fields)
            s.values[first : first + n] = [0] * n
            s.pkt_len += hl.current_nbytes(s.values)
        for o in siblings[h]:
            s.valid[o] = False
        s.valid[h] = True

    return add


def remove_header(layout: PhvLayout, operand: dict[str, Any]) -> Op:
    ref = compile_header_ref(layout, operand)
    headers = layout.headers

    def remove(s: PacketState) -> None:
        h = ref(s)
        if s.valid[h]:
            s.pkt_len -= headers[h].current_nbytes(s.values)
            s.valid[h] = False

    return remove


def _swapper(headers: list[HeaderLayout]) -> Callable[[PacketState, tuple[int, ...], tuple[int, ...]], None]:
    """Swap two stack elements (their headers' fields, varbit lengths and validity)."""
    spans = [(hl.first_index, hl.nslots) for hl in headers]

    def swap(s: PacketState, a: tuple[int, ...], b: tuple[int, ...]) -> None:
        values, valid = s.values, s.valid
        for x, y in zip(a, b, strict=True):
            x0, n = spans[x]
            y0 = spans[y][0]
            values[x0 : x0 + n], values[y0 : y0 + n] = values[y0 : y0 + n], values[x0 : x0 + n]
            valid[x], valid[y] = valid[y], valid[x]

    return swap


def stack_shift(layout: PhvLayout, stack: StackLayout, count: Eval, *, push: bool) -> Op:
    """push_front/pop_front of BMv2's P4_16 stacks (``StackP4_16``)."""
    elements = stack.elements
    size = len(elements)
    nxt = stack.next_index
    swap = _swapper(layout.headers)
    unions = stack.is_union_stack

    def invalidate(s: PacketState, i: int) -> None:
        if not unions:  # HeaderUnion::mark_invalid is a no-op
            s.valid[elements[i][0]] = False

    def push_front(s: PacketState) -> None:
        num = count(s)
        if num == 0:
            return
        s.stack_next[nxt] = min(size, s.stack_next[nxt] + num)
        for i in range(size - 1, num - 1, -1):
            swap(s, elements[i], elements[i - num])
        for i in range(min(size, num)):
            invalidate(s, i)

    def pop_front(s: PacketState) -> None:
        num = count(s)
        if num == 0:
            return
        s.stack_next[nxt] -= min(s.stack_next[nxt], num)
        i = 0
        if num < size:
            for i in range(size - num):
                swap(s, elements[i], elements[i + num])
            i = size - num
        for j in range(i, size):
            invalidate(s, j)

    return push_front if push else pop_front
