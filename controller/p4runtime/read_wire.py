"""Decode the table entries of ReadResponses straight from protobuf wire bytes.

protobuf < 3.21 (which p4runtime-shell requires) runs in pure Python on Python 3.11, where
parsing a ReadResponse costs about 350 us per table entry: a ToR's 132,000 time-flow
entries took 46 s to read, longer than the switch took to send them. The controller's
reads of table rules therefore decode the wire bytes into :class:`TableRule` directly
(field numbers of p4runtime 1.4.1), giving what ``decode_rule`` gives for the parsed
message; the unit tests compare the two over every match kind.
"""

from __future__ import annotations

from collections.abc import Iterator

from controller.p4runtime.entities import (
    Exact,
    Lpm,
    MatchValue,
    Optional,
    Range,
    TableRule,
    Ternary,
)
from controller.p4runtime.schema import P4Schema, SchemaError

__all__ = ["WireError", "decode_table_rules", "wire_fields"]

_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5
# field numbers (p4runtime.proto, p4runtime 1.4.1)
_RESPONSE_ENTITIES = 1
_ENTITY_TABLE_ENTRY = 2
_ENTRY_TABLE_ID, _ENTRY_MATCH, _ENTRY_ACTION, _ENTRY_PRIORITY, _ENTRY_IS_DEFAULT = 1, 2, 3, 4, 8
_MATCH_FIELD_ID, _MATCH_EXACT, _MATCH_TERNARY, _MATCH_LPM, _MATCH_RANGE, _MATCH_OPTIONAL = 1, 2, 3, 4, 6, 7
_TABLE_ACTION_ACTION = 1
_ACTION_ID, _ACTION_PARAMS = 1, 4
_PARAM_ID, _PARAM_VALUE = 2, 3


class WireError(SchemaError):
    """A ReadResponse that is not valid protobuf."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise WireError("truncated varint in a ReadResponse")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7


def wire_fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """The ``(field number, value)`` pairs of one serialized message: an int for varint
    and fixed fields, the bytes of a length-delimited one.

    >>> list(wire_fields(bytes([0x08, 0x96, 0x01, 0x12, 0x02]) + b"hi"))
    [(1, 150), (2, b'hi')]
    """
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _varint(data, pos)
        number, kind = key >> 3, key & 7
        if kind == _VARINT:
            value, pos = _varint(data, pos)
            yield number, value
        elif kind == _LENGTH:
            length, pos = _varint(data, pos)
            if pos + length > end:
                raise WireError("truncated field in a ReadResponse")
            yield number, data[pos:pos + length]
            pos += length
        elif kind in (_FIXED64, _FIXED32):
            size = 8 if kind == _FIXED64 else 4
            yield number, int.from_bytes(data[pos:pos + size], "little")
            pos += size
        else:
            raise WireError(f"wire type {kind} (field {number}) in a ReadResponse")


def _int(data: int | bytes) -> int:
    return int.from_bytes(data, "big") if isinstance(data, bytes) else data


def _sub(fields: bytes) -> dict[int, int | bytes]:
    return dict(wire_fields(fields))


def _match(kind: int, body: bytes) -> MatchValue | None:
    f = _sub(body)
    if kind == _MATCH_EXACT:
        return Exact(_int(f.get(1, b"")))
    if kind == _MATCH_LPM:
        prefix = f.get(2, 0)
        return Lpm(_int(f.get(1, b"")), prefix if isinstance(prefix, int) else 0)
    if kind == _MATCH_TERNARY:
        return Ternary(_int(f.get(1, b"")), _int(f.get(2, b"")))
    if kind == _MATCH_RANGE:
        return Range(_int(f.get(1, b"")), _int(f.get(2, b"")))
    if kind == _MATCH_OPTIONAL:
        return Optional(_int(f.get(1, b"")))
    return None  # "other" (an Any): not a kind the controller writes


class _Decoder:
    """Names of the tables, fields, actions and parameters met so far, looked up once."""

    def __init__(self, schema: P4Schema) -> None:
        self.schema = schema
        self._tables: dict[int, tuple[str, dict[int, str]]] = {}
        self._actions: dict[int, tuple[str, dict[int, str]]] = {}

    def table(self, table_id: int) -> tuple[str, dict[int, str]]:
        found = self._tables.get(table_id)
        if found is None:
            info = self.schema.table(table_id)
            found = self._tables[table_id] = (info.name, {m.id: m.name for m in info.match_fields})
        return found

    def action(self, action_id: int) -> tuple[str, dict[int, str]]:
        found = self._actions.get(action_id)
        if found is None:
            info = self.schema.action(action_id)
            found = self._actions[action_id] = (info.name, {p.id: p.name for p in info.params})
        return found

    def rule(self, entry: bytes) -> TableRule:
        table_id = priority = 0
        is_default = False
        matches: list[bytes] = []
        action: bytes = b""
        for number, value in wire_fields(entry):
            if number == _ENTRY_TABLE_ID and isinstance(value, int):
                table_id = value
            elif number == _ENTRY_MATCH and isinstance(value, bytes):
                matches.append(value)
            elif number == _ENTRY_ACTION and isinstance(value, bytes):
                action = value
            elif number == _ENTRY_PRIORITY and isinstance(value, int):
                priority = value - (1 << 64) if value >= 1 << 63 else value
            elif number == _ENTRY_IS_DEFAULT:
                is_default = bool(value)
        table, field_names = self.table(table_id)
        match: dict[str, MatchValue] = {}
        for body in matches:
            field_id, kind, value_bytes = 0, 0, b""
            for number, value in wire_fields(body):
                if number == _MATCH_FIELD_ID and isinstance(value, int):
                    field_id = value
                elif isinstance(value, bytes):
                    kind, value_bytes = number, value
            name = field_names.get(field_id)
            if name is None:
                raise SchemaError(f"table {table!r} has no match field id {field_id}")
            decoded = _match(kind, value_bytes)
            if decoded is not None:
                match[name] = decoded
        action_name, params = self._action_call(action)
        return TableRule(table, match, action_name, params, priority, is_default)

    def _action_call(self, table_action: bytes) -> tuple[str, dict[str, int]]:
        body = _sub(table_action).get(_TABLE_ACTION_ACTION)
        if not isinstance(body, bytes):
            return "", {}  # an action profile member, group or action set
        action_id, raw_params = 0, []
        for number, value in wire_fields(body):
            if number == _ACTION_ID and isinstance(value, int):
                action_id = value
            elif number == _ACTION_PARAMS and isinstance(value, bytes):
                raw_params.append(value)
        name, param_names = self.action(action_id)
        params: dict[str, int] = {}
        for raw in raw_params:
            f = _sub(raw)
            param_id = f.get(_PARAM_ID, 0)
            params[param_names[param_id if isinstance(param_id, int) else 0]] = _int(f.get(_PARAM_VALUE, b""))
        return name, params


def decode_table_rules(schema: P4Schema, responses: Iterator[bytes] | list[bytes]) -> list[TableRule]:
    """The table entries of serialized ReadResponses as :class:`TableRule` (other entities
    are skipped)."""
    decoder = _Decoder(schema)
    out: list[TableRule] = []
    for response in responses:
        for number, entity in wire_fields(response):
            if number != _RESPONSE_ENTITIES or not isinstance(entity, bytes):
                continue
            for kind, body in wire_fields(entity):
                if kind == _ENTITY_TABLE_ENTRY and isinstance(body, bytes):
                    out.append(decoder.rule(body))
    return out
