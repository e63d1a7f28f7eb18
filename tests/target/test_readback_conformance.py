"""P4Runtime read-back conformance: after the same writes, wildcard reads return what
simple_switch_grpc returns (goldens recorded from BMv2 with --record-golden)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conformance_cases import MATCHING, REPLICATION, SELECTORS
from google.protobuf import json_format
from p4.v1 import p4runtime_pb2
from test_conformance import install

from controller.p4build import PROGRAM_DIRS, pipeline_files
from packettest import open_target

GOLDEN = Path(__file__).parent / "golden"


def _wildcards() -> list[p4runtime_pb2.Entity]:
    table = p4runtime_pb2.Entity()
    table.table_entry.table_id = 0
    groups = p4runtime_pb2.Entity()
    groups.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 0
    members = p4runtime_pb2.Entity()
    members.action_profile_member.action_profile_id = 0
    profile_groups = p4runtime_pb2.Entity()
    profile_groups.action_profile_group.action_profile_id = 0
    return [table, groups, members, profile_groups]


def _read_all(sw) -> list[dict]:
    out = []
    for entity in _wildcards():
        for e in sw.client.read([entity]):
            out.append(json_format.MessageToDict(e, preserving_proto_field_name=True))
    return out


@pytest.mark.parametrize("program", [MATCHING, REPLICATION, SELECTORS], ids=lambda p: p.name)
def test_wildcard_reads_match_bmv2(program, target_name: str, pytestconfig: pytest.Config) -> None:
    record = bool(pytestconfig.getoption("--record-golden"))
    if record and target_name != "bmv2":
        pytest.fail("--record-golden records what BMv2 does: use it with --target bmv2")
    path = GOLDEN / f"{program.name}.readback.json"
    with open_target(target_name, pipeline_files(program.name, PROGRAM_DIRS[1])) as sw:
        install(sw, program)
        got = _read_all(sw)
    if record:
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        return
    expected = json.loads(path.read_text())
    assert got == expected


def test_default_entries_read_back_as_on_bmv2(target_name: str, pytestconfig: pytest.Config) -> None:
    """Every table's default entry, a const default action's included: PI sets no is_const
    on any of them (simple_switch_grpc 1.15.5), only is_default_action and the action."""
    record = bool(pytestconfig.getoption("--record-golden"))
    if record and target_name != "bmv2":
        pytest.fail("--record-golden records what BMv2 does: use it with --target bmv2")
    path = GOLDEN / "matching.defaults.json"
    with open_target(target_name, pipeline_files(MATCHING.name, PROGRAM_DIRS[1])) as sw:
        got = [json_format.MessageToDict(e, preserving_proto_field_name=True)
               for e in sw.client.read_default_entries(sorted(t.id for t in sw.schema.tables))]
    if record:
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        return
    assert got == json.loads(path.read_text())
    assert not any(e.get("is_const") for e in got)


def test_an_indirect_tables_default_entry_reads_back_without_an_action(target_name: str) -> None:
    """PI reads the default entry of a table with an action selector back with no action
    (simple_switch_grpc 1.15.5), whatever the program's default_action."""
    with open_target(target_name, pipeline_files(SELECTORS.name, PROGRAM_DIRS[1])) as sw:
        (got,) = sw.client.read_default_entries([sw.schema.table("I.ecmp").id])
    assert got.is_default_action and not got.HasField("action")
