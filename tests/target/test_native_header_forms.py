"""Every form of header, union and stack reference (tests/target/header_forms.py) on both of
the Python target's engines: the same random frames give the same bytes, and the packets
dropped on an out-of-bounds index are the same, logged with the same words."""

from __future__ import annotations

import logging
import random

import pytest
from header_forms import ACTIONS, TAGS, program

from pybmv2.native.build import compiler
from pybmv2.native.switch import NativeSwitch
from pybmv2.program import Program
from pybmv2.switch import V1Switch

FRAMES = 3000


def _item(rng: random.Random, tag: int) -> bytes:
    size = TAGS[tag][1]
    return bytes([tag]) + rng.randbytes(size - 1)


def _frames(rng: random.Random, n: int) -> list[bytes]:
    out = []
    for _ in range(n):
        ops = rng.getrandbits(16) & rng.getrandbits(16)  # a few actions per packet
        index = [rng.randrange(3) if rng.random() < 0.95 else rng.randrange(256) for _ in range(3)]
        ctl = ops.to_bytes(2, "little") + bytes(index) + rng.randbytes(6)
        items = b"".join(_item(rng, rng.choice(list(TAGS))) for _ in range(rng.randrange(9)))
        frame = ctl + items + b"\x00" + rng.randbytes(rng.randrange(4))
        if rng.random() < 0.1:
            frame = frame[: rng.randrange(len(frame) + 1)]
        out.append(frame)
    return out


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    caplog.clear()
    return lines


def test_every_action_of_the_program_runs() -> None:
    assert len(ACTIONS) == 16  # one per bit of ctl.op0 and ctl.op1


@pytest.mark.parametrize("seed", range(3))
def test_header_references_agree_on_both_engines(seed: int, target_name: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    if target_name != "python":
        pytest.skip("compares the Python target's two engines")
    if compiler() is None:
        pytest.skip("the native engine needs a C compiler")
    doc = program()
    python = V1Switch(Program.from_json(doc))
    native = NativeSwitch(Program.from_json(doc), engine="native")
    try:
        frames = [(1, fr) for fr in _frames(random.Random(seed), FRAMES)]
        with caplog.at_level(logging.ERROR):
            want = [out for port, frame in frames for out in python.process(port, frame)]
            want_errors = _errors(caplog)
            got = native.process_batch(frames)
            got_errors = _errors(caplog)
        assert got == want
        assert [e.split(": packet")[0] for e in got_errors] == \
            [e.split(": packet")[0] for e in want_errors]
        assert got_errors == want_errors
        assert len(want_errors) > 50 and len(want) > FRAMES // 3  # both paths exercised
    finally:
        native.close()
