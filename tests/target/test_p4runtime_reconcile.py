"""SetForwardingPipelineConfig with RECONCILE_AND_COMMIT, as PI does it on the selected target
(``--target bmv2`` checks the expectations against simple_switch_grpc).

PI reads members, groups, table entries, meter and counter entries, loads the new pipeline
and writes all of it back as INSERTs: what the new pipeline accepts is kept, and if anything
was refused (a const entry, a counter, a member read twice for its weight, a table the new
program lacks) the request fails with UNKNOWN "Error when reconciling config". Default
entries, direct counters and the like start afresh.
"""

from __future__ import annotations

import grpc
from conformance_cases import probe
from p4.v1 import p4runtime_pb2

from controller.p4build import PROGRAM_DIRS, Artifact, pipeline_files
from controller.p4runtime.entities import (
    TableRule,
    action_profile_group,
    action_profile_member,
    encode_rule,
    parse_match,
    update,
)
from controller.p4runtime.schema import load_p4info
from packettest import PacketTarget, open_target

SetAction = p4runtime_pb2.SetForwardingPipelineConfigRequest
FAILED = (grpc.StatusCode.UNKNOWN, "Error when reconciling config")
OK = (grpc.StatusCode.OK, "")


def _reconcile(sw: PacketTarget, artifact: Artifact) -> tuple[grpc.StatusCode, str]:
    config = p4runtime_pb2.ForwardingPipelineConfig(p4_device_config=artifact.json.read_bytes())
    config.p4info.CopyFrom(load_p4info(artifact.p4info))
    req = SetAction(device_id=sw.client.device_id, action=SetAction.RECONCILE_AND_COMMIT, config=config)
    req.election_id.low = sw.client.election_id
    try:
        sw.client.stub.SetForwardingPipelineConfig(req, timeout=30)
    except grpc.RpcError as exc:
        return exc.code(), exc.details()
    return OK


def _rule(sw: PacketTarget, table: str, match: dict[str, str], action: str,
          params: dict[str, int] | None = None) -> p4runtime_pb2.TableEntry:
    info = sw.schema.table(table)
    parsed = dict(parse_match(info, name, text) for name, text in match.items())
    return encode_rule(sw.schema, TableRule(info.name, parsed, action, params or {}))


def _state(sw: PacketTarget) -> list[p4runtime_pb2.Entity]:
    entities = [p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry())]
    if sw.schema.p4info.action_profiles:
        entities[:0] = [p4runtime_pb2.Entity(action_profile_member=p4runtime_pb2.ActionProfileMember()),
                        p4runtime_pb2.Entity(action_profile_group=p4runtime_pb2.ActionProfileGroup())]
    return [e for entity in entities for e in sw.client.read([entity])]


def _selectors(sw: PacketTarget, weight: int) -> None:
    entry = _rule(sw, "ecmp", {"hdr.probe.a32": "10.0.0.0/8"}, "")
    entry.action.action_profile_group_id = 70
    entry.controller_metadata = 9
    by_op = _rule(sw, "by_op", {"hdr.probe.op": "1"}, "")
    by_op.action.action_profile_member_id = 1
    sw.client.write([
        update("insert", action_profile_member(sw.schema, "ecmp_sel", 7, "fwd", {"port": 2, "value": 3})),
        update("insert", action_profile_group(sw.schema, "ecmp_sel", 70, [(7, weight)])),
        update("insert", action_profile_member(sw.schema, "prof", 1, "tag2", {"value": 5})),
        update("insert", entry), update("insert", by_op)])


def test_state_the_same_program_accepts_is_kept(target_name: str) -> None:
    artifact = pipeline_files("selectors", PROGRAM_DIRS[1])
    with open_target(target_name, artifact, ports=(1, 2)) as sw:
        _selectors(sw, weight=1)
        before = _state(sw)
        frame = probe(1, 1, a32=0x0A000001)
        forwarded = sw.send(1, frame, expect=1)
        assert forwarded and forwarded[0][0] == 2
        assert _reconcile(sw, artifact) == OK
        assert _state(sw) == before
        assert sw.send(1, frame, expect=1) == forwarded


def test_a_member_read_twice_for_its_weight_fails_but_is_kept(target_name: str) -> None:
    artifact = pipeline_files("selectors", PROGRAM_DIRS[1])
    with open_target(target_name, artifact, ports=(1, 2)) as sw:
        _selectors(sw, weight=2)  # the member reads back twice: its second INSERT fails
        before = _state(sw)
        assert _reconcile(sw, artifact) == FAILED
        assert _state(sw) == before


def test_const_entries_and_defaults(target_name: str) -> None:
    artifact = pipeline_files("matching", PROGRAM_DIRS[1])
    with open_target(target_name, artifact, ports=(1, 2)) as sw:
        initial = _state(sw)  # the const tables' entries
        route = _rule(sw, "t_lpm", {"hdr.probe.a32": "10.0.0.0/8"}, "tag", {"value": 8})
        route.controller_metadata = 77
        default = _rule(sw, "t_lpm", {}, "tag", {"value": 9})
        default.is_default_action = True
        table_id = sw.schema.table("t_lpm").id
        initial_default = sw.client.read_default_entry(table_id)
        sw.client.write([update("insert", route), update("modify", default)])
        # the const entries, read back too, cannot be inserted again
        assert _reconcile(sw, artifact) == FAILED
        assert sorted(e.SerializeToString() for e in _state(sw)) == \
            sorted(e.SerializeToString() for e in [*initial, p4runtime_pb2.Entity(table_entry=route)])
        assert sw.client.read_default_entry(table_id) == initial_default


def test_counters_make_the_project_programs_fail_but_routes_are_kept(target_name: str) -> None:
    artifact = pipeline_files("rail_switch")
    with open_target(target_name, artifact, ports=(1, 2)) as sw:
        routes = [_rule(sw, "ipv4_lpm", {"hdr.ipv4.dst_addr": f"10.0.{i}.0/24"}, "RailIngress.set_nexthop",
                        {"port": 2, "dmac": 2, "smac": 3}) for i in range(3)]
        sw.client.write([update("insert", r) for r in routes])
        before = _state(sw)
        assert _reconcile(sw, artifact) == FAILED  # rail_switch's counter cells are read back
        assert _state(sw) == before


def test_another_program_keeps_nothing(target_name: str) -> None:
    with open_target(target_name, pipeline_files("matching", PROGRAM_DIRS[1]), ports=(1, 2)) as sw:
        route = _rule(sw, "t_lpm", {"hdr.probe.a32": "10.0.0.0/8"}, "tag", {"value": 8})
        sw.client.write([update("insert", route)])
        selectors = pipeline_files("selectors", PROGRAM_DIRS[1])
        assert _reconcile(sw, selectors) == FAILED
        config = sw.client.get_pipeline("P4INFO_AND_COOKIE")
        assert [t.preamble.name for t in config.p4info.tables] == ["I.ecmp", "I.wide", "I.by_op"]
        assert sw.client.read_table_entries() == []
