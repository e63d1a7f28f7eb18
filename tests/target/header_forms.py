"""A BMv2 JSON program that uses every form of header, union and stack reference the Python
target implements, including those p4c 1.2.4.8 or BMv2 1.15.5 cannot run (a run-time index
into a union stack, the conditional operator over unions, whole-stack and whole-union
copies, faults in the parser and in egress), for differential tests of the two engines.

The frame is a control header ``ctl`` (two bytes of operation bits, three indices and
three result fields), then tagged items until a zero tag: 1 an element of stack ``s``,
2 of stack ``t``, 3/4 a member of union ``u``, 5/6 a member of union stack ``us``'s next
element, 7 a byte that makes the parser read ``s[ctl.k]``. Bit ``n`` of the operation
bytes runs action ``n`` (:data:`ACTIONS`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ACTIONS", "TAGS", "program"]

STD = [["ingress_port", 9, False], ["egress_spec", 9, False], ["egress_port", 9, False],
       ["instance_type", 32, False], ["packet_length", 32, False], ["parser_error", 32, False],
       ["mcast_grp", 16, False], ["egress_rid", 16, False], ["checksum_error", 1, False],
       ["_padding", 3, False]]
#: tag -> (header type, bytes of the item including its tag)
TAGS = {1: ("h_t", 3), 2: ("h_t", 3), 3: ("x_t", 3), 4: ("y_t", 5), 5: ("x_t", 3),
        6: ("y_t", 5), 7: (None, 1)}


def f(header: str, name: str) -> dict[str, Any]:
    return {"type": "field", "value": [header, name]}


def hexstr(value: int) -> dict[str, Any]:
    return {"type": "hexstr", "value": hex(value)}


def expr(op: str, left: Any, right: Any, **more: Any) -> dict[str, Any]:
    return {"type": "expression", "value": {"op": op, "left": left, "right": right, **more}}


def deref(stack: str, index: dict[str, Any]) -> dict[str, Any]:
    return expr("dereference_header_stack", {"type": "header_stack", "value": stack}, index)


def uderef(stack: str, index: dict[str, Any]) -> dict[str, Any]:
    return expr("dereference_union_stack", {"type": "header_union_stack", "value": stack}, index)


def field_of(header_ref: dict[str, Any], offset: int) -> dict[str, Any]:
    return expr("access_field", header_ref, offset)


def member(union_ref: dict[str, Any], offset: int) -> dict[str, Any]:
    return expr("access_union_header", union_ref, offset)


def bit(cond: dict[str, Any]) -> dict[str, Any]:
    return expr("?", hexstr(1), hexstr(0), cond=cond)


def prim(op: str, *params: dict[str, Any]) -> dict[str, Any]:
    return {"op": op, "parameters": list(params)}


def header(name: str) -> dict[str, Any]:
    return {"type": "header", "value": name}


def union(name: str) -> dict[str, Any]:
    return {"type": "header_union", "value": name}


IDX_I, IDX_J, IDX_K = f("ctl", "i"), f("ctl", "j"), f("ctl", "k")
#: the primitives of action n (run when bit n of ctl.op0, ctl.op1 is set)
ACTIONS: list[list[dict[str, Any]]] = [
    [prim("assign", f("ctl", "r1"), field_of(deref("s", IDX_I), 1)),
     prim("assign", f("ctl", "r2"), bit(expr("valid", None, deref("s", IDX_J))))],
    [prim("assign", field_of(deref("s", IDX_I), 1), f("ctl", "r3"))],
    [prim("remove_header", deref("s", IDX_J))],
    [prim("add_header", deref("s", IDX_I)), prim("assign", field_of(deref("s", IDX_I), 0), hexstr(1))],
    [prim("assign_header", deref("s", IDX_I), deref("s", IDX_J))],
    [prim("assign_header", header("res"),
          expr("?", deref("s", IDX_I), deref("t", IDX_J), cond=expr("&", IDX_K, hexstr(1))))],
    [prim("assign_union", union("u"), uderef("us", IDX_I))],
    [prim("assign", f("ctl", "r1"), bit(expr("valid_union", None, uderef("us", IDX_J)))),
     prim("assign", f("ctl", "r2"), expr("&", field_of(member(uderef("us", IDX_K), 1), 1),
                                         hexstr(0xFFFF)))],
    [prim("assign_union", expr("?", union("v"), union("u"), cond=expr("&", IDX_K, hexstr(2))),
          union("us[0]"))],
    [prim("push", {"type": "header_union_stack", "value": "us"}, hexstr(1)),
     prim("pop", {"type": "header_stack", "value": "s"}, hexstr(2))],
    [prim("assign_header_stack", {"type": "header_stack", "value": "t"},
          {"type": "header_stack", "value": "s"})],
    [prim("assign", f("u.y", "$valid$"), expr("&", IDX_K, hexstr(4))),
     prim("assign", f("v.x", "$valid$"), hexstr(1))],
    [prim("add_header", member(uderef("us", IDX_I), 0))],
    [prim("pop", {"type": "header_union_stack", "value": "us"}, hexstr(1))],
    [prim("assign", f("ctl", "r3"), expr("last_stack_index", None,
                                         {"type": "header_union_stack", "value": "us"})),
     prim("assign", f("ctl", "r1"), expr("size_stack", None,
                                         {"type": "header_stack", "value": "t"}))],
    [],  # bit 15: egress reads s[ctl.k]
]


def _types() -> list[dict[str, Any]]:
    ctl = [["op0", 8, False], ["op1", 8, False], ["i", 8, False], ["j", 8, False],
           ["k", 8, False], ["r1", 16, False], ["r2", 16, False], ["r3", 16, False]]
    return [{"name": "scalars_t", "id": 0, "fields": [["m8", 8, False]]},
            {"name": "standard_metadata", "id": 1, "fields": STD},
            {"name": "ctl_t", "id": 2, "fields": ctl},
            {"name": "h_t", "id": 3, "fields": [["a", 8, False], ["b", 16, False]]},
            {"name": "x_t", "id": 4, "fields": [["tag", 8, False], ["x", 16, False]]},
            {"name": "y_t", "id": 5, "fields": [["tag", 8, False], ["y", 32, False]]}]


def _headers() -> tuple[list[dict[str, Any]], list[str]]:
    names = [("scalars", "scalars_t", True), ("standard_metadata", "standard_metadata", True),
             ("ctl", "ctl_t", False)]
    names += [(f"{s}[{i}]", "h_t", False) for s in "st" for i in range(4)]
    names += [("res", "h_t", False)]
    for u in ("u", "v", "us[0]", "us[1]", "us[2]"):
        names += [(f"{u}.x", "x_t", False), (f"{u}.y", "y_t", False)]
    headers = [{"name": n, "id": i, "header_type": t, "metadata": m}
               for i, (n, t, m) in enumerate(names)]
    return headers, [n for n, _, m in names if not m]


def _state(name: str, ops: list[dict[str, Any]], nxt: str | None = "loop") -> dict[str, Any]:
    return {"name": name, "id": 0, "parser_ops": ops, "transition_key": [],
            "transitions": [{"type": "default", "value": None, "mask": None, "next_state": nxt}]}


def _parser() -> dict[str, Any]:
    def extract(kind: str, value: Any) -> dict[str, Any]:
        return {"op": "extract", "parameters": [{"type": kind, "value": value}]}

    targets = {1: extract("stack", "s"), 2: extract("stack", "t"), 3: extract("regular", "u.x"),
               4: extract("regular", "u.y"), 5: extract("union_stack", ["us", "x"]),
               6: extract("union_stack", ["us", "y"])}
    states = [_state("start", [extract("regular", "ctl")])]
    states.append({"name": "loop", "id": 0, "parser_ops": [],
                   "transition_key": [{"type": "lookahead", "value": [0, 8]}],
                   "transitions": [{"type": "hexstr", "value": hex(t), "mask": None,
                                    "next_state": f"tag{t}"} for t in TAGS]
                   + [{"type": "default", "value": None, "mask": None, "next_state": None}]})
    states += [_state(f"tag{t}", [op]) for t, op in targets.items()]
    states.append(_state("tag7", [
        {"op": "set", "parameters": [f("scalars", "m8"), field_of(deref("s", IDX_K), 0)]},
        {"op": "shift", "parameters": [hexstr(1)]}]))
    return {"name": "parser", "id": 0, "init_state": "start", "parse_states": states}


def _table(name: str, aid: int, nxt: str | None) -> dict[str, Any]:
    return {"name": name, "id": 0, "key": [], "match_type": "exact", "type": "simple",
            "max_size": 1, "with_counters": False, "support_timeout": False,
            "direct_meters": None, "action_ids": [aid], "actions": [f"a{aid}"],
            "base_default_next": nxt, "next_tables": {f"a{aid}": nxt},
            "default_entry": {"action_id": aid, "action_const": True, "action_data": [],
                              "action_entry_const": True}}


def _ingress() -> dict[str, Any]:
    forward = len(ACTIONS)
    tables = [_table("tbl_fwd", forward, "node0")]
    conds = []
    for n in range(len(ACTIONS)):
        nxt = f"node{n + 1}" if n + 1 < len(ACTIONS) else None
        byte = f("ctl", "op0" if n < 8 else "op1")
        conds.append({"name": f"node{n}", "id": n, "true_next": f"tbl{n}", "false_next": nxt,
                      "expression": expr("!=", expr("&", byte, hexstr(1 << (n % 8))),
                                         hexstr(0))["value"]})
        tables.append(_table(f"tbl{n}", n, nxt))
    return {"name": "ingress", "id": 0, "init_table": "tbl_fwd", "tables": tables,
            "action_profiles": [], "conditionals": conds}


def _egress() -> dict[str, Any]:
    mark = len(ACTIONS) + 1
    bit15 = expr("!=", expr("&", f("ctl", "op1"), hexstr(0x80)), hexstr(0))
    reads = expr("==", field_of(deref("s", IDX_K), 0), hexstr(0))
    return {"name": "egress", "id": 1, "init_table": "enode0", "action_profiles": [],
            "tables": [_table("tbl_mark", mark, None)],
            "conditionals": [
                {"name": "enode0", "id": 0, "expression": bit15["value"],
                 "true_next": "enode1", "false_next": None},
                {"name": "enode1", "id": 1, "expression": reads["value"],
                 "true_next": "tbl_mark", "false_next": None}]}


def program() -> dict[str, Any]:
    headers, emitted = _headers()
    ids = {h["name"]: h["id"] for h in headers}
    actions = [{"name": f"a{n}", "id": n, "runtime_data": [], "primitives": p}
               for n, p in enumerate(ACTIONS)]
    actions.append({"name": f"a{len(ACTIONS)}", "id": len(ACTIONS), "runtime_data": [],
                    "primitives": [prim("assign", f("standard_metadata", "egress_spec"),
                                        hexstr(2))]})
    actions.append({"name": f"a{len(ACTIONS) + 1}", "id": len(ACTIONS) + 1, "runtime_data": [],
                    "primitives": [prim("assign", f("ctl", "r3"), hexstr(0xE5))]})
    return {
        "program": "header_forms.p4", "header_types": _types(), "headers": headers,
        "header_stacks": [{"name": s, "id": n, "header_type": "h_t", "size": 4,
                           "header_ids": [ids[f"{s}[{i}]"] for i in range(4)]}
                          for n, s in enumerate("st")],
        "header_unions": [{"name": u, "id": n, "union_type": "xy_t",
                           "header_ids": [ids[f"{u}.x"], ids[f"{u}.y"]]}
                          for n, u in enumerate(("u", "v", "us[0]", "us[1]", "us[2]"))],
        "header_union_stacks": [{"name": "us", "id": 0, "union_type": "xy_t", "size": 3,
                                 "header_union_ids": [2, 3, 4]}],
        "field_lists": [], "learn_lists": [], "calculations": [], "checksums": [],
        "errors": [["NoError", 0], ["PacketTooShort", 1], ["NoMatch", 2],
                   ["StackOutOfBounds", 3]],
        "parsers": [_parser()],
        "deparsers": [{"name": "deparser", "id": 0, "order": emitted, "primitives": []}],
        "actions": actions, "pipelines": [_ingress(), _egress()],
    }
