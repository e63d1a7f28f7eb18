"""Pure translation between P4Runtime table messages and the target's structures.

Validation follows PI (``proto/frontend/src/device_mgr.cpp``, ``common.cpp``,
``action_helpers.cpp``, ``match_key_helpers.cpp``) so that a client gets the same canonical
error codes as from BMv2:

- a bytestring may be shorter than the field (zero-padded) or longer with leading zero
  bytes, but its value must fit the field width (INVALID_ARGUMENT otherwise);
- a missing LPM/ternary/optional/range field is a wildcard; a missing exact field, a
  prefix length of 0, a ternary mask of 0 or a full range are INVALID_ARGUMENT (omit the
  field instead), as are LPM bits beyond the prefix and ternary value bits outside the mask;
- a priority is required iff the table has ternary, range or optional fields.

Table-entry validation works on plain values (:mod:`pybmv2.runtime.values`):
:func:`key_from_values`, :func:`check_table_action`, :func:`action_call` and
:func:`merge_counts` serve both the protobuf path and the wire fast path; the protobuf
functions (:func:`decode_match_key`, :func:`validate_table_action`, :func:`decode_action`,
:func:`merge_counter_data`) convert and call them.

Values read back are canonical bytestrings (leading zero bytes stripped, ``b"\\x00"`` for
zero) and wildcard fields are omitted, as PI does. Packet I/O, PRE and digest conversion
live in :mod:`pybmv2.runtime.packetio` and :mod:`pybmv2.runtime.pre_codec`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from pybmv2.externs import MeterRates
from pybmv2.runtime.errors import P4RuntimeError
from pybmv2.runtime.p4info import P4Ids, P4InfoIndex, TableBinding, TableInfo
from pybmv2.runtime.values import ActionValue, MatchValue, action_from_proto, match_from_proto
from pybmv2.tables import ActionCall

__all__ = [
    "MAX_PRIORITY",
    "action_call",
    "check_table_action",
    "decode_action",
    "decode_bytestring",
    "decode_match_key",
    "decode_meter_config",
    "encode_action",
    "encode_bytestring",
    "encode_counter_data",
    "encode_match_key",
    "encode_meter_config",
    "invalid",
    "key_from_values",
    "merge_counter_data",
    "merge_counts",
    "validate_table_action",
]

MatchType = p4info_pb2.MatchField.MatchType
Scope = p4info_pb2.ActionRef.Scope
_ACTION = P4Ids.ACTION  # an EnumTypeWrapper attribute look-up is slow, and this one is hot
_TABLE_ONLY, _DEFAULT_ONLY = Scope.TABLE_ONLY, Scope.DEFAULT_ONLY
#: BMv2's PI target rejects priorities that do not fit a C int (pi_tables_imp.cpp)
MAX_PRIORITY = (1 << 31) - 1


def invalid(message: str) -> P4RuntimeError:
    """An INVALID_ARGUMENT error."""
    return P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, message)


def _full(width: int) -> int:
    return (1 << width) - 1


# -- bytestrings ------------------------------------------------------------------------


def decode_bytestring(data: bytes, bitwidth: int, what: str = "value") -> int:
    """PI's ``bytestring_p4rt_to_pi``: the value of a P4Runtime bytestring of a W-bit field.

    >>> decode_bytestring(b"\\x00\\x0a", 9)
    10
    >>> decode_bytestring(b"\\x02\\x00", 9)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pybmv2.runtime.errors.P4RuntimeError: INVALID_ARGUMENT: ...
    """
    value = int.from_bytes(data, "big")
    if value.bit_length() > bitwidth:
        raise invalid(f"Bytestring provided does not fit within {bitwidth} bits "
                      f"({what} = 0x{data.hex()})")
    return value


def encode_bytestring(value: int, bitwidth: int | None = None) -> bytes:
    """The canonical bytestring PI returns: no leading zero bytes, ``b"\\x00"`` for zero.

    >>> encode_bytestring(0x0a0000, 32)
    b'\\n\\x00\\x00'
    >>> encode_bytestring(0, 48)
    b'\\x00'
    """
    if value < 0:
        raise ValueError(f"cannot encode negative value {value}")
    if bitwidth is not None and value.bit_length() > bitwidth:
        raise ValueError(f"value {value:#x} does not fit {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


# -- match keys -------------------------------------------------------------------------

_EXPECTED_KIND = {MatchType.EXACT: "exact", MatchType.LPM: "lpm",
                  MatchType.TERNARY: "ternary", MatchType.RANGE: "range",
                  MatchType.OPTIONAL: "optional"}


def _decode_field(tb: TableBinding, pos: int, fm: MatchValue) -> Any:
    mf = tb.info.match_fields[pos]
    width = mf.bitwidth
    _, which, first, second = fm
    expected = _EXPECTED_KIND[mf.match_type]
    if which != expected:
        raise invalid(f"Invalid match type for field {mf.name!r}: expected {expected}, got "
                      f"{which}")
    kind = tb.target_kinds[pos] if tb.target_kinds else expected
    if which == "exact":
        value = decode_bytestring(first, width, mf.name)
        return (1 if value else 0) if kind == "valid" else value
    if which == "lpm":
        value = decode_bytestring(first, width, mf.name)
        plen = second
        if plen < 0:
            raise invalid("Prefix length cannot be < 0")
        if plen > width:
            raise invalid("Prefix length cannot be > bitwidth")
        if plen == 0:
            raise invalid("Invalid reprsentation of 'don't care' LPM match, omit match field "
                          "instead of using a prefix length of 0")
        if value & _full(width - plen):
            raise invalid("Invalid LPM value, incorrect number of trailing zeros")
        return (value, plen)
    if which == "ternary":
        value = decode_bytestring(first, width, mf.name)
        mask = decode_bytestring(second, width, f"{mf.name} mask")
        if mask == 0:
            raise invalid("Invalid representation of 'don't care' ternary match, omit match "
                          "field instead of using 0 mask")
        if value & ~mask:
            raise invalid("Invalid ternary value, make sure value & mask == value")
        return (value, mask)
    if which == "range":
        low = decode_bytestring(first, width, f"{mf.name} low")
        high = decode_bytestring(second, width, f"{mf.name} high")
        if low == 0 and high == _full(width):
            raise invalid("Invalid representation of 'don't care' range match, omit match "
                          "field instead of using low=0 and high=2**bitwidth-1")
        if low > high:
            raise invalid("Invalid range value, make sure low <= high")
        return (low, high)
    value = decode_bytestring(first, width, mf.name)
    return (value, _full(width))


def _wildcard(info: TableInfo, pos: int) -> Any:
    mf = info.match_fields[pos]
    if mf.match_type == MatchType.RANGE:
        return (0, _full(mf.bitwidth))
    if mf.match_type in (MatchType.LPM, MatchType.TERNARY, MatchType.OPTIONAL):
        return (0, 0)
    raise invalid(f"Missing non-ternary field in match key: {mf.name!r}")


def key_from_values(tb: TableBinding, matches: Sequence[MatchValue],
                    priority: int) -> tuple[tuple, int]:
    """PI's ``construct_match_key`` for a non-default entry: (key tuple, priority)."""
    info = tb.info
    fields = info.match_fields
    if len(matches) > len(fields):
        raise invalid("Too many fields in match key")
    if len(matches) == len(fields) and tuple([fm[0] for fm in matches]) == info.field_ids:
        # every field, in key order (as encoders write them): nothing to look up
        key = tuple([_decode_field(tb, pos, fm) for pos, fm in enumerate(matches)])
    else:
        given: dict[int, MatchValue] = {}
        for fm in matches:
            mf = info.field_by_id(fm[0])
            if mf is None:
                raise invalid(f"Unknown field in match key: id {fm[0]}")
            if mf.position in given:
                raise invalid(f"Duplicate field in match key: {mf.name!r}")
            given[mf.position] = fm
        key = tuple([
            _decode_field(tb, pos, given[pos]) if pos in given else _wildcard(info, pos)
            for pos in range(len(fields))
        ])
    need_priority = info.requires_priority
    if not need_priority and priority > 0:
        raise invalid("Non-zero priority for non-ternary match")
    if need_priority and priority == 0:
        raise invalid("Zero priority for ternary match")
    if priority < 0:
        raise invalid(f"Negative priority {priority}")
    if priority > MAX_PRIORITY:
        raise P4RuntimeError(grpc.StatusCode.UNKNOWN,
                             f"Error when adding match entry to target: priority "
                             f"{priority} exceeds {MAX_PRIORITY}")
    return key, priority if need_priority else 0


