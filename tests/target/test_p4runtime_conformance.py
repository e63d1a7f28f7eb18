"""P4Runtime against the conformance programs: every match kind, const tables, digests,
clone sessions, multicast, packet-in without controller header, meters, direct counters and
direct meters.

Uses the artifacts of tests/p4programs (``make p4``); skipped until they are built.
"""

from __future__ import annotations

import queue
import struct
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from pybmv2.runtime.p4info import P4InfoIndex
from pybmv2.runtime.server import P4RuntimeServer
from pybmv2.runtime.testing import StreamClient, batch_errors, load_config, update
from pybmv2.switch import V1Switch

pytestmark = pytest.mark.target

BUILD = Path(__file__).resolve().parents[1] / "p4programs" / "build"
Update = p4runtime_pb2.Update
DEVICE_ID = 3


class Rig:
    """A server around an in-process switch, with one primary client."""

    def __init__(self, switch: V1Switch, server: P4RuntimeServer, client: StreamClient,
                 ids: P4InfoIndex) -> None:
        self.switch, self.server, self.client, self.ids = switch, server, client, ids

    def send(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        return self.server.deliver_outputs(self.switch.process(port, frame))

    def table_entry(self, table: str, **kwargs: object) -> p4runtime_pb2.Entity:
        ent = p4runtime_pb2.Entity()
        ent.table_entry.table_id = self.ids.id_of(table)
        for key, value in kwargs.items():
            setattr(ent.table_entry, key, value)
        return ent

    def set_action(self, ent: p4runtime_pb2.Entity, action: str, *values: bytes) -> None:
        a = ent.table_entry.action.action
        a.action_id = self.ids.id_of(action)
        for i, v in enumerate(values, start=1):
            a.params.add(param_id=i, value=v)


def _rig(program: str, target_name: str) -> Iterator[Rig]:
    if target_name != "python":
        pytest.skip("exercises the Python target's own P4Runtime server")
    json_path, p4info_path = BUILD / f"{program}.json", BUILD / f"{program}.p4info.txtpb"
    if not (json_path.exists() and p4info_path.exists()):
        pytest.skip(f"{program} artifacts not built yet (tests/p4programs/build: run `make p4`)")
    config = load_config(p4info_path, json_path)
    switch = V1Switch(None, cpu_port=510)
    server = P4RuntimeServer(switch, device_id=DEVICE_ID, address="127.0.0.1:0")
    server.start()
    client: StreamClient | None = None
    try:
        client = StreamClient(server.address, DEVICE_ID, election_id=1)
        assert client.arbitrate().status.code == code_pb2.OK
        client.set_pipeline(config)
        yield Rig(switch, server, client, P4InfoIndex(config.p4info))
    finally:
        if client is not None:
            client.close()
        server.stop(grace=0)


@pytest.fixture
def matching(target_name: str) -> Iterator[Rig]:
    yield from _rig("matching", target_name)


@pytest.fixture
def replication(target_name: str) -> Iterator[Rig]:
    yield from _rig("replication", target_name)


@pytest.fixture
def stateful(target_name: str) -> Iterator[Rig]:
    yield from _rig("stateful", target_name)


@pytest.fixture
def direct_meter(target_name: str) -> Iterator[Rig]:
    yield from _rig("direct_meter", target_name)


def _probe(op: int, *, a8: int = 0, b8: int = 0, a16: int = 0, b16: int = 0, a32: int = 0,
           b32: int = 0, src: bytes = b"\x00\x00\x00\x00\x00\x0a",
           dst: bytes = b"\x00\x00\x00\x00\x00\x0b") -> bytes:
    probe = struct.pack("!BBBHHII16x", op, a8, b8, a16, b16, a32, b32)
    return dst + src + b"\x88\xb5" + probe


def _probe_fields(frame: bytes) -> dict[str, int]:
    op, a8, b8, a16, b16, a32, b32, r1, r2, r3, r4 = struct.unpack("!BBBHHIIIIII", frame[14:45])
    return dict(op=op, a8=a8, b8=b8, a16=a16, b16=b16, a32=a32, b32=b32, r1=r1, r2=r2, r3=r3,
                r4=r4)


# -- matching.p4 -----------------------------------------------------------------------------


def test_ternary_range_optional_round_trip_and_match(matching: Rig) -> None:
    rig, c = matching, matching.client
    exact = rig.table_entry("I.t_exact")
    exact.table_entry.match.add(field_id=1).exact.value = b"\x0b"
    exact.table_entry.match.add(field_id=2).exact.value = b"\x00"
    rig.set_action(exact, "I.set_port", b"\x01")
    tern = rig.table_entry("I.t_ternary", priority=10)
    fm = tern.table_entry.match.add(field_id=1)
    fm.ternary.value, fm.ternary.mask = b"\x12\x00", b"\xff\x00"
    tern.table_entry.match.add(field_id=2).exact.value = b"\x05"
    rig.set_action(tern, "I.tag2", b"\x07")
    rng = rig.table_entry("I.t_range", priority=5)
    fm = rng.table_entry.match.add(field_id=1)
    fm.range.low, fm.range.high = b"\x64", b"\xc8"
    rng.table_entry.match.add(field_id=2).optional.value = b"\x01\x02\x03\x04"
    rig.set_action(rng, "I.tag3", b"\x09")
    rng_any = rig.table_entry("I.t_range", priority=1)
    fm = rng_any.table_entry.match.add(field_id=1)
    fm.range.low, fm.range.high = b"\x01", b"\x02"
    rig.set_action(rng_any, "I.nop")
    c.write(*(update(Update.INSERT, e) for e in (exact, tern, rng, rng_any)))

    [got] = c.read(rig.table_entry("I.t_ternary"))
    assert got.table_entry == tern.table_entry
    by_prio = {e.table_entry.priority: e.table_entry for e in c.read(rig.table_entry("I.t_range"))}
    assert by_prio[5] == rng.table_entry
    assert [m.field_id for m in by_prio[1].match] == [1]  # optional wildcard omitted

    [(port, out)] = rig.send(1, _probe(0, a16=0x1234, b8=0x05, b16=150, b32=0x01020304))
    fields = _probe_fields(out)
    assert port == 1 and fields["r2"] == 7 and fields["r3"] == 9 and fields["b8"] & 0x80


def test_const_tables(matching: Rig) -> None:
    rig, c = matching, matching.client
    entries = c.read(rig.table_entry("I.t_const"))
    assert sorted(e.table_entry.action.action.params[0].value for e in entries) == [b"\x6f",
                                                                                    b"\xde"]
    assert not any(e.table_entry.is_const for e in entries)  # PI never sets is_const on reads
    ternary = [e.table_entry for e in c.read(rig.table_entry("I.t_const_ternary"))]
    assert len(ternary) == 3
    catch_all = next(t for t in ternary if not t.match)
    first = next(t for t in ternary if t.match and t.match[0].ternary.mask == b"\xf0")
    assert first.priority > catch_all.priority > 0
    new = rig.table_entry("I.t_const")
    new.table_entry.match.add(field_id=1).exact.value = b"\x09"
    rig.set_action(new, "I.nop")
    dflt = rig.table_entry("I.t_const", is_default_action=True)
    rig.set_action(dflt, "I.tag4", b"\x01")
    delete = rig.table_entry("I.t_const")
    delete.table_entry.CopyFrom(entries[0].table_entry)
    delete.table_entry.is_const = False
    with pytest.raises(grpc.RpcError) as exc:
        c.write(update(Update.INSERT, new), update(Update.MODIFY, dflt),
                update(Update.DELETE, delete))
    assert [e.canonical_code for e in batch_errors(exc.value)] == [code_pb2.PERMISSION_DENIED] * 3


def test_valid_match(matching: Rig) -> None:
    rig, c = matching, matching.client
    ent = rig.table_entry("I.t_valid")
    ent.table_entry.match.add(field_id=1).exact.value = b"\x01"
    rig.set_action(ent, "I.tag2", b"\x2a")
    c.write(update(Update.INSERT, ent))
    [got] = c.read(rig.table_entry("I.t_valid"))
    assert got.table_entry.match[0].exact.value == b"\x01"


# -- replication.p4 --------------------------------------------------------------------------


def test_digests_are_batched_deduplicated_and_acked(replication: Rig) -> None:
    rig, c = replication, replication.client
    digest_id = rig.ids.id_of("learn_t")
    cfg = p4runtime_pb2.Entity()
    cfg.digest_entry.digest_id = digest_id
    cfg.digest_entry.config.ack_timeout_ns = 10_000_000_000
    frame = _probe(7, src=b"\x00\x11\x22\x33\x44\x55")
    rig.send(3, frame)  # not configured yet: no digest
    c.write(update(Update.INSERT, cfg))
    [got_cfg] = c.read(p4runtime_pb2.Entity(digest_entry=p4runtime_pb2.DigestEntry(
        digest_id=digest_id)))
    assert got_cfg.digest_entry.config.ack_timeout_ns == 10_000_000_000
    rig.send(3, frame)
    digest = c.expect("digest").digest
    assert digest.digest_id == digest_id and digest.list_id == 1
    assert [m.bitstring for m in digest.data[0].struct.members] == [
        bytes.fromhex("001122334455")[1:], b"\x03"]
    rig.send(3, frame)  # same sample, unacked: suppressed
    with pytest.raises(queue.Empty):
        c.responses.get(timeout=0.3)
    ack = p4runtime_pb2.StreamMessageRequest()
    ack.digest_ack.digest_id, ack.digest_ack.list_id = digest_id, 1
    c.send(ack)
    for _ in range(50):
        rig.send(3, frame)
        try:
            msg = c.responses.get(timeout=0.1)
        except queue.Empty:
            continue
        assert msg is not None and msg.digest.list_id == 2
        break
    else:
        raise AssertionError("no digest after the ack")


def test_clone_sessions_multicast_and_packet_in(replication: Rig) -> None:
    rig, c = replication, replication.client
    session = p4runtime_pb2.Entity()
    cs = session.packet_replication_engine_entry.clone_session_entry
    cs.session_id = 5
    cs.replicas.add(egress_port=4, instance=1)
    group = p4runtime_pb2.Entity()
    mc = group.packet_replication_engine_entry.multicast_group_entry
    mc.multicast_group_id = 7
    mc.replicas.add(egress_port=1, instance=1)
    mc.replicas.add(port=b"\x03", instance=2)
    c.write(update(Update.INSERT, session), update(Update.INSERT, group))
    assert sorted(port for port, _ in rig.send(1, _probe(1))) == [2, 4]
    outputs = rig.send(1, _probe(3))
    assert sorted((port, _probe_fields(f)["r2"]) for port, f in outputs) == [(1, 1), (3, 2)]
    [got] = c.read(session)
    assert got.packet_replication_engine_entry.clone_session_entry == cs
    [got] = c.read(group)
    assert [r.WhichOneof("port_kind") for r in
            got.packet_replication_engine_entry.multicast_group_entry.replicas] == [
        "port", "egress_port"]  # PI's order: the rid written last comes first
    frame = _probe(8)
    assert rig.send(6, frame) == []
    pin = c.expect("packet").packet
    assert not pin.metadata and _probe_fields(pin.payload)["op"] == 8


# -- stateful.p4 -----------------------------------------------------------------------------


def test_meters_counters_and_registers(stateful: Rig) -> None:
    rig, c = stateful, stateful.client
    meter_id = rig.ids.id_of("I.rate")
    cfg = p4runtime_pb2.Entity()
    cfg.meter_entry.meter_id = meter_id
    cfg.meter_entry.index.index = 2
    cfg.meter_entry.config.cir, cfg.meter_entry.config.cburst = 10, 2
    cfg.meter_entry.config.pir, cfg.meter_entry.config.pburst = 20, 4
    c.write(update(Update.MODIFY, cfg))
    cells = c.read(p4runtime_pb2.Entity(meter_entry=p4runtime_pb2.MeterEntry(
        meter_id=meter_id)))
    assert len(cells) == 16
    assert [e.meter_entry.index.index for e in cells if e.meter_entry.HasField("config")] == [2]
    [got] = c.read(cfg)
    assert got.meter_entry.config == cfg.meter_entry.config
    with pytest.raises(grpc.RpcError) as exc:
        c.write(update(Update.INSERT, cfg))
    assert [e.canonical_code for e in batch_errors(exc.value)] == [code_pb2.INVALID_ARGUMENT]

    flow = p4runtime_pb2.Entity()
    flow.table_entry.table_id = rig.ids.id_of("I.flows")
    flow.table_entry.match.add(field_id=1).exact.value = b"\x0a"
    flow.table_entry.action.action.action_id = rig.ids.id_of("I.fwd")
    flow.table_entry.action.action.params.add(param_id=1, value=b"\x02")
    c.write(update(Update.INSERT, flow))
    assert [p for p, _ in rig.send(1, _probe(1, a8=3, a32=5))] == [2]
    direct = p4runtime_pb2.Entity()
    direct.direct_counter_entry.table_entry.table_id = flow.table_entry.table_id
    [got] = c.read(direct)
    assert got.direct_counter_entry.data.packet_count == 1
    by_op = p4runtime_pb2.Entity()
    by_op.counter_entry.counter_id = rig.ids.id_of("I.by_op")
    by_op.counter_entry.index.index = 1
    [got] = c.read(by_op)
    assert got.counter_entry.data.packet_count == 1
    assert len(c.read(p4runtime_pb2.Entity(counter_entry=p4runtime_pb2.CounterEntry()))) == 16
    by_op.counter_entry.index.index = 16
    with pytest.raises(grpc.RpcError) as exc:
        c.read(by_op)
    assert exc.value.code() == grpc.StatusCode.UNKNOWN
    by_op.counter_entry.index.index = -1
    with pytest.raises(grpc.RpcError) as exc:
        c.read(by_op)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    register = p4runtime_pb2.Entity()
    register.register_entry.register_id = rig.ids.id_of("I.acc")
    with pytest.raises(grpc.RpcError) as exc:
        c.read(register)
    assert exc.value.code() == grpc.StatusCode.UNIMPLEMENTED


# -- direct_meter.p4 -------------------------------------------------------------------------


def _policed(rig: Rig, src: bytes, config: p4runtime_pb2.MeterConfig | None = None
             ) -> p4runtime_pb2.Entity:
    ent = rig.table_entry("I.policed")
    ent.table_entry.match.add(field_id=1).exact.value = src
    rig.set_action(ent, "I.mark", b"\x03")
    if config is not None:
        ent.table_entry.meter_config.CopyFrom(config)
    return ent


def _meter_entity(table_entry: p4runtime_pb2.TableEntry,
                  config: p4runtime_pb2.MeterConfig | None = None) -> p4runtime_pb2.Entity:
    ent = p4runtime_pb2.Entity()
    ent.direct_meter_entry.table_entry.CopyFrom(table_entry)
    ent.direct_meter_entry.table_entry.ClearField("action")
    ent.direct_meter_entry.table_entry.ClearField("meter_config")
    if config is not None:
        ent.direct_meter_entry.config.CopyFrom(config)
    return ent


def test_direct_meter_entries(direct_meter: Rig) -> None:
    rig, c = direct_meter, direct_meter.client
    one = p4runtime_pb2.MeterConfig(cir=0, cburst=0, pir=0, pburst=1)
    c.write(update(Update.INSERT, _policed(rig, b"\x00\x00\x00\x00\x00\x0a", one)),
            update(Update.INSERT, _policed(rig, b"\x00\x00\x00\x00\x00\x0b")))
    colours = [_probe_fields(rig.send(1, _probe(1))[0][1])["r2"] for _ in range(2)]
    assert colours == [1, 2]  # yellow (no committed burst), then red
    assert _probe_fields(rig.send(1, _probe(1, src=b"\x00" * 5 + b"\x0b"))[0][1])["r2"] == 0
    assert _probe_fields(rig.send(1, _probe(1, src=b"\x00" * 5 + b"\x0c"))[0][1])["r2"] == 3

    # table reads carry meter_config when asked for, and only for configured meters
    wanted = rig.table_entry("I.policed")
    wanted.table_entry.meter_config.SetInParent()
    configs = {bytes(e.table_entry.match[0].exact.value)[-1]: e.table_entry for e in c.read(wanted)}
    assert configs[0x0A].meter_config == one and not configs[0x0B].HasField("meter_config")
    assert not any(e.table_entry.HasField("meter_config")
                   for e in c.read(rig.table_entry("I.policed")))

    # DirectMeterEntry: MODIFY sets and resets, reads one entry or the whole table
    b_entry = _policed(rig, b"\x00\x00\x00\x00\x00\x0b").table_entry
    c.write(update(Update.MODIFY, _meter_entity(b_entry, one)))
    [got] = c.read(_meter_entity(b_entry))
    assert got.direct_meter_entry.config == one
    assert _probe_fields(rig.send(1, _probe(1, src=b"\x00" * 5 + b"\x0b"))[0][1])["r2"] == 1
    c.write(update(Update.MODIFY, _meter_entity(b_entry)))
    every = c.read(_meter_entity(rig.table_entry("I.policed").table_entry))
    assert sorted(e.direct_meter_entry.HasField("config") for e in every) == [False, True]
    assert _probe_fields(rig.send(1, _probe(1, src=b"\x00" * 5 + b"\x0b"))[0][1])["r2"] == 0

    with pytest.raises(grpc.RpcError) as exc:
        c.write(update(Update.INSERT, _meter_entity(b_entry, one)),
                update(Update.DELETE, _meter_entity(b_entry)),
                update(Update.MODIFY, _meter_entity(_policed(rig, b"\x01" * 6).table_entry)),
                update(Update.MODIFY, _meter_entity(rig.table_entry(
                    "I.policed", is_default_action=True).table_entry, one)))
    assert [e.canonical_code for e in batch_errors(exc.value)] == [
        code_pb2.INVALID_ARGUMENT, code_pb2.INVALID_ARGUMENT, code_pb2.INVALID_ARGUMENT,
        code_pb2.UNKNOWN]
    with pytest.raises(grpc.RpcError) as exc:
        c.read(_meter_entity(p4runtime_pb2.TableEntry()))
    assert exc.value.code() == grpc.StatusCode.UNIMPLEMENTED
