"""Action primitives to C statements (the counterpart of :mod:`pybmv2.primitives`)."""

from __future__ import annotations

from typing import Any

from pybmv2.layout import PhvLayout
from pybmv2.native.ccalc import calc_call
from pybmv2.native.cctx import GenCtx, index_code
from pybmv2.native.cexpr import ExprGen
from pybmv2.native.cphv import HeaderRef, header_slots, slot_type, store_field, store_raw
from pybmv2.native.cvalues import Val, cast, ctype_for
from pybmv2.native.errors import NativeUnsupported
from pybmv2.program import DROP_PORT

__all__ = ["action_functions", "assign_varbit", "primitive"]

MIRROR_VALID = 1 << 15


def _per_header(ref: HeaderRef, body: Any) -> list[str]:
    """``body(header id)`` for the header ``ref`` denotes (a switch when it is dynamic)."""
    cases = ref.cases()
    if len(cases) == 1:
        return body(cases[0][1])
    out = [f"switch ({ref.sel}) {{"]
    for i, (_, hid) in enumerate(cases):
        out += [f"case {i}: {{", *("    " + line for line in body(hid)), "    break;", "}"]
    out.append("}")
    return out


def _copy_header(layout: PhvLayout, dst: int, src: int) -> list[str]:
    d, r = layout.headers[dst], layout.headers[src]
    if d.nslots != r.nslots:
        raise NativeUnsupported(f"copying header {r.name} to {d.name} of another layout")
    lines = [f"p->v.f{a} = p->v.f{b};" for a, b in zip(header_slots(d), header_slots(r),
                                                      strict=True)]
    return [*lines, f"p->valid[{dst}] = p->valid[{src}];"]


def _assign(g: GenCtx, eg: ExprGen, dst: dict[str, Any], src: dict[str, Any] | Val) -> list[str]:
    """``_writer_for(dst)(value)``: a field store or a validity change."""
    if dst.get("type") != "field":
        raise NativeUnsupported(f"assignment to {dst}")
    header, name = dst["value"]
    if name == "$valid$":
        hid = g.layout.header(header).id
        truth = eg.truth(src) if isinstance(src, dict) else f"({src.code} != 0)"
        return [f"p->valid[{hid}] = {truth};"]
    slot = g.layout.field(header, name)
    v = eg.modular(src, slot.width) if isinstance(src, dict) else src
    return [store_field(slot, v)]


def _varbit_ref(g: GenCtx, operand: dict[str, Any]) -> tuple[int, int, str]:
    if operand.get("type") != "field":
        raise NativeUnsupported(f"assign_VL of operand {operand}")
    slot = g.layout.field(*operand["value"])
    length = g.layout.header(slot.header).length_index
    if not slot.varbit or length is None:
        raise NativeUnsupported(f"assign_VL: {slot.header}.{slot.name} is not a varbit field")
    return slot.index, length, slot_type(slot)


def assign_varbit(g: GenCtx, dst: dict[str, Any], src: dict[str, Any]) -> list[str]:
    """assign_VL: a varbit's value and current length (validity unchanged)."""
    d, d_len, d_ty = _varbit_ref(g, dst)
    r, r_len, r_ty = _varbit_ref(g, src)
    if d_ty != r_ty:
        raise NativeUnsupported(f"assign_VL between varbit fields of different maxima "
                                f"({d_ty}, {r_ty})")
    return [f"p->v.f{d} = p->v.f{r};", f"p->v.f{d_len} = p->v.f{r_len};"]


