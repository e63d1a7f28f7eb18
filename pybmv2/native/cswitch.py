"""The program-specific helpers the architecture code (rt_switch.c) calls: standard
metadata access, initial validity, metadata reset, field lists, digests and the deparser."""

from __future__ import annotations

from pybmv2.layout import HeaderLayout, PhvLayout
from pybmv2.native.cctx import STD_FIELDS, GenCtx
from pybmv2.native.cphv import slot_type, varbit_start
from pybmv2.native.errors import NativeUnsupported
from pybmv2.program import DROP_PORT

__all__ = ["deparser_function", "switch_helpers"]


def _std_accessors(g: GenCtx) -> list[str]:
    lines = []
    for name in STD_FIELDS:
        slot = g.std(name)
        if slot is None:
            lines += [f"static inline void std_set_{name}(pkt_t *p, u64 v) {{ (void)p; (void)v; }}",
                      f"static inline u64 std_get_{name}(const pkt_t *p) {{ (void)p; return 0; }}"]
            continue
        ty = slot_type(slot)
        lines += [f"static inline void std_set_{name}(pkt_t *p, u64 v) "
                  f"{{ p->v.f{slot.index} = ({ty})v; }}",
                  f"static inline u64 std_get_{name}(const pkt_t *p) "
                  f"{{ return (u64)p->v.f{slot.index}; }}"]
    queueing = all(g.std(n) is not None
                   for n in ("enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth"))
    spec = g.std("egress_spec")
    mask = spec.mask if spec is not None else 0x1FF
    lines += [f"#define STD_QUEUEING {int(queueing)}", f"#define EGRESS_SPEC_MASK {mask}ULL",
              f"#define DROP_PORT {DROP_PORT}ULL"]
    return lines


def _pool_helpers(layout: PhvLayout) -> list[str]:
    """BMv2's PHV reuse (pybmv2/phv_pool.py): what a copy takes from its original, and what
    a PHV given back to the pool forgets (varbit values and lengths)."""
    lines = ["static void gen_copy_live(phv_t *d, const pkt_t *s) {"]
    for hl in layout.headers:
        slots = [f.index for f in hl.fields] + (
            [hl.length_index] if hl.length_index is not None else [])
        copies = " ".join(f"d->f{i} = s->v.f{i};" for i in slots)
        if not copies:
            continue
        lines.append(f"    {copies}" if hl.metadata else f"    if (s->valid[{hl.id}]) {{ {copies} }}")
    lines += ["    (void)d; (void)s;", "}", "static void gen_pool_scrub(phv_t *v) {"]
    for hl in layout.headers:
        if hl.length_index is None:
            continue
        for f in hl.fields:
            if f.varbit:
                lines.append(f"    memset(&v->f{f.index}, 0, sizeof v->f{f.index});")
        lines.append(f"    v->f{hl.length_index} = 0;")
    lines += ["    (void)v;", "}"]
    return lines


def _meta_reader(layout: PhvLayout) -> list[str]:
    """``gen_meta_u64``: a metadata field's value by its slot (the calendar queue's release
    time, rt_io.c), clamped to 0..2^64-1: a negative time is past, a wider one far ahead."""
    lines = ["static u64 gen_meta_u64(const pkt_t *p, u32 slot) {", "    switch (slot) {"]
    for hl in layout.headers:
        for f in (f for f in hl.fields if hl.metadata and not f.varbit):
            v, ty = f"p->v.f{f.index}", slot_type(f)
            below = f"{v} < 0 ? 0 : " if ty.startswith("i") else ""
            above = f"{v} >> 64 ? UINT64_MAX : " if ty.endswith("128") else ""
            lines.append(f"    case {f.index}: return {below}{above}(u64){v};")
    lines += ["    default: (void)p; return 0;", "    }", "}"]
    return lines


