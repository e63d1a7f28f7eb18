"""Reading p4c's STF packet tests into P4Runtime updates (packettest.stf)."""

from __future__ import annotations

import pytest

from controller.p4build import PROGRAM_DIRS, pipeline_files
from controller.p4runtime.entities import Exact, Lpm, Ternary, decode_rule
from controller.p4runtime.schema import P4Schema
from packettest.stf import StfError, StfMulticast, StfPacket, parse_stf, stf_writes

STF = """
# comments and blank lines are ignored
add t_ternary 5 hdr.probe.a16:0x08** hdr.probe.b8:7 I.tag2(value:0x10)
add t_lpm probe.a32:0x0a01**** tag(value:3)
add t_exact hdr.eth.dst:0x000000000002 a8:4 set_port(port:2)
add t_range b16:9 tag3(value:1)
setdefault t_exact drop()
mc_mgrp_create 1
mc_node_create 7 1 2
mc_node_create 8 3
mc_node_associate 1 0
mc_node_associate 1 1
packet 1 0000 0000 0002 0000 0000 0001 88b5
expect 2 000000000002 **** $
"""


@pytest.fixture(scope="module")
def schema() -> P4Schema:
    return P4Schema.from_file(pipeline_files("matching", PROGRAM_DIRS[1]).p4info)


def test_entries_use_p4info_names_suffixes_wildcards_and_priorities(schema: P4Schema) -> None:
    test = parse_stf(STF)
    groups: dict = {}
    rules = [decode_rule(schema, u.entity.table_entry) for step in test.steps[:5]
             for u in stf_writes(schema, step, groups)]
    ternary, lpm, exact, ranged, default = rules
    assert ternary.table == "I.t_ternary" and ternary.priority == 6
    assert ternary.match == {"hdr.probe.a16": Ternary(0x0800, 0xFF00), "hdr.probe.b8": Exact(7)}
    assert ternary.action == "I.tag2" and ternary.params == {"value": 0x10}
    assert lpm.match == {"hdr.probe.a32": Lpm(0x0A010000, 16)}
    assert exact.match == {"hdr.eth.dst": Exact(2), "hdr.probe.a8": Exact(4)}
    assert ranged.match["hdr.probe.b16"].low == 9 and "hdr.probe.b32" not in ranged.match
    assert default.is_default and default.action == "I.drop"


def test_multicast_nodes_become_groups_and_packets_keep_their_order() -> None:
    test = parse_stf(STF)
    groups = [s for s in test.steps if isinstance(s, StfMulticast)]
    assert groups[-1] == StfMulticast(1, ((1, 7), (2, 7), (3, 8)))
    (packet,) = [s for s in test.steps if isinstance(s, StfPacket)]
    assert packet == StfPacket(1, bytes.fromhex("00000000000200000000000188b5"))
    (expect,) = test.expects
    assert (expect.port, expect.pattern, expect.exact_length) == (2, "000000000002****", True)
    assert test.ports == [1, 2, 3]


@pytest.mark.parametrize(("line", "message"), [
    ("register_read r 0", "'register_read' has no P4Runtime equivalent"),
    ("frobnicate 1", "unknown STF command 'frobnicate'"),
    ("add t k:1 act", "key 'act' is not NAME:VALUE"),
    ("add t k:1 act(x)", "action argument 'x' is not NAME:VALUE"),
])
def test_what_p4runtime_cannot_express_is_named(line: str, message: str) -> None:
    with pytest.raises(StfError, match=message):
        parse_stf(line)


def test_unknown_names_are_named(schema: P4Schema) -> None:
    (step,) = parse_stf("add no_such_table k:1 nop()").steps
    with pytest.raises(StfError, match="table 'no_such_table': no match"):
        stf_writes(schema, step, {})
    (step,) = parse_stf("add t_lpm a32:1 tag(value:1)").steps
    (u,) = stf_writes(schema, step, {})  # a decimal lpm value is a full-length prefix
    assert decode_rule(schema, u.entity.table_entry).match == {"hdr.probe.a32": Lpm(1, 32)}
