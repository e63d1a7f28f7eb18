"""A hand-written decoder of the common WriteRequest, straight from protobuf wire bytes.

protobuf 3.20 runs in pure Python here (no C extension for this interpreter), where parsing a
WriteRequest and reading its fields costs far more than applying it. :func:`decode_write_request`
decodes the request most Writes are, table-entry updates, into plain values
(:mod:`pybmv2.runtime.values`) and returns None for anything else, so that the caller parses
that request with protobuf instead. It returns None, never a guess, for:

- entities other than ``table_entry``; a TableEntry with ``meter_config``,
  ``counter_data``, ``meter_counter_data`` or ``time_since_last_hit``;
  an indirect (action profile) or empty ``TableAction``; a FieldMatch without a match or
  with ``other``;
- unknown fields, known fields with an unexpected wire type, tags not encoded in one byte
  (every field decoded here has a number below 16), enum values the enum does not define
  (protobuf would keep those as unknown fields), a singular message field given twice
  (protobuf would merge them) or a second member of a oneof;
- malformed input: truncated varints or strings, varints over 10 bytes, invalid UTF-8.

Scalars follow protobuf's decoding: 64-bit varints masked to the field's width, int32 and
enums sign-extended from their low 32 bits, the last occurrence of a singular scalar wins.
Field numbers are those of p4runtime 1.4 (``p4/v1/p4runtime.proto``); the unit tests check
them against the generated descriptors.
"""

from __future__ import annotations

from dataclasses import dataclass

from pybmv2.runtime import wire_native
from pybmv2.runtime.values import ActionValue, EntryValue, MatchValue

__all__ = ["WriteBatch", "decode_in_python", "decode_write_request"]

_MASK32 = 0xFFFFFFFF
_SIGN32 = 0x80000000
_MASK64 = (1 << 64) - 1
#: Update.Type and WriteRequest.Atomicity values (protobuf keeps others as unknown fields)
_UPDATE_TYPES = frozenset((0, 1, 2, 3))
_ATOMICITIES = frozenset((0, 1, 2))


@dataclass(slots=True)
class WriteBatch:
    """A WriteRequest of table-entry updates: ``updates`` holds (Update.type, entry) pairs.

    ``election_id`` is None when the request has none (``HasField`` false).
    """

    device_id: int
    role: str
    election_id: int | None
    atomicity: int
    updates: list[tuple[int, EntryValue]]


class _Unsupported(Exception):
    """The request is outside what this decoder handles (or malformed)."""


def decode_write_request(data: bytes) -> WriteBatch | None:
    """The WriteBatch of a serialized WriteRequest, or None if protobuf must parse it.

    The C build of this decoder (:mod:`pybmv2.runtime.wire_native`) does it once loaded."""
    fast = wire_native.decoder()
    if fast is not None:
        got = fast(data, EntryValue)
        return None if got is None else WriteBatch(*got)
    return decode_in_python(data)


def decode_in_python(data: bytes) -> WriteBatch | None:
    """:func:`decode_write_request` by the Python functions below."""
    try:
        return _write_request(bytes(data) + b"\x00")
    except _Unsupported:
        return None


# -- primitives --------------------------------------------------------------------------
#
# Every decoder takes the buffer, a start and an end position. The buffer ends with one
# extra zero byte, so reading a varint never runs off it: a varint running past ``end``
# leaves ``pos > end``, which the ``pos != end`` check after each message loop rejects.


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A varint of up to 10 bytes at ``pos``, masked to 64 bits, and the next position."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        result |= (b & 0x7F) << shift
        pos += 1
        if not b & 0x80:
            return result & _MASK64, pos
        shift += 7
        if shift >= 64:
            raise _Unsupported("varint longer than 10 bytes")


def _uint32(buf: bytes, pos: int) -> tuple[int, int]:
    """A uint32 varint at ``pos`` (protobuf keeps the low 32 bits) and the next position."""
    value, pos = _varint(buf, pos)
    return value & _MASK32, pos


def _int32(buf: bytes, pos: int) -> tuple[int, int]:
    """An int32 or enum varint at ``pos`` (the low 32 bits, sign-extended, as protobuf)."""
    value, pos = _varint(buf, pos)
    value &= _MASK32
    return (value ^ _SIGN32) - _SIGN32, pos


