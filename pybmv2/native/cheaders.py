"""Primitives on whole headers, header unions and stacks in C, with BMv2's details as
:mod:`pybmv2.header_ops` reproduces them:

- ``assign_header`` from an invalid header only invalidates the destination (its fields
  keep their values); a copy into a union member invalidates the other members;
- making a union member valid invalidates the other members;
- ``push_front``/``pop_front`` *swap* elements, so the element that becomes invalid holds
  what was at the other end, and a union stack's element is never invalidated
  (``HeaderUnion::mark_invalid`` is a no-op).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pybmv2.layout import PhvLayout
from pybmv2.native.cexpr import ExprGen
from pybmv2.native.cphv import header_slots
from pybmv2.native.crefs import HeaderRef, stack_ref, union_ref
from pybmv2.native.errors import NativeUnsupported

__all__ = ["add_header", "assign_header", "assign_stack", "assign_union", "per_header",
           "remove_header", "set_validity", "stack_shift"]


def per_header(ref: HeaderRef, body: Callable[[int], list[str]]) -> list[str]:
    """``body(id)`` for the id ``ref`` denotes (a switch on its index when it is dynamic)."""
    if ref.sel is None:
        return body(ref.ids[0])
    out = [f"switch ({ref.sel}) {{"]
    for i, hid in enumerate(ref.ids):
        out += [f"case {i}: {{", *("    " + line for line in body(hid)), "    break;", "}"]
    out.append("}")
    return out


def set_validity(layout: PhvLayout, hid: int, truth: str) -> list[str]:
    """``valid_writer``: valid (the union's other members become invalid) or invalid."""
    evict = [f"p->valid[{o}] = 0;" for o in layout.siblings[hid]]
    if not evict:
        return [f"p->valid[{hid}] = {truth};"]
    return [f"if ({truth}) {{", *("    " + x for x in evict), f"    p->valid[{hid}] = 1;",
            f"}} else p->valid[{hid}] = 0;"]


def _copy(layout: PhvLayout, dst: int, src: int) -> list[str]:
    """BMv2's assign_header between two header ids."""
    d, r = layout.headers[dst], layout.headers[src]
    if d.nslots != r.nslots:
        raise NativeUnsupported(f"copying header {r.name} to {d.name} of another layout")
    fields = [f"    p->v.f{a} = p->v.f{b};"
              for a, b in zip(header_slots(d), header_slots(r), strict=True)]
    evict = [f"    p->valid[{o}] = 0;" for o in layout.siblings[dst]]
    return [f"if (!p->valid[{src}]) p->valid[{dst}] = 0;", "else {", *evict,
            f"    p->valid[{dst}] = 1;", *fields, "}"]


def assign_header(eg: ExprGen, dst: dict[str, Any], src: dict[str, Any]) -> list[str]:
    d, r = eg.header_ref(dst), eg.header_ref(src)
    return per_header(d, lambda a: per_header(r, lambda b: _copy(eg.layout, a, b)))


def assign_union(eg: ExprGen, dst: dict[str, Any], src: dict[str, Any]) -> list[str]:
    """Member by member, as BMv2's assign_union."""
    unions = eg.layout.unions
    d, r = union_ref(eg, dst), union_ref(eg, src)

    def copy(a: int, b: int) -> list[str]:
        pairs = zip(unions[a].header_ids, unions[b].header_ids, strict=True)
        return [line for x, y in pairs for line in _copy(eg.layout, x, y)]

    return per_header(d, lambda a: per_header(r, lambda b: copy(a, b)))


def assign_stack(eg: ExprGen, dst: dict[str, Any], src: dict[str, Any]) -> list[str]:
    """A whole stack (of headers or of unions): its next index, then element by element."""
    d, r = stack_ref(eg, dst), stack_ref(eg, src)
    lines = [f"p->sn[{d.next_index}] = p->sn[{r.next_index}];"]
    for a, b in zip(d.header_ids, r.header_ids, strict=True):
        lines += _copy(eg.layout, a, b)
    return lines


def add_header(eg: ExprGen, operand: dict[str, Any], *, count_length: bool) -> list[str]:
    """setValid(): a header that was invalid gets zeroed fields (``add_header``; a varbit
    keeps its length) and, for ``add_header``, counts in the packet length."""
    layout = eg.layout

    def add(hid: int) -> list[str]:
        hl = layout.headers[hid]
        body = []
        if count_length:
            body = [f"memset(&p->v.f{s.index}, 0, sizeof p->v.f{s.index});" if s.varbit else
                    f"p->v.f{s.index} = 0;" for s in hl.fields]
            size = str(hl.nbytes) if hl.length_index is None else \
                f"(i64)(({hl.nbits} + p->v.f{hl.length_index}) / 8)"  # the varbit's current size
            body.append(f"p->pkt_len += {size};")
        body += [f"p->valid[{o}] = 0;" for o in layout.siblings[hid]]
        return [f"if (!p->valid[{hid}]) {{", *("    " + x for x in body),
                f"    p->valid[{hid}] = 1;", "}"]

    return per_header(eg.header_ref(operand), add)


def remove_header(eg: ExprGen, operand: dict[str, Any]) -> list[str]:
    def remove(hid: int) -> list[str]:
        hl = eg.layout.headers[hid]
        size = str(hl.nbytes) if hl.length_index is None else \
            f"(i64)(({hl.nbits} + p->v.f{hl.length_index}) / 8)"
        return [f"if (p->valid[{hid}]) {{ p->pkt_len -= {size}; p->valid[{hid}] = 0; }}"]

    return per_header(eg.header_ref(operand), remove)


def _swap(layout: PhvLayout, a: tuple[int, ...], b: tuple[int, ...]) -> list[str]:
    """Swap two stack elements: their headers' slots (varbit lengths too) and validity."""
    lines = []
    for x, y in zip(a, b, strict=True):
        for i, j in zip(header_slots(layout.headers[x]), header_slots(layout.headers[y]),
                        strict=True):
            lines.append(f"{{ __typeof__(p->v.f{i}) t = p->v.f{i}; p->v.f{i} = p->v.f{j}; "
                         f"p->v.f{j} = t; }}")
        lines.append(f"{{ u8 t = p->valid[{x}]; p->valid[{x}] = p->valid[{y}]; "
                     f"p->valid[{y}] = t; }}")
    return lines


def stack_shift(eg: ExprGen, op: str, params: list[dict[str, Any]]) -> list[str]:
    """push_front/pop_front of BMv2's P4_16 stacks (``StackP4_16``) by a constant count."""
    stack = stack_ref(eg, params[0])
    count = eg.exact(params[1])
    if not count.is_const or count.lo < 0:
        raise NativeUnsupported(f"{op} of header stack {stack.name} by a non-constant count")
    num, elements = count.lo, stack.elements
    size = len(elements)
    if num == 0:
        return []
    sn = f"p->sn[{stack.next_index}]"

    def invalidate(i: int) -> list[str]:
        return [] if stack.is_union_stack else [f"p->valid[{elements[i][0]}] = 0;"]

    lines: list[str] = []
    if op == "push":
        lines.append(f"{sn} = {sn} + {num} < {size} ? {sn} + {num} : {size};")
        for i in range(size - 1, num - 1, -1):
            lines += _swap(eg.layout, elements[i], elements[i - num])
        for i in range(min(size, num)):
            lines += invalidate(i)
        return lines
    lines.append(f"{sn} = {sn} > {num} ? {sn} - {num} : 0;")
    first_invalid = 0
    if num < size:
        for i in range(size - num):
            lines += _swap(eg.layout, elements[i], elements[i + num])
        first_invalid = size - num
    for j in range(first_invalid, size):
        lines += invalidate(j)
    return lines
