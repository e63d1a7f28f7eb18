"""Header, union and stack references in BMv2 JSON operands (pybmv2.expressions), on a small
layout: the forms p4c emits that the corpus programs do not all show."""

from __future__ import annotations

import pytest

from pybmv2.errors import PacketError
from pybmv2.expressions import compile_field_writer, compile_header_ref, compile_operand, unwrap
from pybmv2.header_ops import assign_header
from pybmv2.layout import PhvLayout
from pybmv2.state import PacketState

DOC = {
    "header_types": [{"name": "h_t", "fields": [["a", 8, False], ["b", 8, False]]}],
    "headers": [{"name": f"s[{i}]", "id": i, "header_type": "h_t", "metadata": False} for i in range(3)]
    + [{"name": "u.x", "id": 3, "header_type": "h_t", "metadata": False},
       {"name": "u.y", "id": 4, "header_type": "h_t", "metadata": False},
       {"name": "m", "id": 5, "header_type": "h_t", "metadata": True}],
    "header_stacks": [{"name": "s", "id": 0, "header_type": "h_t", "size": 3, "header_ids": [0, 1, 2]}],
    "header_unions": [{"name": "u", "id": 0, "union_type": "u_t", "header_ids": [3, 4]}],
}
LAYOUT = PhvLayout.from_json(DOC)
INDEX = {"type": "field", "value": ["m", "a"]}
DEREF = {"type": "expression", "value": {"op": "dereference_header_stack",
                                         "left": {"type": "header_stack", "value": "s"}, "right": INDEX}}


def state(index: int = 0, nxt: int = 2) -> PacketState:
    s = PacketState([10, 11, 20, 21, 30, 31, 40, 41, 50, 51, index, 0],
                    [True, True, False, True, False, True], 1, b"")
    s.stack_next[0] = nxt
    return s


def test_last_written_as_a_stack_field_named_last_is_the_last_element() -> None:
    ref = compile_header_ref(LAYOUT, {"type": "expression",
                                      "value": {"type": "stack_field", "value": ["s", "last"]}})
    assert ref(state(nxt=2)) == 1


def test_a_dereferenced_field_is_read_and_written_and_bounds_are_checked() -> None:
    field = {"type": "expression", "value": {"op": "access_field", "left": DEREF, "right": 1}}
    s = state(index=2)
    assert compile_operand(LAYOUT, field)(s) == 31
    compile_field_writer(LAYOUT, field)(s, 0x1FF)
    assert s.values[5] == 0xFF
    with pytest.raises(PacketError, match="index 3 out of bounds of header stack 's'"):
        compile_operand(LAYOUT, field)(state(index=3))


def test_copying_an_invalid_header_only_invalidates_and_a_union_member_evicts_its_sibling() -> None:
    s = state(index=2)
    assign_header(LAYOUT, {"type": "header", "value": "s[0]"}, DEREF)(s)  # s[2] is invalid
    assert s.valid[0] is False and s.values[0:2] == [10, 11]
    assign_header(LAYOUT, {"type": "header", "value": "u.x"}, {"type": "header", "value": "s[1]"})(s)
    assert s.valid[3] and not s.valid[4] and s.values[6:8] == [20, 21]


def test_unwrap_strips_every_expression_layer() -> None:
    inner = {"type": "header", "value": "m"}
    assert unwrap({"type": "expression", "value": {"type": "expression", "value": inner}}) == inner