def decode_match_key(tb: TableBinding, entry: p4runtime_pb2.TableEntry) -> tuple[tuple, int]:
    """:func:`key_from_values` of a protobuf TableEntry."""
    return key_from_values(tb, [match_from_proto(fm) for fm in entry.match], entry.priority)


def encode_match_key(tb: TableBinding, key: tuple, priority: int,
                     entry: p4runtime_pb2.TableEntry) -> None:
    """PI's ``parse_match_key``: fill ``entry.match`` (wildcards omitted) and priority."""
    info = tb.info
    if priority > 0:
        entry.priority = priority
    for mf, part in zip(info.match_fields, key, strict=True):
        width = mf.bitwidth
        if mf.match_type == MatchType.EXACT:
            entry.match.add(field_id=mf.id).exact.value = encode_bytestring(part)
        elif mf.match_type == MatchType.LPM:
            value, plen = part
            if plen:
                fm = entry.match.add(field_id=mf.id)
                fm.lpm.value = encode_bytestring(value)
                fm.lpm.prefix_len = plen
        elif mf.match_type == MatchType.TERNARY:
            value, mask = part
            if mask:
                fm = entry.match.add(field_id=mf.id)
                fm.ternary.value = encode_bytestring(value)
                fm.ternary.mask = encode_bytestring(mask)
        elif mf.match_type == MatchType.RANGE:
            low, high = part
            if not (low == 0 and high == _full(width)):
                fm = entry.match.add(field_id=mf.id)
                fm.range.low = encode_bytestring(low)
                fm.range.high = encode_bytestring(high)
        else:  # OPTIONAL
            value, mask = part
            if mask:
                entry.match.add(field_id=mf.id).optional.value = encode_bytestring(value)


