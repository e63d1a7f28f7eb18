"""The P4Runtime server of the Python target, driven over real gRPC on loopback.

Runs rail_switch (p4src/build artifacts) on an in-process V1Switch; packets go through
``switch.process`` and ``server.deliver_outputs`` as the process-mode I/O layer does.
"""

from __future__ import annotations

import queue
import struct
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import text_format
from google.rpc import code_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from pybmv2.runtime.p4info import P4InfoIndex
from pybmv2.runtime.server import P4RuntimeServer, ServerOptions
from pybmv2.runtime.testing import StreamClient, batch_errors
from pybmv2.switch import V1Switch

pytestmark = pytest.mark.target

BUILD = Path(__file__).resolve().parents[2] / "p4src" / "build"
JSON_PATH = BUILD / "rail_switch.json"
P4INFO_PATH = BUILD / "rail_switch.p4info.txtpb"
CPU_PORT = 510
DEVICE_ID = 1
Update = p4runtime_pb2.Update
SetAction = p4runtime_pb2.SetForwardingPipelineConfigRequest


@pytest.fixture(scope="module")
def artifacts(target_name: str) -> tuple[p4info_pb2.P4Info, bytes]:
    if target_name != "python":
        pytest.skip("exercises the Python target's own P4Runtime server")
    if not (JSON_PATH.exists() and P4INFO_PATH.exists()):
        pytest.skip(f"rail_switch artifacts not built yet ({JSON_PATH.name}, "
                    f"{P4INFO_PATH.name}: run `make p4`)")
    p4info = text_format.Parse(P4INFO_PATH.read_text(), p4info_pb2.P4Info())
    return p4info, JSON_PATH.read_bytes()


@pytest.fixture(scope="module")
def ids(artifacts: tuple[p4info_pb2.P4Info, bytes]) -> P4InfoIndex:
    return P4InfoIndex(artifacts[0])


@pytest.fixture
def switch() -> V1Switch:
    return V1Switch(None, cpu_port=CPU_PORT)


@pytest.fixture
def server(switch: V1Switch) -> Iterator[P4RuntimeServer]:
    srv = P4RuntimeServer(switch, device_id=DEVICE_ID, address="127.0.0.1:0")
    srv.start()
    try:
        yield srv
    finally:
        srv.stop(grace=0)


@pytest.fixture
def clients(server: P4RuntimeServer) -> Iterator[list[StreamClient]]:
    opened: list[StreamClient] = []
    try:
        yield opened
    finally:
        for c in opened:
            c.close()


def _connect(server: P4RuntimeServer, clients: list[StreamClient], election_id: int | None,
             device_id: int = DEVICE_ID) -> StreamClient:
    c = StreamClient(server.address, device_id, election_id)
    clients.append(c)
    return c


@pytest.fixture
def primary(server: P4RuntimeServer, clients: list[StreamClient],
            artifacts: tuple[p4info_pb2.P4Info, bytes]) -> StreamClient:
    """A primary client that committed rail_switch."""
    c = _connect(server, clients, 10)
    assert c.arbitrate().status.code == code_pb2.OK
    c.set_pipeline(_config(*artifacts))
    return c


def _config(p4info: p4info_pb2.P4Info, json_bytes: bytes,
            cookie: int = 7) -> p4runtime_pb2.ForwardingPipelineConfig:
    config = p4runtime_pb2.ForwardingPipelineConfig(p4_device_config=json_bytes)
    config.p4info.CopyFrom(p4info)
    config.cookie.cookie = cookie
    return config


def _route(ids: P4InfoIndex, prefix: bytes, plen: int, port: int,
           action: str = "RailIngress.set_nexthop") -> p4runtime_pb2.Entity:
    ent = p4runtime_pb2.Entity()
    te = ent.table_entry
    te.table_id = ids.id_of("RailIngress.ipv4_lpm")
    fm = te.match.add(field_id=1)
    fm.lpm.value, fm.lpm.prefix_len = prefix, plen
    te.action.action.action_id = ids.id_of(action)
    if action == "RailIngress.set_nexthop":
        for pid, value in ((1, port.to_bytes(2, "big")), (2, b"\x02" * 6), (3, b"\x04" * 6)):
            te.action.action.params.add(param_id=pid, value=value)
    return ent


