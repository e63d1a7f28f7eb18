"""Calculations (hashes) and checksums in C, as :mod:`pybmv2.calculations` computes them.

A calculation packs its inputs bitwise (fields of invalid headers skipped), pads the last
byte with zeros, appends the payload when it asks for it and runs the algorithm.
"""

from __future__ import annotations

from typing import Any

from pybmv2.expressions import parse_hexstr
from pybmv2.native.cctx import GenCtx
from pybmv2.native.cexpr import ExprGen
from pybmv2.native.cphv import field_val, store_field
from pybmv2.native.cvalues import Val, literal
from pybmv2.native.errors import NativeUnsupported

__all__ = ["ALGO_BITS", "calc_call", "calc_function", "checksum_functions"]

#: C function and output width of every algorithm pybmv2 implements
ALGO_BITS = {
    "crc16": ("algo_crc16", 16), "crc32": ("algo_crc32", 32), "crcCCITT": ("algo_crc_ccitt", 16),
    "csum16": ("algo_csum16", 16), "cksum16": ("algo_csum16", 16),
    "identity": ("algo_identity", 64), "xor16": ("algo_xor16", 16), "xor32": ("algo_xor32", 32),
}


def calc_function(g: GenCtx, key: str, spec: dict[str, Any]) -> tuple[str, int]:
    """The C function computing calculation ``spec`` (generated once per ``key``) and the
    bit width of its output."""
    algo = spec.get("algo")
    if algo not in ALGO_BITS:
        raise NativeUnsupported(f"calculation {spec.get('name')!r}: algorithm {algo!r}")
    cfn, bits = ALGO_BITS[algo]
    if key in g.calc_fns:
        return g.calc_fns[key][0], bits
    name = f"calc_{len(g.calc_fns)}"
    layout = g.layout
    puts: list[str] = []
    fixed_bits = 0
    payload = False

    def put_field(hid: int, slot: Any) -> None:
        nonlocal fixed_bits
        if slot.varbit:  # its current length's worth of bits (whole bytes)
            length = layout.headers[hid].length_index
            puts.append(f"    if (p->valid[{hid}]) for (u64 i = 0; i < p->v.f{length} / 8; i++) "
                        f"bw_put(&w, p->v.f{slot.index}.b[i], 8);")
            fixed_bits += slot.width
            return
        v = field_val(slot)
        puts.append(f"    if (p->valid[{hid}]) bw_put(&w, (u128)({v.code}), {slot.width});")
        fixed_bits += slot.width

    for item in spec.get("input", []):
        kind = item.get("type")
        if kind == "field":
            hname, fname = item["value"]
            if fname == "$valid$":
                raise NativeUnsupported(f"calculation {spec.get('name')!r}: $valid$ input")
            put_field(layout.header(hname).id, layout.field(hname, fname))
        elif kind == "hexstr":
            width = int(item.get("bitwidth", 0))
            if not 0 < width <= 128:
                raise NativeUnsupported(f"calculation {spec.get('name')!r}: a {width}-bit "
                                        "constant input")
            value = parse_hexstr(item["value"]) & ((1 << width) - 1)
            puts.append(f"    bw_put(&w, {literal(value, 'u128')}, {width});")
            fixed_bits += width
        elif kind == "header":
            header = layout.header(item["value"])
            for slot in header.fields:
                put_field(header.id, slot)
        elif kind == "payload":
            payload = True
        else:
            raise NativeUnsupported(f"calculation {spec.get('name')!r}: input type {kind!r}")
    room = f"{(fixed_bits + 7) // 8}" + (" + pn" if payload else "")
    tail = ["    memcpy(b + n, pl, pn);", "    n += pn;"] if payload else []
    body = [
        f"static u64 {name}(ctx_t *cx, const pkt_t *p, const u8 *pl, u32 pn) {{",
        "    (void)pl; (void)pn;",
        f"    u8 *b = scratch(cx, {room});",
        "    bw_t w = {b, 0};",
        *puts,
        "    size_t n = (size_t)((w.bits + 7) >> 3);",
        *tail,
        f"    return {cfn}(b, n);",
        "}",
    ]
    g.calc_fns[key] = (name, "\n".join(body))
    return name, bits


def calc_call(g: GenCtx, calc_name: str) -> Val:
    """A call of the program's calculation ``calc_name`` on the packet and its payload."""
    for spec in g.doc.get("calculations", []):
        if spec["name"] == calc_name:
            fn, bits = calc_function(g, f"calc:{calc_name}", spec)
            return Val(f"{fn}(cx, p, p->data + p->offset, p->len - p->offset)", "u64", 0,
                       (1 << bits) - 1)
    raise NativeUnsupported(f"unknown calculation {calc_name!r}")


def checksum_functions(g: GenCtx) -> str:
    """``gen_verify`` (1 when a verified checksum is wrong) and ``gen_update_checksums``."""
    verify = ["static int gen_verify(ctx_t *cx, pkt_t *p) {",
              "    (void)cx; (void)p;"]
    update = ["static void gen_update_checksums(ctx_t *cx, pkt_t *p, const u8 *pl, u32 pn) {",
              "    (void)cx; (void)p; (void)pl; (void)pn;"]
    for spec in g.doc.get("checksums", []):
        kind = spec.get("type", "generic")
        if kind not in ("generic", "ipv4"):
            raise NativeUnsupported(f"checksum {spec.get('name')!r} of type {kind!r}")
        calc = next((c for c in g.doc.get("calculations", [])
                     if c["name"] == spec["calculation"]), None)
        if calc is None:
            raise NativeUnsupported(f"checksum {spec['name']!r}: unknown calculation")
        fn, bits = calc_function(g, f"calc:{calc['name']}", calc)
        slot = g.layout.field(*spec["target"])
        eg = ExprGen(g.layout, bail=None)  # gen_verify returns a value: no fault exit
        cond = eg.truth(spec["if_cond"]) if spec.get("if_cond") else "1"
        out = Val(f"{fn}(cx, p, pl, pn)", "u64", 0, (1 << bits) - 1)
        if spec.get("verify", True):
            same = eg._compare("==", field_val(slot), out)
            verify += ["    {",
                       "        const u8 *pl = p->data + p->offset;",
                       "        u32 pn = p->len - p->offset;",
                       f"        if ({cond} && !({same.code})) return 1;",
                       "    }"]
        if spec.get("update", True):
            update.append(f"    if ({cond}) {{ {store_field(slot, out)} }}")
    verify += ["    return 0;", "}"]
    update.append("}")
    return "\n".join([*verify, "", *update])
