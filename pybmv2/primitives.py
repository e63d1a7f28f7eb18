"""Compile BMv2 action primitives (simple_switch's set) into closures.

A compiled primitive is ``op(state) -> int | None``: it returns the index of the next
primitive only for the ``_jump`` family, and None to fall through.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pybmv2.calculations import Calculation
from pybmv2.errors import JsonFormatError, UnsupportedJsonError
from pybmv2.expressions import (
    Eval,
    compile_field_writer,
    compile_operand,
    compile_stack_ref,
)
from pybmv2.externs import CounterArray, MeterArray, RegisterArray
from pybmv2.header_ops import (
    add_header,
    assign_header,
    assign_header_stack,
    assign_union,
    remove_header,
    stack_shift,
)
from pybmv2.layout import PhvLayout
from pybmv2.state import PacketState

__all__ = ["Action", "Externs", "Primitive", "assign_varbit", "compile_action", "compile_primitive"]

log = logging.getLogger(__name__)

Primitive = Callable[[PacketState], int | None]

#: RegisterAccess::MIRROR_SESSION_ID_VALID_MASK
MIRROR_VALID = 1 << 15


@dataclass(slots=True)
class Externs:
    """The named objects that primitives refer to."""

    layout: PhvLayout
    drop_port: int
    calculations: dict[str, Calculation] = field(default_factory=dict)
    counters: dict[str, CounterArray] = field(default_factory=dict)
    registers: dict[str, RegisterArray] = field(default_factory=dict)
    meters: dict[str, MeterArray] = field(default_factory=dict)


@dataclass(slots=True)
class Action:
    id: int
    name: str
    params: tuple[tuple[str, int], ...]  # (name, bitwidth) per runtime_data
    run: Callable[[PacketState], None]


def _writer_for(ext: Externs, operand: dict[str, Any]) -> Callable[[PacketState, int], None]:
    return compile_field_writer(ext.layout, operand)


def _std_slot(ext: Externs, name: str, header: str = "standard_metadata") -> int | None:
    if ext.layout.has_field(header, name):
        return ext.layout.field(header, name).index
    return None


def compile_primitive(ext: Externs, prim: dict[str, Any]) -> Primitive:
    op = prim.get("op")
    params: list[dict[str, Any]] = prim.get("parameters", [])
    layout = ext.layout

    def operand(i: int) -> Eval:
        try:
            return compile_operand(layout, params[i])
        except IndexError:
            raise JsonFormatError(f"primitive {op!r}: missing parameter {i}") from None

    if op == "assign":
        write = _writer_for(ext, params[0])
        src = operand(1)

        def assign(s: PacketState) -> None:
            write(s, src(s))

        return assign
    if op == "assign_header":
        return assign_header(layout, params[0], params[1])
    if op == "assign_union":
        return assign_union(layout, params[0], params[1])
    if op in ("assign_header_stack", "assign_union_stack"):
        return assign_header_stack(layout, params[0], params[1])
    if op == "assign_VL":
        return assign_varbit(layout, params[0], params[1])
    if op in ("add_header", "add_header_fast"):
        return add_header(layout, params[0], count_length=op == "add_header")
    if op == "remove_header":
        return remove_header(layout, params[0])
    if op in ("push", "pop"):
        return stack_shift(layout, compile_stack_ref(layout, params[0]), operand(1), push=op == "push")
    if op in ("mark_to_drop", "drop"):
        # mark_to_drop(std) writes the header it is given: p4c passes a copy of
        # standard_metadata when an action takes it as a parameter, and copies it back
        std = params[0]["value"] if params and params[0].get("type") == "header" else "standard_metadata"
        egress_spec = _std_slot(ext, "egress_spec", std)
        mcast = _std_slot(ext, "mcast_grp", std)
        if egress_spec is None:
            raise JsonFormatError(f"mark_to_drop: header {std!r} has no egress_spec")
        drop_port = ext.drop_port

        def mark_to_drop(s: PacketState) -> None:
            s.values[egress_spec] = drop_port
            if mcast is not None:
                s.values[mcast] = 0

        return mark_to_drop
    if op == "exit":

        def exit_(s: PacketState) -> None:
            s.exit = True

        return exit_
    if op == "no_op":
        return lambda s: None
    if op == "count":
        counter = ext.counters[params[0]["value"]]
        index = operand(1)
        return lambda s: counter.count(index(s), len(s.data))
    if op == "execute_meter":
        meter = ext.meters[params[0]["value"]]
        index = operand(1)
        write = _writer_for(ext, params[2])
        return lambda s: write(s, meter.execute(index(s), len(s.data)))
    if op == "register_read":
        write = _writer_for(ext, params[0])
        reg = ext.registers[params[1]["value"]]
        index = operand(2)
        return lambda s: write(s, reg.read(index(s)))
    if op == "register_write":
        reg = ext.registers[params[0]["value"]]
        index, src = operand(1), operand(2)
        return lambda s: reg.write(index(s), src(s))
    if op == "modify_field_with_hash_based_offset":
        write = _writer_for(ext, params[0])
        base = operand(1)
        calc = ext.calculations[params[2]["value"]]
        size = operand(3)

        def hash_offset(s: PacketState) -> None:
            sz = size(s) or 1
            write(s, calc.output(s, s.payload) % sz + base(s))

        return hash_offset
    if op == "modify_field_rng_uniform":
        write = _writer_for(ext, params[0])
        lo, hi = operand(1), operand(2)
        return lambda s: write(s, random.randint(lo(s), hi(s)))
    if op in ("clone_ingress_pkt_to_egress", "clone_egress_pkt_to_egress"):
        session, field_list = operand(0), operand(1)

        def clone(s: PacketState) -> None:
            s.clone_session = (session(s) & 0xFFFF) | MIRROR_VALID
            s.clone_field_list = field_list(s) & 0xFFFF

        return clone
    if op in ("resubmit", "recirculate"):
        field_list = operand(0)
        if op == "resubmit":

            def resubmit(s: PacketState) -> None:
                s.resubmit = field_list(s) & 0xFFFF

            return resubmit

        def recirculate(s: PacketState) -> None:
            s.recirculate = field_list(s) & 0xFFFF

        return recirculate
    if op == "generate_digest":
        learn_id = operand(1)

        def digest(s: PacketState) -> None:
            s.learn_id = learn_id(s) & 0xFFFF

        return digest
    if op == "truncate":
        length = operand(0)

        def truncate(s: PacketState) -> None:
            s.truncate_len = length(s)

        return truncate
    if op == "log_msg":
        fmt = params[0].get("value", "")

        def log_msg(s: PacketState) -> None:
            log.debug("log_msg: %s", fmt)

        return log_msg
    if op in ("assert", "assume"):
        cond = operand(0)

        def check(s: PacketState) -> None:
            if not cond(s):
                log.error("%s failed in action", op)

        return check
    if op == "_jump":
        target = int(operand(0)(None))  # type: ignore[arg-type]
        return lambda s: target
    if op == "_jump_if_zero":
        test = operand(0)
        target = int(operand(1)(None))  # type: ignore[arg-type]
        return lambda s: target if test(s) == 0 else None
    raise UnsupportedJsonError(f"action primitive {op!r} is not supported")


def _varbit_ref(layout: PhvLayout, operand: dict[str, Any]) -> tuple[int, int]:
    """(value slot, length slot) of a varbit field operand."""
    if operand.get("type") != "field":
        raise UnsupportedJsonError(f"assign_VL of operand {operand}")
    hname, fname = operand["value"]
    slot = layout.field(hname, fname)
    length_index = layout.header(slot.header).length_index
    if not slot.varbit or length_index is None:
        raise JsonFormatError(f"assign_VL: {hname}.{fname} is not a varbit field")
    return slot.index, length_index


def assign_varbit(layout: PhvLayout, dst: dict[str, Any], src: dict[str, Any]) -> Primitive:
    """BMv2's assign_VL: copy a varbit's value and current length (validity unchanged)."""
    d, d_len = _varbit_ref(layout, dst)
    r, r_len = _varbit_ref(layout, src)

    def assign_vl(s: PacketState) -> None:
        s.values[d] = s.values[r]
        s.values[d_len] = s.values[r_len]

    return assign_vl


def compile_action(ext: Externs, spec: dict[str, Any]) -> Action:
    name = spec["name"]
    params = tuple((p["name"], int(p["bitwidth"])) for p in spec.get("runtime_data", []))
    try:
        ops = [compile_primitive(ext, p) for p in spec.get("primitives", [])]
    except (KeyError, IndexError, TypeError) as exc:
        raise JsonFormatError(f"action {name!r}: malformed primitive ({exc!r})") from exc
    except UnsupportedJsonError as exc:
        raise UnsupportedJsonError(f"action {name!r}: {exc}") from exc
    has_jumps = any(p.get("op", "").startswith("_jump") for p in spec.get("primitives", []))
    if has_jumps:
        n = len(ops)

        def run_with_jumps(s: PacketState) -> None:
            i = 0
            while i < n:
                j = ops[i](s)
                i = i + 1 if j is None else j

        run = run_with_jumps
    elif len(ops) == 1:
        only = ops[0]

        def run_one(s: PacketState) -> None:
            only(s)

        run = run_one
    else:
        frozen = tuple(ops)

        def run_all(s: PacketState) -> None:
            for op in frozen:
                op(s)

        run = run_all
    return Action(int(spec["id"]), name, params, run)