# -- actions ----------------------------------------------------------------------------


def check_table_action(index: P4InfoIndex, info: TableInfo, is_default: bool,
                       action_kind: str | None, action_id: int) -> None:
    """PI's ``validate_action``: default-action constness, action type and scope.

    ``action_kind`` is None without an ``action``, else the set TableAction member.
    """
    if is_default and info.const_default_action_id:
        raise P4RuntimeError(
            grpc.StatusCode.PERMISSION_DENIED,
            f"Cannot set / reset default action for table {info.id} which has a const "
            "default action")
    if action_kind is None:
        return
    if action_kind != "action":
        raise invalid(f"Cannot provide indirect action for direct table {info.id}")
    if not index.is_valid_id(action_id, _ACTION):
        raise invalid("Invalid P4 id")
    scope = info.action_scopes.get(action_id)
    if scope is None:
        raise invalid("Invalid action for table")
    if scope == _TABLE_ONLY and is_default:
        raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                             "Cannot use TABLE_ONLY action as default action")
    if scope == _DEFAULT_ONLY and not is_default:
        raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                             "Cannot use DEFAULT_ONLY action in table entry")


def validate_table_action(index: P4InfoIndex, info: TableInfo,
                          entry: p4runtime_pb2.TableEntry) -> None:
    """:func:`check_table_action` of a protobuf TableEntry."""
    kind = (entry.action.WhichOneof("type") or "") if entry.HasField("action") else None
    check_table_action(index, info, entry.is_default_action, kind,
                       entry.action.action.action_id)


