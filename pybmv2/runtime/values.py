"""Plain-value forms of the P4Runtime table messages a Write carries.

Validation (:mod:`pybmv2.runtime.codec`) and table writes (:mod:`pybmv2.runtime.table_ops`)
work on these values, so that a TableEntry parsed by protobuf and one decoded straight from
the wire (:mod:`pybmv2.runtime.wire`) go through one implementation of every rule. The
``*_from_proto`` functions are the protobuf side of that bridge.

Forms:

- a field match, :data:`MatchValue`: ``(field_id, kind, first, second)`` where ``kind`` is
  the name of the set ``field_match_type`` member (``None`` if none is set) and
  ``first``/``second`` are exact ``(value, None)``, lpm ``(value, prefix_len)``, ternary
  ``(value, mask)``, range ``(low, high)``, optional ``(value, None)``;
- an action, :data:`ActionValue`: ``(action_id, ((param_id, value), ...))``;
- a table entry, :class:`EntryValue`.
"""

from __future__ import annotations

from typing import Any

from p4.v1 import p4runtime_pb2

__all__ = [
    "ActionValue",
    "EntryValue",
    "MatchValue",
    "action_from_proto",
    "entry_from_proto",
    "match_from_proto",
]

MatchValue = tuple[int, "str | None", bytes, Any]
ActionValue = tuple[int, tuple[tuple[int, bytes], ...]]


class EntryValue:
    """The fields of a TableEntry that a write looks at, as plain Python values.

    ``action_kind`` is None when the entry has no ``action``; otherwise it names the set
    member of the TableAction oneof (``""`` if none is), and ``action`` holds the direct
    action when that member is ``"action"``. ``counter_data`` is ``(packet_count,
    byte_count)`` when the entry carries one; ``has_meter`` says whether ``meter_config`` or
    ``meter_counter_data`` is set, and ``meter_config`` is the former (or None). ``indirect_id`` is the member or group id of an
    ``action_profile_member_id`` / ``action_profile_group_id`` action, ``action_set`` the
    ``action_profile_action_set`` of a one-shot action (protobuf path only).
    """

    __slots__ = ("action", "action_kind", "action_set", "controller_metadata", "counter_data",
                 "has_meter", "has_time_since_last_hit", "idle_timeout_ns",
                 "indirect_id", "is_const", "is_default_action", "matches", "metadata",
                 "meter_config", "priority", "table_id")

    def __init__(self, table_id: int, matches: tuple[MatchValue, ...], action_kind: str | None,
                 action: ActionValue | None, priority: int, controller_metadata: int,
                 metadata: bytes, is_default_action: bool, is_const: bool = False,
                 has_time_since_last_hit: bool = False, has_meter: bool = False,
                 counter_data: tuple[int, int] | None = None, idle_timeout_ns: int = 0,
                 indirect_id: int = 0,
                 meter_config: p4runtime_pb2.MeterConfig | None = None,
                 action_set: p4runtime_pb2.ActionProfileActionSet | None = None) -> None:
        self.table_id = table_id
        self.matches = matches
        self.action_kind = action_kind
        self.action = action
        self.priority = priority
        self.controller_metadata = controller_metadata
        self.metadata = metadata
        self.is_default_action = is_default_action
        self.is_const = is_const
        self.has_time_since_last_hit = has_time_since_last_hit
        self.has_meter = has_meter
        self.counter_data = counter_data
        self.idle_timeout_ns = idle_timeout_ns
        self.indirect_id = indirect_id
        self.meter_config = meter_config
        self.action_set = action_set

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EntryValue):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"EntryValue({inner})"


def match_from_proto(fm: p4runtime_pb2.FieldMatch) -> MatchValue:
    """The :data:`MatchValue` of a protobuf FieldMatch."""
    which = fm.WhichOneof("field_match_type")
    if which == "exact":
        return (fm.field_id, which, fm.exact.value, None)
    if which == "lpm":
        return (fm.field_id, which, fm.lpm.value, fm.lpm.prefix_len)
    if which == "ternary":
        return (fm.field_id, which, fm.ternary.value, fm.ternary.mask)
    if which == "range":
        return (fm.field_id, which, fm.range.low, fm.range.high)
    if which == "optional":
        return (fm.field_id, which, fm.optional.value, None)
    return (fm.field_id, which, b"", None)


def action_from_proto(action: p4runtime_pb2.Action) -> ActionValue:
    """The :data:`ActionValue` of a protobuf Action."""
    return (action.action_id, tuple((p.param_id, p.value) for p in action.params))


def entry_from_proto(msg: p4runtime_pb2.TableEntry) -> EntryValue:
    """The :class:`EntryValue` of a protobuf TableEntry."""
    action_kind: str | None = None
    action: ActionValue | None = None
    indirect_id = 0
    action_set = None
    if msg.HasField("action"):
        action_kind = msg.action.WhichOneof("type") or ""
        if action_kind == "action":
            action = action_from_proto(msg.action.action)
        elif action_kind in ("action_profile_member_id", "action_profile_group_id"):
            indirect_id = getattr(msg.action, action_kind)
        elif action_kind == "action_profile_action_set":
            action_set = msg.action.action_profile_action_set
    counter_data = None
    if msg.HasField("counter_data"):
        counter_data = (msg.counter_data.packet_count, msg.counter_data.byte_count)
    return EntryValue(
        table_id=msg.table_id,
        matches=tuple(match_from_proto(fm) for fm in msg.match),
        action_kind=action_kind,
        action=action,
        priority=msg.priority,
        controller_metadata=msg.controller_metadata,
        metadata=bytes(msg.metadata),
        is_default_action=msg.is_default_action,
        is_const=msg.is_const,
        has_time_since_last_hit=msg.HasField("time_since_last_hit"),
        has_meter=msg.HasField("meter_config") or msg.HasField("meter_counter_data"),
        counter_data=counter_data,
        idle_timeout_ns=msg.idle_timeout_ns,
        indirect_id=indirect_id,
        meter_config=msg.meter_config if msg.HasField("meter_config") else None,
        action_set=action_set,
    )
