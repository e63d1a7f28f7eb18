"""Varbit header fields: layout, packing, extract_VL errors, assignment and checksums.

End-to-end behaviour is compared with BMv2 by the ``varbit`` conformance program; these
tests pin the pieces that conformance cannot see (slots, lengths, sizes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pybmv2.calculations import Calculation
from pybmv2.errors import JsonFormatError
from pybmv2.layout import PhvLayout
from pybmv2.program import Program
from pybmv2.state import PacketState
from pybmv2.switch import V1Switch
from pybmv2.varbit import VarbitPlan

BUILD = Path(__file__).resolve().parents[1] / "p4programs" / "build" / "varbit.json"

DOC = {
    "header_types": [
        {"name": "t", "id": 0, "fields": [["a", 8, False], ["v", "*"], ["b", 16, False]], "max_length": 7},
    ],
    "headers": [{"name": "h", "id": 0, "header_type": "t", "metadata": False}],
}


@pytest.fixture(scope="module")
def program() -> Program:
    return Program.from_file(str(BUILD))


def test_varbit_header_gets_a_length_slot_after_its_fields() -> None:
    layout = PhvLayout.from_json(DOC)
    hl = layout.header("h")
    assert [s.name for s in hl.fields] == ["a", "v", "b"]
    assert hl.nbits == 24 and hl.nslots == 4 and hl.length_index == 3
    assert layout.num_fields == 4
    v = layout.field("h", "v")
    assert v.varbit and v.width == 32 and v.shift == 16
    values = [0, 0, 0, 16]
    assert hl.current_nbytes(values) == 5


def test_two_varbits_in_one_header_are_rejected() -> None:
    doc = {
        "header_types": [{"name": "t", "id": 0, "fields": [["v", "*"], ["w", "*"]], "max_length": 4}],
        "headers": [{"name": "h", "id": 0, "header_type": "t"}],
    }
    with pytest.raises(JsonFormatError):
        PhvLayout.from_json(doc)


@pytest.mark.parametrize("vl_bits", [0, 8, 32])
def test_pack_unpack_round_trip(vl_bits: int) -> None:
    plan = VarbitPlan(PhvLayout.from_json(DOC).header("h"))
    body = bytes(range(1, 4 + vl_bits // 8))
    x = int.from_bytes(body, "big")
    vals = plan.unpack(x, vl_bits)
    assert vals[0] == 1 and vals[2] == int.from_bytes(body[-2:], "big")
    assert plan.to_bytes([*vals, vl_bits]) == body


def _parse(program: Program, frame: bytes) -> PacketState:
    s = PacketState(program.layout.initial_values(), program.layout.initial_validity(),
                    len(program.layout.stacks), frame)
    program.parser.parse(s)
    return s


def _vl(nbits: int, body: bytes) -> bytes:
    return b"\x00" * 12 + b"\x88\xb6" + bytes((nbits, 0, 0x11)) + body + b"\x99"


@pytest.mark.parametrize(
    ("nbits", "body", "error"),
    [
        (16, b"\xab\xcd", "NoError"),
        (12, b"\xab\xcd", "ParserInvalidArgument"),
        (64, b"\x01", "PacketTooShort"),
        (72, bytes(9), "HeaderTooShort"),
    ],
)
def test_extract_vl_errors_follow_bmv2(program: Program, nbits: int, body: bytes, error: str) -> None:
    s = _parse(program, _vl(nbits, body))
    assert s.error == program.errors.get(error, 0)
    hl = program.layout.header("vl")
    assert s.valid[hl.id] == (error == "NoError")
    if error == "NoError":
        assert hl.length_index is not None and s.values[hl.length_index] == nbits
        assert s.values[program.layout.field("vl", "data").index] == 0xABCD
        assert s.values[program.layout.field("vl", "trailer").index] == 0x99


def test_checksum_covers_the_varbit_at_its_current_length(program: Program) -> None:
    options = b"\x94\x04\x00\x00"
    header = bytes.fromhex("46000018000100004011") + b"\x00\x00" + bytes((10, 0, 0, 1, 10, 0, 0, 2))
    s = _parse(program, b"\x00" * 12 + b"\x08\x00" + header + options)
    calc = Calculation(program.layout, {"name": "c", "algo": "identity", "input": [
        {"type": "field", "value": ["ipv4", "protocol"]},
        {"type": "field", "value": ["ipv4_options", "options"]},
    ]})
    assert calc.input_bytes(s) == b"\x11" + options


def test_stripping_options_shrinks_the_packet(program: Program) -> None:
    sw = V1Switch(program, cpu_port=510)
    ipv4 = bytes.fromhex("4701001c000100004011") + b"\x00\x00" + bytes((10, 0, 0, 1, 10, 0, 0, 2))
    frame = b"\x00" * 12 + b"\x08\x00" + ipv4 + bytes(range(8))
    ((port, out),) = sw.process(1, frame)
    assert port == 1
    # Ethernet + report + IPv4 without options, no payload
    assert len(out) == 14 + 4 + 20
    assert out[18] == 0x45
