"""Table entries read back as protobuf wire bytes, without building protobuf messages.

protobuf runs in pure Python here, where building one ``TableEntry`` message costs about
ten Python objects and 100 us: a wildcard Read of 65,536 entries took seconds of CPU and
set off full garbage collections that stopped every thread. :class:`TableEncoder` writes
the ``Entity`` of a table entry straight to the bytes that ``SerializeToString()`` gives for
the message :mod:`~pybmv2.runtime.table_ops` would build (fields in field-number order,
proto3 defaults omitted, oneof members always written); the unit tests compare the two
byte for byte. Each encoded entity comes framed as one ``entities`` field of a
``ReadResponse``, so a response is the concatenation of its entities.

Field numbers are those of p4runtime 1.4 (``p4/v1/p4runtime.proto``).
"""

from __future__ import annotations

from collections.abc import Sequence

from p4.config.v1 import p4info_pb2

from pybmv2.externs import MeterRates
from pybmv2.runtime.idle_timeouts import elapsed_ns
from pybmv2.runtime.p4info import P4InfoIndex, TableBinding
from pybmv2.tables import ActionCall, TableEntry

__all__ = ["OneShotAction", "TableEncoder", "entity_bytes", "varint"]

MatchType = p4info_pb2.MatchField.MatchType
#: distinct actions whose encoding a table's encoder keeps (big tables repeat a few)
ACTION_MEMO_SIZE = 4096
_MASK64 = (1 << 64) - 1

#: one action of a one-shot action set: (target action, weight, watch kind, watch value),
#: where the watch kind is "" (unset), "watch" (an int32) or "watch_port" (bytes)
OneShotAction = tuple[ActionCall, int, str, int | bytes]


def varint(value: int) -> bytes:
    """The protobuf varint of a non-negative integer (negative int32/int64 values are
    written as their 64-bit two's complement, as protobuf does).

    >>> varint(300)
    b'\\xac\\x02'
    """
    value &= _MASK64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag: int, data: bytes) -> bytes:
    """A length-delimited field (``tag`` is the one-byte key) holding ``data``."""
    return bytes((tag,)) + varint(len(data)) + data


def _bytestring(value: int) -> bytes:
    """PI's canonical bytestring (as :func:`pybmv2.runtime.codec.encode_bytestring`)."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def _counter_data(entry: TableEntry) -> bytes:
    """A ``CounterData`` message of an entry's counts."""
    data = b""
    if entry.bytes:
        data += b"\x08" + varint(entry.bytes)
    if entry.packets:
        data += b"\x10" + varint(entry.packets)
    return data


def _meter_config(rates: MeterRates) -> bytes:
    """A ``MeterConfig`` message."""
    config = b""
    for tag, value in ((0x08, rates.cir), (0x10, rates.cburst), (0x18, rates.pir),
                       (0x20, rates.pburst)):
        if value:
            config += bytes((tag,)) + varint(value)
    return config


def entity_bytes(table_entry: bytes) -> bytes:
    """A serialized TableEntry as one ``entities`` field of a ReadResponse."""
    return _field(0x0A, _field(0x12, table_entry))


def _action(action_id: int, params: Sequence[tuple[int, bytes]]) -> bytes:
    """A ``p4.v1.Action`` message."""
    body = b"\x08" + varint(action_id)
    for param_id, value in params:
        body += _field(0x22, b"\x10" + varint(param_id) + _field(0x1A, value))
    return body


