"""Random BMv2 JSON programs for differential tests of expression and width semantics.

Each program parses an input header of fields of many widths (signed ones too) and an
output header, then one action stores random expressions into metadata scratch fields of
random widths and random expressions (which read the scratch fields back) into the output
fields; a random condition picks one of two such actions. Only constructs p4c emits for
v1model appear: the operators, masks, ``two_comp_mod`` and saturating casts of BMv2 JSON.
"""

from __future__ import annotations

import random
from typing import Any

__all__ = ["INPUT_FIELDS", "random_program"]

#: (name, width, signed) of the input header's fields
INPUT_FIELDS = (("u1", 1, False), ("u7", 7, False), ("u8", 8, False), ("u16", 16, False),
                ("u32", 32, False), ("u48", 48, False), ("u64", 64, False), ("u100", 100, False),
                ("u128", 128, False), ("s8", 8, True), ("s33", 33, True), ("s64", 64, True),
                ("pad", 3, False))
STD = [["ingress_port", 9, False], ["egress_spec", 9, False], ["egress_port", 9, False],
       ["instance_type", 32, False], ["packet_length", 32, False], ["enq_timestamp", 32, False],
       ["enq_qdepth", 19, False], ["deq_timedelta", 32, False], ["deq_qdepth", 19, False],
       ["ingress_global_timestamp", 48, False], ["egress_global_timestamp", 48, False],
       ["mcast_grp", 16, False], ["egress_rid", 16, False], ["checksum_error", 1, False],
       ["parser_error", 32, False], ["priority", 3, False], ["_padding", 3, False]]
WIDTHS = (1, 3, 8, 9, 16, 31, 32, 48, 63, 64, 65, 100, 127, 128)
BINARY = ("+", "-", "*", "&", "|", "^", "<<", ">>", "==", "!=", "<", ">", "<=", ">=", "and", "or")


def _hex(value: int) -> str:
    return f"-0x{-value:x}" if value < 0 else f"0x{value:x}"


class _Gen:
    def __init__(self, rng: random.Random, scratch: list[tuple[str, int, bool]], nargs: int):
        self.rng = rng
        self.leaves: list[dict[str, Any]] = [
            {"type": "field", "value": ["inp", n]} for n, _, _ in INPUT_FIELDS[:-1]]
        self.scratch = scratch
        self.nargs = nargs

    def const(self) -> dict[str, Any]:
        w = self.rng.choice(WIDTHS)
        v = self.rng.randrange(1 << w) if self.rng.random() < 0.7 else self.rng.choice(
            [0, 1, (1 << w) - 1, 1 << (w - 1)])
        if self.rng.random() < 0.1:
            v = -v
        return {"type": "hexstr", "value": _hex(v)}

    def leaf(self, readable_scratch: int) -> dict[str, Any]:
        r = self.rng.random()
        if r < 0.15:
            return self.const()
        if r < 0.25 and self.nargs:
            return {"type": "runtime_data", "value": self.rng.randrange(self.nargs)}
        if r < 0.45 and readable_scratch:
            name = self.scratch[self.rng.randrange(readable_scratch)][0]
            return {"type": "field", "value": ["scratch", name]}
        return self.rng.choice(self.leaves)

    def expr(self, depth: int, readable: int) -> dict[str, Any]:
        rng = self.rng
        if depth == 0 or rng.random() < 0.25:
            return self.leaf(readable)
        kind = rng.random()
        sub = lambda: self.expr(depth - 1, readable)  # noqa: E731
        if kind < 0.55:
            op = rng.choice(BINARY)
            right = sub()
            if op in ("<<", ">>"):  # p4c masks shift amounts to the value's width
                right = _node("&", right, {"type": "hexstr", "value": _hex(rng.choice((7, 31, 63, 127)))})
            node = _node(op, sub(), right)
            if op in ("==", "!=", "<", ">", "<=", ">=", "and", "or"):
                node = _node("?", {"type": "hexstr", "value": "0x1"},
                             {"type": "hexstr", "value": "0x0"}, cond=node)
            return node
        if kind < 0.7:
            w = rng.choice(WIDTHS)
            return _node("&", sub(), {"type": "hexstr", "value": _hex((1 << w) - 1)})
        if kind < 0.78:
            return _node("two_comp_mod", sub(), {"type": "hexstr", "value": _hex(rng.choice(WIDTHS))})
        if kind < 0.84:
            return _node(rng.choice(("usat_cast", "sat_cast")), sub(),
                         {"type": "hexstr", "value": _hex(rng.choice(WIDTHS[:-1]))})
        if kind < 0.9:
            return _node("~", None, sub())
        if kind < 0.95:
            cond = _node(rng.choice(("==", "<", ">=")), sub(), sub())
            return _node("?", sub(), sub(), cond=cond)
        return _node("not", None, _node("d2b", None, sub())) if rng.random() < 0.5 else \
            _node("b2d", None, _node("d2b", None, sub()))


def _node(op: str, left: Any, right: Any, cond: Any = None) -> dict[str, Any]:
    value: dict[str, Any] = {"op": op, "left": left, "right": right}
    if cond is not None:
        value["cond"] = cond
    return {"type": "expression", "value": value}


