"""Reads of a native engine's counts never hold up its I/O thread, and lose no count.

The engine's I/O thread (``csrc/rt_io.c``) runs on Unix datagram socket pairs here, one per
port (no root needed): a frame written to the test's end of port 1 comes out of the test's
end of port 2. A P4Runtime Read pulls the counts the data plane made into the Python
objects first (:meth:`EngineMirror.pull`); it is paused in the middle of that pull, and a
packet must still be forwarded. Counts pulled while packets flow must add up exactly.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from p4.v1 import p4runtime_pb2

from controller.p4runtime.entities import Lpm, TableRule, encode_rule
from controller.p4runtime.schema import P4Schema
from packettest.frames import ethernet, ipv4, udp
from pybmv2.native.build import compiler
from pybmv2.native.engine import NativeEngine
from pybmv2.native.io import NativeIO, PacketIOError
from pybmv2.native.switch import NativeSwitch
from pybmv2.program import Program
from pybmv2.runtime.device import DeviceManager
from pybmv2.runtime.testing import load_config
from pybmv2.tables import ActionCall

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")

BUILD = Path(__file__).parents[2] / "p4src" / "build"
#: generous bounds for what must happen at once; reached only when the code under test hangs
STUCK = 20.0
COMMIT = p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT


def _frame(seq: int) -> bytes:
    return ethernet("00:00:00:00:0a:01", "00:00:00:00:00:01", 0x0800,
                    ipv4("10.255.0.1", "10.0.1.9", udp(1000, 80, seq.to_bytes(8, "big"))))


class _Rig:
    """rail_switch on the native engine behind a DeviceManager, its I/O thread on socket
    pairs for ports 1 and 2, and one route 10.0.1.0/24 -> port 2."""

    def __init__(self, ports: tuple[int, ...] = (1, 2)) -> None:
        self.switch = NativeSwitch(None, engine="native")
        self.dev = DeviceManager(self.switch, 0)
        self.dev.set_pipeline(COMMIT, load_config(BUILD / "rail_switch.p4info.txtpb",
                                                  BUILD / "rail_switch.json"))
        self.schema = P4Schema.from_file(BUILD / "rail_switch.p4info.txtpb")
        rule = TableRule("RailIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": Lpm(0x0A000100, 24)},
                         "RailIngress.set_nexthop", {"port": 2, "dmac": 2, "smac": 3})
        req = p4runtime_pb2.WriteRequest(device_id=0)
        req.updates.add(type=p4runtime_pb2.Update.INSERT).entity.table_entry.CopyFrom(
            encode_rule(self.schema, rule))
        assert self.dev.write(req).code == 0
        self.outside: dict[int, socket.socket] = {}
        inside: dict[int, socket.socket] = {}
        for port in ports:
            inside[port], self.outside[port] = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            self.outside[port].settimeout(STUCK)
        self._inside = inside
        native = self.switch.native
        assert native is not None
        self.io = NativeIO(native, {p: s.fileno() for p, s in inside.items()},
                           start_ns=self.switch._start_ns, cpu_port=None,
                           on_packet_in=lambda port, frame: None,
                           on_digest=lambda lid, values: None)

    def forward(self, seq: int) -> bytes:
        """Send a frame into port 1; the frame port 2 sent (a timeout if none comes)."""
        self.outside[1].send(_frame(seq))
        return self.outside[2].recv(65536)

    def counts(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """(packets, bytes) of the route's direct counter and of port 1's rx counter, read
        over P4Runtime."""
        req = p4runtime_pb2.ReadRequest(device_id=0)
        req.entities.add().direct_counter_entry.table_entry.table_id = \
            self.schema.table("ipv4_lpm").id
        req.entities.add().counter_entry.counter_id = self.schema.counter("port_rx").id
        response, error = self.dev.read(req)
        assert error is None
        direct = [e.direct_counter_entry.data for e in response.entities
                  if e.WhichOneof("entity") == "direct_counter_entry"]
        rx = [e.counter_entry.data for e in response.entities
              if e.WhichOneof("entity") == "counter_entry" and e.counter_entry.index.index == 1]
        return ((direct[0].packet_count, direct[0].byte_count),
                (rx[0].packet_count, rx[0].byte_count))

    def close(self) -> None:
        self.io.close()
        self.switch.close()
        for s in [*self.outside.values(), *self._inside.values()]:
            s.close()


@pytest.fixture
def rig() -> Iterator[_Rig]:
    r = _Rig()
    try:
        yield r
    finally:
        r.close()


def test_a_packet_is_forwarded_while_a_pull_is_paused(rig: _Rig) -> None:
    first = rig.forward(0)
    assert first[:6] == bytes.fromhex("000000000002")  # set_nexthop rewrote the MACs
    paused, resume = threading.Event(), threading.Event()

    def hold_the_pull(table: str) -> None:  # the route's counts are taken: wait here
        mirror = rig.switch.mirror
        assert mirror is not None
        if table != "RailIngress.ipv4_lpm":
            return
        mirror.pull_hook = None
        paused.set()
        resume.wait(4 * STUCK)  # outlasts the test's waits: only the test resumes it

    assert rig.switch.mirror is not None
    rig.switch.mirror.pull_hook = hold_the_pull
    read: dict = {}
    reader = threading.Thread(target=lambda: read.update(counts=rig.counts()), daemon=True)
    reader.start()
    try:
        assert paused.wait(STUCK), "the Read never pulled the engine's counts"
        try:
            rig.forward(1)
        except TimeoutError:
            pytest.fail("a packet waited for a pull of the engine's counts")
    finally:
        resume.set()
    reader.join(STUCK)
    assert not reader.is_alive()
    length = len(_frame(0))
    # the paused Read took the route's count before the second packet, port 1's after it;
    # the next Read has the second packet on the route too
    assert read["counts"] == ((1, length), (2, 2 * length))
    assert rig.counts() == ((2, 2 * length), (2, 2 * length))


def test_counts_pulled_while_packets_flow_add_up(rig: _Rig) -> None:
    n = 600
    done = threading.Event()
    pulls = 0

    def pull_again_and_again() -> None:
        nonlocal pulls
        while not done.is_set():
            rig.switch.refresh()
            pulls += 1

    puller = threading.Thread(target=pull_again_and_again, daemon=True)
    puller.start()
    try:
        for seq in range(n):
            rig.forward(seq)
    finally:
        done.set()
        puller.join(STUCK)
    assert pulls > 1
    length = len(_frame(0))
    assert rig.counts() == ((n, n * length), (n, n * length))


def test_a_counter_write_during_traffic_replaces_what_was_counted(rig: _Rig) -> None:
    for seq in range(3):
        rig.forward(seq)
    entry = p4runtime_pb2.DirectCounterEntry()
    entry.table_entry.CopyFrom(encode_rule(rig.schema, TableRule(
        "RailIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": Lpm(0x0A000100, 24)},
        "RailIngress.set_nexthop", {"port": 2, "dmac": 2, "smac": 3})))
    entry.table_entry.ClearField("action")
    entry.data.packet_count, entry.data.byte_count = 100, 1000
    req = p4runtime_pb2.WriteRequest(device_id=0)
    req.updates.add(type=p4runtime_pb2.Update.MODIFY).entity.direct_counter_entry.CopyFrom(entry)
    assert rig.dev.write(req).code == 0
    with contextlib.suppress(TimeoutError):
        rig.forward(3)
    length = len(_frame(0))
    assert rig.counts()[0] == (101, 1000 + length)


# -- the touched lists under deletes, at the engine's API (the batch API runs the packets) --


def _routes_engine() -> tuple[NativeEngine, ActionCall]:
    program = Program.from_file(BUILD / "rail_switch.json")
    engine = NativeEngine(program)
    (aid,) = [a for a in program.table("RailIngress.ipv4_lpm").action_ids
              if program.actions[a].name.endswith("set_nexthop")]
    return engine, ActionCall(aid, (2, 2, 3))


def _to(route: int) -> bytes:
    return ethernet("00:00:00:00:0a:01", "00:00:00:00:00:01", 0x0800,
                    ipv4("10.255.0.1", f"10.{route >> 8 & 255}.{route & 255}.9", udp(1000, 80)))


def _taken(engine: NativeEngine) -> dict[int, int]:
    engine.pull_begin()
    return {eid: packets for eid, packets, _, _, _ in engine.table_take("RailIngress.ipv4_lpm")}


def test_entries_deleted_after_packets_hit_them_leave_the_others_counts_exact() -> None:
    engine, call = _routes_engine()
    table = "RailIngress.ipv4_lpm"
    n = 200
    eids = [engine.table_add(table, ((0x0A000000 | r << 8, 24),), 0, call) for r in range(n)]
    engine.process([(1, _to(r)) for r in range(n) for _ in range(1 + r % 3)])
    # the first listed, then the last (which took its place), and so on; then a third
    order = [0, n - 1, 3, n - 2, 6, n - 3, 1, *range(9, n - 3, 3)]
    gone = set(order)
    for r in order:
        engine.table_delete(table, eids[r])
    # the deleted entries' ids are reused at once: a deleted entry still listed would now
    # be taken as one of these, which packets never hit
    again = {r: engine.table_add(table, ((0x0A000000 | r << 8, 24),), 0, call) for r in gone}
    assert set(again.values()) == {eids[r] for r in gone}
    assert _taken(engine) == {eids[r]: 1 + r % 3 for r in range(n) if r not in gone}
    engine.process([(1, _to(r)) for r in (0, 1)])
    assert _taken(engine) == {again[0]: 1, again[1]: 1}
    engine.close()


def test_a_pull_begun_and_not_taken_loses_nothing_and_trips_on_no_deleted_entry() -> None:
    engine, call = _routes_engine()
    table = "RailIngress.ipv4_lpm"
    eids = [engine.table_add(table, ((0x0A000000 | r << 8, 24),), 0, call) for r in range(4)]
    engine.process([(1, _to(r)) for r in range(4)])
    engine.pull_begin()  # and nothing taken: these four stay listed
    engine.process([(1, _to(r)) for r in range(4)])
    engine.table_delete(table, eids[3])
    engine.table_delete(table, eids[2])
    assert _taken(engine) == {eids[0]: 2, eids[1]: 2}
    # the list left behind comes round again: its deleted entries are skipped, and what
    # was taken already is not taken twice
    assert _taken(engine) == {eids[0]: 0, eids[1]: 0}
    assert _taken(engine) == {}
    engine.close()


def test_a_packet_is_forwarded_while_a_write_is_paused_between_engine_calls(rig: _Rig) -> None:
    """A Write's Python work (here paused; in life, waiting for the GIL) holds no engine lock."""
    paused, resume = threading.Event(), threading.Event()

    def hold_the_write(table: str) -> None:
        mirror = rig.switch.mirror
        assert mirror is not None
        mirror.change_hook = None
        paused.set()
        resume.wait(4 * STUCK)

    assert rig.switch.mirror is not None
    rig.switch.mirror.change_hook = hold_the_write
    rule = TableRule("RailIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": Lpm(0x0A000200, 24)},
                     "RailIngress.set_nexthop", {"port": 2, "dmac": 4, "smac": 3})
    req = p4runtime_pb2.WriteRequest(device_id=0)
    req.updates.add(type=p4runtime_pb2.Update.INSERT).entity.table_entry.CopyFrom(
        encode_rule(rig.schema, rule))
    wrote: dict = {}
    writer = threading.Thread(target=lambda: wrote.update(status=rig.dev.write(req)), daemon=True)
    writer.start()
    try:
        assert paused.wait(STUCK), "the Write never reached the engine"
        try:
            rig.forward(0)
        except TimeoutError:
            pytest.fail("a packet waited for a Write's Python work")
    finally:
        resume.set()
    writer.join(STUCK)
    assert wrote["status"].code == 0
    rig.outside[1].send(ethernet("00:00:00:00:0a:01", "00:00:00:00:00:01", 0x0800,
                                 ipv4("10.255.0.1", "10.0.2.9", udp(1000, 80))))
    assert rig.outside[2].recv(65536)[:6] == bytes.fromhex("000000000004")


def test_the_native_engine_takes_as_many_ports_as_bmv2_and_names_the_one_it_cannot() -> None:
    """BMv2 takes 512 ports by default; so does the native engine (it took 64, and a
    1,024-GPU fabric's rail switches failed at bring-up)."""
    r = _Rig(ports=tuple(range(1, 301)))
    try:
        assert r.forward(7).endswith((7).to_bytes(8, "big"))
    finally:
        r.close()
    switch = NativeSwitch(None, engine="native")
    pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM) for _ in range(2)]
    try:
        DeviceManager(switch, 0).set_pipeline(COMMIT, load_config(BUILD / "rail_switch.p4info.txtpb",
                                                                  BUILD / "rail_switch.json"))
        assert switch.native is not None
        with pytest.raises(PacketIOError, match="cannot take port 512"):
            NativeIO(switch.native, {1: pairs[0][0].fileno(), 512: pairs[1][0].fileno()}, start_ns=0,
                     cpu_port=None, on_packet_in=lambda port, frame: None, on_digest=lambda lid, values: None)
    finally:
        switch.close()
        for a, b in pairs:
            a.close()
            b.close()
