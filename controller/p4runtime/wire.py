"""Encode table-entry Write requests straight to protobuf wire bytes.

protobuf < 3.21 (which p4runtime-shell requires) runs in pure Python on Python 3.11, where
building and serializing message objects costs ~200 us per table entry. Install paths
therefore encode :class:`TableRule` updates directly (field numbers of p4runtime 1.4.1,
checked by the tests against protobuf's own serialization, byte for byte).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from controller.p4runtime.entities import Exact, Lpm, Optional, Range, TableRule, Ternary
from controller.p4runtime.schema import P4Schema, SchemaError
from controller.p4runtime.values import BadValue, encode_int

__all__ = ["UPDATE_TYPES", "encode_rule_updates", "encode_write_request"]

UPDATE_TYPES = {"insert": 1, "modify": 2, "delete": 3}


#: one-byte varints, the common case (tags, lengths under 128, small ids)
_SMALL = tuple(bytes((i,)) for i in range(128))


def _varint(value: int) -> bytes:
    if 0 <= value < 128:
        return _SMALL[value]
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _int32(value: int) -> bytes:
    return _varint(value if value >= 0 else value + (1 << 64))


def _ld(field: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _vi(field: int, value: int) -> bytes:
    return _varint(field << 3) + _int32(value) if value else b""


class _TableCodec:
    """Per-table precomputed ids and widths, to encode many rules of one table fast."""

    def __init__(self, schema: P4Schema, table: str) -> None:
        info = schema.table(table)
        self.info = info
        self.prefix = _vi(1, info.id)
        self.fields = {m.name: m for m in info.match_fields}
        for m in info.match_fields:
            self.fields.setdefault(m.name.split(".")[-1], m)
        self.actions = {}
        for aid in info.action_ids:
            a = schema.action(aid)
            self.actions[a.name] = a
        #: per match field, its FieldMatch's field_id bytes; per action, its id and parameters'
        self._fid = {m.id: _vi(1, m.id) for m in info.match_fields}
        self._action_parts = {name: (_vi(1, a.id), frozenset(p.name for p in a.params),
                                     tuple((p.name, _vi(2, p.id), p.bitwidth) for p in a.params))
                              for name, a in self.actions.items()}

    def match(self, name: str, m: object) -> bytes:
        try:
            mf = self.fields[name]
        except KeyError:
            raise SchemaError(f"table {self.info.name!r} has no match field {name!r}") from None
        w = mf.bitwidth
        fid = self._fid[mf.id]
        if isinstance(m, Exact) and mf.match_type == "exact":
            return _ld(2, fid + _ld(2, _ld(1, encode_int(m.value, w))))
        if isinstance(m, Lpm) and mf.match_type == "lpm":
            if m.prefix_len == 0:
                return b""
            return _ld(2, fid + _ld(4, _ld(1, encode_int(m.value, w)) + _vi(2, m.prefix_len)))
        if isinstance(m, Ternary) and mf.match_type == "ternary":
            if m.mask == 0:
                return b""
            return _ld(2, fid + _ld(3, _ld(1, encode_int(m.value, w)) + _ld(2, encode_int(m.mask, w))))
        if isinstance(m, Range) and mf.match_type == "range":
            if m.low == 0 and m.high == (1 << w) - 1:
                return b""
            return _ld(2, fid + _ld(6, _ld(1, encode_int(m.low, w)) + _ld(2, encode_int(m.high, w))))
        if isinstance(m, Optional) and mf.match_type == "optional":
            return _ld(2, fid + _ld(7, _ld(1, encode_int(m.value, w))))
        raise BadValue(f"{self.info.name} field {mf.name} is {mf.match_type}, got {type(m).__name__}")

    def action(self, rule: TableRule) -> bytes:
        a = self.actions.get(rule.action)
        if a is None:
            full = [n for n in self.actions if n.split(".")[-1] == rule.action]
            if len(full) != 1:
                raise SchemaError(f"action {rule.action!r} is not an action of table {self.info.name!r}")
            a = self.actions[full[0]]
        head, names, params = self._action_parts[a.name]
        if rule.params.keys() != names:
            raise BadValue(f"action {a.name}: parameters {sorted(rule.params)}, expected {[p.name for p in a.params]}")
        body = head + b"".join(_ld(4, pid + _ld(3, encode_int(int(rule.params[name]), width)))
                               for name, pid, width in params)
        return _ld(3, _ld(1, body))

    def entry(self, rule: TableRule) -> bytes:
        out = self.prefix + b"".join(self.match(n, m) for n, m in rule.match.items())
        if rule.action:
            out += self.action(rule)
        if rule.priority:
            out += _vi(4, rule.priority)
        if rule.is_default:
            out += _vi(8, 1)
        return out


def encode_rule_updates(schema: P4Schema, kind: str, rules: Iterable[TableRule]) -> list[bytes]:
    """Each rule as the bytes of one ``Update`` of ``kind`` (insert, modify or delete)."""
    utype = _vi(1, UPDATE_TYPES[kind])
    codecs: dict[str, _TableCodec] = {}
    out = []
    for rule in rules:
        codec = codecs.get(rule.table)
        if codec is None:
            codec = codecs[rule.table] = _TableCodec(schema, rule.table)
        out.append(utype + _ld(2, _ld(2, codec.entry(rule))))
    return out


def encode_write_request(device_id: int, election_id: int, updates: Sequence[bytes], role: str = "") -> bytes:
    """A WriteRequest around already-encoded updates (atomicity CONTINUE_ON_ERROR)."""
    election = _vi(1, election_id >> 64) + _vi(2, election_id & ((1 << 64) - 1))
    out = _vi(1, device_id) + _ld(3, election) + b"".join(_ld(4, u) for u in updates)
    if role:
        out += _ld(6, role.encode())
    return out