def _fields(rng: random.Random, prefix: str, n: int) -> list[tuple[str, int, bool]]:
    out = [(f"{prefix}{i}", w, rng.random() < 0.3) for i, w in enumerate(rng.choices(WIDTHS, k=n))]
    pad = -sum(w for _, w, _ in out) % 8
    return out + ([(f"{prefix}_pad", pad, False)] if pad else [])


def random_program(seed: int, outputs: int = 40, scratch: int = 12,
                   accept: Any = None) -> dict[str, Any]:
    """A BMv2 JSON program; ``accept(expression)`` may reject an expression (then another
    is drawn), e.g. one a target cannot compile."""
    rng = random.Random(seed)
    scratch_fields = _fields(rng, "t", scratch)
    out_fields = _fields(rng, "o", outputs)
    nargs = 3
    gen = _Gen(rng, scratch_fields, nargs)

    def draw(depth: int, readable: int, width: int, g: _Gen = gen) -> dict[str, Any]:
        for _ in range(200):
            e = g.expr(depth, readable)
            if accept is None or accept(e, width):
                return e
        raise RuntimeError("no acceptable expression in 200 draws")

    def action(aid: int) -> dict[str, Any]:
        prims = []
        for i, (name, w, _) in enumerate(scratch_fields):
            if not name.endswith("_pad"):
                prims.append({"op": "assign", "parameters": [
                    {"type": "field", "value": ["scratch", name]}, draw(3, i, w)]})
        for name, w, _ in out_fields:
            if not name.endswith("_pad"):
                prims.append({"op": "assign", "parameters": [
                    {"type": "field", "value": ["out", name]}, draw(4, len(scratch_fields), w)]})
        prims.append({"op": "assign", "parameters": [
            {"type": "field", "value": ["standard_metadata", "egress_spec"]},
            {"type": "hexstr", "value": _hex(1 + aid)}]})
        params = [{"name": f"a{i}", "bitwidth": w} for i, w in enumerate((8, 64, 128)[:nargs])]
        return {"name": f"act{aid}", "id": aid, "runtime_data": params, "primitives": prims}

    def table(tid: int, aid: int) -> dict[str, Any]:
        data = [_hex(rng.randrange(1 << w)) for w in (8, 64, 128)[:nargs]]
        return {"name": f"tbl{tid}", "id": tid, "key": [], "match_type": "exact", "type": "simple",
                "max_size": 1024, "with_counters": False, "support_timeout": False,
                "direct_meters": None, "action_ids": [aid], "actions": [f"act{aid}"],
                "base_default_next": None, "next_tables": {f"act{aid}": None},
                "default_entry": {"action_id": aid, "action_const": True, "action_data": data,
                                  "action_entry_const": True}}

    def header_type(hid: int, name: str, fields: list[tuple[str, int, bool]]) -> dict[str, Any]:
        return {"name": name, "id": hid, "fields": [[n, w, s] for n, w, s in fields]}

    cond = draw(3, 0, 1, _Gen(rng, [], 0))  # conditions see no action data
    return {
        "header_types": [header_type(0, "scratch_t", scratch_fields),
                         {"name": "standard_metadata", "id": 1, "fields": STD},
                         header_type(2, "in_t", list(INPUT_FIELDS)),
                         header_type(3, "out_t", out_fields)],
        "headers": [{"name": "scratch", "id": 0, "header_type": "scratch_t", "metadata": True},
                    {"name": "standard_metadata", "id": 1, "header_type": "standard_metadata",
                     "metadata": True},
                    {"name": "inp", "id": 2, "header_type": "in_t", "metadata": False},
                    {"name": "out", "id": 3, "header_type": "out_t", "metadata": False}],
        "header_stacks": [], "field_lists": [], "learn_lists": [], "calculations": [],
        "checksums": [], "errors": [["NoError", 0], ["PacketTooShort", 1], ["NoMatch", 2]],
        "parsers": [{"name": "parser", "id": 0, "init_state": "start", "parse_states": [
            {"name": "start", "id": 0, "parser_ops": [
                {"op": "extract", "parameters": [{"type": "regular", "value": "inp"}]},
                {"op": "extract", "parameters": [{"type": "regular", "value": "out"}]}],
             "transitions": [{"type": "default", "value": None, "mask": None, "next_state": None}],
             "transition_key": []}]}],
        "deparsers": [{"name": "deparser", "id": 0, "order": ["inp", "out"], "primitives": []}],
        "actions": [action(0), action(1)],
        "pipelines": [
            {"name": "ingress", "id": 0, "init_table": "node_0", "tables": [table(0, 0), table(1, 1)],
             "action_profiles": [], "conditionals": [
                 {"name": "node_0", "id": 0, "expression": _node("d2b", None, cond)["value"],
                  "true_next": "tbl0", "false_next": "tbl1"}]},
            {"name": "egress", "id": 1, "init_table": None, "tables": [], "action_profiles": [],
             "conditionals": []}],
        "program": f"random{seed}.p4",
    }