def switch_helpers(g: GenCtx) -> str:
    layout = g.layout
    lines = _std_accessors(g)
    lines += _meta_reader(layout)
    valid = ", ".join("1" if hl.metadata else "0" for hl in layout.headers) or "0"
    lines.append(f"static const u8 INIT_VALID[NX_NH] = {{{valid}}};")
    lines += _pool_helpers(layout)
    lines.append("static void gen_reset_metadata(pkt_t *p) {")
    lines += [f"    p->v.f{i} = 0;" for i in layout.metadata_slots()]
    lines += ["    (void)p;", "}"]
    lines += ["static void gen_copy_field_list(pkt_t *d, const pkt_t *s, u32 id) {",
              "    switch (id) {"]
    for fid, slots in g.program.field_lists.items():
        lines.append(f"    case {fid}:")
        lines += [f"        d->v.f{i} = s->v.f{i};" for i in slots]
        lines.append("        break;")
    lines += ["    default: (void)d; (void)s; break;", "    }", "}"]
    lines += ["static void gen_learn(ctx_t *cx, const pkt_t *p, u32 id) {", "    u64 *r;",
              "    switch (id) {"]
    for lid, ll in g.program.learn_lists.items():
        n = len(ll.fields)
        for h, f, _, _ in ll.fields:
            if layout.field(h, f).varbit:
                raise NativeUnsupported(f"digest {ll.name!r} of varbit field {h}.{f}")
        lines += [f"    case {lid}:",
                  f"        if (buf_reserve(&cx->dig, {(2 + 2 * n) * 8})) abort();",
                  "        r = (u64 *)(cx->dig.p + cx->dig.n);",
                  f"        r[0] = {lid}; r[1] = {n};"]
        for i, (_, _, idx, _) in enumerate(ll.fields):
            lines.append(f"        r[{2 + 2 * i}] = (u64)p->v.f{idx}; "
                         f"r[{3 + 2 * i}] = (u64)((i128)p->v.f{idx} >> 64);")
        lines += [f"        cx->dig.n += {(2 + 2 * n) * 8};", "        cx->ndig++;", "        break;"]
    lines += ["    default: (void)cx; (void)p; (void)r; break;", "    }", "}"]
    return "\n".join(lines)


def _emit_header(hl: HeaderLayout) -> list[str]:
    size, after = str(hl.nbytes), "o"
    lines = [f"if (p->valid[{hl.id}]) {{"]
    if hl.length_index is not None:  # the varbit's current bytes sit between the fixed fields
        size, after = f"({hl.nbytes} + vb)", "o2"
        lines += [f"    u32 vb = (u32)(p->v.f{hl.length_index} / 8);", "    u8 *o2 = o + vb;"]
    lines.append(f"    memset(o, 0, {size});")
    base = "o"
    for slot in hl.fields:
        if slot.varbit:
            lines.append(f"    memcpy(o + {varbit_start(hl)}, p->v.f{slot.index}.b, vb);")
            base = after
            continue
        width = slot.width
        hb = hl.nbits - slot.shift - width
        last = (hb + width - 1) // 8
        shift = (last + 1) * 8 - (hb + width)
        ty = "u64" if width <= 64 else "u128"
        mask = "" if width in (64, 128) else \
            f" & (({ty})~({ty})0 >> {(64 if ty == 'u64' else 128) - width})"
        parts = [f"{base}[{last}] |= (u8)(v << {shift});" if shift else
                 f"{base}[{last}] |= (u8)v;"]
        done, b = 8 - shift, last
        while done < width:
            b -= 1
            parts.append(f"{base}[{b}] |= (u8)(v >> {done});")
            done += 8
        lines.append(f"    {{ {ty} v = ({ty})p->v.f{slot.index}{mask}; {' '.join(parts)} }}")
    lines += [f"    o += {size};", "}"]
    return lines


def deparser_function(g: GenCtx) -> tuple[str, int]:
    """``gen_emit`` (the valid headers in the deparser's order) and the most bytes it adds."""
    deparsers = g.doc.get("deparsers", [])
    if len(deparsers) != 1:
        raise NativeUnsupported(f"{len(deparsers)} deparsers")
    spec = deparsers[0]
    if spec.get("primitives"):
        raise NativeUnsupported(f"deparser {spec['name']!r}: primitives")
    lines = ["static u32 gen_emit(const pkt_t *p, u8 *o) {", "    u8 *start = o;"]
    total = 0
    for hname in spec.get("order", []):
        hl = g.layout.header(hname)
        for slot in hl.fields:
            slot_type(slot)
        lines += ["    " + x for x in _emit_header(hl)]
        vb = hl.varbit
        total += hl.nbytes + (vb.width // 8 if vb is not None else 0)
    lines += ["    return (u32)(o - start);", "}"]
    return "\n".join(lines), total