def _update(kind: int, entity: p4runtime_pb2.Entity) -> p4runtime_pb2.Update:
    u = p4runtime_pb2.Update(type=kind)
    u.entity.CopyFrom(entity)
    return u


def _checksum(header: bytes) -> int:
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _frame(dst: str = "10.0.1.5", ttl: int = 64) -> bytes:
    udp = struct.pack("!HHHH", 1234, 4321, 8 + 4, 0) + b"data"
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, ttl, 17, 0,
                     bytes([10, 0, 0, 1]), bytes(int(x) for x in dst.split(".")))
    ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
    return b"\x00\x00\x00\x00\x00\x01" + b"\x00\x00\x00\x00\x00\x02" + b"\x08\x00" + ip + udp


def _rpc_code(exc_info: pytest.ExceptionInfo[grpc.RpcError]) -> grpc.StatusCode:
    return exc_info.value.code()


# -- before any pipeline ---------------------------------------------------------------------


def test_capabilities_and_requests_before_a_pipeline(server: P4RuntimeServer,
                                                      clients: list[StreamClient]) -> None:
    c = _connect(server, clients, None)
    assert c.stub.Capabilities(p4runtime_pb2.CapabilitiesRequest()).p4runtime_api_version \
        == "1.4.1"
    with pytest.raises(grpc.RpcError) as exc:
        c.read(p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry()))
    assert _rpc_code(exc) == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as exc:
        c.write()
    assert _rpc_code(exc) == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as exc:
        c.stub.GetForwardingPipelineConfig(
            p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=DEVICE_ID))
    assert _rpc_code(exc) == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as exc:  # another device: one with no pipeline (PI)
        list(c.stub.Read(p4runtime_pb2.ReadRequest(device_id=99)))
    assert _rpc_code(exc) == grpc.StatusCode.FAILED_PRECONDITION


def test_the_primary_of_another_device_cannot_send_packets(primary: StreamClient,
                                                           server: P4RuntimeServer,
                                                           clients: list[StreamClient]) -> None:
    sent: queue.Queue[list[tuple[int, bytes]]] = queue.Queue()
    server.packet_out_sink = sent.put
    other = _connect(server, clients, 1, device_id=42)
    assert other.arbitrate().status.code == code_pb2.OK  # PI: the primary of device 42
    other.packet_out(_frame(), {1: b"\x00\x02"})
    primary.packet_out(_frame(ttl=9), {1: b"\x00\x05"})
    assert sent.get(timeout=5) == [(5, _frame(ttl=9))]  # only device 1's primary's went out
    assert sent.empty()


# -- arbitration and pipeline ----------------------------------------------------------------


def test_primary_backup_and_failover(server: P4RuntimeServer, clients: list[StreamClient],
                                     artifacts: tuple[p4info_pb2.P4Info, bytes],
                                     ids: P4InfoIndex) -> None:
    a = _connect(server, clients, 10)
    assert a.arbitrate().status.code == code_pb2.OK
    b = _connect(server, clients, 5)
    backup = b.arbitrate()
    assert backup.status.code == code_pb2.ALREADY_EXISTS
    assert backup.election_id.low == 10
    with pytest.raises(grpc.RpcError) as exc:
        b.set_pipeline(_config(*artifacts))
    assert _rpc_code(exc) == grpc.StatusCode.PERMISSION_DENIED
    a.set_pipeline(_config(*artifacts))
    with pytest.raises(grpc.RpcError) as exc:
        b.write(_update(Update.INSERT, _route(ids, b"\x0a\x00\x00\x00", 8, 1)))
    assert _rpc_code(exc) == grpc.StatusCode.PERMISSION_DENIED
    dup = _connect(server, clients, 10)
    with pytest.raises(AssertionError, match="stream ended"):
        dup.arbitrate()
    assert dup.stream_error is not None
    assert dup.stream_error.code() == grpc.StatusCode.INVALID_ARGUMENT
    a.close()
    assert b.expect("arbitration").arbitration.status.code == code_pb2.OK
    b.write(_update(Update.INSERT, _route(ids, b"\x0a\x00\x00\x00", 8, 1)))


