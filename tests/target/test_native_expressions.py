"""Width semantics: random expressions (p4c's operators, masks, casts, signed fields,
action data, stored and read back) give the same bytes on the native and Python engines.

The corpus programs use few of the ways widths can go wrong; these random programs use
them all, on random field values and on the edge values (zeros, ones, top bits).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from random_programs import random_program

from pybmv2.layout import PhvLayout
from pybmv2.native.cexpr import ExprGen
from pybmv2.native.errors import NativeUnsupported
from pybmv2.native.switch import NativeSwitch
from pybmv2.program import Program
from pybmv2.switch import V1Switch

FRAMES = 300
ARGS = [(0, 8), (1, 64), (2, 128)]


def _acceptor(doc: dict[str, Any]) -> Any:
    layout = PhvLayout.from_json(doc)

    def accept(expr: dict[str, Any], width: int) -> bool:
        eg = ExprGen(layout, ARGS)
        try:
            eg.modular(expr, width) if width > 1 else eg.truth(expr)
        except NativeUnsupported:
            return False
        return True

    return accept


def _frames(rng: random.Random, size: int) -> list[bytes]:
    edges = [bytes(size), b"\xff" * size, b"\x80" * size, b"\x7f" * size, b"\x01" * size]
    return edges + [rng.randbytes(size) for _ in range(FRAMES - len(edges))]


@pytest.mark.parametrize("seed", range(6))
def test_random_expressions_give_the_same_bytes(seed: int, target_name: str) -> None:
    if target_name != "python":
        pytest.skip("compares the Python target's two engines")
    doc = random_program(seed, accept=_acceptor(random_program(seed)))
    python = V1Switch(Program.from_json(doc))
    native = NativeSwitch(Program.from_json(doc), engine="native")
    try:
        layout = python.program.layout  # type: ignore[union-attr]
        size = (layout.header("inp").nbits + layout.header("out").nbits) // 8
        rng = random.Random(seed)
        frames = [(1, f + rng.randbytes(rng.randrange(3))) for f in _frames(rng, size)]
        want = [out for port, frame in frames for out in python.process(port, frame)]
        assert len(want) == len(frames)
        got = native.process_batch(frames)
        for i, (w, g) in enumerate(zip(want, got, strict=True)):
            assert g == w, f"frame {i}: {frames[i][1].hex()}"
    finally:
        native.close()
