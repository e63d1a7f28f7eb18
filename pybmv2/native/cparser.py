"""The parser in C: a state machine of labels over the frame (:mod:`pybmv2.parser`).

Errors follow simple_switch: the first error stops the parser with its code in
``p->error``; the headers extracted so far stay valid and the rest is payload.
"""

from __future__ import annotations

from typing import Any

from pybmv2.expressions import parse_hexstr
from pybmv2.layout import HeaderLayout
from pybmv2.native.cactions import assign_varbit, primitive
from pybmv2.native.cctx import GenCtx, value_set_ids
from pybmv2.native.cexpr import ExprGen
from pybmv2.native.cphv import field_val, store_field, varbit_start
from pybmv2.native.cvalues import Val, cast, const, ctype_for, literal, uint_for
from pybmv2.native.errors import NativeUnsupported

__all__ = ["extract_code", "parser_function"]


def _field_bits(slot: Any, header: HeaderLayout, d: str = "d") -> str:
    """C reading one field of a header whose bytes start at ``d`` (for the fields after a
    varbit field, where they would start without it)."""
    hb = header.nbits - slot.shift - slot.width  # the field's first bit in the header
    first, last = hb // 8, (hb + slot.width - 1) // 8
    if last - first + 1 > 8:
        raw = f"rd_bits({d}, {hb}, {slot.width})"
        return raw if slot.width > 64 else f"((u64){raw})"
    acc = " | ".join(f"((u64){d}[{b}] << {8 * (last - b)})" if last > b else f"(u64){d}[{b}]"
                     for b in range(first, last + 1))
    shift = (last + 1) * 8 - (hb + slot.width)
    code = f"({acc})" if shift == 0 else f"(({acc}) >> {shift})"
    if slot.width < 8 * (last - first + 1) - shift:
        code = f"({code} & {literal((1 << slot.width) - 1, 'u64')})"
    return code


def extract_code(header: HeaderLayout, too_short: int) -> list[str]:
    """``extract``: check the length, unpack every field, set valid, advance."""
    if header.length_index is not None:
        raise NativeUnsupported(f"extract of varbit header {header.name}")
    n = header.nbytes
    lines = [f"if ((u64)p->offset + {n} > p->len) {{ p->error = {too_short}; return; }}",
             "{", "    const u8 *d = p->data + p->offset;", "    (void)d;"]
    for slot in header.fields:
        bits = _field_bits(slot, header)
        if slot.signed:
            v = Val(bits, uint_for(slot.width), 0, (1 << slot.width) - 1)
            lines.append("    " + store_field(slot, v))
        else:
            lines.append(f"    p->v.f{slot.index} = {bits};")
    lines += [f"    p->valid[{header.id}] = 1;", f"    p->offset += {n};", "}"]
    return lines


def extract_vl_code(g: GenCtx, header: HeaderLayout, length: Val) -> list[str]:
    """BMv2's extract_VL: ``length`` is the varbit's size in bits (a C int), a multiple of 8;
    ParserInvalidArgument, PacketTooShort and HeaderTooShort in BMv2's order."""
    vb = header.varbit
    if vb is None or header.length_index is None:
        raise NativeUnsupported(f"extract_VL of header {header.name} without a varbit field")
    start = varbit_start(header)
    fixed = header.nbytes
    most = (header.nbits + vb.width) // 8
    invalid = g.error_code("ParserInvalidArgument", 6)
    short = g.error_code("PacketTooShort", 1)
    too_long = g.error_code("HeaderTooShort", 4)
    pos = [s.index for s in header.fields].index(vb.index)
    lines = ["{",
             f"    i64 nb = (i64)(i32)(u32)({cast(length, 'u64')} & 0xFFFFFFFFULL);",
             f"    if (nb % 8) {{ p->error = {invalid}; return; }}",
             f"    if (nb < 0 || (u64)p->offset + {fixed} + (u64)(nb / 8) > p->len) "
             f"{{ p->error = {short}; return; }}",
             f"    if ({fixed} + nb / 8 > {most}) {{ p->error = {too_long}; return; }}",
             "    const u8 *d = p->data + p->offset, *d2 = d + nb / 8;",
             "    (void)d2;"]
    for i, slot in enumerate(header.fields):
        if slot.varbit:
            lines += [f"    memset(&p->v.f{slot.index}, 0, sizeof p->v.f{slot.index});",
                      f"    memcpy(p->v.f{slot.index}.b, d + {start}, (size_t)(nb / 8));"]
        else:
            lines.append(f"    p->v.f{slot.index} = {_field_bits(slot, header, 'd2' if i > pos else 'd')};")
    lines += [f"    p->v.f{header.length_index} = (u64)nb;", f"    p->valid[{header.id}] = 1;",
              f"    p->offset += (u32)({fixed} + nb / 8);", "}"]
    return lines


