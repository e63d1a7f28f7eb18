"""The controller's wire decoder of ReadResponses gives what protobuf parsing and
``decode_rule`` give, for every match kind, action parameters, priorities, default entries
and entities that are not table entries."""

from __future__ import annotations

import random

import pytest
from p4.v1 import p4runtime_pb2

from controller.p4build import PROGRAM_DIRS, pipeline_files
from controller.p4runtime.entities import TableRule, decode_rule, encode_rule
from controller.p4runtime.read_wire import WireError, decode_table_rules, wire_fields
from controller.p4runtime.schema import P4Schema
from packettest.random_rules import random_rule


def _responses(schema: P4Schema, rules: list[TableRule], per_response: int) -> list[bytes]:
    out = []
    for start in range(0, len(rules), per_response):
        resp = p4runtime_pb2.ReadResponse()
        for rule in rules[start:start + per_response]:
            resp.entities.add().table_entry.CopyFrom(encode_rule(schema, rule))
        resp.entities.add().counter_entry.counter_id = 7  # not a table entry: skipped
        out.append(resp.SerializeToString())
    return out


@pytest.mark.parametrize(("program", "folder"), [("rail_switch", 0), ("tor_switch", 0), ("matching", 1)])
def test_wire_decoding_equals_protobuf_then_decode_rule(program: str, folder: int) -> None:
    schema = P4Schema.from_file(pipeline_files(program, PROGRAM_DIRS[folder]).p4info)
    rng = random.Random(11)
    tables = [t.name for t in schema.tables if t.match_fields and not t.is_const]
    rules = [random_rule(rng, schema, rng.choice(tables)) for _ in range(300)]
    responses = _responses(schema, rules, per_response=64)
    slow = [decode_rule(schema, e.table_entry)
            for r in responses for e in p4runtime_pb2.ReadResponse.FromString(r).entities
            if e.WhichOneof("entity") == "table_entry"]
    assert decode_table_rules(schema, responses) == slow
    assert len(slow) == len(rules)


def test_a_default_entry_and_an_indirect_action_decode_as_decode_rule_does() -> None:
    schema = P4Schema.from_file(pipeline_files("rail_switch").p4info)
    table = schema.table("ipv4_lpm")
    default = p4runtime_pb2.TableEntry(table_id=table.id, is_default_action=True)
    default.action.action.action_id = schema.action(table.action_ids[0]).id
    member = p4runtime_pb2.TableEntry(table_id=table.id)
    member.action.action_profile_member_id = 3
    resp = p4runtime_pb2.ReadResponse()
    for e in (default, member):
        resp.entities.add().table_entry.CopyFrom(e)
    assert decode_table_rules(schema, [resp.SerializeToString()]) == [decode_rule(schema, default),
                                                                      decode_rule(schema, member)]


def test_bad_bytes_are_a_wire_error() -> None:
    with pytest.raises(WireError, match="truncated"):
        list(wire_fields(b"\x0a\x05ab"))
    with pytest.raises(WireError, match="wire type 7"):
        list(wire_fields(b"\x0f"))
