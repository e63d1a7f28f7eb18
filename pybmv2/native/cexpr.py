"""BMv2 JSON operands and expressions to C, with static width inference.

The counterpart of :mod:`pybmv2.expressions`: the same JSON, the same results, as C
expressions over the packet ``p`` and the action data ``a``. See :mod:`pybmv2.native.cvalues`
for how exact ranges and moduli keep fixed-width C arithmetic equal to BMv2's unbounded one.
"""

from __future__ import annotations

from typing import Any

from pybmv2.expressions import parse_hexstr
from pybmv2.layout import PhvLayout
from pybmv2.native.cphv import field_val
from pybmv2.native.crefs import HeaderRef, choose, header_ref, stack_ref, union_ref, valid_union
from pybmv2.native.cvalues import BITS, Val, cast, const, ctype_for, uint_for, unsigned
from pybmv2.native.errors import NativeUnsupported

__all__ = ["ExprGen"]

_ARITH = ("+", "-", "*")
_BITWISE = ("&", "|", "^")
_COMPARE = {"==": "==", "!=": "!=", ">": ">", ">=": ">=", "<": "<", "<=": "<="}
BOOL = ("u64", 0, 1)


def _bitlen(x: int) -> int:
    return (x if x >= 0 else ~x).bit_length()


def _bool(code: str) -> Val:
    return Val(f"((u64)({code}))", "u64", 0, 1)


