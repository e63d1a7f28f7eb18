"""Controls in C: tables and conditionals as labels of one function per pipeline
(:mod:`pybmv2.control`), with every table's key, lookup, on-hit work and next node."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pybmv2.expressions import parse_hexstr
from pybmv2.native.ccalc import calc_function
from pybmv2.native.cctx import GenCtx, words_of
from pybmv2.native.cexpr import ExprGen
from pybmv2.native.cphv import field_val, store_field
from pybmv2.native.cvalues import Val, cast, const
from pybmv2.native.errors import NativeUnsupported
from pybmv2.native.manifest import TableMeta
from pybmv2.tables import MatchTable

__all__ = ["KIND_CODES", "MODE_CODES", "TableMeta", "pipeline_function", "table_descriptors"]

KIND_CODES = {"exact": 0, "lpm": 1, "ternary": 2, "range": 3, "optional": 4, "valid": 5}
MODE_CODES = {"exact": 0, "lpm": 1, "ternary": 2}


def _key_code(g: GenCtx, spec: dict[str, Any], metas: list[tuple[str, int, int, int]]) -> list[str]:
    lines = []
    eg = ExprGen(g.layout)
    for (_, _, word, nw), k in zip(metas, spec.get("key", []), strict=True):
        target = k["target"]
        if target[1] == "$valid$":
            lines.append(f"k[{word}] = p->valid[{g.layout.header(target[0]).id}];")
            continue
        slot = g.layout.field(target[0], target[1])
        if slot.signed:
            raise NativeUnsupported(f"table {spec['name']!r}: signed key field "
                                    f"{target[0]}.{target[1]}")
        v = field_val(slot)
        if k.get("mask"):
            v = eg._bitwise("&", v, const(parse_hexstr(k["mask"])))
        if nw == 1:
            lines.append(f"k[{word}] = {cast(v, 'u64')};")
        else:
            t = eg.temp()
            lines.append(f"{{ u128 {t} = {cast(v, 'u128')}; k[{word}] = (u64){t}; "
                         f"k[{word + 1}] = (u64)({t} >> 64); }}")
    return lines


def table_metas(g: GenCtx) -> list[TableMeta]:
    """Every table of ingress then egress, numbered in that order."""
    out: list[TableMeta] = []
    profiles = profile_ids(g)
    for pipe in (g.program.ingress, g.program.egress):
        for table in pipe.tables.values():
            fields, at = [], 0
            for kf in table.keys:
                if kf.match_type not in KIND_CODES:
                    raise NativeUnsupported(f"table {table.name!r}: match kind {kf.match_type!r}")
                n = words_of(kf.width)
                fields.append((kf.match_type, kf.width, at, n))
                at += n
            prof = profiles[(pipe.name, table.action_profile_name)] \
                if table.action_profile_name is not None else None
            out.append(TableMeta(len(out), pipe.name, table.name, table.mode, tuple(fields), at,
                                 prof))
    return out


def profile_ids(g: GenCtx) -> dict[tuple[str, str | None], int]:
    ids: dict[tuple[str, str | None], int] = {}
    for pipe in (g.program.ingress, g.program.egress):
        for name in pipe.action_profiles:
            ids[(pipe.name, name)] = len(ids)
    return ids


def table_descriptors(metas: list[TableMeta]) -> str:
    lines = []
    for m in metas:
        kf = ", ".join(f"{{{KIND_CODES[k]}, {w0}, {n}, {w}}}" for k, w, w0, n in m.fields)
        lines.append(f"static const keyf_t KF{m.tid}[] = {{{kf or '{0, 0, 0, 0}'}}};")
    descs = []
    for m in metas:
        lpm = next((i for i, f in enumerate(m.fields) if f[0] == "lpm"), -1)
        descs.append(f"{{{MODE_CODES[m.mode]}, {len(m.fields)}, {m.nwords}, {lpm}, KF{m.tid}}}")
    body = ", ".join(descs) or "{0, 0, 0, -1, NULL}"
    return "\n".join([*lines, f"static const table_desc_t TABLE_DESCS[] = {{{body}}};"])


class _PipelineGen:
    def __init__(self, g: GenCtx, spec: dict[str, Any], metas: dict[str, TableMeta]) -> None:
        self.g = g
        self.spec = spec
        self.metas = metas
        ingress = g.program.ingress
        self.pipe = ingress if spec["name"] == ingress.name else g.program.egress
        names = [t["name"] for t in spec.get("tables", [])]
        names += [c["name"] for c in spec.get("conditionals", [])]
        self.labels = {n: f"N{i}" for i, n in enumerate(names)}
        direct = {c.binding for c in g.program.externs.counters.values()
                  if c.is_direct and c.binding}
        self.direct_counters = direct
        self.direct_meters = {m.binding: m for m in g.program.externs.meters.values()
                              if m.is_direct and m.binding}

    def goto(self, name: str | None) -> str:
        if name is None:
            return "return;"
        if name not in self.labels:
            raise NativeUnsupported(f"pipeline {self.spec['name']!r}: unknown node {name!r}")
        return f"goto {self.labels[name]};"

    def on_hit(self, table: MatchTable) -> list[str]:
        lines = []
        if table.support_timeout:
            lines.append("entry_hit(t, e, std_get_ingress_global_timestamp(p));")
        if table.name in self.direct_counters:
            lines.append("entry_count(t, e, p->len);")
        meter = self.direct_meters.get(table.name)
        if meter is not None:
            if meter.result_target is None:
                raise NativeUnsupported(f"direct meter {meter.name!r} without a result_target")
            units = "1" if meter.type == "packets" else "p->len"
            colour = Val(f"((u64)meter_exec(&e->meter, {units}))", "u64", 0, 2)
            lines += ["entry_touch(t, e);",
                      store_field(self.g.layout.field(*meter.result_target), colour)]
        return lines

    def selector(self, table: MatchTable) -> str:
        profile = table.profile
        assert profile is not None
        sel = next(p for p in self.spec.get("action_profiles", []) if p["name"] == profile.name)
        fn, _ = calc_function(self.g, f"selector:{self.spec['name']}:{profile.name}",
                              {"name": profile.name, **sel["selector"]})
        return f"{fn}(cx, p, NULL, 0)"

    def group_pick(self, table: MatchTable) -> list[str]:
        """A group's member: ``members[hash % size]`` (profiles without a selector have no
        groups)."""
        assert table.profile is not None
        if table.profile.selector is None:
            return []
        return ["    else {",
                "        group_t *gr = &pr->g[e->ind_handle];",
                f"        if (gr->n) c = &pr->m[gr->m[({self.selector(table)} & 0xFFFFFFFFULL)"
                " % gr->n]].call;",
                "    }"]

    def table(self, t: dict[str, Any]) -> list[str]:
        table = self.pipe.tables[t["name"]]
        meta = self.metas[t["name"]]
        next_tables = t.get("next_tables", {})
        hit_miss = "__HIT__" in next_tables or "__MISS__" in next_tables
        base = t.get("base_default_next")
        by_action = {int(aid): next_tables.get(a, base)
                     for aid, a in zip(t.get("action_ids", []), t.get("actions", []), strict=False)}
        nexts = ["switch (c->action) {",
                 *(f"case {aid}: {self.goto(n)}" for aid, n in by_action.items()),
                 f"default: {self.goto(base)}", "}"]
        lines = [f"t = &cx->tables[{meta.tid}]; /* {table.name} */"]
        if not table.keys and not hit_miss:
            return [*lines, "c = &t->def;", "run_action(cx, p, c->action, c->args);", *nexts]
        lines += _key_code(self.g, t, list(meta.fields))
        lines.append("e = table_lookup(t, k);")
        hit = self.on_hit(table)
        if table.profile is None:
            lines += ["if (e) {", *("    " + x for x in hit), "    c = &e->call;",
                      "} else c = &t->def;", "run_action(cx, p, c->action, c->args);"]
        else:
            pid = meta.profile
            lines += ["c = NULL;", "if (e) {", *("    " + x for x in hit),
                      f"    profile_t *pr = &cx->profiles[{pid}];",
                      "    if (e->ind_kind == IND_MEMBER) c = &pr->m[e->ind_handle].call;",
                      *self.group_pick(table), "}",
                      "if (c) run_action(cx, p, c->action, c->args);",
                      "else if (e) return;"]
            if not hit_miss:
                lines.append(f"if (!c) {self.goto(base)}")
        if hit_miss:
            return [*lines, f"if (e) {self.goto(next_tables.get('__HIT__'))}",
                    self.goto(next_tables.get("__MISS__"))]
        return [*lines, *nexts]

    def conditional(self, c: dict[str, Any]) -> list[str]:
        cond = ExprGen(self.g.layout).truth(c["expression"])
        return [f"if ({cond}) {self.goto(c.get('true_next'))}", self.goto(c.get("false_next"))]

    def function(self, fname: str) -> str:
        lines = [f"static void {fname}(ctx_t *cx, pkt_t *p) {{",
                 "    table_t *t; entry_t *e; const call_t *c; u64 k[NX_MAX_KEYW];",
                 "    (void)t; (void)e; (void)c; (void)k;",
                 f"    {self.goto(self.spec.get('init_table'))}"]
        nodes: list[tuple[str, Callable[[dict[str, Any]], list[str]], dict[str, Any]]] = [
            (t["name"], self.table, t) for t in self.spec.get("tables", [])]
        nodes += [(c["name"], self.conditional, c) for c in self.spec.get("conditionals", [])]
        for name, gen, node in nodes:
            try:
                body = gen(node)
            except NativeUnsupported as exc:
                raise NativeUnsupported(f"{self.spec['name']} {name!r}: {exc}") from exc
            lines += [f"{self.labels[name]}:", "    if (p->exit_) return;",
                      *("    " + x for x in body)]
        lines.append("}")
        return "\n".join(lines)


def pipeline_function(g: GenCtx, spec: dict[str, Any], fname: str, metas: list[TableMeta]) -> str:
    mine = {m.name: m for m in metas if m.pipeline == spec["name"]}
    return _PipelineGen(g, spec, mine).function(fname)
