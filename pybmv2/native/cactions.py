"""Action primitives to C statements (the counterpart of :mod:`pybmv2.primitives`)."""

from __future__ import annotations

from typing import Any

from pybmv2.expressions import unwrap
from pybmv2.native.ccalc import calc_call
from pybmv2.native.cctx import GenCtx, index_code
from pybmv2.native.cexpr import ExprGen
from pybmv2.native.cheaders import (
    add_header,
    assign_header,
    assign_stack,
    assign_union,
    per_header,
    remove_header,
    set_validity,
    stack_shift,
)
from pybmv2.native.cphv import slot_type, store_field, store_raw
from pybmv2.native.cvalues import Val, cast, ctype_for
from pybmv2.native.errors import NativeUnsupported
from pybmv2.program import DROP_PORT

__all__ = ["action_functions", "assign_varbit", "primitive"]

MIRROR_VALID = 1 << 15


def _assign(g: GenCtx, eg: ExprGen, dst: dict[str, Any], src: dict[str, Any] | Val) -> list[str]:
    """``compile_field_writer(dst)(value)``: a field store, a validity change, or a store
    into a field of a header chosen at run time (``access_field``)."""
    dst = unwrap(dst)
    kind = dst.get("type")
    value: Any = dst.get("value")
    if kind == "field":
        header, name = value
        if name == "$valid$":
            truth = eg.truth(src) if isinstance(src, dict) else f"({src.code} != 0)"
            return set_validity(g.layout, g.layout.header(header).id, truth)
        slot = g.layout.field(header, name)
        v = eg.modular(src, slot.width) if isinstance(src, dict) else src
        return [store_field(slot, v)]
    if kind == "expression" and value.get("op") == "access_field":
        offset = int(value["right"])
        ref = eg.header_ref(value["left"])
        slots = {h: g.layout.headers[h].fields[offset] for h in ref.ids}
        src_v = eg.modular(src, max(s.width for s in slots.values())) \
            if isinstance(src, dict) else src
        t = eg.temp()  # the value first, then the header (as the Python engine)
        held = Val(t, src_v.ty, src_v.lo, src_v.hi, src_v.mod)
        return [f"{{ {src_v.ty} {t} = {src_v.code};",
                *("    " + x for x in per_header(ref, lambda h: [store_field(slots[h], held)])),
                "}"]
    raise NativeUnsupported(f"assignment to {dst}")


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


def primitive(g: GenCtx, eg: ExprGen, prim: dict[str, Any]) -> list[str]:
    """The C statements of one primitive (``goto L<n>`` for the ``_jump`` family)."""
    op = prim.get("op")
    params: list[dict[str, Any]] = prim.get("parameters", [])
    layout = g.layout
    if op == "assign":
        return _assign(g, eg, params[0], params[1])
    if op == "assign_header":
        return assign_header(eg, params[0], params[1])
    if op == "assign_union":
        return assign_union(eg, params[0], params[1])
    if op in ("assign_header_stack", "assign_union_stack"):
        return assign_stack(eg, params[0], params[1])
    if op in ("add_header", "add_header_fast"):
        return add_header(eg, params[0], count_length=op == "add_header")
    if op == "remove_header":
        return remove_header(eg, params[0])
    if op in ("push", "pop"):
        return stack_shift(eg, op, params)
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