class TableEncoder:
    """The wire encoder of one table's entries (its P4Info ids looked up once)."""

    def __init__(self, index: P4InfoIndex, tb: TableBinding) -> None:
        self.index = index
        self.tb = tb
        self._head = b"\x08" + varint(tb.info.id)
        self._fields = [(b"\x08" + varint(mf.id), mf.match_type, (1 << mf.bitwidth) - 1)
                        for mf in tb.info.match_fields]
        self._actions: dict[ActionCall, bytes] = {}

    def match(self, key: tuple) -> bytes:
        """The ``match`` fields of a key (wildcards omitted), as ``encode_match_key``."""
        out = b""
        for (fid, kind, full), part in zip(self._fields, key, strict=True):
            if kind == MatchType.EXACT:
                out += _field(0x12, fid + _field(0x12, _field(0x0A, _bytestring(part))))
            elif kind == MatchType.LPM:
                value, plen = part
                if plen:
                    body = _field(0x0A, _bytestring(value)) + b"\x10" + varint(plen)
                    out += _field(0x12, fid + _field(0x22, body))
            elif kind == MatchType.TERNARY:
                value, mask = part
                if mask:
                    body = _field(0x0A, _bytestring(value)) + _field(0x12, _bytestring(mask))
                    out += _field(0x12, fid + _field(0x1A, body))
            elif kind == MatchType.RANGE:
                low, high = part
                if not (low == 0 and high == full):
                    body = _field(0x0A, _bytestring(low)) + _field(0x12, _bytestring(high))
                    out += _field(0x12, fid + _field(0x32, body))
            else:  # OPTIONAL
                value, mask = part
                if mask:
                    out += _field(0x12, fid + _field(0x3A, _field(0x0A, _bytestring(value))))
        return out

    def action_message(self, call: ActionCall) -> bytes | None:
        """The ``p4.v1.Action`` of a direct action (None if it has no P4Info id)."""
        action_id = self.tb.from_target_action.get(call.action_id)
        info = self.index.actions.get(action_id) if action_id is not None else None
        if info is None:
            return None
        return _action(info.id, [(p.id, _bytestring(v))
                                 for p, v in zip(info.params, call.args, strict=False)])

    def direct_action(self, call: ActionCall) -> bytes:
        """The ``action`` field (a TableAction) of a direct entry; empty if it has none."""
        memo = self._actions
        out = memo.get(call)
        if out is None:
            action = self.action_message(call)
            out = b"" if action is None else _field(0x1A, _field(0x0A, action))
            if len(memo) < ACTION_MEMO_SIZE:
                memo[call] = out
        return out

    @staticmethod
    def member_action(member_id: int) -> bytes:
        """The ``action`` field of an entry pointing to an action profile member."""
        return _field(0x1A, b"\x10" + varint(member_id))

    @staticmethod
    def group_action(group_id: int) -> bytes:
        """The ``action`` field of an entry pointing to an action profile group."""
        return _field(0x1A, b"\x18" + varint(group_id))

    def oneshot_action(self, actions: Sequence[OneShotAction]) -> bytes:
        """The ``action`` field of a one-shot entry: its ``action_profile_action_set``."""
        body = b""
        for call, weight, watch_kind, watch in actions:
            action = self.action_message(call)
            ap = b"" if action is None else _field(0x0A, action)
            if weight:
                ap += b"\x10" + varint(weight)
            if watch_kind == "watch":
                assert isinstance(watch, int)
                ap += b"\x18" + varint(watch)
            elif watch_kind == "watch_port":
                assert isinstance(watch, bytes)
                ap += _field(0x22, watch)
            body += _field(0x0A, ap)
        return _field(0x1A, _field(0x22, body))

    def direct_counter(self, entry: TableEntry) -> bytes:
        """The ReadResponse field of an entry's DirectCounterEntry (its key and counts)."""
        body = _field(0x0A, self._key(entry)) + _field(0x12, _counter_data(entry))
        return _field(0x0A, _field(0x42, body))

    def direct_meter(self, entry: TableEntry, rates: MeterRates | None) -> bytes:
        """The ReadResponse field of an entry's DirectMeterEntry (its key and config)."""
        body = _field(0x0A, self._key(entry))
        if rates is not None:
            body += _field(0x12, _meter_config(rates))
        return _field(0x0A, _field(0x32, body))

    def _key(self, entry: TableEntry) -> bytes:
        """A TableEntry naming ``entry``: table id, match and priority."""
        body = self._head + self.match(entry.key)
        if entry.priority > 0:
            body += b"\x20" + varint(entry.priority)
        return body

    def entity(self, entry: TableEntry, action: bytes, *, counters: bool = False,
               meter: MeterRates | None = None, now_us: int | None = None) -> bytes:
        """The ReadResponse field of one entry, given its encoded ``action`` field;
        ``counters``: with its direct counters' ``counter_data``; ``meter``: with this
        ``meter_config``; ``now_us``: with ``time_since_last_hit`` measured to that time."""
        body = self._head + self.match(entry.key) + action
        if entry.priority > 0:
            body += b"\x20" + varint(entry.priority)
        if entry.metadata:
            body += b"\x28" + varint(entry.metadata)
        if meter is not None:
            body += _field(0x32, _meter_config(meter))
        if counters:
            body += _field(0x3A, _counter_data(entry))
        if entry.ttl_ns:
            body += b"\x48" + varint(entry.ttl_ns)
        if now_us is not None:
            elapsed = elapsed_ns(entry.ttl_ns, entry.hit_us, now_us)
            body += _field(0x52, b"\x08" + varint(elapsed) if elapsed else b"")
        metadata = entry.extra.get("metadata", b"")
        if metadata:
            body += _field(0x5A, metadata)
        return entity_bytes(body)