class _ParserGen:
    def __init__(self, g: GenCtx, spec: dict[str, Any]) -> None:
        self.g = g
        self.spec = spec
        self.eg = ExprGen(g.layout)
        self.too_short = g.error_code("PacketTooShort", 1)
        self.labels = {st["name"]: f"S{i}" for i, st in enumerate(spec.get("parse_states", []))}
        self.value_sets = value_set_ids(g.doc)

    def fail(self, code: int | str) -> str:
        return f"{{ p->error = {code}; return; }}"

    def lookahead(self, offset: int, width: int, checks: list[str]) -> Val:
        if not 0 < width <= 128:
            raise NativeUnsupported(f"a lookahead of {width} bits")
        start = f"((u64)p->offset * 8 + {offset})"
        checks.append(f"if ({start} + {width} > (u64)p->len * 8) {self.fail(self.too_short)}")
        raw = f"rd_bits(p->data, {start}, {width})"
        ty = uint_for(width)
        return Val(raw if ty == "u128" else f"((u64){raw})", ty, 0, (1 << width) - 1)

    def extract(self, kind: str, params: list[dict[str, Any]]) -> list[str]:
        """``extract``/``extract_VL`` into a header, a stack's next element or the member of
        a union stack's next element; a union member invalidates the other members."""
        layout = self.g.layout
        length = self.eg.modular(params[1], 32) if kind == "extract_VL" else None

        def into(hid: int) -> list[str]:
            hl = layout.headers[hid]
            body = extract_code(hl, self.too_short) if length is None else \
                extract_vl_code(self.g, hl, length)
            return body + [f"p->valid[{o}] = 0;" for o in layout.siblings[hid]]

        p = params[0]
        if p["type"] == "regular":
            return into(layout.header(p["value"]).id)
        if p["type"] == "stack":
            stack = layout.stack(p["value"])
            ids = stack.header_ids
        elif p["type"] == "union_stack":
            stack = layout.union_stack(p["value"][0])
            ids = tuple(layout.header(f"{layout.unions[u].name}.{p['value'][1]}").id
                        for u in stack.union_ids)
        else:
            raise NativeUnsupported(f"{kind} of {p['type']!r}")
        oob = self.g.error_code("StackOutOfBounds", 3)
        sn = f"p->sn[{stack.next_index}]"
        lines = [f"if ({sn} >= {len(ids)}) {self.fail(oob)}", f"switch ({sn}) {{"]
        for i, hid in enumerate(ids):
            lines += [f"case {i}:", *("    " + x for x in into(hid)), "    break;"]
        return [*lines, "}", f"{sn} += 1;"]

    def op(self, op: dict[str, Any]) -> list[str]:
        kind = op.get("op")
        params = op.get("parameters", [])
        layout = self.g.layout
        if kind in ("extract", "extract_VL"):
            return self.extract(kind, params)
        if kind == "set":
            dst = params[0]
            if dst.get("type") != "field":
                raise NativeUnsupported(f"parser set of {dst.get('type')!r}")
            slot = layout.field(*dst["value"])
            if slot.varbit:
                return assign_varbit(self.g, dst, params[1])
            checks: list[str] = []
            src = params[1]
            if src.get("type") == "lookahead":
                offset, width = src["value"]
                value = self.lookahead(offset, width, checks)
            else:
                value = self.eg.modular(src, slot.width)
            return [*checks, store_field(slot, value)]
        if kind == "verify":
            code = self.eg.exact(params[1])
            ctype_for(code.lo, code.hi)
            if code.lo < -(1 << 63) or code.hi >= 1 << 63:
                raise NativeUnsupported("a parser error code beyond 64 bits")
            return [f"if (!{self.eg.truth(params[0])}) {self.fail(f'(i64)({code.code})')}"]
        if kind == "primitive":
            return primitive(self.g, self.eg, params[0])
        if kind in ("shift", "advance"):
            if kind == "shift":
                p0 = params[0]
                nbytes = parse_hexstr(p0["value"]) if p0.get("type") == "hexstr" else int(p0["value"])
                bits = const(nbytes * 8)
            else:
                bits = self.eg.exact(params[0])
            if bits.lo < 0:
                raise NativeUnsupported("advance by a possibly negative amount")
            t = self.eg.temp()
            return [f"{{ u128 {t} = (u128)p->offset + ({cast(bits, 'u128')} / 8);",
                    f"  if ({t} > p->len) {self.fail(self.too_short)}",
                    f"  p->offset = (u32){t}; }}"]
        raise NativeUnsupported(f"parser op {kind!r}")

    def key(self, key_spec: list[dict[str, Any]], checks: list[str]) -> Val:
        parts: list[tuple[Val, int]] = []
        for k in key_spec:
            kind = k.get("type")
            if kind == "lookahead":
                offset, width = k["value"]
                parts.append((self.lookahead(offset, width, checks), (width + 7) // 8 * 8))
            elif kind == "field":
                hname, fname = k["value"]
                if fname == "$valid$":
                    parts.append((self.eg.exact(k), 8))
                else:
                    slot = self.g.layout.field(hname, fname)
                    v = field_val(slot)
                    u = uint_for(slot.width)
                    masked = Val(f"({cast(v, u)} & {literal((1 << slot.width) - 1, u)})", u, 0,
                                 (1 << slot.width) - 1)
                    parts.append((masked, (slot.width + 7) // 8 * 8))
            elif kind in ("stack_field", "expression"):
                parts.append((self.eg.exact(k), (int(k.get("bitwidth", 32)) + 7) // 8 * 8))
            else:
                raise NativeUnsupported(f"parser transition key of type {kind!r}")
        if len(parts) == 1:
            return parts[0][0]
        total = sum(bits for _, bits in parts)
        u = uint_for(total)
        code = "0"
        for v, bits in parts:
            code = f"(({code} << {bits}) | ({cast(v, u)} & {literal((1 << bits) - 1, u)}))" \
                if code != "0" else f"({cast(v, u)} & {literal((1 << bits) - 1, u)})"
        return Val(f"(({u}){code})", u, 0, (1 << total) - 1)

    def state(self, st: dict[str, Any]) -> list[str]:
        name = st["name"]
        try:
            body: list[str] = []
            for op in st.get("parser_ops", []):
                body += self.op(op)
            checks: list[str] = []
            key = self.key(st["transition_key"], checks) if st.get("transition_key") else None
        except NativeUnsupported as exc:
            raise NativeUnsupported(f"parser state {name!r}: {exc}") from exc
        default: Any = None
        has_default = False
        tests: list[tuple[str, Any]] = []
        for t in st.get("transitions", []):
            kind = t.get("type", "hexstr")
            if kind == "default" or t.get("value") == "default":
                if not has_default:
                    default, has_default = t.get("next_state"), True
                continue
            if key is None:
                raise NativeUnsupported(f"parser state {name!r}: transitions without a key")
            mask = parse_hexstr(t["mask"]) if t.get("mask") else None
            if kind == "parse_vset":  # the key under the mask is a member
                k = key if mask is None else self.eg._bitwise("&", key, const(mask))
                vid = self.value_sets.get(t["value"])
                if vid is None:
                    raise NativeUnsupported(f"parser state {name!r}: value set {t['value']!r}")
                tests.append((f"vset_has(&cx->vsets[{vid}], {cast(k, 'u128')})",
                              t.get("next_state")))
                continue
            if kind != "hexstr":
                raise NativeUnsupported(f"parser state {name!r}: transition type {kind!r}")
            value = parse_hexstr(t["value"])
            k = key if mask is None else self.eg._bitwise("&", key, const(mask))
            same = self.eg._compare("==", k, const(value if mask is None else value & mask))
            tests.append((same.code, t.get("next_state")))
        lines = [f"{self.labels[name]}: {{", *("    " + x for x in body)]
        if key is not None:
            lines += ["    " + x for x in checks]
            for cond, target in tests:
                lines.append(f"    if ({cond}) {self.goto(target)}")
            if has_default:
                lines.append(f"    {self.goto(default)}")
            else:
                lines.append(f"    {self.fail(self.g.error_code('NoMatch', 2))}")
        else:
            lines.append(f"    {self.goto(default) if has_default else 'return;'}")
        return [*lines, "}"]

    def goto(self, target: str | None) -> str:
        if target is None:
            return "return;"
        if target not in self.labels:
            raise NativeUnsupported(f"parser: unknown state {target!r}")
        return f"goto {self.labels[target]};"


def parser_function(g: GenCtx) -> str:
    parsers = g.doc.get("parsers", [])
    if len(parsers) != 1:
        raise NativeUnsupported(f"{len(parsers)} parsers")
    pg = _ParserGen(g, parsers[0])
    lines = ["static void gen_parse(ctx_t *cx, pkt_t *p) {", "    (void)cx;",
             f"    {pg.goto(parsers[0].get('init_state'))}"]
    for st in parsers[0].get("parse_states", []):
        lines += pg.state(st)
    lines.append("}")
    return "\n".join(lines)
