"""A Write's new entries reach the native engine together, in the order Python made every
change, before the Write is answered (pybmv2.native.mirror: EngineMirror.deferring_adds).

The oracle is :meth:`EngineMirror.push`, which compares every Python entry with the
engine's and fixes what differs: after each Write it must find nothing to do.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from p4.v1 import p4runtime_pb2

from controller.p4runtime.entities import Lpm, TableRule, encode_rule
from controller.p4runtime.schema import P4Schema
from pybmv2.errors import EntryExistsError
from pybmv2.native.build import compiler
from pybmv2.native.engine import NativeEngine
from pybmv2.native.mirror import EngineMirror
from pybmv2.native.switch import NativeSwitch
from pybmv2.runtime.device import DeviceManager
from pybmv2.runtime.testing import load_config
from pybmv2.tables import ActionCall

pytestmark = [pytest.mark.unit, pytest.mark.skipif(compiler() is None, reason="no C compiler")]

BUILD = Path(__file__).parents[2] / "p4src" / "build"
COMMIT = p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
INSERT, MODIFY, DELETE = (p4runtime_pb2.Update.INSERT, p4runtime_pb2.Update.MODIFY,
                          p4runtime_pb2.Update.DELETE)
TABLE = "RailIngress.ipv4_lpm"


class _Switch:
    """rail_switch on the native engine behind a DeviceManager (no ports)."""

    def __init__(self) -> None:
        self.switch = NativeSwitch(None, engine="native")
        self.dev = DeviceManager(self.switch, 0)
        self.dev.set_pipeline(COMMIT, load_config(BUILD / "rail_switch.p4info.txtpb",
                                                  BUILD / "rail_switch.json"))
        self.schema = P4Schema.from_file(BUILD / "rail_switch.p4info.txtpb")

    @property
    def mirror(self) -> EngineMirror:
        assert self.switch.mirror is not None
        return self.switch.mirror

    @property
    def engine(self) -> NativeEngine:
        assert self.switch.native is not None
        return self.switch.native

    def write(self, *updates: tuple[int, int, int]) -> p4runtime_pb2.WriteRequest:
        """One Write of (type, route, port) updates of 10.<route>.0.0/16 -> port."""
        req = p4runtime_pb2.WriteRequest(device_id=0)
        for kind, route, port in updates:
            rule = TableRule(TABLE, {"hdr.ipv4.dst_addr": Lpm(0x0A000000 | route << 16, 16)},
                             "RailIngress.set_nexthop", {"port": port, "dmac": 2, "smac": 3})
            req.updates.add(type=kind).entity.table_entry.CopyFrom(encode_rule(self.schema, rule))
        status = self.dev.write(req)
        assert status.code == 0, status
        return req

    def routes(self) -> dict[int, int]:
        """route -> port of every entry in the Python table."""
        table = self.switch.program.table(TABLE)
        return {(e.key[0][0] >> 16) & 0xFF: e.action.args[0] for e in table.entries()}


@pytest.fixture
def sw() -> Iterator[_Switch]:
    s = _Switch()
    try:
        yield s
    finally:
        s.switch.close()


def test_a_writes_new_entries_reach_the_engine_in_one_call(sw: _Switch) -> None:
    before = sw.mirror.ops
    sw.write(*[(INSERT, r, 1 + r % 4) for r in range(50)])
    assert sw.mirror.ops == before + 1
    assert sw.engine.table_size(TABLE) == 50
    assert sw.mirror.push() == 0


def test_changes_after_an_insert_in_the_same_write_keep_their_order(sw: _Switch) -> None:
    sw.write((INSERT, 1, 1), (MODIFY, 1, 3), (INSERT, 2, 1), (DELETE, 2, 1), (INSERT, 3, 4),
             (INSERT, 2, 2))
    assert sw.routes() == {1: 3, 3: 4, 2: 2}
    assert sw.engine.table_size(TABLE) == 3
    assert sw.mirror.push() == 0  # the engine holds exactly what Python does


def test_an_entry_the_engine_refuses_leaves_the_python_table_too(sw: _Switch,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine refuses an entry only when its memory runs out; stood in for here."""
    real = sw.engine.table_add_many

    def out_of_memory_at_the_last(entries):  # type: ignore[no-untyped-def]
        eids, _ = real(entries[:-1])
        return eids, MemoryError("out of memory in the native engine")

    monkeypatch.setattr(sw.engine, "table_add_many", out_of_memory_at_the_last)
    sw.write((INSERT, 1, 1), (INSERT, 2, 2), (INSERT, 3, 3))
    assert sw.routes() == {1: 1, 2: 2}
    monkeypatch.undo()
    assert sw.mirror.push() == 0


def test_table_add_many_stops_at_the_first_entry_it_cannot_add() -> None:
    sw = _Switch()
    try:
        engine = sw.engine
        action = sw.switch.program.table(TABLE).action_ids[0]
        call = ActionCall(action, (0,) * len(engine.manifest.action_args[action]))
        first = engine.table_add(TABLE, ((0x0B000000, 8),), 0, call)
        eids, error = engine.table_add_many([
            (TABLE, ((0x0C000000, 8),), 0, call, 10, None),
            (TABLE, ((0x0B000000, 8),), 0, call, 11, None),  # already there
            (TABLE, ((0x0D000000, 8),), 0, call, 12, None),  # not tried
        ])
        assert len(eids) == 1 and eids[0] != first
        assert isinstance(error, EntryExistsError)
        assert engine.table_size(TABLE) == 2
    finally:
        sw.switch.close()


def test_the_python_engine_finds_what_was_written_while_the_native_engine_ran(sw: _Switch) -> None:
    """The Python tables keep no packet-path index while the native engine runs the packets
    (MatchTable.defer_index); tracing hands the packets to the Python engine, which rebuilds it."""
    from packettest.frames import ethernet, ipv4, udp

    sw.write((INSERT, 1, 1), (INSERT, 2, 2), (INSERT, 3, 3), (MODIFY, 2, 4), (DELETE, 3, 3))
    frames = {route: ethernet("00:00:00:00:0a:01", "00:00:00:00:00:01", 0x0800,
                              ipv4("10.255.0.1", f"10.{route}.0.9", udp(1000, 80))) for route in (1, 2, 3)}
    native = {route: [port for port, _ in sw.switch.process(5, frame)] for route, frame in frames.items()}
    sw.switch.set_trace(lambda line: None)  # the Python engine runs them now
    python = {route: [port for port, _ in sw.switch.process(5, frame)] for route, frame in frames.items()}
    assert native == python == {1: [1], 2: [4], 3: []}
