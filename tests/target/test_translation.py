"""``@p4runtime_translation`` as simple_switch_grpc 1.15.5 has it (``tests/p4programs/translation.p4``):
PI translates no type. A table whose key is of a translated type takes no entry (BMv2 gets the
32-bit P4Runtime value for its 9-bit field and refuses it: UNKNOWN, "Error when adding match
entry to target"); an action parameter of a translated type is taken at the P4Info's width
and cut to the data plane's 9 bits. The golden is recorded from BMv2 (``--record-golden``)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from conformance_cases import probe
from google.protobuf import json_format
from p4.v1 import p4runtime_pb2

from controller.p4build import PROGRAM_DIRS, pipeline_files
from controller.p4runtime.client import P4ClientError
from packettest import open_target

GOLDEN = Path(__file__).parent / "golden" / "translation.json"
BMV2_REFUSAL = "UNKNOWN: Error when adding match entry to target"


def _insert(sw, table: str, key: bytes, param: bytes) -> str:
    e = p4runtime_pb2.TableEntry(table_id=sw.schema.table(table).id)
    e.match.add(field_id=1).exact.value = key
    e.action.action.action_id = sw.schema.action("I.to").id
    e.action.action.params.add(param_id=1, value=param)
    u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
    u.entity.table_entry.CopyFrom(e)
    try:
        sw.client.write([u])
        return "ok"
    except P4ClientError as exc:
        # what PI says, without the detail the Python target adds (docs/p4runtime.md: "Some error
        # messages say more than PI's")
        return BMV2_REFUSAL if BMV2_REFUSAL in str(exc) else str(exc).split("first: ")[-1].split(" (")[0]


def _r2(frames: list[tuple[int, bytes]]) -> list[int]:
    return [struct.unpack("!I", f[33:37])[0] for _, f in frames]


def test_translated_types_as_on_bmv2(target_name: str, switch_engine: str | None,
                                     pytestconfig: pytest.Config) -> None:
    record = bool(pytestconfig.getoption("--record-golden"))
    if record and target_name != "bmv2":
        pytest.fail("--record-golden records what BMv2 does: use it with --target bmv2")
    with open_target(target_name, pipeline_files("translation", PROGRAM_DIRS[1]),
                     engine=switch_engine or "python") as sw:
        keyed = {f"{k.hex()} -> {v.hex()}": _insert(sw, "I.by_port", k, v)
                 for k, v in [(b"\x05", b"\x07"), (b"\x00\x00\x00\x06", b"\x00\x00\x01\x08"),
                              (b"\x02\x58", b"\x02\x59"), (b"\x0a", b"\x01\x00\x00\x00\x00")]}
        params = {v.hex(): _insert(sw, "I.by_tag", bytes([i]), v)
                  for i, v in enumerate([b"\x02\x59", b"\x00\x00\x02\x59", b"\xff\xff\xff\xff", b"\x01\x08"], start=1)}
        outputs = {i: _r2(sw.send(1, probe(a8=i))) for i in range(1, 5)}
        ent = p4runtime_pb2.Entity()
        ent.table_entry.table_id = sw.schema.table("I.by_tag").id
        read = [json_format.MessageToDict(e, preserving_proto_field_name=True) for e in sw.client.read([ent])]
    got = {"translated key": keyed, "translated parameter": params, "r2 per a8": outputs, "read": read}
    got = json.loads(json.dumps(got))  # int keys as JSON has them
    if record:
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        return
    assert got == json.loads(GOLDEN.read_text())
