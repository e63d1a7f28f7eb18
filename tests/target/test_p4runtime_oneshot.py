"""One-shot action selector programming (a table entry's ``action_profile_action_set``), with
PI's semantics, on the selected target: simple_switch_grpc is the reference (``--target
bmv2``), and the Python target must answer the same. Which member a packet gets is compared
with BMv2's goldens by the conformance case ``selectors_oneshot``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from p4.v1 import p4runtime_pb2

from controller.p4build import PROGRAM_DIRS, pipeline_files
from controller.p4runtime.client import P4ClientError
from controller.p4runtime.entities import _profile, action_profile_member, update
from packettest import PacketTarget, open_target

MIX = "Invalid attempt to mix action selector programming modes"


@pytest.fixture
def sw(target_name: str) -> Iterator[PacketTarget]:
    with open_target(target_name, pipeline_files("selectors", PROGRAM_DIRS[1]), ports=(1, 2)) as target:
        yield target


def _action(sw: PacketTarget, name: str, *values: bytes) -> p4runtime_pb2.Action:
    info = sw.schema.action(name)
    action = p4runtime_pb2.Action(action_id=info.id)
    for p, value in zip(info.params, values, strict=True):
        action.params.add(param_id=p.id, value=value)
    return action


def _ecmp(sw: PacketTarget, first_octet: int, *actions: p4runtime_pb2.ActionProfileAction,
          metadata: int = 0) -> p4runtime_pb2.TableEntry:
    te = p4runtime_pb2.TableEntry(table_id=sw.schema.table("ecmp").id, controller_metadata=metadata)
    fm = te.match.add(field_id=1)
    fm.lpm.value, fm.lpm.prefix_len = bytes((first_octet, 0, 0, 0)), 8
    te.action.action_profile_action_set.action_profile_actions.extend(actions)
    return te


def _fwd(sw: PacketTarget, port: int, value: int, weight: int, **watch: object) -> p4runtime_pb2.ActionProfileAction:
    """A ``fwd`` action with canonical bytestrings (as they read back)."""
    ap = p4runtime_pb2.ActionProfileAction(weight=weight, **watch)
    ap.action.CopyFrom(_action(sw, "fwd", bytes((port,)), bytes((value,))))
    return ap


def _read(sw: PacketTarget, entity: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]:
    return sw.client.read([entity])


def _table(sw: PacketTarget, name: str) -> list[p4runtime_pb2.TableEntry]:
    return sw.client.read_table_entries(sw.schema.table(name).id)


def _members(sw: PacketTarget, profile: str = "") -> p4runtime_pb2.Entity:
    ent = p4runtime_pb2.Entity()
    ent.action_profile_member.action_profile_id = _profile(sw.schema, profile).preamble.id if profile else 0
    return ent


def _groups(sw: PacketTarget, profile: str) -> p4runtime_pb2.Entity:
    ent = p4runtime_pb2.Entity()
    ent.action_profile_group.action_profile_id = _profile(sw.schema, profile).preamble.id
    return ent


def _write_error(sw: PacketTarget, kind: str, entity: object) -> tuple[str, str]:
    with pytest.raises(P4ClientError) as info:
        sw.client.write([update(kind, entity)])
    [error] = info.value.errors
    return error.code, error.message


def test_an_action_set_reads_back_as_written(sw: PacketTarget) -> None:
    entries = [
        _ecmp(sw, 10, _fwd(sw, 2, 10, 1), _fwd(sw, 3, 11, 2, watch=5),
              _fwd(sw, 4, 12, 1, watch_port=b"\x00\x07"), metadata=9),
        _ecmp(sw, 11, _fwd(sw, 4, 13, 3)),
    ]
    sw.client.write([update("insert", e) for e in entries])
    assert _table(sw, "ecmp") == entries
    entries[0] = _ecmp(sw, 10, _fwd(sw, 2, 14, 2), metadata=10)
    sw.client.write([update("modify", entries[0])])
    assert _table(sw, "ecmp") == entries
    sw.client.write([update("delete", entries[1])])
    assert _table(sw, "ecmp") == entries[:1]


def test_its_members_and_groups_stay_hidden(sw: PacketTarget) -> None:
    sw.client.write([update("insert", _ecmp(sw, 10, _fwd(sw, 2, 10, 2), _fwd(sw, 3, 11, 1)))])
    for entity in (_members(sw, "ecmp_sel"), _groups(sw, "ecmp_sel"), _members(sw)):
        with pytest.raises(P4ClientError) as info:
            _read(sw, entity)
        assert (info.value.code, str(info.value).split(": ", 2)[2]) == ("INVALID_ARGUMENT", MIX)
    assert _read(sw, _members(sw, "prof")) == []  # another profile is not affected


def test_a_profile_takes_one_programming_mode_at_a_time(sw: PacketTarget) -> None:
    oneshot = _ecmp(sw, 10, _fwd(sw, 2, 10, 1))
    member = action_profile_member(sw.schema, "ecmp_sel", 1, "fwd", {"port": 1, "value": 1})
    sw.client.write([update("insert", oneshot)])
    assert _write_error(sw, "insert", member) == ("INVALID_ARGUMENT", MIX)
    by_member = _ecmp(sw, 11)
    by_member.action.action_profile_member_id = 1
    assert _write_error(sw, "insert", by_member) == ("INVALID_ARGUMENT", MIX)
    sw.client.write([update("delete", oneshot)])  # empty again: manual use may begin
    sw.client.write([update("insert", member), update("insert", by_member)])
    assert _write_error(sw, "insert", _ecmp(sw, 12, _fwd(sw, 2, 10, 1))) == ("INVALID_ARGUMENT", MIX)


def test_bad_action_sets_fail_as_on_pi(sw: PacketTarget) -> None:
    wrong_action = p4runtime_pb2.ActionProfileAction(weight=1)
    wrong_action.action.CopyFrom(_action(sw, "tag3", b"\x01"))
    too_wide = _fwd(sw, 2, 1, 1)
    too_wide.action.params[0].value = b"\xff\xff"  # 16 bits for a 9-bit port
    by_op = p4runtime_pb2.TableEntry(table_id=sw.schema.table("by_op").id)
    by_op.match.add(field_id=1).exact.value = b"\x01"
    tag2 = by_op.action.action_profile_action_set.action_profile_actions.add(weight=1)
    tag2.action.CopyFrom(_action(sw, "tag2", b"\x05"))
    cases = [
        (_ecmp(sw, 12), ("UNIMPLEMENTED", "No support for empty action profile groups")),
        (_ecmp(sw, 12, _fwd(sw, 2, 1, 0)), ("INVALID_ARGUMENT", "Member weight must be a positive integer value")),
        (_ecmp(sw, 12, wrong_action), ("INVALID_ARGUMENT", "Invalid action for action profile")),
        (_ecmp(sw, 12, too_wide), ("INVALID_ARGUMENT", "Bytestring provided does not fit within 9 bits")),
        # a plain action profile (no selector) has no groups to give a one-shot entry
        (by_op, ("UNKNOWN", "Error when adding match entry to target")),
    ]
    for entry, (code, message) in cases:  # the Python target may say more (the field's name)
        got_code, got_message = _write_error(sw, "insert", entry)
        assert got_code == code and got_message.startswith(message), (got_code, got_message)
    ok = _ecmp(sw, 10, _fwd(sw, 2, 10, 1))
    sw.client.write([update("insert", ok)])
    assert _write_error(sw, "insert", ok) == (
        "ALREADY_EXISTS", "Match entry exists, use MODIFY if you wish to change action")
    assert _table(sw, "ecmp") == [ok] and _table(sw, "by_op") == []
