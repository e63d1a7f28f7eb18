"""Unit tests of the P4Runtime codec, arbitration and digest logic on a synthetic P4Info."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from google.protobuf import text_format
from google.rpc import code_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4data_pb2, p4runtime_pb2

from pybmv2.pre import Replica
from pybmv2.program import Program
from pybmv2.runtime.arbitration import Arbitration
from pybmv2.runtime.codec import (
    decode_action,
    decode_bytestring,
    decode_match_key,
    decode_meter_config,
    encode_action,
    encode_bytestring,
    encode_match_key,
    merge_counter_data,
    validate_table_action,
)
from pybmv2.runtime.digests import MAX_LIST_BYTES, DigestEngine, max_samples
from pybmv2.runtime.errors import P4RuntimeError, batch_status
from pybmv2.runtime.p4info import (
    P4InfoIndex,
    P4InfoMismatchError,
    TableBinding,
    bind,
    id_prefix,
)
from pybmv2.runtime.packetio import (
    digest_data,
    pack_header,
    packet_in_message,
    packet_out_frame,
    unpack_header,
)
from pybmv2.runtime.pre_codec import (
    decode_clone_session,
    decode_multicast_group,
    encode_multicast_group,
)
from pybmv2.tables import ActionCall

pytestmark = pytest.mark.unit

MT = p4info_pb2.MatchField
Scope = p4info_pb2.ActionRef
LPM_T, TERN_T = 0x02000001, 0x02000002
A_FWD, A_PAIR, A_NOP, A_DEF = 0x01000001, 0x01000002, 0x01000003, 0x01000004


def _p4info() -> p4info_pb2.P4Info:
    info = p4info_pb2.P4Info()
    for aid, name, params in (
        (A_FWD, "ingress.fwd", [("port", 9)]),
        (A_PAIR, "ingress.pair", [("mac", 48), ("vlan", 12)]),
        (A_NOP, "NoAction", []),
        (A_DEF, "ingress.only_default", []),
    ):
        a = info.actions.add()
        a.preamble.id, a.preamble.name = aid, name
        for i, (pname, width) in enumerate(params, start=1):
            a.params.add(id=i, name=pname, bitwidth=width)
    t = info.tables.add()
    t.preamble.id, t.preamble.name = LPM_T, "ingress.lpm"
    t.match_fields.add(id=1, name="hdr.ipv4.dst", bitwidth=32, match_type=MT.LPM)
    t.match_fields.add(id=2, name="meta.port", bitwidth=9, match_type=MT.EXACT)
    t.action_refs.add(id=A_FWD)
    t.action_refs.add(id=A_PAIR, scope=Scope.TABLE_ONLY)
    t.action_refs.add(id=A_DEF, scope=Scope.DEFAULT_ONLY)
    t.action_refs.add(id=A_NOP)
    t.size = 1024
    t = info.tables.add()
    t.preamble.id, t.preamble.name = TERN_T, "ingress.acl"
    t.match_fields.add(id=1, name="hdr.eth.type", bitwidth=16, match_type=MT.TERNARY)
    t.match_fields.add(id=2, name="hdr.l4.dport", bitwidth=16, match_type=MT.RANGE)
    t.match_fields.add(id=3, name="hdr.ip.proto", bitwidth=8, match_type=MT.OPTIONAL)
    t.action_refs.add(id=A_FWD)
    t.action_refs.add(id=A_NOP)
    t.const_default_action_id = A_NOP
    for name, fields in (("packet_in", [("ingress_port", 9), ("_pad", 7)]),
                         ("packet_out", [("egress_port", 9), ("_pad", 7)])):
        h = info.controller_packet_metadata.add()
        h.preamble.id, h.preamble.name = 0x04000000 + len(name), name
        for i, (fname, width) in enumerate(fields, start=1):
            h.metadata.add(id=i, name=fname, bitwidth=width)
    d = info.digests.add()
    d.preamble.id, d.preamble.name = 0x17000001, "learn_t"
    d.type_spec.struct.name = "learn_t"
    st = info.type_info.structs["learn_t"]
    st.members.add(name="mac").type_spec.bitstring.bit.bitwidth = 48
    st.members.add(name="port").type_spec.bitstring.bit.bitwidth = 9
    return info


@pytest.fixture(scope="module")
def index() -> P4InfoIndex:
    return P4InfoIndex(_p4info())


def _binding(index: P4InfoIndex, table_id: int) -> TableBinding:
    info = index.tables[table_id]
    ids = {aid: aid + 100 for aid in info.action_scopes}
    return TableBinding(info, info.name, ids, {j: a for a, j in ids.items()})


def _code(exc_info: pytest.ExceptionInfo[P4RuntimeError]) -> grpc.StatusCode:
    return exc_info.value.code


def _lpm_entry(value: bytes, plen: int, port: bytes = b"\x01") -> p4runtime_pb2.TableEntry:
    e = p4runtime_pb2.TableEntry(table_id=LPM_T)
    fm = e.match.add(field_id=1)
    fm.lpm.value, fm.lpm.prefix_len = value, plen
    e.match.add(field_id=2).exact.value = port
    return e


# -- bytestrings -----------------------------------------------------------------------------


@pytest.mark.parametrize(("data", "width", "value"), [
    (b"\x0a", 32, 10),             # shorter than the field: zero-padded (PI)
    (b"\x00\x00\x01\x00", 9, 256),  # longer with leading zeros: accepted (PI)
    (b"", 8, 0),                   # empty: zero (PI pads it)
    (b"\x01\xff", 9, 511),
])
def test_decode_bytestring_accepts_pi_forms(data: bytes, width: int, value: int) -> None:
    assert decode_bytestring(data, width) == value


@pytest.mark.parametrize(("data", "width"), [(b"\x02\x00", 9), (b"\xff", 7), (b"\x01\x00", 8)])
def test_decode_bytestring_rejects_values_wider_than_the_field(data: bytes, width: int) -> None:
    with pytest.raises(P4RuntimeError) as exc:
        decode_bytestring(data, width)
    assert _code(exc) == grpc.StatusCode.INVALID_ARGUMENT


def test_encode_bytestring_is_canonical() -> None:
    assert encode_bytestring(0) == b"\x00"
    assert encode_bytestring(0x0A000000, 32) == b"\x0a\x00\x00\x00"
    assert encode_bytestring(0x1FF, 9) == b"\x01\xff"
    assert encode_bytestring(5) == b"\x05"


# -- match keys ------------------------------------------------------------------------------


def test_lpm_exact_round_trip(index: P4InfoIndex) -> None:
    tb = _binding(index, LPM_T)
    key, prio = decode_match_key(tb, _lpm_entry(b"\x0a\x00\x00\x00", 8, b"\x00\x03"))
    assert key == ((0x0A000000, 8), 3) and prio == 0
    out = p4runtime_pb2.TableEntry()
    encode_match_key(tb, key, prio, out)
    assert out.match[0].lpm.value == b"\x0a\x00\x00\x00" and out.match[0].lpm.prefix_len == 8
    assert out.match[1].exact.value == b"\x03"  # canonical: leading zero byte dropped


def test_missing_lpm_is_a_wildcard_and_is_omitted_on_read(index: P4InfoIndex) -> None:
    tb = _binding(index, LPM_T)
    e = p4runtime_pb2.TableEntry(table_id=LPM_T)
    e.match.add(field_id=2).exact.value = b"\x05"
    key, _ = decode_match_key(tb, e)
    assert key == ((0, 0), 5)
    out = p4runtime_pb2.TableEntry()
    encode_match_key(tb, key, 0, out)
    assert [m.field_id for m in out.match] == [2]


@pytest.mark.parametrize(("entry", "fragment"), [
    (_lpm_entry(b"\x0a\x00\x00\x01", 8), "trailing zeros"),
    (_lpm_entry(b"\x0a\x00\x00\x00", 33), "> bitwidth"),
    (_lpm_entry(b"\x0a\x00\x00\x00", 0), "don't care"),
    (_lpm_entry(b"\x0a\x00\x00\x00", 8, b"\x02\x00"), "does not fit within 9 bits"),
])
def test_invalid_lpm_keys(index: P4InfoIndex, entry: p4runtime_pb2.TableEntry,
                          fragment: str) -> None:
    with pytest.raises(P4RuntimeError) as exc:
        decode_match_key(_binding(index, LPM_T), entry)
    assert _code(exc) == grpc.StatusCode.INVALID_ARGUMENT
    assert fragment in exc.value.message


def test_missing_exact_field_and_unknown_fields_are_invalid(index: P4InfoIndex) -> None:
    tb = _binding(index, LPM_T)
    e = p4runtime_pb2.TableEntry(table_id=LPM_T)
    fm = e.match.add(field_id=1)
    fm.lpm.value, fm.lpm.prefix_len = b"\x0a\x00\x00\x00", 8
    with pytest.raises(P4RuntimeError, match="Missing non-ternary field"):
        decode_match_key(tb, e)
    e2 = _lpm_entry(b"\x0a\x00\x00\x00", 8)
    e2.match.add(field_id=9).exact.value = b"\x01"
    with pytest.raises(P4RuntimeError, match="Too many fields"):
        decode_match_key(tb, e2)
    e3 = _lpm_entry(b"\x0a\x00\x00\x00", 8)
    e3.match[1].field_id = 7
    with pytest.raises(P4RuntimeError, match="Unknown field"):
        decode_match_key(tb, e3)
    e4 = _lpm_entry(b"\x0a\x00\x00\x00", 8)
    e4.match[0].ClearField("lpm")
    e4.match[0].exact.value = b"\x0a"
    with pytest.raises(P4RuntimeError, match="Invalid match type"):
        decode_match_key(tb, e4)


def test_priority_rules(index: P4InfoIndex) -> None:
    lpm, acl = _binding(index, LPM_T), _binding(index, TERN_T)
    e = _lpm_entry(b"\x0a\x00\x00\x00", 8)
    e.priority = 3
    with pytest.raises(P4RuntimeError, match="Non-zero priority"):
        decode_match_key(lpm, e)
    with pytest.raises(P4RuntimeError, match="Zero priority") as exc:
        decode_match_key(acl, p4runtime_pb2.TableEntry(table_id=TERN_T))
    assert _code(exc) == grpc.StatusCode.INVALID_ARGUMENT
    key, prio = decode_match_key(acl, p4runtime_pb2.TableEntry(table_id=TERN_T, priority=7))
    assert key == ((0, 0), (0, 0xFFFF), (0, 0)) and prio == 7


def test_ternary_range_optional(index: P4InfoIndex) -> None:
    tb = _binding(index, TERN_T)
    e = p4runtime_pb2.TableEntry(table_id=TERN_T, priority=10)
    fm = e.match.add(field_id=1)
    fm.ternary.value, fm.ternary.mask = b"\x08\x00", b"\xff\x00"
    fm = e.match.add(field_id=2)
    fm.range.low, fm.range.high = b"\x00\x50", b"\x01\xbb"
    e.match.add(field_id=3).optional.value = b"\x06"
    key, prio = decode_match_key(tb, e)
    assert key == ((0x0800, 0xFF00), (80, 443), (6, 0xFF)) and prio == 10
    out = p4runtime_pb2.TableEntry()
    encode_match_key(tb, key, prio, out)
    assert out.priority == 10
    assert out.match[0].ternary.value == b"\x08\x00" and out.match[0].ternary.mask == b"\xff\x00"
    assert out.match[1].range.low == b"\x50" and out.match[1].range.high == b"\x01\xbb"
    assert out.match[2].optional.value == b"\x06"


@pytest.mark.parametrize(("field", "kind", "values", "fragment"), [
    (1, "ternary", {"value": b"\x01", "mask": b"\x10"}, "value & mask == value"),
    (1, "ternary", {"value": b"\x00", "mask": b"\x00"}, "0 mask"),
    (2, "range", {"low": b"\x05", "high": b"\x04"}, "low <= high"),
    (2, "range", {"low": b"\x00", "high": b"\xff\xff"}, "don't care"),
])
def test_invalid_ternary_and_range(index: P4InfoIndex, field: int, kind: str,
                                   values: dict[str, bytes], fragment: str) -> None:
    e = p4runtime_pb2.TableEntry(table_id=TERN_T, priority=1)
    sub = getattr(e.match.add(field_id=field), kind)
    for name, value in values.items():
        setattr(sub, name, value)
    with pytest.raises(P4RuntimeError) as exc:
        decode_match_key(_binding(index, TERN_T), e)
    assert _code(exc) == grpc.StatusCode.INVALID_ARGUMENT and fragment in exc.value.message


# -- actions ---------------------------------------------------------------------------------


def test_action_round_trip_maps_ids(index: P4InfoIndex) -> None:
    tb = _binding(index, LPM_T)
    a = p4runtime_pb2.Action(action_id=A_PAIR)
    a.params.add(param_id=2, value=b"\x00\x0a")
    a.params.add(param_id=1, value=b"\x00\x00\x00\x00\x00\x01")
    call = decode_action(index, tb, a)
    assert call == ActionCall(A_PAIR + 100, (1, 10))
    out = p4runtime_pb2.Action()
    assert encode_action(index, tb, call, out)
    assert out.action_id == A_PAIR
    assert [(p.param_id, p.value) for p in out.params] == [(1, b"\x01"), (2, b"\x0a")]


@pytest.mark.parametrize(("params", "fragment"), [
    ([], "Unexpected number"),
    ([(1, b"\x01"), (3, b"\x01")], "Unknown action parameter"),
    ([(1, b"\x01"), (2, b"\x10\x00")], "does not fit within 12 bits"),
    ([(1, b"\x01"), (1, b"\x01")], "Duplicate"),
])
def test_invalid_action_params(index: P4InfoIndex, params, fragment: str) -> None:
    a = p4runtime_pb2.Action(action_id=A_PAIR)
    for pid, value in params:
        a.params.add(param_id=pid, value=value)
    with pytest.raises(P4RuntimeError) as exc:
        decode_action(index, _binding(index, LPM_T), a)
    assert _code(exc) == grpc.StatusCode.INVALID_ARGUMENT and fragment in exc.value.message


@pytest.mark.parametrize(("table", "action", "default", "code"), [
    (LPM_T, A_PAIR, True, grpc.StatusCode.PERMISSION_DENIED),   # TABLE_ONLY as default
    (LPM_T, A_DEF, False, grpc.StatusCode.PERMISSION_DENIED),   # DEFAULT_ONLY in an entry
    (TERN_T, A_FWD, True, grpc.StatusCode.PERMISSION_DENIED),   # const default action
    (TERN_T, A_PAIR, False, grpc.StatusCode.INVALID_ARGUMENT),  # not an action of the table
    (LPM_T, 0x01000099, False, grpc.StatusCode.INVALID_ARGUMENT),  # unknown id
])
def test_action_scopes(index: P4InfoIndex, table: int, action: int, default: bool,
                       code: grpc.StatusCode) -> None:
    e = p4runtime_pb2.TableEntry(table_id=table, is_default_action=default)
    e.action.action.action_id = action
    with pytest.raises(P4RuntimeError) as exc:
        validate_table_action(index, index.tables[table], e)
    assert _code(exc) == code


def test_allowed_scopes_pass(index: P4InfoIndex) -> None:
    for action, default in ((A_DEF, True), (A_PAIR, False), (A_FWD, True)):
        e = p4runtime_pb2.TableEntry(table_id=LPM_T, is_default_action=default)
        e.action.action.action_id = action
        validate_table_action(index, index.tables[LPM_T], e)


def test_counter_merge_and_meter_config() -> None:
    unit = p4info_pb2.CounterSpec
    data = p4runtime_pb2.CounterData(packet_count=5, byte_count=700)
    assert merge_counter_data(unit.PACKETS, data, (1, 2)) == (5, 2)
    assert merge_counter_data(unit.BYTES, data, (1, 2)) == (1, 700)
    assert merge_counter_data(unit.BOTH, data, (1, 2)) == (5, 700)
    assert decode_meter_config(None) is None
    rates = decode_meter_config(p4runtime_pb2.MeterConfig(cir=10, cburst=2, pir=20, pburst=4))
    assert rates is not None and (rates.cir, rates.pburst) == (10, 4)
    with pytest.raises(P4RuntimeError, match="Negative"):
        decode_meter_config(p4runtime_pb2.MeterConfig(cir=-5))


# -- packet I/O and digests ------------------------------------------------------------------


def test_controller_headers(index: P4InfoIndex) -> None:
    out_h, in_h = index.controller_headers["packet_out"], index.controller_headers["packet_in"]
    assert out_h.nbytes == 2
    assert pack_header(out_h, [3, 0]) == b"\x01\x80"
    assert unpack_header(in_h, b"\xff\x80") == [511, 0]
    msg = p4runtime_pb2.PacketOut(payload=b"eth")
    msg.metadata.add(metadata_id=1, value=b"\x00\x03")
    assert packet_out_frame(out_h, msg) == b"\x01\x80eth"
    assert packet_out_frame(out_h, p4runtime_pb2.PacketOut(payload=b"x")) == b"\x00\x00x"
    bad = p4runtime_pb2.PacketOut(payload=b"x")
    bad.metadata.add(metadata_id=9, value=b"\x01")
    with pytest.raises(P4RuntimeError, match="Unknown metadata id"):
        packet_out_frame(out_h, bad)
    with pytest.raises(P4RuntimeError, match="Unexpected metadata"):
        packet_out_frame(None, msg)
    pin = packet_in_message(in_h, b"\x00\x80frame")
    assert pin is not None and pin.payload == b"frame"
    assert [(m.metadata_id, m.value) for m in pin.metadata] == [(1, b"\x01"), (2, b"\x00")]
    assert packet_in_message(in_h, b"\x00") is None
    nohdr = packet_in_message(None, b"raw")
    assert nohdr is not None and nohdr.payload == b"raw" and not nohdr.metadata


def test_digest_data_struct(index: P4InfoIndex) -> None:
    data = p4data_pb2.P4Data()
    digest_data(index.digests[0x17000001], (0x0000AABBCCDDEEFF, 3), data)
    assert [m.bitstring for m in data.struct.members] == [bytes.fromhex("aabbccddeeff"), b"\x03"]


def _digest_entry(max_timeout: int = 0, max_size: int = 0, ack: int = 0) -> p4runtime_pb2.DigestEntry:
    e = p4runtime_pb2.DigestEntry(digest_id=0x17000001)
    e.config.max_timeout_ns, e.config.max_list_size, e.config.ack_timeout_ns = (
        max_timeout, max_size, ack)
    return e


def test_digest_engine(index: P4InfoIndex) -> None:
    Update = p4runtime_pb2.Update
    eng = DigestEngine(index.digests)
    assert eng.add(0x17000001, (1, 1), 0) == []  # not configured: dropped
    with pytest.raises(P4RuntimeError) as exc:
        eng.configure(Update.MODIFY, _digest_entry())
    assert _code(exc) == grpc.StatusCode.NOT_FOUND
    eng.configure(Update.INSERT, _digest_entry())
    with pytest.raises(P4RuntimeError) as exc:
        eng.configure(Update.INSERT, _digest_entry())
    assert _code(exc) == grpc.StatusCode.ALREADY_EXISTS
    [msg] = eng.add(0x17000001, (1, 2), 5)
    assert msg.list_id == 1 and len(msg.data) == 1
    eng.configure(Update.MODIFY, _digest_entry(max_timeout=1000, max_size=3, ack=10_000))
    assert eng.add(0x17000001, (1, 2), 10) == []
    assert eng.add(0x17000001, (1, 2), 11) == []  # duplicate of an unacked sample
    assert eng.tick(500) == []
    [msg] = eng.tick(1010)
    assert msg.list_id == 2 and len(msg.data) == 1
    assert eng.add(0x17000001, (1, 2), 1020) == []  # still unacked: suppressed
    eng.ack(0x17000001, 2)
    eng.add(0x17000001, (1, 2), 1030)
    eng.add(0x17000001, (1, 3), 1031)
    [msg] = eng.add(0x17000001, (1, 4), 1032)  # max_list_size reached
    assert msg.list_id == 3 and len(msg.data) == 3
    assert eng.read_config(0x17000001).config.max_list_size == 3
    with pytest.raises(P4RuntimeError) as exc:
        eng.read_config(0)
    assert _code(exc) == grpc.StatusCode.UNIMPLEMENTED


def test_a_digest_list_never_outgrows_a_default_grpc_message(index: P4InfoIndex) -> None:
    """No max_list_size and a long timeout: PI would grow the list with the traffic; the
    target sends it once it holds max_samples, each list under MAX_LIST_BYTES."""
    eng = DigestEngine(index.digests)
    eng.configure(p4runtime_pb2.Update.INSERT, _digest_entry(max_timeout=10**12))
    cap = max_samples(index.digests[0x17000001])
    sent = [m for i in range(3 * cap) for m in eng.add(0x17000001, ((1 << 48) - 1 - i, 255), i)]
    assert [len(m.data) for m in sent] == [cap, cap, cap]
    assert max(m.ByteSize() for m in sent) <= MAX_LIST_BYTES < 4 * 1024 * 1024


# -- PRE -------------------------------------------------------------------------------------


def test_multicast_group_codec() -> None:
    g = p4runtime_pb2.MulticastGroupEntry(multicast_group_id=7)
    g.replicas.add(egress_port=3, instance=1)
    g.replicas.add(port=b"\x00\x02", instance=0)
    decoded = decode_multicast_group(g)
    assert decoded.replicas == (Replica(3, 1), Replica(2, 0))
    out = p4runtime_pb2.MulticastGroupEntry()
    encode_multicast_group(7, decoded.replicas, decoded.forms, b"", out)
    assert [(r.instance, r.WhichOneof("port_kind")) for r in out.replicas] == [
        (0, "port"), (1, "egress_port")]
    assert out.replicas[0].port == b"\x00\x02"
    for gid, code in ((0, grpc.StatusCode.INVALID_ARGUMENT),
                      (1 << 15, grpc.StatusCode.OUT_OF_RANGE)):
        with pytest.raises(P4RuntimeError) as exc:
            decode_multicast_group(p4runtime_pb2.MulticastGroupEntry(multicast_group_id=gid))
        assert _code(exc) == code
    g.replicas.add(egress_port=3, instance=1)
    with pytest.raises(P4RuntimeError, match="Duplicate replica"):
        decode_multicast_group(g)


def test_clone_session_codec() -> None:
    s = p4runtime_pb2.CloneSessionEntry(session_id=5, packet_length_bytes=64)
    s.replicas.add(egress_port=9, instance=1)
    session, _ = decode_clone_session(s)
    assert session.replicas == (Replica(9, 1),) and session.packet_length_bytes == 64
    s.class_of_service = 1
    with pytest.raises(P4RuntimeError) as exc:
        decode_clone_session(s)
    assert _code(exc) == grpc.StatusCode.UNIMPLEMENTED
    with pytest.raises(P4RuntimeError, match="out-of-range"):
        decode_clone_session(p4runtime_pb2.CloneSessionEntry(session_id=40000))


# -- batch status and arbitration ------------------------------------------------------------


def test_batch_status_has_one_error_per_update() -> None:
    ok = batch_status([None, None])
    assert ok.code == code_pb2.OK and not ok.details
    status = batch_status([None, P4RuntimeError(grpc.StatusCode.ALREADY_EXISTS, "dup"), None])
    assert status.code == code_pb2.UNKNOWN and len(status.details) == 3
    errors = []
    for d in status.details:
        err = p4runtime_pb2.Error()
        assert d.Unpack(err)
        errors.append(err.canonical_code)
    assert errors == [code_pb2.OK, code_pb2.ALREADY_EXISTS, code_pb2.OK]


def _arb(device: int, election: int | None, role: str = "") -> p4runtime_pb2.MasterArbitrationUpdate:
    m = p4runtime_pb2.MasterArbitrationUpdate(device_id=device)
    if election is not None:
        m.election_id.low = election
    if role:
        m.role.name = role
    return m


def test_arbitration_primary_backup_and_failover() -> None:
    arb = Arbitration(max_connections=3)
    [(conn, resp)] = arb.update("a", _arb(1, 5))
    assert conn == "a" and resp.arbitration.status.code == code_pb2.OK
    [(conn, resp)] = arb.update("b", _arb(1, 2))  # a backup only hears about itself
    assert conn == "b" and resp.arbitration.status.code == code_pb2.ALREADY_EXISTS
    assert resp.arbitration.election_id.low == 5
    with pytest.raises(P4RuntimeError) as exc:
        arb.update("c", _arb(1, 5))
    assert _code(exc) == grpc.StatusCode.INVALID_ARGUMENT
    notes = dict(arb.update("c", _arb(1, 9)))  # new primary: everybody is told
    assert {k: v.arbitration.status.code for k, v in notes.items()} == {
        "a": code_pb2.ALREADY_EXISTS, "b": code_pb2.ALREADY_EXISTS, "c": code_pb2.OK}
    with pytest.raises(P4RuntimeError) as exc:
        arb.update("d", _arb(1, 10))
    assert _code(exc) == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert arb.is_primary_id(1, "", 9) and not arb.is_primary_id(1, "", 5)
    notes = dict(arb.remove("c"))  # primary leaves: the next highest takes over (PI)
    assert notes["a"].arbitration.status.code == code_pb2.OK
    assert arb.primary(1) == "a"
    with pytest.raises(P4RuntimeError) as exc:
        arb.update("a", _arb(2, 5))
    assert _code(exc) == grpc.StatusCode.FAILED_PRECONDITION


def test_arbitration_roles_and_unset_election_id() -> None:
    arb = Arbitration()
    arb.update("x", _arb(1, None))
    assert arb.primary(1) is None
    [(_, resp)] = arb.update("y", _arb(1, None))  # several unset ids may coexist
    assert resp.arbitration.status.code == code_pb2.NOT_FOUND
    arb.update("r", _arb(1, 1, role="sdn"))
    assert arb.primary(1, "sdn") == "r" and arb.primaries(1) == ["r"]


def test_index_lookups(index: P4InfoIndex) -> None:
    assert id_prefix(LPM_T) == p4info_pb2.P4Ids.TABLE
    assert index.id_of("ingress.lpm") == LPM_T
    assert index.tables[TERN_T].requires_priority and not index.tables[LPM_T].requires_priority
    assert index.is_valid_id(A_FWD, p4info_pb2.P4Ids.ACTION)
    assert not index.is_valid_id(A_FWD, p4info_pb2.P4Ids.TABLE)
    assert index.digests[0x17000001].bitwidths == (48, 9)


# -- binding a P4Info to the BMv2 JSON -------------------------------------------------------

_BUILD = Path(__file__).resolve().parents[2] / "p4src" / "build"


@pytest.fixture(scope="module")
def rail() -> tuple[p4info_pb2.P4Info, Program]:
    json_path, p4info_path = _BUILD / "rail_switch.json", _BUILD / "rail_switch.p4info.txtpb"
    if not (json_path.exists() and p4info_path.exists()):
        pytest.skip("rail_switch artifacts not built yet (run `make p4`)")
    p4info = text_format.Parse(p4info_path.read_text(), p4info_pb2.P4Info())
    return p4info, Program.from_file(json_path)


def test_bind_maps_names_and_duplicate_json_actions(rail: tuple[p4info_pb2.P4Info, Program]
                                                    ) -> None:
    p4info, program = rail
    index = P4InfoIndex(p4info)
    binding = bind(index, program)
    lpm = binding.tables[index.id_of("RailIngress.ipv4_lpm")]
    ecmp = binding.tables[index.id_of("RailIngress.ecmp_nexthop")]
    drop = index.id_of("RailIngress.drop")
    # p4c emits one JSON action per use of drop: each table maps to its own copy
    assert program.actions[lpm.to_target_action[drop]].name == "RailIngress.drop"
    assert lpm.to_target_action[drop] in program.tables["RailIngress.ipv4_lpm"].action_ids
    assert ecmp.to_target_action[drop] in program.tables["RailIngress.ecmp_nexthop"].action_ids
    assert binding.counters[index.id_of("RailIngress.port_rx")] == "RailIngress.port_rx"


def _mutated(p4info: p4info_pb2.P4Info, mutate) -> p4info_pb2.P4Info:
    copy = p4info_pb2.P4Info()
    copy.CopyFrom(p4info)
    mutate(copy)
    return copy


def _action(info: p4info_pb2.P4Info, name: str) -> p4info_pb2.Action:
    return next(a for a in info.actions if a.preamble.name == name)


def test_a_p4info_table_missing_from_the_json_is_left_unbound(
        rail: tuple[p4info_pb2.P4Info, Program]) -> None:
    # BMv2 loads such a pair (p4c drops never-applied tables from the JSON only)
    p4info, program = rail
    renamed = _mutated(p4info, lambda i: setattr(i.tables[1].preamble, "name", "RailIngress.gone"))
    binding = bind(P4InfoIndex(renamed), program)
    assert renamed.tables[1].preamble.id not in binding.tables
    assert renamed.tables[0].preamble.id in binding.tables


def test_translated_types_keep_the_controller_width(rail: tuple[p4info_pb2.P4Info, Program]) -> None:
    # @p4runtime_translation: the P4Info has the controller's width; BMv2 loads the pair
    p4info, program = rail

    def translate(i: p4info_pb2.P4Info) -> None:
        i.type_info.new_types["PortId_t"].translated_type.uri = "p4.org/psa/v1/PortId_t"
        i.tables[0].match_fields[0].bitwidth = 32
        i.tables[0].match_fields[0].type_name.name = "PortId_t"
        param = _action(i, "RailIngress.set_nexthop").params[0]
        param.bitwidth, param.type_name.name = 32, "PortId_t"

    bind(P4InfoIndex(_mutated(p4info, translate)), program)


@pytest.mark.parametrize(("mutate", "fragment"), [
    (lambda i: setattr(i.tables[0].match_fields[0], "bitwidth", 16), "16 bits in the P4Info"),
    (lambda i: setattr(i.tables[0].match_fields[0], "match_type", MT.TERNARY), "match type"),
    (lambda i: setattr(_action(i, "RailIngress.set_nexthop").params[0], "bitwidth", 10), "parameter 'port'"),
    (lambda i: setattr(i.counters[0], "size", 10), "10 cells"),
    (lambda i: setattr(i.counters[0].preamble, "name", "RailIngress.nope"), "RailIngress.nope"),
])
def test_bind_names_the_mismatch(rail: tuple[p4info_pb2.P4Info, Program], mutate,
                                 fragment: str) -> None:
    p4info, program = rail
    with pytest.raises(P4InfoMismatchError) as exc:
        bind(P4InfoIndex(_mutated(p4info, mutate)), program)
    assert exc.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert fragment in exc.value.message
