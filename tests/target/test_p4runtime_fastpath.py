"""The Write fast path against the protobuf path: same responses, same switch state.

Two servers run matching.p4 (every match kind, const tables, const default actions): one
with the wire fast path (the default), one with ``write_fast_path=False``. The same corpus
of serialized WriteRequests, valid and invalid, common and not, goes to both over gRPC in
order; every response (code, details, the google.rpc.Status trailer) and the switch state
after every request must be identical, and the fast server must have taken the path the
corpus expects. Read-back of every table closes the comparison.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from google.protobuf.message import DecodeError
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from pybmv2.runtime.p4info import P4InfoIndex
from pybmv2.runtime.server import P4RuntimeServer, ServerOptions
from pybmv2.runtime.testing import StreamClient, load_config
from pybmv2.switch import V1Switch

pytestmark = pytest.mark.target

BUILD = Path(__file__).resolve().parents[1] / "p4programs" / "build"
DEVICE_ID = 4
Update = p4runtime_pb2.Update
FM = p4runtime_pb2.FieldMatch
RawWrite = Callable[..., bytes]
INS, MOD, DEL = Update.INSERT, Update.MODIFY, Update.DELETE


@dataclass
class Side:
    server: P4RuntimeServer
    client: StreamClient
    write: RawWrite


def _side(fast: bool, with_pipeline: bool = True) -> Side:
    server = P4RuntimeServer(V1Switch(None, cpu_port=510), device_id=DEVICE_ID,
                             address="127.0.0.1:0",
                             options=ServerOptions(write_fast_path=fast))
    server.start()
    client = StreamClient(server.address, DEVICE_ID, election_id=1)
    assert client.arbitrate().status.code == code_pb2.OK
    if with_pipeline:
        client.set_pipeline(load_config(BUILD / "matching.p4info.txtpb",
                                        BUILD / "matching.json"))
    write = client.channel.unary_unary("/p4.v1.P4Runtime/Write", request_serializer=None,
                                       response_deserializer=None)
    return Side(server, client, write)


def _pair(target_name: str, with_pipeline: bool = True) -> Iterator[tuple[Side, Side]]:
    if target_name != "python":
        pytest.skip("exercises the Python target's own P4Runtime server")
    if not (BUILD / "matching.json").exists():
        pytest.skip("matching artifacts not built yet (tests/p4programs/build: run `make p4`)")
    sides = [_side(True, with_pipeline), _side(False, with_pipeline)]
    try:
        yield sides[0], sides[1]
    finally:
        for s in sides:
            s.client.close()
            s.server.stop(grace=0)


@pytest.fixture
def pair(target_name: str) -> Iterator[tuple[Side, Side]]:
    yield from _pair(target_name)


def _outcome(side: Side, data: bytes) -> tuple[object, ...]:
    try:
        side.write(data, timeout=20)
    except grpc.RpcError as exc:
        trailer = dict(exc.trailing_metadata() or ()).get("grpc-status-details-bin")
        return (exc.code(), exc.details(), trailer)
    return ("OK",)


def _state(side: Side) -> object:
    p = side.server.device.pipeline
    assert p is not None
    tables = {
        name: ([(e.key, e.action, e.priority, e.is_const, e.metadata, e.extra, e.packets,
                 e.bytes, e.handle) for e in t.entries()], t.default)
        for name, t in sorted(p.tables.items())
    }
    return tables, p.default_metadata


# -- the corpus ------------------------------------------------------------------------------


def net(first: int) -> bytes:
    """The 32-bit value of first.0.0.0 (a canonical /8)."""
    return bytes([first, 0, 0, 0])


def exact(fid: int, v: bytes) -> FM:
    return FM(field_id=fid, exact=FM.Exact(value=v))


def lpm(fid: int, v: bytes, plen: int) -> FM:
    return FM(field_id=fid, lpm=FM.LPM(value=v, prefix_len=plen))


def tern(fid: int, v: bytes, mask: bytes) -> FM:
    return FM(field_id=fid, ternary=FM.Ternary(value=v, mask=mask))


def rng(fid: int, low: bytes, high: bytes) -> FM:
    return FM(field_id=fid, range=FM.Range(low=low, high=high))


def opt(fid: int, v: bytes) -> FM:
    return FM(field_id=fid, optional=FM.Optional(value=v))


class Corpus:
    """Builders of serialized WriteRequests for matching.p4, and the list of cases."""

    def __init__(self, ids: P4InfoIndex) -> None:
        self.ids = ids
        self.cases: list[tuple[str, bytes, bool]] = []

    def te(self, table: str, *matches: FM, action: str | None = None,
           params: tuple[bytes, ...] = (), **fields: object) -> p4runtime_pb2.TableEntry:
        t = p4runtime_pb2.TableEntry(table_id=self.ids.id_of(table), **fields)
        t.match.extend(matches)
        if action is not None:
            a = t.action.action
            a.action_id = self.ids.id_of(action)
            for i, v in enumerate(params, start=1):
                a.params.add(param_id=i, value=v)
        return t

    @staticmethod
    def up(kind: int, entry: p4runtime_pb2.TableEntry | None = None,
           **entity: object) -> p4runtime_pb2.Update:
        u = Update(type=kind)
        if entry is not None:
            u.entity.table_entry.CopyFrom(entry)
        for name, msg in entity.items():
            getattr(u.entity, name).CopyFrom(msg)
        return u

    @staticmethod
    def request(*updates: p4runtime_pb2.Update, election: int | None = 1,
                **fields: object) -> p4runtime_pb2.WriteRequest:
        req = p4runtime_pb2.WriteRequest(**{"device_id": DEVICE_ID, **fields})
        if election is not None:
            req.election_id.low = election
        req.updates.extend(updates)
        return req

    def add(self, name: str, req: p4runtime_pb2.WriteRequest | bytes, fast: bool = True) -> None:
        data = req if isinstance(req, bytes) else req.SerializeToString()
        self.cases.append((name, data, fast))

    def batch(self, name: str, *updates: p4runtime_pb2.Update) -> None:
        self.add(name, self.request(*updates))


def _valid_cases(c: Corpus) -> tuple[p4runtime_pb2.TableEntry, ...]:
    mac = b"\x00\x00\x00\x00\x00\x0b"
    entries = (
        c.te("I.t_exact", exact(1, mac), exact(2, b"\x00"), action="I.set_port",
             params=(b"\x01",)),
        c.te("I.t_lpm", lpm(1, net(10), 8), action="I.tag", params=(b"\x05",),
             controller_metadata=77, metadata=b"cookie"),
        c.te("I.t_ternary", tern(1, b"\x12\x00", b"\xff\x00"), exact(2, b"\x05"),
             action="I.tag2", params=(b"\x07",), priority=10),
        c.te("I.t_range", rng(1, b"\x64", b"\xc8"), opt(2, b"\x01\x02\x03\x04"),
             action="I.tag3", params=(b"\x09",), priority=5),
        c.te("I.t_range", rng(1, b"\x01", b"\x02"), action="I.nop", priority=1),
        c.te("I.t_valid", exact(1, b"\x01"), action="I.tag2", params=(b"\x03",)),
    )
    c.batch("inserts, every match kind", *(c.up(INS, e) for e in entries))
    c.batch("duplicate insert", c.up(INS, entries[0]),
            c.up(INS, c.te("I.t_lpm", lpm(1, net(11), 8), action="I.nop")))
    return entries


def _invalid_entry_cases(c: Corpus) -> None:
    mac = b"\x00\x00\x00\x00\x00\x0b"
    c.batch("widths", *(c.up(INS, e) for e in (
        c.te("I.t_exact", exact(1, b"\x01" + mac), exact(2, b"\x00"), action="I.drop"),
        c.te("I.t_exact", exact(1, mac), exact(2, b"\x01\x00"), action="I.drop"),
        c.te("I.t_exact", exact(1, b"\x00\x00" + mac), exact(2, b"\x02"),
             action="I.set_port", params=(b"\x00\x00\x01",)),
        c.te("I.t_exact", exact(1, mac), exact(2, b"\x03"), action="I.set_port",
             params=(b"\x02\x00",)),
        c.te("I.t_exact", exact(1, b""), exact(2, b"\x04"), action="I.drop"),
    )))
    c.batch("non-canonical lpm", *(
        c.up(INS, c.te("I.t_lpm", lpm(1, v, n), action="I.nop"))
        for v, n in ((b"\x0a\x00\x00\x01", 8), (b"\x0c", 0), (b"\x0c", 33), (b"\x0c", -1))))
    c.batch("ternary, range, optional, priorities", *(c.up(INS, e) for e in (
        c.te("I.t_ternary", tern(1, b"\x00", b"\x00"), exact(2, b"\x01"), action="I.nop",
             priority=1),
        c.te("I.t_ternary", tern(1, b"\x01", b"\x10"), exact(2, b"\x01"), action="I.nop",
             priority=1),
        c.te("I.t_ternary", tern(1, b"\x01", b"\x01"), exact(2, b"\x01"), action="I.nop"),
        c.te("I.t_ternary", tern(1, b"\x01", b"\x01"), exact(2, b"\x01"), action="I.nop",
             priority=-3),
        c.te("I.t_ternary", exact(2, b"\x02"), action="I.nop", priority=2**31 - 1),
        c.te("I.t_range", rng(1, b"\x09", b"\x02"), action="I.nop", priority=1),
        c.te("I.t_range", rng(1, b"\x00", b"\xff\xff"), action="I.nop", priority=1),
        c.te("I.t_range", opt(2, b"\x05"), action="I.nop", priority=3),
        c.te("I.t_lpm", lpm(1, net(13), 8), action="I.nop", priority=4),
    )))
    tag = c.ids.id_of("I.tag")
    c.batch("actions", *(c.up(INS, e) for e in (
        c.te("I.t_lpm", lpm(1, net(20), 8), action="I.set_port", params=(b"\x01",)),
        c.te("I.t_lpm", lpm(1, net(21), 8), action="I.tag"),
        c.te("I.t_lpm", lpm(1, net(22), 8), action="I.tag", params=(b"\x01", b"\x02")),
        c.te("I.t_lpm", lpm(1, net(23), 8)),
        _with_action(c.te("I.t_lpm", lpm(1, net(24), 8)), 0x01999999, []),
        _with_action(c.te("I.t_lpm", lpm(1, net(25), 8)), tag, [(2, b"\x01")]),
        _with_action(c.te("I.t_lpm", lpm(1, net(26), 8)), tag, [(1, b"\x01"), (1, b"\x02")]),
    )))
    c.batch("match structure", *(c.up(INS, e) for e in (
        c.te("I.t_exact", exact(1, mac), action="I.drop"),
        c.te("I.t_exact", exact(1, mac), exact(7, b"\x01"), action="I.drop"),
        c.te("I.t_exact", exact(1, mac), exact(1, mac), action="I.drop"),
        c.te("I.t_exact", exact(1, mac), exact(2, b"\x01"), exact(2, b"\x02"), action="I.drop"),
        c.te("I.t_exact", lpm(1, mac, 8), exact(2, b"\x01"), action="I.drop"),
        c.te("I.t_valid", exact(1, b"\x00"), action="I.nop"),
    )))


def _state_cases(c: Corpus, valid: tuple[p4runtime_pb2.TableEntry, ...]) -> None:
    c.batch("modify and delete", *(c.up(kind, e) for kind, e in (
        (MOD, c.te("I.t_lpm", lpm(1, net(10), 8), action="I.tag", params=(b"\x06",),
                   metadata=b"m2")),
        (MOD, c.te("I.t_lpm", lpm(1, net(127), 8), action="I.nop")),
        (MOD, c.te("I.t_lpm", lpm(1, net(10), 8))),
        (DEL, c.te("I.t_lpm", lpm(1, net(126), 8))),
        (DEL, valid[4]), (INS, valid[4]), (DEL, valid[5]),
    )))
    c.batch("default entries", *(c.up(kind, e) for kind, e in (
        (MOD, c.te("I.t_lpm", action="I.tag", params=(b"\x03",), is_default_action=True,
                   controller_metadata=5)),
        (MOD, c.te("I.t_lpm", lpm(1, net(10), 8), action="I.nop", is_default_action=True)),
        (MOD, c.te("I.t_ternary", action="I.nop", is_default_action=True, priority=3)),
        (INS, c.te("I.t_lpm", action="I.nop", is_default_action=True)),
        (DEL, c.te("I.t_lpm", is_default_action=True)),
        (MOD, c.te("I.t_const", action="I.nop", is_default_action=True)),
        (MOD, c.te("I.t_const_ternary", action="NoAction", is_default_action=True)),
        (MOD, c.te("I.t_exact", action="I.drop", is_default_action=True)),
        (MOD, c.te("I.t_exact", is_default_action=True)),
    )))
    c.batch("const tables", *(c.up(kind, e) for kind, e in (
        (INS, c.te("I.t_const", exact(1, b"\x09"), action="I.nop")),
        (MOD, c.te("I.t_const", exact(1, b"\x01"), action="I.nop")),
        (DEL, c.te("I.t_const", exact(1, b"\x01"))),
        (INS, c.te("I.t_const_ternary", tern(1, b"\x01", b"\x01"), action="NoAction",
                   priority=1)),
    )))
    c.batch("odd updates", c.up(Update.UNSPECIFIED, valid[0]),
            c.up(INS, c.te("I.t_lpm", lpm(1, net(33), 8), action="I.nop", is_const=True)),
            c.up(INS, p4runtime_pb2.TableEntry(table_id=0x02999999)),
            c.up(INS, p4runtime_pb2.TableEntry()))
    mixed = []
    for i in range(12):
        value = net(40 + i) if i % 3 else bytes([40 + i, 0, 0, 1])  # every third is invalid
        entry = c.te("I.t_lpm", lpm(1, value, 8), action="I.tag", params=(bytes([i]),))
        mixed.append(c.up(INS if i % 4 else MOD, entry))
    c.batch("mixed batch", *mixed, c.up(INS, valid[1]),
            c.up(DEL, c.te("I.t_lpm", lpm(1, net(41), 8))))
    c.batch("a large batch", *(
        c.up(INS, c.te("I.t_lpm", lpm(1, bytes([100, i >> 8, i & 255, 0]), 24),
                       action="I.tag", params=(b"\x01",)))
        for i in range(400)))


def _with_action(entry: p4runtime_pb2.TableEntry, action_id: int,
                 params: list[tuple[int, bytes]]) -> p4runtime_pb2.TableEntry:
    entry.action.action.action_id = action_id
    for pid, value in params:
        entry.action.action.params.add(param_id=pid, value=value)
    return entry


def _request_cases(c: Corpus) -> None:
    one = c.up(Update.INSERT, c.te("I.t_lpm", lpm(1, net(48), 8), action="I.nop"))
    c.add("wrong device id", c.request(one, device_id=DEVICE_ID + 1))
    c.add("not the primary's election id", c.request(one, election=2))
    c.add("no election id", c.request(one, election=None))
    c.add("unknown role", c.request(one, role="nobody"))
    c.add("atomic batch", c.request(one, atomicity=p4runtime_pb2.WriteRequest.ROLLBACK_ON_ERROR))
    c.add("an empty batch", c.request())
    c.add("deprecated role_id", c.request(one, role_id=3))


def _fallback_cases(c: Corpus) -> None:
    valid = c.request(c.up(INS, c.te("I.t_lpm", lpm(1, net(49), 8), action="I.nop")))
    c.add("unknown field", valid.SerializeToString() + b"\xf8\x06\x01", fast=False)
    update = valid.updates[0].SerializeToString()
    assert update.startswith(b"\x08\x01")  # type = INSERT, then the entity
    odd = b"\x08\x07" + update[2:]
    c.add("unknown update type", bytes([0x22, len(odd)]) + odd + valid.SerializeToString(),
          fast=False)
    data = valid.SerializeToString()[:-3]
    with pytest.raises(DecodeError):
        p4runtime_pb2.WriteRequest.FromString(data)
    c.add("malformed bytes", data, fast=False)
    group = p4runtime_pb2.PacketReplicationEngineEntry()
    group.multicast_group_entry.multicast_group_id = 7
    group.multicast_group_entry.replicas.add(egress_port=1, instance=1)
    c.add("mixed entity types", c.request(
        c.up(INS, c.te("I.t_lpm", lpm(1, net(50), 8), action="I.nop")),
        c.up(INS, packet_replication_engine_entry=group),
        c.up(Update.MODIFY, counter_entry=p4runtime_pb2.CounterEntry(counter_id=0x12000001)),
        c.up(INS, action_profile_member=p4runtime_pb2.ActionProfileMember()),
        c.up(Update.MODIFY, register_entry=p4runtime_pb2.RegisterEntry()),
        c.up(INS, c.te("I.t_lpm", lpm(1, net(50), 8), action="I.nop"))), fast=False)
    lpm33 = lpm(1, net(51), 8)
    entries = [c.te("I.t_lpm", lpm33, action="I.nop") for _ in range(5)]
    entries[0].meter_config.cir = 1
    entries[1].counter_data.packet_count = 3
    entries[2].time_since_last_hit.elapsed_ns = 1
    entries[3].action.action_profile_member_id = 1
    entries[4].action.Clear()
    entries[4].action.SetInParent()
    for i, e in enumerate(entries):
        c.add(f"table entry the decoder declines ({i})", c.request(c.up(INS, e)), fast=False)
    ttl = c.te("I.t_lpm", lpm33, action="I.nop")
    ttl.idle_timeout_ns = 5  # decoded (a flow cache's inserts); refused: the table has no timeout
    c.add("idle_timeout_ns on a table without support_timeout", c.request(c.up(INS, ttl)), fast=True)
    other = c.te("I.t_lpm", action="I.nop")
    other.match.add(field_id=1).other.type_url = "x"
    c.add("FieldMatch.other", c.request(c.up(INS, other)), fast=False)


def corpus(ids: P4InfoIndex) -> list[tuple[str, bytes, bool]]:
    c = Corpus(ids)
    valid = _valid_cases(c)
    _invalid_entry_cases(c)
    _state_cases(c, valid)
    _request_cases(c)
    _fallback_cases(c)
    return c.cases


# -- tests -----------------------------------------------------------------------------------


def test_both_paths_answer_alike_and_leave_the_same_state(pair: tuple[Side, Side]) -> None:
    fast, slow = pair
    pipeline = fast.server.device.pipeline
    assert pipeline is not None
    cases = corpus(pipeline.index)
    svc = fast.server.servicer
    failures = 0
    for name, data, fast_path in cases:
        before = (svc.write_fast_count, svc.write_fallback_count)
        got, want = _outcome(fast, data), _outcome(slow, data)
        assert got == want, name
        assert _state(fast) == _state(slow), name
        counted = (svc.write_fast_count - before[0], svc.write_fallback_count - before[1])
        assert counted == ((1, 0) if fast_path else (0, 1)), name
        failures += got != ("OK",)
    assert failures > len(cases) // 2  # the corpus exercises the errors...
    assert sum(fast_path for _, _, fast_path in cases) > len(cases) // 2  # ...mostly fast
    assert (slow.server.servicer.write_fast_count,
            slow.server.servicer.write_fallback_count) == (0, 0)
    everything = p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry())
    assert fast.client.read(everything) == slow.client.read(everything)
    assert len(fast.client.read(everything)) > 400
    for table_id in pipeline.index.tables:
        default = p4runtime_pb2.Entity()
        default.table_entry.table_id = table_id
        default.table_entry.is_default_action = True
        assert fast.client.read(default) == slow.client.read(default)


def test_errors_are_reported_per_update(pair: tuple[Side, Side]) -> None:
    fast, _ = pair
    pipeline = fast.server.device.pipeline
    assert pipeline is not None
    c = Corpus(pipeline.index)
    entry = c.te("I.t_lpm", lpm(1, net(10), 8), action="I.nop")
    data = c.request(c.up(Update.INSERT, entry), c.up(Update.INSERT, entry)).SerializeToString()
    code, details, trailer = _outcome(fast, data)
    assert code == grpc.StatusCode.UNKNOWN and details == "1 of 2 updates failed"
    assert isinstance(trailer, bytes)
    assert fast.server.servicer.write_fast_count == 1


def test_no_pipeline(target_name: str) -> None:
    for fast, slow in _pair(target_name, with_pipeline=False):
        ids = P4InfoIndex(load_config(BUILD / "matching.p4info.txtpb",
                                      BUILD / "matching.json").p4info)
        c = Corpus(ids)
        data = c.request(c.up(Update.INSERT, c.te("I.t_lpm", lpm(1, net(10), 8),
                                                  action="I.nop"))).SerializeToString()
        got = _outcome(fast, data)
        assert got == _outcome(slow, data)
        assert got[0] == grpc.StatusCode.FAILED_PRECONDITION
