"""Direct meters in the data plane: a hit writes the entry's colour to the meter's result
field before the action runs; a miss meters nothing; an unconfigured meter is green.

End-to-end colours are compared with BMv2 by the ``direct_meter`` conformance program;
these tests drive the tables directly, without P4Runtime.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from pybmv2.errors import JsonFormatError
from pybmv2.externs import GREEN, RED, YELLOW, MeterRates, meter_cell
from pybmv2.program import Program
from pybmv2.switch import V1Switch
from pybmv2.tables import ActionCall, TableEntry

BUILD = Path(__file__).resolve().parents[1] / "p4programs" / "build" / "direct_meter.json"


def _frame(src: int) -> bytes:
    probe = struct.pack("!BBBHHII16x", 1, 0, 0, 0, 0, 0, 0)
    return b"\x00" * 5 + b"\x02" + src.to_bytes(6, "big") + b"\x88\xb5" + probe


def _colour(sw: V1Switch, src: int) -> int:
    [(_, out)] = sw.process(1, _frame(src))
    return int(struct.unpack("!I", out[33:37])[0])


@pytest.fixture
def switch() -> V1Switch:
    program = Program.from_file(str(BUILD))
    table = program.table("I.policed")
    mark = program.action_by_name("I.mark").id
    for src in (9, 10, 12):
        table.insert(TableEntry((src,), ActionCall(mark, (3,))))
    table.find((10,)).meter = meter_cell(MeterRates(0, 1, 0, 1))
    table.find((12,)).meter = meter_cell(MeterRates(0, 0, 0, 1))
    return V1Switch(program)


def test_unconfigured_meter_is_green_and_a_miss_is_not_metered(switch: V1Switch) -> None:
    assert [_colour(switch, 9) for _ in range(3)] == [GREEN] * 3
    assert _colour(switch, 11) == 3  # the value set before the table, untouched


def test_configured_meters_use_their_buckets(switch: V1Switch) -> None:
    assert [_colour(switch, 10) for _ in range(3)] == [GREEN, RED, RED]
    assert [_colour(switch, 12) for _ in range(2)] == [YELLOW, RED]
    assert _colour(switch, 9) == GREEN  # each entry has its own meter


def test_a_meter_bound_to_another_table_is_rejected() -> None:
    doc = json.loads(BUILD.read_text())
    doc["meter_arrays"][0]["binding"] = "I.elsewhere"
    with pytest.raises(JsonFormatError, match="direct meter"):
        Program.from_json(doc)
