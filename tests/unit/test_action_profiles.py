"""Action profiles and selectors: P4Runtime members/groups, indirect entries, selection."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from p4.v1 import p4runtime_pb2

from pybmv2.calculations import crc16
from pybmv2.runtime.device import DeviceManager
from pybmv2.runtime.testing import load_config, update
from pybmv2.switch import V1Switch

BUILD = Path(__file__).parents[1] / "p4programs" / "build"
INSERT, MODIFY, DELETE = (p4runtime_pb2.Update.INSERT, p4runtime_pb2.Update.MODIFY,
                          p4runtime_pb2.Update.DELETE)


@pytest.fixture()
def dev() -> DeviceManager:
    d = DeviceManager(V1Switch(None), 0)
    d.set_pipeline(p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
                   load_config(BUILD / "selectors.p4info.txtpb", BUILD / "selectors.json"))
    return d


def _ids(dev: DeviceManager) -> dict[str, int]:
    p = dev.require_pipeline()
    return {n.split(".")[-1]: i for n, i in p.index._names.items()}


def member(dev: DeviceManager, profile: str, mid: int, port: int, value: int
           ) -> p4runtime_pb2.Entity:
    ids = _ids(dev)
    e = p4runtime_pb2.Entity()
    m = e.action_profile_member
    m.action_profile_id, m.member_id = ids[profile], mid
    m.action.action_id = ids["fwd"]
    m.action.params.add(param_id=1, value=port.to_bytes(2, "big"))
    m.action.params.add(param_id=2, value=value.to_bytes(4, "big"))
    return e


def group(dev: DeviceManager, profile: str, gid: int, members: dict[int, int]
          ) -> p4runtime_pb2.Entity:
    e = p4runtime_pb2.Entity()
    g = e.action_profile_group
    g.action_profile_id, g.group_id = _ids(dev)[profile], gid
    for mid, weight in members.items():
        g.members.add(member_id=mid, weight=weight)
    return e


def ecmp_entry(dev: DeviceManager, *, group_id: int = 0, member_id: int = 0
               ) -> p4runtime_pb2.Entity:
    e = p4runtime_pb2.Entity()
    t = e.table_entry
    t.table_id = _ids(dev)["ecmp"]
    fm = t.match.add(field_id=1)
    fm.lpm.value, fm.lpm.prefix_len = b"\x0a\x00\x00\x00", 8
    if group_id:
        t.action.action_profile_group_id = group_id
    else:
        t.action.action_profile_member_id = member_id
    return e


def write(dev: DeviceManager, *updates: p4runtime_pb2.Update) -> list[int]:
    status = dev.write(p4runtime_pb2.WriteRequest(updates=list(updates)))
    if status.code == 0:
        return [0] * len(updates)
    out = []
    for detail in status.details:
        err = p4runtime_pb2.Error()
        detail.Unpack(err)
        out.append(err.canonical_code)
    return out


def probe(b32: int, a16: int, b8: int) -> bytes:
    body = struct.pack("!BBBHHII4I", 0, 0, b8, a16, 0, 0x0A000001, b32, 0, 0, 0, 0)
    return b"\x00\x00\x00\x00\x00\x02" + b"\x00\x00\x00\x00\x00\x01" + b"\x88\xb5" + body


def test_selector_picks_member_by_crc16_in_handle_order(dev: DeviceManager) -> None:
    assert write(dev, *(update(INSERT, member(dev, "ecmp_sel", m, m, 100 + m))
                        for m in (10, 20, 30))) == [0, 0, 0]
    assert write(dev, update(INSERT, group(dev, "ecmp_sel", 1, {30: 1, 10: 2, 20: 1})),
                 update(INSERT, ecmp_entry(dev, group_id=1))) == [0, 0]
    # handles: 10 -> 0, 20 -> 1, 30 -> 2, the weight-2 copy of 10 -> 3
    order = [10, 20, 30, 10]
    for b32 in range(20):
        out = dev.switch.process(1, probe(b32, 7, 3))
        h = crc16(struct.pack("!IHB", b32, 7, 3))
        assert [port for port, _ in out] == [order[h % 4]]
    resp, err = dev.read(p4runtime_pb2.ReadRequest(entities=[group(dev, "ecmp_sel", 0, {})]))
    assert err is None
    [g] = [e.action_profile_group for e in resp.entities]
    assert [(m.member_id, m.weight) for m in g.members] == [(10, 2), (20, 1), (30, 1)]
    resp, err = dev.read(p4runtime_pb2.ReadRequest(entities=[member(dev, "ecmp_sel", 0, 0, 0)]))
    assert [e.action_profile_member.member_id for e in resp.entities] == [10, 20, 30, 10]


def test_pi_error_codes(dev: DeviceManager) -> None:
    assert write(dev, update(INSERT, member(dev, "ecmp_sel", 1, 2, 0))) == [0]
    assert write(dev, update(INSERT, member(dev, "ecmp_sel", 1, 2, 0))) == [6]  # ALREADY_EXISTS
    assert write(dev, update(INSERT, group(dev, "ecmp_sel", 5, {9: 1}))) == [5]  # NOT_FOUND
    assert write(dev, update(MODIFY, group(dev, "ecmp_sel", 6, {1: 1}))) == [5]
    assert write(dev, update(INSERT, ecmp_entry(dev, member_id=99))) == [3]  # INVALID_ARGUMENT
    assert write(dev, update(INSERT, ecmp_entry(dev, member_id=1))) == [0]
    assert write(dev, update(DELETE, member(dev, "ecmp_sel", 1, 0, 0))) == [2]  # in use: UNKNOWN
    assert write(dev, update(DELETE, ecmp_entry(dev, member_id=1)),
                 update(DELETE, member(dev, "ecmp_sel", 1, 0, 0))) == [0, 0]
    [out] = dev.switch.process(1, probe(0, 0, 0))  # miss: no action, egress_spec stays 1
    assert out[0] == 1