def _stack_shift(g: GenCtx, eg: ExprGen, op: str, params: list[dict[str, Any]]) -> list[str]:
    stack = g.layout.stack(params[0]["value"])
    count = eg.exact(params[1])
    if not count.is_const or count.lo < 0:
        raise NativeUnsupported(f"{op} of header stack {stack.name} by a non-constant count")
    n, ids, size = count.lo, stack.header_ids, len(stack.header_ids)
    lines: list[str] = []
    order = range(size - 1, -1, -1) if op == "push" else range(size)
    for i in order:
        src = i - n if op == "push" else i + n
        if 0 <= src < size:
            lines += _copy_header(g.layout, ids[i], ids[src])
        else:
            lines.append(f"p->valid[{ids[i]}] = 0;")
    sn = f"p->sn[{stack.id}]"
    if op == "push":
        lines.append(f"{sn} = {sn} + {n} < {size} ? {sn} + {n} : {size};")
    else:
        lines.append(f"{sn} = {sn} - {n} > 0 ? {sn} - {n} : 0;")
    return lines


def primitive(g: GenCtx, eg: ExprGen, prim: dict[str, Any]) -> list[str]:
    """The C statements of one primitive (``goto L<n>`` for the ``_jump`` family)."""
    op = prim.get("op")
    params: list[dict[str, Any]] = prim.get("parameters", [])
    layout = g.layout
    if op == "assign":
        return _assign(g, eg, params[0], params[1])
    if op == "assign_header":
        dst, src = eg.header_ref(params[0]), eg.header_ref(params[1])
        return _per_header(dst, lambda d: _per_header(src, lambda r: _copy_header(layout, d, r)))
    if op in ("add_header", "add_header_fast", "remove_header"):
        ref = eg.header_ref(params[0])

        def change(hid: int) -> list[str]:
            hl = layout.headers[hid]
            size = str(hl.nbytes) if hl.length_index is None else \
                f"(i64)(({hl.nbits} + p->v.f{hl.length_index}) / 8)"  # a varbit's current size
            if op == "remove_header":
                return [f"if (p->valid[{hid}]) {{ p->pkt_len -= {size}; p->valid[{hid}] = 0; }}"]
            zero = [f"memset(&p->v.f{s.index}, 0, sizeof p->v.f{s.index});" if s.varbit else
                    f"p->v.f{s.index} = 0;" for s in hl.fields] if op == "add_header" else []
            grow = [f"p->pkt_len += {size};"] if op == "add_header" else []
            return [f"if (!p->valid[{hid}]) {{", *zero, *grow, f"p->valid[{hid}] = 1;", "}"]

        return _per_header(ref, change)
    if op in ("push", "pop"):
        return _stack_shift(g, eg, op, params)
    if op == "assign_VL":
        return assign_varbit(g, params[0], params[1])
    if op in ("mark_to_drop", "drop"):
        # it writes the header it is given: p4c passes a copy of standard_metadata to an
        # action that takes it as a parameter, and copies it back (pybmv2.primitives)
        std = params[0]["value"] if params and params[0].get("type") == "header" \
            else "standard_metadata"
        layout = g.layout
        egress_spec = layout.field(std, "egress_spec") if layout.has_field(std, "egress_spec") \
            else None
        mcast = layout.field(std, "mcast_grp") if layout.has_field(std, "mcast_grp") else None
        if egress_spec is None:
            raise NativeUnsupported(f"mark_to_drop on header {std!r} without egress_spec")
        out = [store_raw(egress_spec, str(DROP_PORT))]
        return out + ([store_raw(mcast, "0")] if mcast is not None else [])
    if op == "exit":
        return ["p->exit_ = 1;"]
    if op in ("no_op", "log_msg", "assert", "assume"):
        return []
    if op == "count":
        cid = g.counters[params[0]["value"]]
        return [f"counter_count(&cx->counters[{cid}], {index_code(eg.exact(params[1]))}, p->len);"]
    if op == "execute_meter":
        mid = g.meters[params[0]["value"]]
        colour = Val(f"((u64)meterarr_exec(&cx->meters[{mid}], "
                     f"{index_code(eg.exact(params[1]))}, p->len))", "u64", 0, 2)
        return _assign(g, eg, params[2], colour)
    if op == "register_read":
        rid, width = g.registers[params[1]["value"]]
        ty = "u64" if width <= 64 else "u128"
        value = Val(f"(({ty})reg_read(&cx->regs[{rid}], {index_code(eg.exact(params[2]))}))",
                    ty, 0, (1 << width) - 1)
        return _assign(g, eg, params[0], value)
    if op == "register_write":
        rid, width = g.registers[params[0]["value"]]
        bits = cast(eg.modular(params[2], width), "u128")
        return [f"reg_write(&cx->regs[{rid}], {index_code(eg.exact(params[1]))}, {bits});"]
    if op == "modify_field_with_hash_based_offset":
        base, size = eg.exact(params[1]), eg.exact(params[3])
        if size.lo < 0:
            raise NativeUnsupported("a hash with a possibly negative size")
        h = calc_call(g, params[2]["value"])
        span = min(h.hi, max(size.hi - 1, 0))
        lo, hi = base.lo, base.hi + span
        ty = ctype_for(min(lo, 0), max(hi, size.hi, h.hi), "a hash offset")
        t = eg.temp()
        code = (f"({{ {ty} {t} = {cast(size, ty)}; if (!{t}) {t} = 1; "
                f"({ty})({cast(h, ty)} % {t}) + {cast(base, ty)}; }})")
        return _assign(g, eg, params[0], Val(code, ty, lo, hi))
    if op in ("clone_ingress_pkt_to_egress", "clone_egress_pkt_to_egress"):
        session = cast(eg.modular(params[0], 16), "u64")
        field_list = cast(eg.modular(params[1], 16), "u64")
        return [f"p->clone_session = (u32)(({session}) & 0xFFFF) | {MIRROR_VALID};",
                f"p->clone_fl = (u32)(({field_list}) & 0xFFFF);"]
    if op in ("resubmit", "recirculate"):
        field_list = cast(eg.modular(params[0], 16), "u64")
        reg = "resubmit" if op == "resubmit" else "recirc"
        return [f"p->{reg} = (u32)(({field_list}) & 0xFFFF);"]
    if op == "generate_digest":
        return [f"p->learn_id = (u32)(({cast(eg.modular(params[1], 16), 'u64')}) & 0xFFFF);"]
    if op == "truncate":
        length = eg.exact(params[0])
        if length.lo < -(1 << 63) or length.hi >= 1 << 63:
            raise NativeUnsupported("truncate to a length beyond 64 bits")
        return [f"p->truncate_len = (i64)({length.code});"]
    if op == "_jump":
        return [f"goto L{eg.exact(params[0]).lo};"]
    if op == "_jump_if_zero":
        return [f"if (!{eg.truth(params[0])}) goto L{eg.exact(params[1]).lo};"]
    raise NativeUnsupported(f"action primitive {op!r}")