def test_pipeline_config_actions(primary: StreamClient,
                                 artifacts: tuple[p4info_pb2.P4Info, bytes]) -> None:
    p4info, json_bytes = artifacts
    get = p4runtime_pb2.GetForwardingPipelineConfigRequest
    full = primary.stub.GetForwardingPipelineConfig(
        get(device_id=DEVICE_ID, response_type=get.ALL)).config
    assert full.p4info == p4info and full.p4_device_config == json_bytes
    assert full.cookie.cookie == 7
    cookie = primary.stub.GetForwardingPipelineConfig(
        get(device_id=DEVICE_ID, response_type=get.COOKIE_ONLY)).config
    assert not cookie.HasField("p4info") and not cookie.p4_device_config
    assert cookie.cookie.cookie == 7
    primary.set_pipeline(_config(p4info, json_bytes), SetAction.VERIFY)
    with pytest.raises(grpc.RpcError) as exc:  # as on PI: rail_switch's counter cells
        primary.set_pipeline(_config(p4info, json_bytes), SetAction.RECONCILE_AND_COMMIT)
    assert _rpc_code(exc) == grpc.StatusCode.UNKNOWN
    assert exc.value.details() == "Error when reconciling config"
    bad = p4info_pb2.P4Info()
    bad.CopyFrom(p4info)
    bad.tables[0].match_fields[0].bitwidth = 7
    with pytest.raises(grpc.RpcError) as exc:
        primary.set_pipeline(_config(bad, json_bytes), SetAction.VERIFY)
    assert _rpc_code(exc) == grpc.StatusCode.INVALID_ARGUMENT
    assert "7 bits in the P4Info" in exc.value.details()
    primary.set_pipeline(_config(p4info, json_bytes, cookie=9), SetAction.VERIFY_AND_SAVE)
    primary.set_pipeline(p4runtime_pb2.ForwardingPipelineConfig(), SetAction.COMMIT)
    again = primary.stub.GetForwardingPipelineConfig(
        get(device_id=DEVICE_ID, response_type=get.COOKIE_ONLY)).config
    assert again.cookie.cookie == 9


# -- table entries ---------------------------------------------------------------------------


def test_insert_read_modify_delete(primary: StreamClient, ids: P4InfoIndex) -> None:
    route = _route(ids, b"\x0a\x00\x01\x00", 24, 3)
    route.table_entry.controller_metadata = 77
    primary.write(_update(Update.INSERT, route))
    [got] = primary.read(p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(
        table_id=ids.id_of("RailIngress.ipv4_lpm"))))
    te = got.table_entry
    assert te.match[0].lpm.value == b"\x0a\x00\x01\x00" and te.match[0].lpm.prefix_len == 24
    assert [p.value for p in te.action.action.params] == [b"\x03", b"\x02" * 6, b"\x04" * 6]
    assert te.controller_metadata == 77
    modified = _route(ids, b"\x0a\x00\x01\x00", 24, 4)
    primary.write(_update(Update.MODIFY, modified))
    [got] = primary.read(p4runtime_pb2.Entity(table_entry=modified.table_entry))
    assert got.table_entry.action.action.params[0].value == b"\x04"
    primary.write(_update(Update.DELETE, modified))
    assert primary.read(p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(
        table_id=ids.id_of("RailIngress.ipv4_lpm")))) == []
    with pytest.raises(grpc.RpcError) as exc:
        primary.write(_update(Update.DELETE, modified), _update(Update.MODIFY, modified))
    assert _rpc_code(exc) == grpc.StatusCode.UNKNOWN
    assert [e.canonical_code for e in batch_errors(exc.value)] == [code_pb2.NOT_FOUND] * 2


