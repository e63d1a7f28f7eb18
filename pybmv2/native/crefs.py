"""Header, union and stack references in C (the counterpart of the ``compile_*_ref``
functions of :mod:`pybmv2.expressions`).

A reference is a :class:`HeaderRef`: the ids it may denote and a C index choosing one of
them at run time (a stack element at a run-time index, the conditional operator over
headers or unions). A run-time stack index is checked against the stack's size: out of
bounds, BMv2 throws ``std::out_of_range`` and the Python target drops the packet, naming
the stack; the generated code records the fault in the packet (``pkt_fault``) and leaves
the function it runs in with the ExprGen's ``bail`` statement, so the rest of the control
does not run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pybmv2.expressions import unwrap
from pybmv2.layout import StackLayout
from pybmv2.native.cvalues import Val
from pybmv2.native.errors import NativeUnsupported

if TYPE_CHECKING:
    from pybmv2.native.cexpr import ExprGen

__all__ = ["HeaderRef", "choose", "header_ref", "stack_ref", "union_ref", "valid_union"]


@dataclass(frozen=True, slots=True)
class HeaderRef:
    """An operand denoting a header (or a union): one of ``ids``, chosen by the C index
    ``sel`` (None: ``ids[0]``)."""

    ids: tuple[int, ...]
    sel: str | None = None

    @property
    def static(self) -> int | None:
        return self.ids[0] if self.sel is None else None

    def cases(self) -> list[tuple[str | None, int]]:
        """(C condition or None, id) for code that must branch per header."""
        if self.sel is None:
            return [(None, self.ids[0])]
        return [(f"({self.sel}) == {i}", h) for i, h in enumerate(self.ids)]

    def map(self, ids: tuple[int, ...]) -> HeaderRef:
        """The same choice over other ids (a union's member at one offset)."""
        return HeaderRef(ids, self.sel)


def _pick(cond: str, a: HeaderRef, b: HeaderRef) -> HeaderRef:
    """``cond ? a : b`` over references: one index into both lists of ids."""
    left = a.sel or "0"
    right = f"{len(a.ids)}" if b.sel is None else f"{len(a.ids)} + ({b.sel})"
    return HeaderRef(a.ids + b.ids, f"((u64)({cond} ? ({left}) : ({right})))")


def _checked(eg: ExprGen, stack: StackLayout, index: Val) -> str | int:
    """The element position a run-time index selects: an int when it is a constant in
    bounds, else C that checks the bounds (a fault leaves with ``eg.bail``)."""
    size = len(stack.elements)
    if index.is_const and 0 <= index.lo < size:
        return index.lo
    if index.lo >= 0 and index.hi < size:
        return f"((u64){index.code})"
    if eg.bail is None:
        raise NativeUnsupported(f"header stack {stack.name} indexed by a value that may be out "
                                f"of bounds ({index.lo}..{index.hi}) where a fault cannot stop "
                                "the packet")
    t = eg.temp()
    tests = []
    if index.lo < 0:
        tests.append(f"{t} < 0")
    if index.hi >= size:
        tests.append(f"{t} >= {size}")
    unsigned = int(index.ty.startswith("u"))
    return (f"({{ {index.ty} {t} = {index.code}; if ({' || '.join(tests)}) {{ "
            f"pkt_fault({eg.pkt}, {stack.next_index}, (u128)(i128){t}, {unsigned}); {eg.bail} }} "
            f"(u64){t}; }})")


def stack_ref(eg: ExprGen, node: dict[str, Any]) -> StackLayout:
    """The header stack or header union stack an operand names."""
    node = unwrap(node)
    kind = node.get("type")
    if kind == "header_stack":
        return eg.layout.stack(node["value"])
    if kind == "header_union_stack":
        return eg.layout.union_stack(node["value"])
    raise NativeUnsupported(f"stack reference {node}")


def union_ref(eg: ExprGen, node: dict[str, Any]) -> HeaderRef:
    """A header union: its union id (``ids`` are union ids)."""
    node = unwrap(node)
    kind = node.get("type")
    value: Any = node.get("value")
    if kind in ("header_union", "header"):  # p4c names a union stack element as a "header"
        return HeaderRef((eg.layout.union(value).id,))
    if kind == "expression":
        op = value.get("op")
        if op == "dereference_union_stack":
            stack = stack_ref(eg, value["left"])
            at = _checked(eg, stack, eg.exact(value["right"]))
            if isinstance(at, int):
                return HeaderRef((stack.union_ids[at],))
            return HeaderRef(stack.union_ids, at)
        if op == "?":
            return _pick(eg.truth(value["cond"]), union_ref(eg, value["left"]),
                         union_ref(eg, value["right"]))
    raise NativeUnsupported(f"header union reference {node}")


def valid_union(eg: ExprGen, ref: HeaderRef) -> str:
    """C that is 1 when a member of the union ``ref`` denotes is valid."""
    def any_valid(uid: int) -> str:
        members = eg.layout.unions[uid].header_ids
        return "(" + " || ".join(f"{eg.pkt}->valid[{h}]" for h in members) + ")" if members \
            else "0"

    return f"((u64){choose(eg, ref, any_valid)})"


def choose(eg: ExprGen, ref: HeaderRef, code_for: Callable[[int], str]) -> str:
    """C whose value is ``code_for(id)`` of the id ``ref`` denotes (its index evaluated
    once)."""
    if ref.sel is None:
        return code_for(ref.ids[0])
    t = eg.temp()
    code = code_for(ref.ids[-1])
    for i in range(len(ref.ids) - 2, -1, -1):
        code = f"({t} == {i} ? {code_for(ref.ids[i])} : {code})"
    return f"({{ u64 {t} = {ref.sel}; {code}; }})"


def header_ref(eg: ExprGen, node: dict[str, Any]) -> HeaderRef:
    """A header instance: a header, a stack's last element, a stack element at a run-time
    index, a union member, or the conditional operator between headers."""
    node = unwrap(node)
    kind = node.get("type")
    value: Any = node.get("value")
    layout = eg.layout
    if kind == "header":
        return HeaderRef((layout.header(value).id,))
    if kind == "expression":
        op = value.get("op")
        if op == "dereference_header_stack":
            stack = stack_ref(eg, value["left"])
            at = _checked(eg, stack, eg.exact(value["right"]))
            if isinstance(at, int):
                return HeaderRef((stack.header_ids[at],))
            return HeaderRef(stack.header_ids, at)
        if op == "access_union_header":
            union = union_ref(eg, value["left"])
            offset = int(value["right"])
            return union.map(tuple(layout.unions[u].header_ids[offset] for u in union.ids))
        if op == "?":
            return _pick(eg.truth(value["cond"]), header_ref(eg, value["left"]),
                         header_ref(eg, value["right"]))
    if kind == "stack_field" and value[1] == "last":  # p4c's `stack.last` as a header
        kind, value = "stack_header", value[0]
    if kind == "stack_header":
        stack = layout.stack(value)
        n = f"{eg.pkt}->sn[{stack.next_index}]"
        return HeaderRef(stack.header_ids, f"((u64)({n} > 0 ? {n} - 1 : 0))")
    raise NativeUnsupported(f"header reference {node}")