def action_functions(g: GenCtx) -> str:
    """``act_<id>`` for every action, and ``run_action``, the dispatcher by action id."""
    out = []
    for spec in g.doc.get("actions", []):
        aid = int(spec["id"])
        eg = ExprGen(g.layout, g.action_args[aid])
        body: list[str] = []
        prims = spec.get("primitives", [])
        targets = {int(p["parameters"][-1]["value"], 16) if p["parameters"][-1]["type"] == "hexstr"
                   else -1 for p in prims if p.get("op", "").startswith("_jump")}
        try:
            for i, prim in enumerate(prims):
                if i in targets:
                    body.append(f"L{i}:;")
                body += ["    " + line for line in primitive(g, eg, prim)]
        except NativeUnsupported as exc:
            raise NativeUnsupported(f"action {spec['name']!r}: {exc}") from exc
        if len(prims) in targets:
            body.append(f"L{len(prims)}:;")
        out += [f"static void act_{aid}(ctx_t *cx, pkt_t *p, const u64 *a) {{",
                "    (void)cx; (void)p; (void)a;", *body, "}", ""]
    out += ["static void run_action(ctx_t *cx, pkt_t *p, i32 aid, const u64 *a) {",
            "    switch (aid) {"]
    out += [f"    case {int(s['id'])}: act_{int(s['id'])}(cx, p, a); break;"
            for s in g.doc.get("actions", [])]
    out += ["    default: break;", "    }", "}"]
    return "\n".join(out)
