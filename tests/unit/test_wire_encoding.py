"""The fast wire encoder produces exactly protobuf's bytes for every match kind and action."""

from __future__ import annotations

import random

import pytest
from p4.v1 import p4runtime_pb2

from controller.p4build import PROGRAM_DIRS, pipeline_files
from controller.p4runtime.entities import Lpm, TableRule, encode_rule, update
from controller.p4runtime.schema import P4Schema
from controller.p4runtime.wire import encode_rule_updates, encode_write_request
from packettest.random_rules import random_rule


@pytest.mark.parametrize(("program", "folder"), [("rail_switch", 0), ("matching", 1)])
def test_wire_bytes_equal_protobuf_serialization(program: str, folder: int) -> None:
    schema = P4Schema.from_file(pipeline_files(program, PROGRAM_DIRS[folder]).p4info)
    rng = random.Random(7)
    tables = [t.name for t in schema.tables if t.match_fields and not t.is_const]
    for kind in ("insert", "modify", "delete"):
        rules = [random_rule(rng, schema, rng.choice(tables)) for _ in range(200)]
        fast = encode_rule_updates(schema, kind, rules)
        slow = [update(kind, encode_rule(schema, r)).SerializeToString(deterministic=True) for r in rules]
        assert fast == slow


def test_write_request_bytes_equal_protobuf() -> None:
    schema = P4Schema.from_file(pipeline_files("rail_switch").p4info)
    rule = TableRule("ipv4_lpm", {"hdr.ipv4.dst_addr": Lpm(0x0A000000, 8)}, "RailIngress.drop")
    ups = encode_rule_updates(schema, "insert", [rule])
    req = p4runtime_pb2.WriteRequest(device_id=3, role="r")
    req.election_id.high, req.election_id.low = 1, 5
    req.updates.add().CopyFrom(update("insert", encode_rule(schema, rule)))
    assert encode_write_request(3, (1 << 64) | 5, ups, "r") == req.SerializeToString(deterministic=True)


@pytest.mark.parametrize("params", [{"port": 1}, {"port": 1, "dmac": 2, "smac": 3, "vlan": 4}])
def test_an_action_with_missing_or_extra_parameters_is_named(params: dict) -> None:
    from controller.p4runtime.values import BadValue

    schema = P4Schema.from_file(pipeline_files("rail_switch").p4info)
    rule = TableRule("RailIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": Lpm(1, 32)}, "RailIngress.set_nexthop", params)
    with pytest.raises(BadValue, match=r"action RailIngress.set_nexthop: parameters .* expected \['port', 'dmac', 'smac'\]"):
        encode_rule_updates(schema, "insert", [rule])