class ExprGen:
    """Generates C for the expressions of one action, parser state or condition.

    ``args`` gives, per action parameter, its first word in the action data ``a`` and its
    bit width (None where no action data exists). ``bail`` is the C statement that leaves
    the generated function after a fault (a run-time stack index out of bounds; see
    :mod:`pybmv2.native.crefs`), None where the code cannot stop the packet.
    """

    def __init__(self, layout: PhvLayout, args: list[tuple[int, int]] | None = None,
                 pkt: str = "p", bail: str | None = "return;") -> None:
        self.layout = layout
        self.args = args
        self.pkt = pkt
        self.bail = bail
        self._tmp = 0

    def temp(self) -> str:
        self._tmp += 1
        return f"_t{self._tmp}"

    # -- operands ------------------------------------------------------------------------

    def _leaf(self, node: dict[str, Any]) -> Val:
        kind = node.get("type")
        value: Any = node.get("value")
        if kind == "field":
            header, name = value[0], value[1]
            if name == "$valid$":
                return _bool(f"{self.pkt}->valid[{self.layout.header(header).id}]")
            return field_val(self.layout.field(header, name), self.pkt)
        if kind == "hexstr":
            return const(parse_hexstr(value))
        if kind == "bool":
            return const(1 if value else 0)
        if kind in ("runtime_data", "local"):
            if self.args is None:
                raise NativeUnsupported(f"action data outside an action: {node}")
            word, width = self.args[int(value)]
            if width > 128:
                raise NativeUnsupported(f"an action parameter of {width} bits")
            if width <= 64:
                return Val(f"a[{word}]", "u64", 0, (1 << width) - 1)
            return Val(f"(((u128)a[{word + 1}] << 64) | a[{word}])", "u128", 0, (1 << width) - 1)
        if kind == "expression":
            return self.exact(value)
        if kind == "stack_field":
            stack = self.layout.stack(value[0])
            vals = [field_val(self.layout.field(self.layout.headers[h].name, value[1]), self.pkt)
                    for h in stack.header_ids]
            lo = min(0, *(v.lo for v in vals))
            hi = max(0, *(v.hi for v in vals))
            ty = ctype_for(lo, hi)
            n = f"{self.pkt}->sn[{stack.next_index}]"
            code = cast(vals[-1], ty)  # n == size
            for i in range(len(vals) - 1, 0, -1):
                code = f"({n} == {i} ? {cast(vals[i - 1], ty)} : {code})"
            code = f"({n} == 0 ? ({ty})0 : {code})"
            return Val(code, ty, lo, hi)
        raise NativeUnsupported(f"operand type {kind!r}: {node}")

    def header_ref(self, node: dict[str, Any]) -> HeaderRef:
        """The header an operand denotes (:func:`pybmv2.native.crefs.header_ref`)."""
        return header_ref(self, node)

    # -- exact values ----------------------------------------------------------------------

    def exact(self, node: dict[str, Any]) -> Val:
        """The exact value of an operand or expression."""
        if "op" not in node:
            return self._leaf(node)
        op = node["op"]
        left: Any = node.get("left")
        right: Any = node.get("right")
        if op == "not":
            return _bool(f"!{self.truth(right)}")
        if op == "d2b":
            return _bool(self.truth(right))
        if op == "b2d":
            return self.exact(right)
        if op == "~":
            r = self.exact(right)
            lo, hi = -r.hi - 1, -r.lo - 1
            ty = ctype_for(lo, hi, "~")
            return Val(f"(~{cast(r, ty)})", ty, lo, hi)
        if op == "valid":
            return self._valid(self.header_ref(right))
        if op == "valid_union":
            return _bool(valid_union(self, union_ref(self, right)))
        if op == "?":
            return self._ternary(node, None)
        if op == "two_comp_mod":
            width = self._const_width(right, op)
            return self._sign_extend(self.modular(left, width), width)
        if op in ("usat_cast", "sat_cast"):
            return self._saturate(op, self.exact(left), self._const_width(right, op))
        if op == "access_field":
            return self._access_field(self.header_ref(left), int(right))
        if op == "last_stack_index":
            stack = stack_ref(self, right)
            size = len(stack.elements)
            return Val(f"((i64){self.pkt}->sn[{stack.next_index}] - 1)", "i64", -1, size - 1)
        if op == "size_stack":
            stack = stack_ref(self, right)
            return Val(f"((u64){self.pkt}->sn[{stack.next_index}])", "u64", 0,
                       len(stack.elements))
        if op in ("and", "or"):
            c = "&&" if op == "and" else "||"
            return _bool(f"({self.truth(left)} {c} {self.truth(right)})")
        if left is None or right is None:
            raise NativeUnsupported(f"expression operator {op!r}: {node}")
        if op == "&":
            return self._and(left, right)
        if op in _COMPARE:
            return self._compare(_COMPARE[op], self.exact(left), self.exact(right))
        if op in _ARITH:
            return self._arith(op, self.exact(left), self.exact(right))
        if op in _BITWISE:
            return self._bitwise(op, self.exact(left), self.exact(right))
        if op == "<<":
            return self._shl(self.exact(left), self.exact(right))
        if op == ">>":
            return self._shr(self.exact(left), self.exact(right))
        if op in ("/", "%"):
            return self._divmod(op, self.exact(left), self.exact(right))
        raise NativeUnsupported(f"expression operator {op!r}")

    def truth(self, node: dict[str, Any]) -> str:
        """A C condition: the operand's value is not zero."""
        v = self.exact(node)
        if (v.lo, v.hi) == (0, 1) and v.code.startswith("((u64)("):
            return f"({v.code})"
        return f"({v.code} != 0)"

    def _const_width(self, node: dict[str, Any], op: str) -> int:
        v = self.exact(node)
        if not v.is_const or not 0 <= v.lo <= 128:
            raise NativeUnsupported(f"{op} with width {v.lo}..{v.hi}")
        return v.lo

    def _valid(self, ref: HeaderRef) -> Val:
        if ref.sel is None:
            return _bool(f"{self.pkt}->valid[{ref.ids[0]}]")
        ids = ", ".join(str(h) for h in ref.ids)
        return _bool(f"{self.pkt}->valid[((const int[]){{{ids}}})[{ref.sel}]]")

    def _access_field(self, ref: HeaderRef, offset: int) -> Val:
        vals = {h: field_val(self.layout.headers[h].fields[offset], self.pkt) for h in ref.ids}
        if ref.sel is None:
            return vals[ref.ids[0]]
        lo, hi = min(v.lo for v in vals.values()), max(v.hi for v in vals.values())
        ty = ctype_for(lo, hi)
        return Val(choose(self, ref, lambda h: cast(vals[h], ty)), ty, lo, hi)

    def _ternary(self, node: dict[str, Any], width: int | None) -> Val:
        cond = self.truth(node["cond"])
        if width is None:
            a, b = self.exact(node["left"]), self.exact(node["right"])
            lo, hi = min(a.lo, b.lo), max(a.hi, b.hi)
            ty = ctype_for(lo, hi, "?:")
            return Val(f"({cond} ? {cast(a, ty)} : {cast(b, ty)})", ty, lo, hi)
        a, b = self.modular(node["left"], width), self.modular(node["right"], width)
        u = uint_for(width)
        return Val(f"({cond} ? {cast(a, u)} : {cast(b, u)})", u, 0, (1 << BITS[u]) - 1, width)

    def _sign_extend(self, v: Val, width: int) -> Val:
        if width == 0:
            return const(0)
        u = uint_for(width)
        big = BITS[u]
        sty = "i64" if big == 64 else "i128"
        bits = cast(v, u)
        code = f"(({sty})({bits}))" if width == big else \
            f"((({sty})(({bits}) << {big - width})) >> {big - width})"
        return Val(code, sty, -(1 << (width - 1)), (1 << (width - 1)) - 1)

    def _saturate(self, op: str, v: Val, width: int) -> Val:
        if op == "usat_cast":
            lo, hi = 0, (1 << width) - 1
        else:
            lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
        rlo, rhi = min(max(v.lo, lo), hi), min(max(v.hi, lo), hi)
        ty = ctype_for(min(v.lo, lo), max(v.hi, hi), op)
        t = self.temp()
        code = (f"({{ {ty} {t} = {cast(v, ty)}; {t} < {cast(const(lo), ty)} ? "
                f"{cast(const(lo), ty)} : ({t} > {cast(const(hi), ty)} ? "
                f"{cast(const(hi), ty)} : {t}); }})")
        rty = ctype_for(rlo, rhi)
        return Val(f"(({rty}){code})", rty, rlo, rhi)

    def _arith(self, op: str, a: Val, b: Val) -> Val:
        if op == "+":
            lo, hi = a.lo + b.lo, a.hi + b.hi
        elif op == "-":
            lo, hi = a.lo - b.hi, a.hi - b.lo
        else:
            corners = (a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi)
            lo, hi = min(corners), max(corners)
        ty = ctype_for(min(lo, a.lo, b.lo), max(hi, a.hi, b.hi), f"the result of {op!r}")
        if ty.startswith("i") and op == "*":
            u = unsigned(ty)  # signed overflow cannot happen, but keep the multiply unsigned
            return Val(f"(({ty})({cast(a, u)} * {cast(b, u)}))", ty, lo, hi)
        return Val(f"({cast(a, ty)} {op} {cast(b, ty)})", ty, lo, hi)

    def _bitwise(self, op: str, a: Val, b: Val) -> Val:
        if a.lo >= 0 and b.lo >= 0:
            if op == "&":
                lo, hi = 0, min(a.hi, b.hi)
            else:
                lo, hi = 0, (1 << max(a.hi.bit_length(), b.hi.bit_length())) - 1
        elif op == "&" and (a.lo >= 0 or b.lo >= 0):
            lo, hi = 0, a.hi if a.lo >= 0 else b.hi
        else:
            n = max(_bitlen(x) for x in (a.lo, a.hi, b.lo, b.hi))
            lo, hi = -(1 << n), (1 << n) - 1
        ty = ctype_for(min(lo, a.lo, b.lo), max(hi, a.hi, b.hi), f"the result of {op!r}")
        return Val(f"({cast(a, ty)} {op} {cast(b, ty)})", ty, lo, hi)

    def _and(self, left: dict[str, Any], right: dict[str, Any]) -> Val:
        """``x & M`` with a constant ``M >= 0`` needs only the low bits of ``x``."""
        for x_node, m_node in ((left, right), (right, left)):
            m = self._maybe_const(m_node)
            if m is not None and m >= 0:
                width = max(m.bit_length(), 1)
                if width > 128:
                    break
                x = self.modular(x_node, width)
                u = uint_for(width)
                hi = m if x.mod is not None or x.lo < 0 else min(m, x.hi)
                return Val(f"({cast(x, u)} & {cast(const(m), u)})", u, 0, hi)
        return self._bitwise("&", self.exact(left), self.exact(right))

    def _maybe_const(self, node: dict[str, Any]) -> int | None:
        if "op" in node or node.get("type") not in ("hexstr", "bool", "expression"):
            return None
        try:
            v = self.exact(node)
        except NativeUnsupported:
            return None
        return v.lo if v.is_const else None

    def _compare(self, op: str, a: Val, b: Val) -> Val:
        ty = ctype_for(min(a.lo, b.lo), max(a.hi, b.hi), f"the operands of {op!r}")
        return _bool(f"{cast(a, ty)} {op} {cast(b, ty)}")

    def _shift_amount(self, s: Val, op: str) -> Val:
        if s.lo < 0:
            raise NativeUnsupported(f"{op} by a possibly negative amount ({s.lo}..{s.hi})")
        return s

    def _shl(self, a: Val, s: Val) -> Val:
        s = self._shift_amount(s, "<<")
        if a.lo == a.hi == 0:
            return const(0)
        if s.hi > 256:
            raise NativeUnsupported(f"<< by up to {s.hi} bits")
        lo = a.lo << (s.lo if a.lo >= 0 else s.hi)
        hi = a.hi << (s.hi if a.hi >= 0 else s.lo)
        ty = ctype_for(min(lo, a.lo), max(hi, a.hi), "the result of '<<'")
        u = unsigned(ty)
        return Val(f"(({ty})({cast(a, u)} << {cast(s, 'u64')}))", ty, lo, hi)

    def _shr(self, a: Val, s: Val) -> Val:
        s = self._shift_amount(s, ">>")
        cap = min(s.hi, 256)
        corners = [a.lo >> s.lo, a.lo >> cap, a.hi >> s.lo, a.hi >> cap]
        lo, hi = min(corners), max(corners)
        ty = a.ty
        bits = BITS[ty]
        if s.hi < bits:
            return Val(f"({a.code} >> {cast(s, 'u64')})", ty, lo, hi)
        t, n = self.temp(), self.temp()
        big = f"({t} < 0 ? ({ty})-1 : ({ty})0)" if ty.startswith("i") else f"({ty})0"
        code = (f"({{ {ty} {t} = {a.code}; u64 {n} = {cast(s, 'u64')}; "
                f"{n} >= {bits} ? {big} : {t} >> {n}; }})")
        return Val(code, ty, lo, hi)

    def _divmod(self, op: str, a: Val, b: Val) -> Val:
        if a.lo < 0 or b.lo <= 0:
            raise NativeUnsupported(f"{op!r} on a possibly negative or zero operand")
        if op == "/":
            lo, hi = a.lo // b.hi, a.hi // b.lo
        else:
            lo, hi = 0, min(a.hi, b.hi - 1)
        ty = ctype_for(0, max(a.hi, b.hi))
        rty = ctype_for(lo, hi)
        return Val(f"(({rty})({cast(a, ty)} {op} {cast(b, ty)}))", rty, lo, hi)

    # -- modular values ----------------------------------------------------------------------

    def modular(self, node: dict[str, Any], width: int) -> Val:
        """A value whose low ``width`` bits equal those of the expression's exact value."""
        if width > 128 or width <= 0:
            return self.exact(node)
        if "op" not in node:
            if node.get("type") == "expression":
                return self.modular(node["value"], width)
            return self._leaf(node)
        op = node["op"]
        left: Any = node.get("left")
        right: Any = node.get("right")
        u = uint_for(width)
        top = (1 << BITS[u]) - 1
        if op in ("+", "-", "*", "|", "^") or (op == "&" and self._maybe_const(left) is None
                                              and self._maybe_const(right) is None):
            a, b = self.modular(left, width), self.modular(right, width)
            return Val(f"({cast(a, u)} {op} {cast(b, u)})", u, 0, top, width)
        if op == "~":
            return Val(f"(~{cast(self.modular(right, width), u)})", u, 0, top, width)
        if op == "<<":
            s = self._shift_amount(self.exact(right), "<<")
            if s.lo >= width:
                return const(0)
            a = self.modular(left, width)
            code = f"({cast(a, u)} << {cast(s, 'u64')})"
            if s.hi >= BITS[u]:
                t = self.temp()
                code = (f"({{ u64 {t} = {cast(s, 'u64')}; {t} >= {BITS[u]} ? ({u})0 : "
                        f"({cast(a, u)} << {t}); }})")
            return Val(code, u, 0, top, width)
        if op == ">>":
            amount = self._maybe_const(right)
            if amount is not None and amount >= 0 and width + amount <= 128:
                wide = uint_for(width + amount)
                a = self.modular(left, width + amount)
                return Val(f"({cast(a, wide)} >> {amount})", wide, 0, (1 << BITS[wide]) - 1,
                           width)
        if op == "?":
            return self._ternary(node, width)
        if op == "two_comp_mod" and width <= self._const_width(right, op):
            return self.modular(left, width)
        if op == "b2d":
            return self.modular(right, width)
        return self.exact(node)