def _span(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """The (start, stop) of a length-delimited value whose length varint is at ``pos``."""
    n = buf[pos]
    pos += 1
    if n >= 0x80:
        n, pos = _varint(buf, pos - 1)
    stop = pos + n
    if stop > end:
        raise _Unsupported("truncated length-delimited field")
    return pos, stop


def _bytes(buf: bytes, pos: int, end: int) -> tuple[bytes, int]:
    """A bytes field whose length varint is at ``pos``, and the next position."""
    start, stop = _span(buf, pos, end)
    return buf[start:stop], stop


def _done(pos: int, end: int) -> None:
    if pos != end:
        raise _Unsupported("truncated message")


# -- messages ----------------------------------------------------------------------------


def _write_request(buf: bytes) -> WriteBatch:
    end = len(buf) - 1
    pos = 0
    device_id = atomicity = 0
    role = ""
    election_id: int | None = None
    updates: list[tuple[int, EntryValue]] = []
    actions: dict[bytes, ActionValue] = {}
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag == 0x22:  # updates = 4
            start = pos + 1
            pos = start + buf[pos]  # the length in one byte (below 128), else a varint
            if buf[start - 1] >= 0x80 or pos > end:
                start, pos = _span(buf, start - 1, end)
            updates.append(_update(buf, start, pos, actions))
        elif tag == 0x08:  # device_id = 1 (uint64)
            device_id, pos = _varint(buf, pos)
        elif tag == 0x10:  # role_id = 2 (deprecated uint64; unused, as by protobuf path)
            _, pos = _varint(buf, pos)
        elif tag == 0x1A:  # election_id = 3 (Uint128)
            if election_id is not None:
                raise _Unsupported("election_id given twice")
            start, pos = _span(buf, pos, end)
            election_id = _uint128(buf, start, pos)
        elif tag == 0x28:  # atomicity = 5 (enum)
            atomicity, pos = _int32(buf, pos)
            if atomicity not in _ATOMICITIES:
                raise _Unsupported("unknown atomicity")
        elif tag == 0x32:  # role = 6 (string)
            start, pos = _span(buf, pos, end)
            try:
                role = buf[start:pos].decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _Unsupported("role is not UTF-8") from exc
        else:
            raise _Unsupported(f"WriteRequest tag {tag:#x}")
    _done(pos, end)
    return WriteBatch(device_id, role, election_id, atomicity, updates)


def _uint128(buf: bytes, pos: int, end: int) -> int:
    high = low = 0
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag == 0x08:  # high = 1
            high, pos = _varint(buf, pos)
        elif tag == 0x10:  # low = 2
            low, pos = _varint(buf, pos)
        else:
            raise _Unsupported(f"Uint128 tag {tag:#x}")
    _done(pos, end)
    return (high << 64) | low


def _update(buf: bytes, pos: int, end: int,
            actions: dict[bytes, ActionValue]) -> tuple[int, EntryValue]:
    kind = 0
    entry: EntryValue | None = None
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag == 0x12:  # entity = 2
            if entry is not None:
                raise _Unsupported("entity given twice")
            start = pos + 1
            pos = start + buf[pos]
            if buf[start - 1] >= 0x80 or pos > end:
                start, pos = _span(buf, start - 1, end)
            entry = _entity(buf, start, pos, actions)
        elif tag == 0x08:  # type = 1 (enum)
            kind = buf[pos]
            pos += 1
            if kind >= 0x80:
                kind, pos = _int32(buf, pos - 1)
            if kind not in _UPDATE_TYPES:
                raise _Unsupported("unknown update type")
        else:
            raise _Unsupported(f"Update tag {tag:#x}")
    _done(pos, end)
    if entry is None:
        raise _Unsupported("update without entity")
    return kind, entry


def _entity(buf: bytes, pos: int, end: int, actions: dict[bytes, ActionValue]) -> EntryValue:
    entry: EntryValue | None = None
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag != 0x12 or entry is not None:  # table_entry = 2, once
            raise _Unsupported(f"Entity tag {tag:#x}")
        start = pos + 1
        pos = start + buf[pos]
        if buf[start - 1] >= 0x80 or pos > end:
            start, pos = _span(buf, start - 1, end)
        entry = _table_entry(buf, start, pos, actions)
    _done(pos, end)
    if entry is None:
        raise _Unsupported("empty entity")
    return entry


def _table_entry(buf: bytes, pos: int, end: int,
                 actions: dict[bytes, ActionValue]) -> EntryValue:
    table_id = priority = controller_metadata = idle_timeout_ns = 0
    is_default = is_const = False
    metadata = b""
    matches: list[MatchValue] = []
    action: ActionValue | None = None
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag == 0x12:  # match = 2
            start = pos + 1
            pos = start + buf[pos]
            if buf[start - 1] >= 0x80 or pos > end:
                start, pos = _span(buf, start - 1, end)
            matches.append(_field_match(buf, start, pos))
        elif tag == 0x08:  # table_id = 1 (uint32)
            table_id, pos = _uint32(buf, pos)
        elif tag == 0x1A:  # action = 3 (TableAction)
            if action is not None:
                raise _Unsupported("action given twice")
            start = pos + 1
            pos = start + buf[pos]
            if buf[start - 1] >= 0x80 or pos > end:
                start, pos = _span(buf, start - 1, end)
            raw = buf[start:pos]
            cached = actions.get(raw)
            if cached is None:
                cached = actions[raw] = _table_action(buf, start, pos)
            action = cached
        elif tag == 0x20:  # priority = 4 (int32)
            priority, pos = _int32(buf, pos)
        elif tag == 0x28:  # controller_metadata = 5 (uint64)
            controller_metadata, pos = _varint(buf, pos)
        elif tag == 0x40:  # is_default_action = 8 (bool)
            value, pos = _varint(buf, pos)
            is_default = bool(value)
        elif tag == 0x48:  # idle_timeout_ns = 9 (int64)
            idle_timeout_ns, pos = _varint(buf, pos)
            if idle_timeout_ns >= 1 << 63:
                idle_timeout_ns -= 1 << 64
        elif tag == 0x5A:  # metadata = 11 (bytes)
            metadata, pos = _bytes(buf, pos, end)
        elif tag == 0x68:  # is_const = 13 (bool)
            value, pos = _varint(buf, pos)
            is_const = bool(value)
        else:  # meter_config, counter_data, time_since_last_hit, ...
            raise _Unsupported(f"TableEntry tag {tag:#x}")
    _done(pos, end)
    return EntryValue(table_id, tuple(matches), None if action is None else "action", action,
                      priority, controller_metadata, metadata, is_default, is_const,
                      idle_timeout_ns=idle_timeout_ns)


#: FieldMatch tag -> (match kind, tag of its second field: 0 none, 0x10 varint, 0x12 bytes)
_MATCH_TAGS = {0x12: ("exact", 0), 0x1A: ("ternary", 0x12), 0x22: ("lpm", 0x10),
               0x32: ("range", 0x12), 0x3A: ("optional", 0)}


def _field_match(buf: bytes, pos: int, end: int) -> MatchValue:
    field_id = 0
    kind: str | None = None
    first = b""
    second: bytes | int | None = None
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag == 0x08:  # field_id = 1 (uint32)
            field_id = buf[pos]
            pos += 1
            if field_id >= 0x80:
                field_id, pos = _uint32(buf, pos - 1)
            continue
        found = _MATCH_TAGS.get(tag)  # other = 100 (a two-byte tag) is not decoded
        if found is None or kind is not None:
            raise _Unsupported(f"FieldMatch tag {tag:#x}")
        kind, second_tag = found
        start = pos + 1
        pos = start + buf[pos]
        if buf[start - 1] >= 0x80 or pos > end:
            start, pos = _span(buf, start - 1, end)
        first, second = _match_value(buf, start, pos, second_tag)
    _done(pos, end)
    if kind is None:
        raise _Unsupported("FieldMatch without a match")
    return (field_id, kind, first, second)


def _match_value(buf: bytes, pos: int, end: int,
                 second_tag: int) -> tuple[bytes, bytes | int | None]:
    """An Exact/LPM/Ternary/Range/Optional message: field 1 is bytes; field 2, if the kind
    has one, is bytes (``second_tag`` 0x12) or an int32 (0x10, LPM's prefix_len)."""
    first = b""
    second: bytes | int | None = None
    if second_tag == 0x12:
        second = b""
    elif second_tag == 0x10:
        second = 0
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag == 0x0A:  # value / low = 1
            start = pos + 1
            pos = start + buf[pos]
            if buf[start - 1] >= 0x80 or pos > end:
                start, pos = _span(buf, start - 1, end)
            first = buf[start:pos]
        elif tag != second_tag or not second_tag:
            raise _Unsupported(f"FieldMatch value tag {tag:#x}")
        elif tag == 0x12:  # mask / high = 2
            second, pos = _bytes(buf, pos, end)
        else:  # prefix_len = 2 (int32)
            second = buf[pos]
            pos += 1
            if second >= 0x80:
                second, pos = _int32(buf, pos - 1)
    _done(pos, end)
    return first, second


def _table_action(buf: bytes, pos: int, end: int) -> ActionValue:
    action: ActionValue | None = None
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag != 0x0A or action is not None:  # action = 1, once; profiles unsupported
            raise _Unsupported(f"TableAction tag {tag:#x}")
        start, pos = _span(buf, pos, end)
        action = _action(buf, start, pos)
    _done(pos, end)
    if action is None:
        raise _Unsupported("empty TableAction")
    return action


def _action(buf: bytes, pos: int, end: int) -> ActionValue:
    action_id = 0
    params: list[tuple[int, bytes]] = []
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag == 0x22:  # params = 4
            start, pos = _span(buf, pos, end)
            params.append(_param(buf, start, pos))
        elif tag == 0x08:  # action_id = 1 (uint32)
            action_id, pos = _uint32(buf, pos)
        else:
            raise _Unsupported(f"Action tag {tag:#x}")
    _done(pos, end)
    return (action_id, tuple(params))


def _param(buf: bytes, pos: int, end: int) -> tuple[int, bytes]:
    param_id = 0
    value = b""
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag == 0x10:  # param_id = 2 (uint32)
            param_id, pos = _uint32(buf, pos)
        elif tag == 0x1A:  # value = 3
            value, pos = _bytes(buf, pos, end)
        else:
            raise _Unsupported(f"Param tag {tag:#x}")
    _done(pos, end)
    return (param_id, value)