def test_duplicate_insert_fails_alone_in_its_batch(primary: StreamClient,
                                                   ids: P4InfoIndex) -> None:
    a = _route(ids, b"\x0a\x00\x02\x00", 24, 1)
    b = _route(ids, b"\x0a\x00\x03\x00", 24, 2)
    with pytest.raises(grpc.RpcError) as exc:
        primary.write(_update(Update.INSERT, a), _update(Update.INSERT, a),
                      _update(Update.INSERT, b))
    assert _rpc_code(exc) == grpc.StatusCode.UNKNOWN
    errors = batch_errors(exc.value)
    assert [e.canonical_code for e in errors] == [code_pb2.OK, code_pb2.ALREADY_EXISTS,
                                                  code_pb2.OK]
    assert len(primary.read(p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(
        table_id=ids.id_of("RailIngress.ipv4_lpm"))))) == 2


def test_malformed_entries_are_invalid_argument(primary: StreamClient,
                                                ids: P4InfoIndex) -> None:
    too_wide_key = _route(ids, b"\x01\x0a\x00\x00\x00", 8, 1)
    too_wide_param = _route(ids, b"\x0b\x00\x00\x00", 8, 1)
    too_wide_param.table_entry.action.action.params[0].value = b"\x02\x00"  # 512 > 9 bits
    bad_prefix = _route(ids, b"\x0c\x00\x00\x01", 8, 1)
    with pytest.raises(grpc.RpcError) as exc:
        primary.write(*(_update(Update.INSERT, e)
                        for e in (too_wide_key, too_wide_param, bad_prefix)))
    assert [e.canonical_code for e in batch_errors(exc.value)] == [code_pb2.INVALID_ARGUMENT] * 3


def test_wildcard_reads(primary: StreamClient, ids: P4InfoIndex) -> None:
    primary.write(_update(Update.INSERT, _route(ids, b"\x0a\x00\x00\x00", 8, 1)))
    ecmp = p4runtime_pb2.Entity()
    te = ecmp.table_entry
    te.table_id = ids.id_of("RailIngress.ecmp_nexthop")
    te.match.add(field_id=1).exact.value = b"\x00\x01"
    te.match.add(field_id=2).exact.value = b"\x00\x00"
    te.action.action.action_id = ids.id_of("RailIngress.drop")
    primary.write(_update(Update.INSERT, ecmp))
    everything = primary.read(p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry()))
    assert sorted(e.table_entry.table_id for e in everything) == sorted(
        [ids.id_of("RailIngress.ipv4_lpm"), ids.id_of("RailIngress.ecmp_nexthop")])
    [one] = primary.read(ecmp)
    assert [m.exact.value for m in one.table_entry.match] == [b"\x01", b"\x00"]


def test_default_action_modify_and_reset(primary: StreamClient, ids: P4InfoIndex) -> None:
    table_id = ids.id_of("RailIngress.ipv4_lpm")
    query = p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(
        table_id=table_id, is_default_action=True))
    [got] = primary.read(query)
    assert got.table_entry.action.action.action_id == ids.id_of("RailIngress.drop")
    new = p4runtime_pb2.Entity()
    new.table_entry.table_id = table_id
    new.table_entry.is_default_action = True
    new.table_entry.action.action.action_id = ids.id_of("RailIngress.send_to_cpu")
    primary.write(_update(Update.MODIFY, new))
    [got] = primary.read(query)
    assert got.table_entry.action.action.action_id == ids.id_of("RailIngress.send_to_cpu")
    with pytest.raises(grpc.RpcError) as exc:
        primary.write(_update(Update.INSERT, new))
    assert [e.canonical_code for e in batch_errors(exc.value)] == [code_pb2.INVALID_ARGUMENT]
    new.table_entry.ClearField("action")
    primary.write(_update(Update.MODIFY, new))  # no action: back to the program's default
    [got] = primary.read(query)
    assert got.table_entry.action.action.action_id == ids.id_of("RailIngress.drop")


