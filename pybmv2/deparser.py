"""Checksum verification and update, and the deparser that turns the PHV back into bytes."""

from __future__ import annotations

from typing import Any

from pybmv2.calculations import Calculation
from pybmv2.errors import UnsupportedJsonError
from pybmv2.expressions import Eval, compile_expression, field_writer
from pybmv2.layout import PhvLayout
from pybmv2.state import PacketState
from pybmv2.varbit import VarbitPlan

__all__ = ["Checksum", "CompiledDeparser"]


class Checksum:
    """An entry of the JSON ``checksums`` list: verify and/or update one field."""

    def __init__(self, layout: PhvLayout, spec: dict[str, Any], calcs: dict[str, Calculation]):
        self.name: str = spec["name"]
        if spec.get("type", "generic") not in ("generic", "ipv4"):
            raise UnsupportedJsonError(f"checksum {self.name!r}: type {spec.get('type')!r}")
        self.calc = calcs[spec["calculation"]]
        hname, fname = spec["target"]
        slot = layout.field(hname, fname)
        self._target = slot.index
        self._target_hid = layout.header(hname).id
        self._write = field_writer(slot)
        self.verify_enabled: bool = bool(spec.get("verify", True))
        self.update_enabled: bool = bool(spec.get("update", True))
        cond = spec.get("if_cond")
        self._cond: Eval | None = compile_expression(layout, cond) if cond else None

    def _applies(self, s: PacketState) -> bool:
        return self._cond is None or bool(self._cond(s))

    def verify(self, s: PacketState) -> bool:
        """True when the field holds the right checksum (or the checksum does not apply)."""
        if not self._applies(s):
            return True
        return s.values[self._target] == self.calc.output(s, s.payload)

    def update(self, s: PacketState, payload: bytes) -> None:
        if self._applies(s):
            self._write(s, self.calc.output(s, payload))


def _pack_fixed(values: list[int], fields: tuple[tuple[int, int, int], ...], nbytes: int) -> bytes:
    """The bytes of a fixed-size header (``emit`` inlines this loop for speed)."""
    x = 0
    for idx, shift, mask in fields:
        x |= (values[idx] & mask) << shift
    return x.to_bytes(nbytes, "big")


class CompiledDeparser:
    """Emits the valid headers in the deparser's order, then the payload.

    Programs without varbit headers use a flat plan of (header id, fields, size); with
    varbit headers, those headers' entries carry a :class:`VarbitPlan` instead of fields.
    """

    def __init__(self, layout: PhvLayout, spec: dict[str, Any]) -> None:
        self.name: str = spec["name"]
        if spec.get("primitives"):
            raise UnsupportedJsonError(f"deparser {self.name!r}: primitives are not supported")
        plan = []
        varbits: list[tuple[int, VarbitPlan | None]] = []
        for hname in spec.get("order", []):
            hl = layout.header(hname)
            fields = tuple((s.index, s.shift, s.mask) for s in hl.fields)
            plan.append((hl.id, fields, hl.nbytes))
            varbits.append((hl.id, VarbitPlan(hl) if hl.length_index is not None else None))
        self._plan = tuple(plan)
        self._varbit_plan = tuple(varbits) if any(vp for _, vp in varbits) else None

    def _emit_varbit(self, s: PacketState, payload: bytes) -> bytes:
        out = bytearray()
        values, valid = s.values, s.valid
        for (hid, fields, nbytes), (_, vp) in zip(self._plan, self._varbit_plan or (), strict=True):
            if not valid[hid]:
                continue
            out += vp.to_bytes(values) if vp is not None else _pack_fixed(values, fields, nbytes)
        out += payload
        return bytes(out)

    def emit(self, s: PacketState, payload: bytes) -> bytes:
        if self._varbit_plan is not None:
            return self._emit_varbit(s, payload)
        out = bytearray()
        values, valid = s.values, s.valid
        for hid, fields, nbytes in self._plan:
            if not valid[hid]:
                continue
            x = 0
            for idx, shift, mask in fields:
                x |= (values[idx] & mask) << shift
            out += x.to_bytes(nbytes, "big")
        out += payload
        return bytes(out)