def action_call(index: P4InfoIndex, tb: TableBinding, action: ActionValue) -> ActionCall:
    """PI's ``construct_action_data``: the target ActionCall of a P4Runtime action."""
    action_id, params = action
    info = index.actions.get(action_id)
    if info is None:
        raise invalid("Invalid P4 id")
    if len(params) != len(info.params):
        raise invalid("Unexpected number of action parameters")
    args: list[int | None] = [None] * len(info.params)
    for param_id, value in params:
        pos = info.param_position(param_id)
        if pos is None:
            raise invalid("Unknown action parameter")
        if args[pos] is not None:
            raise invalid(f"Duplicate action parameter {info.params[pos].name!r}")
        args[pos] = decode_bytestring(value, info.params[pos].bitwidth,
                                      f"{info.name}.{info.params[pos].name}")
    target_id = tb.to_target_action.get(action_id)
    if target_id is None:
        raise invalid("Invalid action for table")
    return ActionCall(target_id, tuple(a or 0 for a in args))


def decode_action(index: P4InfoIndex, tb: TableBinding,
                  action: p4runtime_pb2.Action) -> ActionCall:
    """:func:`action_call` of a protobuf Action."""
    return action_call(index, tb, action_from_proto(action))


def encode_action(index: P4InfoIndex, tb: TableBinding, call: ActionCall,
                  action: p4runtime_pb2.Action) -> bool:
    """Fill a P4Runtime Action from an ActionCall; False if the action has no P4Info id."""
    action_id = tb.from_target_action.get(call.action_id)
    info = index.actions.get(action_id) if action_id is not None else None
    if info is None:
        return False
    action.action_id = info.id
    for p, value in zip(info.params, call.args, strict=False):
        action.params.add(param_id=p.id, value=encode_bytestring(value))
    return True


# -- counters and meters ----------------------------------------------------------------


def encode_counter_data(packets: int, nbytes: int, data: p4runtime_pb2.CounterData) -> None:
    """BMv2 reports both units whatever the counter's unit, and so do we."""
    data.packet_count = packets
    data.byte_count = nbytes


def merge_counts(unit: int, counts: tuple[int, int],
                 current: tuple[int, int]) -> tuple[int, int]:
    """(packets, bytes) to write from new ``counts``: those of the counter's unit, the
    others kept (PI)."""
    Unit = p4info_pb2.CounterSpec.Unit
    packets, nbytes = current
    if unit in (Unit.PACKETS, Unit.BOTH):
        packets = counts[0]
    if unit in (Unit.BYTES, Unit.BOTH):
        nbytes = counts[1]
    if unit == Unit.UNSPECIFIED:
        packets, nbytes = counts
    return packets, nbytes


def merge_counter_data(unit: int, data: p4runtime_pb2.CounterData,
                       current: tuple[int, int]) -> tuple[int, int]:
    """:func:`merge_counts` of a protobuf CounterData."""
    return merge_counts(unit, (data.packet_count, data.byte_count), current)


def decode_meter_config(config: p4runtime_pb2.MeterConfig | None) -> MeterRates | None:
    """PI's ``validate_meter_spec`` + conversion; None (always green) for an unset config."""
    if config is None:
        return None
    for name in ("cir", "cburst", "pir", "pburst"):
        if getattr(config, name) < -1:
            raise invalid(f"Negative meter {name.upper().replace('BURST', 'Burst')}")
    for name in ("cburst", "pburst"):
        if getattr(config, name) > 0xFFFFFFFF:
            raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED, f"{name} too large")
    if -1 in (config.cir, config.cburst, config.pir, config.pburst):
        return None
    return MeterRates(config.cir, config.cburst, config.pir, config.pburst)


def encode_meter_config(rates: MeterRates | None, config: p4runtime_pb2.MeterConfig) -> bool:
    """Fill a MeterConfig; False (leave it unset) for a default, unconfigured meter."""
    if rates is None:
        return False
    config.cir, config.cburst = rates.cir, rates.cburst
    config.pir, config.pburst = rates.pir, rates.pburst
    return True