# -- counters and packets --------------------------------------------------------------------


def test_counters_after_packets(primary: StreamClient, ids: P4InfoIndex, switch: V1Switch,
                                server: P4RuntimeServer) -> None:
    route = _route(ids, b"\x0a\x00\x01\x00", 24, 3)
    primary.write(_update(Update.INSERT, route))
    frame = _frame()
    for _ in range(3):
        out = server.deliver_outputs(switch.process(1, frame))
        assert [port for port, _ in out] == [3]
    counter_id = ids.id_of("RailIngress.port_rx")
    query = p4runtime_pb2.Entity()
    query.counter_entry.counter_id = counter_id
    query.counter_entry.index.index = 1
    [got] = primary.read(query)
    assert got.counter_entry.data.packet_count == 3
    assert got.counter_entry.data.byte_count == 3 * len(frame)
    all_cells = primary.read(p4runtime_pb2.Entity(
        counter_entry=p4runtime_pb2.CounterEntry(counter_id=counter_id)))
    assert len(all_cells) == 512
    direct = p4runtime_pb2.Entity()
    direct.direct_counter_entry.table_entry.CopyFrom(route.table_entry)
    direct.direct_counter_entry.table_entry.ClearField("action")
    [got] = primary.read(direct)
    assert got.direct_counter_entry.data.packet_count == 3
    with_data = p4runtime_pb2.Entity()
    with_data.table_entry.table_id = route.table_entry.table_id
    with_data.table_entry.counter_data.SetInParent()
    [got] = primary.read(with_data)
    assert got.table_entry.counter_data.packet_count == 3
    reset = p4runtime_pb2.Entity()
    reset.counter_entry.CopyFrom(query.counter_entry)
    reset.counter_entry.data.packet_count = 0
    reset.counter_entry.data.byte_count = 0
    primary.write(_update(Update.MODIFY, reset))
    [got] = primary.read(query)
    assert got.counter_entry.data.packet_count == 0


def test_packet_out_leaves_on_the_requested_port(primary: StreamClient,
                                                 server: P4RuntimeServer) -> None:
    sent: queue.Queue[list[tuple[int, bytes]]] = queue.Queue()
    server.packet_out_sink = sent.put
    frame = _frame()
    primary.packet_out(frame, {1: b"\x00\x02"})  # egress_port = 2
    assert sent.get(timeout=5) == [(2, frame)]


def test_frames_to_the_cpu_become_packet_ins(primary: StreamClient, ids: P4InfoIndex,
                                             switch: V1Switch,
                                             server: P4RuntimeServer) -> None:
    primary.write(_update(Update.INSERT, _route(ids, b"\x0a\x00\x09\x00", 24, 0,
                                                action="RailIngress.send_to_cpu")))
    frame = _frame(dst="10.0.9.1")
    assert server.deliver_outputs(switch.process(7, frame)) == []
    pin = primary.expect("packet").packet
    assert pin.payload == frame
    assert {m.metadata_id: m.value for m in pin.metadata}[1] == b"\x07"


# -- PRE and unsupported entities ------------------------------------------------------------


