"""PI's watch ports on the selected target (simple_switch_grpc is the reference, ``--target
bmv2``): a selector group's member whose watch port is down is not chosen, and is chosen
again when the port comes back; a watch port the switch does not have counts as down; a
group reads back with the watch of its last member on every member, as PI returns it.

Where BMv2 and PI fail to do what PI means to (a port going down), the Python target does what
PI means: the member stops being chosen. docs/p4runtime.md lists this."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest
from conformance_cases import probe
from p4.v1 import p4runtime_pb2

from controller.p4build import PROGRAM_DIRS, pipeline_files
from controller.p4runtime.entities import _profile, action_profile_member, update
from packettest import PacketTarget, open_target

R1 = slice(29, 33)  # the probe's r1: which member's fwd ran


def _group(sw: PacketTarget, group_id: int, *members: tuple[int, dict[str, object]]) -> p4runtime_pb2.Update:
    ent = p4runtime_pb2.Entity()
    g = ent.action_profile_group
    g.action_profile_id, g.group_id = _profile(sw.schema, "ecmp_sel").preamble.id, group_id
    for member_id, watch in members:
        g.members.add(member_id=member_id, weight=1, **watch)  # type: ignore[arg-type]
    return update("insert", ent)


def _program(sw: PacketTarget, watch_a: dict[str, object], watch_b: dict[str, object]) -> None:
    """Members 1 (r1 = 10) and 2 (r1 = 11), both out of port 2, in group 7 with their
    watches; every 10.0.0.0/8 probe goes to group 7."""
    sw.client.write([update("insert", action_profile_member(sw.schema, "ecmp_sel", 1, "fwd", {"port": 2, "value": 10})),
                     update("insert", action_profile_member(sw.schema, "ecmp_sel", 2, "fwd", {"port": 2, "value": 11})),
                     _group(sw, 7, (1, watch_a), (2, watch_b))])
    te = p4runtime_pb2.TableEntry(table_id=sw.schema.table("ecmp").id)
    fm = te.match.add(field_id=1)
    fm.lpm.value, fm.lpm.prefix_len = bytes((10, 0, 0, 0)), 8
    te.action.action_profile_group_id = 7
    sw.client.write([update("insert", te)])


def _chosen(sw: PacketTarget, flows: int = 24) -> set[int]:
    """The members (r1 values) the selector chose for ``flows`` different flows."""
    out = set()
    for k in range(flows):
        [(port, frame)] = sw.send(1, probe(a32=0x0A000001, b32=k * 7919, a16=k, b8=k), expect=1)
        assert port == 2
        out.add(int.from_bytes(frame[R1], "big"))
    return out


def _read_group(sw: PacketTarget) -> p4runtime_pb2.ActionProfileGroup:
    ent = p4runtime_pb2.Entity()
    ent.action_profile_group.action_profile_id = _profile(sw.schema, "ecmp_sel").preamble.id
    [got] = sw.client.read([ent])
    return got.action_profile_group


@pytest.fixture
def sw(target_name: str) -> Iterator[PacketTarget]:
    with open_target(target_name, pipeline_files("selectors", PROGRAM_DIRS[1]), ports=(1, 2, 3, 4)) as target:
        yield target


@pytest.mark.parametrize("kind", ["watch_port", "watch"])
def test_a_member_watching_a_port_the_switch_lacks_is_never_chosen(sw: PacketTarget, kind: str) -> None:
    def on(port: int) -> dict[str, object]:
        return {"watch_port": bytes((0, port))} if kind == "watch_port" else {"watch": port}

    _program(sw, on(3), on(9))  # port 9 is not the switch's: PI counts it down
    assert _chosen(sw) == {10}
    # PI reads every member's watch into one variable: all show the last member's
    members = _read_group(sw).members
    assert [(m.member_id, m.WhichOneof("watch_kind"), getattr(m, kind)) for m in members] == \
        [(1, kind, on(9)[kind]), (2, kind, on(9)[kind])]


def test_members_without_a_watch_are_both_chosen(sw: PacketTarget) -> None:
    _program(sw, {}, {"watch_port": bytes((0, 4))})
    assert _chosen(sw) == {10, 11}
    assert [m.WhichOneof("watch_kind") for m in _read_group(sw).members] == ["watch_port", "watch_port"]


def test_a_member_follows_its_watch_port_down_and_up(target_name: str) -> None:
    if target_name == "bmv2":
        pytest.skip("simple_switch_grpc 1.15.5 cannot show it: with an interface down it forwards nothing on any "
                    "port, and a removed port (port_remove) reaches no member, because PI's WatchPortEnforcer stops "
                    "at the first action profile whose cached status already matches (selectors.p4 has three)")
    kind = "python-process"
    with open_target(kind, pipeline_files("selectors", PROGRAM_DIRS[1]), ports=(1, 2, 3, 4)) as sw:
        _program(sw, {"watch_port": bytes((0, 3))}, {"watch_port": bytes((0, 4))})
        assert _chosen(sw) == {10, 11}
        iface = sw.veth.switch_ifaces[4]  # type: ignore[attr-defined]
        subprocess.run(["ip", "link", "set", iface, "down"], check=True)
        try:
            assert _eventually(sw, {10}), "member 2 still chosen with its watch port down"
        finally:
            subprocess.run(["ip", "link", "set", iface, "up"], check=True)
        assert _eventually(sw, {10, 11}), "member 2 not chosen again with its watch port back up"


def _eventually(sw: PacketTarget, want: set[int], timeout_s: float = 5.0) -> bool:
    """Whether the chosen members become ``want`` (the switch polls its ports every 200 ms)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _chosen(sw) == want:
            return True
        time.sleep(0.1)
    return False
