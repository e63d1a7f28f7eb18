"""The hand-written WriteRequest decoder (pybmv2.runtime.wire) against protobuf's own parser,
in both of its builds: the Python functions and the C module (pybmv2.runtime.wire_native).

Random requests (fixed seeds) serialized by protobuf must decode to exactly what the protobuf
parse gives through :func:`pybmv2.runtime.values.entry_from_proto`; every field the decoder
does not handle must make it decline (None), and so must malformed bytes; on randomly
mutated bytes, whatever it accepts protobuf must parse to the same values.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message
from p4.v1 import p4runtime_pb2

from pybmv2.runtime import wire_native
from pybmv2.runtime.arbitration import election_id_of
from pybmv2.runtime.values import EntryValue, entry_from_proto
from pybmv2.runtime.wire import WriteBatch, decode_in_python, decode_write_request

pytestmark = pytest.mark.unit

Decode = Callable[[bytes], "WriteBatch | None"]


@pytest.fixture(params=["python", "c"])
def decode(request: pytest.FixtureRequest) -> Decode:
    """Each build of the decoder: the C one is built here (a C compiler and Python.h are
    installed by tools/bootstrap.sh; without them the switch decodes in Python)."""
    if request.param == "python":
        return decode_in_python
    fast = wire_native.load()
    if fast is None:
        pytest.skip("the C decoder cannot be built here (no C compiler or no Python.h)")

    def decode_in_c(data: bytes) -> WriteBatch | None:
        got = fast(data, EntryValue)
        return None if got is None else WriteBatch(*got)

    return decode_in_c

WriteRequest = p4runtime_pb2.WriteRequest

#: message name -> the fields the decoder reads; every other field must make it decline
SUPPORTED = {
    "WriteRequest": {"device_id", "role_id", "election_id", "updates", "atomicity", "role"},
    "Uint128": {"high", "low"},
    "Update": {"type", "entity"},
    "Entity": {"table_entry"},
    "TableEntry": {"table_id", "match", "action", "priority", "controller_metadata",
                   "is_default_action", "metadata", "is_const", "idle_timeout_ns"},
    "FieldMatch": {"field_id", "exact", "ternary", "lpm", "range", "optional"},
    "Exact": {"value"}, "LPM": {"value", "prefix_len"}, "Ternary": {"value", "mask"},
    "Range": {"low", "high"}, "Optional": {"value"},
    "TableAction": {"action"},
    "Action": {"action_id", "params"},
    "Param": {"param_id", "value"},
}


def expected(request: p4runtime_pb2.WriteRequest) -> WriteBatch:
    """What the decoder must return for a request protobuf parsed."""
    updates = []
    for u in request.updates:
        assert u.entity.WhichOneof("entity") == "table_entry"
        updates.append((u.type, entry_from_proto(u.entity.table_entry)))
    return WriteBatch(request.device_id, request.role, election_id_of(request),
                      request.atomicity, updates)


# -- random requests -------------------------------------------------------------------------


def _bytes(rng: random.Random) -> bytes:
    n = rng.choice((0, 1, 1, 2, 4, 6, 16, 130, 300))
    return bytes(rng.getrandbits(8) for _ in range(n))


def _u(rng: random.Random, bits: int) -> int:
    return rng.choice((0, 1, 127, 128, 300, (1 << bits) - 1, rng.getrandbits(bits)))


def _i32(rng: random.Random) -> int:
    return rng.choice((0, 1, -1, 24, 2**31 - 1, -(2**31), rng.randrange(-(2**31), 2**31)))


def _field_match(rng: random.Random, fm: p4runtime_pb2.FieldMatch) -> None:
    if rng.random() < 0.8:
        fm.field_id = _u(rng, 32)
    kind = rng.choice(("exact", "lpm", "ternary", "range", "optional"))
    sub = getattr(fm, kind)
    sub.SetInParent()
    for f in sub.DESCRIPTOR.fields:
        if rng.random() < 0.8:
            setattr(sub, f.name, _i32(rng) if f.type == FieldDescriptor.TYPE_INT32 else _bytes(rng))


def _table_entry(rng: random.Random, te: p4runtime_pb2.TableEntry) -> None:
    te.SetInParent()
    if rng.random() < 0.9:
        te.table_id = _u(rng, 32)
    for _ in range(rng.choice((0, 1, 1, 2, 3))):
        _field_match(rng, te.match.add())
    if rng.random() < 0.8:
        action = te.action.action
        action.SetInParent()
        if rng.random() < 0.9:
            action.action_id = _u(rng, 32)
        for _ in range(rng.choice((0, 1, 3))):
            p = action.params.add()
            if rng.random() < 0.9:
                p.param_id = _u(rng, 32)
            p.value = _bytes(rng)
    if rng.random() < 0.5:
        te.priority = _i32(rng)
    if rng.random() < 0.3:
        te.controller_metadata = _u(rng, 64)
    te.is_default_action = rng.random() < 0.2
    te.is_const = rng.random() < 0.1
    if rng.random() < 0.3:  # int64: negative values are 10-byte varints
        te.idle_timeout_ns = rng.choice((1, 10**9, -1, -(1 << 63), (1 << 63) - 1, rng.getrandbits(40)))
    if rng.random() < 0.3:
        te.metadata = _bytes(rng)


def random_request(rng: random.Random) -> p4runtime_pb2.WriteRequest:
    req = WriteRequest()
    if rng.random() < 0.8:
        req.device_id = _u(rng, 64)
    if rng.random() < 0.1:
        req.role_id = _u(rng, 64)
    if rng.random() < 0.6:
        req.election_id.SetInParent()  # present even when both halves are 0
        req.election_id.high = rng.choice((0, 0, _u(rng, 64)))
        req.election_id.low = _u(rng, 64)
    if rng.random() < 0.3:
        req.role = rng.choice(("", "sdn", "rôle-ü", "x" * 200))
    req.atomicity = rng.choice((0, 0, 0, 1, 2))
    for _ in range(rng.choice((0, 1, 2, 5))):
        u = req.updates.add()
        u.type = rng.choice((0, 1, 1, 2, 3))
        _table_entry(rng, u.entity.table_entry)
    return req


@pytest.mark.parametrize("seed", range(4))
def test_random_requests_decode_as_protobuf_parses_them(seed: int, decode: Decode) -> None:
    rng = random.Random(seed)
    for _ in range(150):
        data = random_request(rng).SerializeToString()
        got = decode(data)
        assert got is not None
        assert got == expected(WriteRequest.FromString(data))


def test_scalars_follow_protobuf_decoding(decode: Decode) -> None:
    """Negative int32 (10-byte varints), 64-bit values, the last of repeated scalars."""
    req = WriteRequest(device_id=2**64 - 1)
    te = req.updates.add(type=p4runtime_pb2.Update.INSERT).entity.table_entry
    te.priority = -5
    te.controller_metadata = 2**64 - 1
    te.match.add(field_id=1).lpm.prefix_len = -1
    data = req.SerializeToString() + WriteRequest(device_id=7).SerializeToString()
    got = decode(data)
    assert got == expected(WriteRequest.FromString(data))
    assert got is not None and got.device_id == 7
    assert got.updates[0][1].priority == -5
    assert got.updates[0][1].matches[0][3] == -1


def test_32_bit_fields_keep_the_low_bits_of_wider_varints(decode: Decode) -> None:
    big = 2**40 + 5
    varint = _varint(big)
    fm = _tag(1, 0) + varint + _wrap(2, b"")  # field_id, exact
    te = _tag(1, 0) + varint + _wrap(2, fm) + _tag(4, 0) + _varint(2**33 - 7)  # priority
    data = _wrap(4, _tag(1, 0) + b"\x01" + _wrap(2, _wrap(2, te)))
    got = decode(data)
    assert got == expected(WriteRequest.FromString(data))
    assert got is not None
    entry = got.updates[0][1]
    assert (entry.table_id, entry.matches[0][0], entry.priority) == (5, 5, -7)


def test_an_empty_request_and_zero_election_id(decode: Decode) -> None:
    assert decode(b"") == WriteBatch(0, "", None, 0, [])
    req = WriteRequest()
    req.election_id.SetInParent()
    assert decode(req.SerializeToString()) == WriteBatch(0, "", 0, 0, [])


# -- what the decoder declines ---------------------------------------------------------------


def _minimal() -> tuple[p4runtime_pb2.WriteRequest, dict[str, Message]]:
    """A request with one message of every supported type, by message name."""
    req = WriteRequest(device_id=1)
    req.election_id.low = 1
    u = req.updates.add(type=p4runtime_pb2.Update.INSERT)
    te = u.entity.table_entry
    te.table_id = 5
    fms = {}
    for i, kind in enumerate(("exact", "lpm", "ternary", "range", "optional"), start=1):
        fm = te.match.add(field_id=i)
        getattr(fm, kind).SetInParent()
        fms[getattr(fm, kind).DESCRIPTOR.name] = getattr(fm, kind)
    te.action.action.action_id = 9
    param = te.action.action.params.add(param_id=1, value=b"\x01")
    return req, {"WriteRequest": req, "Uint128": req.election_id, "Update": u,
                 "Entity": u.entity, "TableEntry": te, "FieldMatch": te.match[0],
                 "TableAction": te.action, "Action": te.action.action, "Param": param, **fms}


def _set_any(msg: Message, f: FieldDescriptor) -> None:
    """Give field ``f`` of ``msg`` a non-default value."""
    if f.type == FieldDescriptor.TYPE_MESSAGE:
        target = getattr(msg, f.name)
        (target.add() if f.label == FieldDescriptor.LABEL_REPEATED else target).SetInParent()
        return
    value: object = {FieldDescriptor.TYPE_STRING: "x", FieldDescriptor.TYPE_BYTES: b"x",
                     FieldDescriptor.TYPE_BOOL: True}.get(f.type, 1)
    if f.label == FieldDescriptor.LABEL_REPEATED:
        getattr(msg, f.name).append(value)
    else:
        setattr(msg, f.name, value)


def test_the_minimal_request_is_decoded(decode: Decode) -> None:
    req, messages = _minimal()
    assert set(messages) == set(SUPPORTED)
    assert decode(req.SerializeToString()) == expected(req)


def _unsupported_fields() -> list[tuple[str, str]]:
    _, messages = _minimal()
    return [(name, f.name) for name, msg in messages.items() for f in msg.DESCRIPTOR.fields
            if f.name not in SUPPORTED[name]]


@pytest.mark.parametrize(("message", "field"), _unsupported_fields())
def test_every_other_field_is_declined(message: str, field: str, decode: Decode) -> None:
    req, messages = _minimal()
    msg = messages[message]
    _set_any(msg, msg.DESCRIPTOR.fields_by_name[field])
    assert decode(req.SerializeToString()) is None


def test_the_unsupported_fields_cover_the_brief() -> None:
    names = set(_unsupported_fields())
    for field in ("meter_config", "counter_data", "meter_counter_data", "time_since_last_hit"):
        assert ("TableEntry", field) in names
    assert ("Entity", "counter_entry") in names and ("FieldMatch", "other") in names
    assert ("Entity", "direct_meter_entry") in names
    assert ("TableAction", "action_profile_member_id") in names


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _tag(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _wrap(number: int, payload: bytes) -> bytes:
    assert len(payload) < 0x80
    return _tag(number, 2) + bytes([len(payload)]) + payload


@pytest.mark.parametrize("data", [
    _tag(99, 0) + b"\x01",                             # unknown varint field
    _tag(7, 2) + b"\x00",                               # unknown length-delimited field
    _tag(1, 2) + b"\x00",                               # device_id with the wrong wire type
    b"\x88\x00\x01",                                    # device_id with a two-byte tag
    _tag(5, 0) + b"\x07",                               # atomicity the enum lacks
    _wrap(4, _tag(1, 0) + b"\x07"),                     # update type the enum lacks
    _wrap(4, b""),                                      # update without entity
    _wrap(4, _wrap(2, b"")),                            # entity without a member
    _wrap(4, _wrap(2, _wrap(2, b"")) + _wrap(2, _wrap(2, b""))),  # entity twice (merged)
    _wrap(3, b"") + _wrap(3, b""),                      # election_id twice (merged)
    _wrap(4, _wrap(2, _wrap(2, _wrap(3, b"")))),        # empty TableAction
    _wrap(4, _wrap(2, _wrap(2, _wrap(2, _tag(1, 0) + b"\x01")))),  # FieldMatch without match
    _wrap(4, _wrap(2, _wrap(2, _wrap(2, _wrap(2, b"") + _wrap(4, b""))))),  # two members
    _tag(1, 0) + b"\xff" * 10 + b"\x01",                # 11-byte varint
    _tag(1, 0) + b"\x80",                               # truncated varint
    _tag(6, 2) + b"\x05ab",                             # truncated string
    _tag(6, 2) + b"\x02\xc3\x28",                       # role that is not UTF-8
    _wrap(4, _wrap(2, _wrap(2, _tag(1, 0) + b"\x80"))),  # varint running out of its message
])
def test_declined_bytes(data: bytes, decode: Decode) -> None:
    assert decode(data) is None


def test_mutated_bytes_are_declined_or_decoded_as_protobuf_does(decode: Decode) -> None:
    rng = random.Random(1234)
    accepted = 0
    for _ in range(1500):
        data = bytearray(random_request(rng).SerializeToString())
        for _ in range(rng.choice((1, 1, 2, 3))):
            op, at = rng.randrange(4), rng.randrange(len(data) + 1)
            if op == 0:
                del data[at:]
            elif op == 1 and at < len(data):
                data[at] = rng.getrandbits(8)
            elif op == 2:
                data.insert(at, rng.getrandbits(8))
            elif at < len(data):
                del data[at]
        got = decode(bytes(data))
        if got is None:
            continue
        accepted += 1
        try:
            parsed = WriteRequest.FromString(bytes(data))
        except DecodeError as exc:
            raise AssertionError(f"decoded what protobuf rejects: {bytes(data)!r}") from exc
        assert got == expected(parsed), bytes(data)
    assert accepted > 100


def test_writes_are_decoded_in_c_once_it_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = wire_native.load()
    if fast is None:
        pytest.skip("the C decoder cannot be built here (no C compiler or no Python.h)")
    calls: list[int] = []

    def counted(data: bytes, cls: type) -> object:
        calls.append(1)
        return fast(data, cls)

    monkeypatch.setattr(wire_native, "_decode", counted)
    data = random_request(random.Random(9)).SerializeToString()
    assert decode_write_request(data) == decode_in_python(data)
    assert calls == [1]