def test_multicast_groups(primary: StreamClient) -> None:
    group = p4runtime_pb2.Entity()
    mc = group.packet_replication_engine_entry.multicast_group_entry
    mc.multicast_group_id = 5
    mc.replicas.add(egress_port=2, instance=1)
    mc.replicas.add(egress_port=1, instance=1)
    primary.write(_update(Update.INSERT, group))
    query = p4runtime_pb2.Entity()
    query.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 5
    [got] = primary.read(query)
    replicas = got.packet_replication_engine_entry.multicast_group_entry.replicas
    assert [(r.egress_port, r.instance) for r in replicas] == [(1, 1), (2, 1)]
    with pytest.raises(grpc.RpcError) as exc:
        primary.write(_update(Update.INSERT, group))
    assert [e.canonical_code for e in batch_errors(exc.value)] == [code_pb2.ALREADY_EXISTS]
    query.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 0
    assert len(primary.read(query)) == 1
    primary.write(_update(Update.DELETE, group))
    query.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 5
    with pytest.raises(grpc.RpcError) as exc:
        primary.read(query)
    assert _rpc_code(exc) == grpc.StatusCode.NOT_FOUND


def test_registers_and_atomic_batches_are_unimplemented(primary: StreamClient,
                                                        ids: P4InfoIndex) -> None:
    with pytest.raises(grpc.RpcError) as exc:
        primary.read(p4runtime_pb2.Entity(register_entry=p4runtime_pb2.RegisterEntry()))
    assert _rpc_code(exc) == grpc.StatusCode.UNIMPLEMENTED
    with pytest.raises(grpc.RpcError) as exc:
        primary.write(_update(Update.MODIFY, p4runtime_pb2.Entity(
            register_entry=p4runtime_pb2.RegisterEntry(register_id=1))))
    assert [e.canonical_code for e in batch_errors(exc.value)] == [code_pb2.UNIMPLEMENTED]
    for mode in (p4runtime_pb2.WriteRequest.ROLLBACK_ON_ERROR,
                 p4runtime_pb2.WriteRequest.DATAPLANE_ATOMIC):
        with pytest.raises(grpc.RpcError) as exc:
            primary.write(_update(Update.INSERT, _route(ids, b"\x0a\x00\x00\x00", 8, 1)),
                          atomicity=mode)
        assert _rpc_code(exc) == grpc.StatusCode.UNIMPLEMENTED


def test_packet_out_from_a_backup_is_ignored(primary: StreamClient, server: P4RuntimeServer,
                                             clients: list[StreamClient]) -> None:
    sent: queue.Queue[list[tuple[int, bytes]]] = queue.Queue()
    server.packet_out_sink = sent.put
    backup = _connect(server, clients, 3)
    assert backup.arbitrate().status.code == code_pb2.ALREADY_EXISTS
    backup.packet_out(_frame(), {1: b"\x00\x02"})
    primary.packet_out(_frame(ttl=9), {1: b"\x00\x05"})
    assert sent.get(timeout=5) == [(5, _frame(ttl=9))]  # only the primary's went out
    assert sent.empty()


def test_packet_out_injector_and_stream_errors(switch: V1Switch,
                                               artifacts: tuple[p4info_pb2.P4Info, bytes]
                                               ) -> None:
    srv = P4RuntimeServer(switch, device_id=DEVICE_ID, address="127.0.0.1:0",
                          options=ServerOptions(stream_error_reporting=True))
    injected: queue.Queue[tuple[int, bytes]] = queue.Queue()
    srv.packet_out_injector = lambda port, frame: injected.put((port, frame))
    srv.start()
    c = StreamClient(srv.address, DEVICE_ID, 1)
    try:
        c.arbitrate()
        c.set_pipeline(_config(*artifacts))
        c.packet_out(b"payload", {1: b"\x01\x00"})  # egress_port 256
        assert injected.get(timeout=5) == (CPU_PORT, b"\x80\x00payload")
        c.packet_out(b"payload", {9: b"\x01"})  # unknown metadata id
        err = c.expect("error").error
        assert err.canonical_code == code_pb2.INVALID_ARGUMENT
        assert err.packet_out.packet_out.payload == b"payload"
    finally:
        c.close()
        srv.stop(grace=0)
