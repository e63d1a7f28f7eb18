"""Pure encoding and decoding of P4Runtime entities (no I/O).

A :class:`TableRule` is a table entry by name with typed match values; :func:`encode_rule`
turns it into a ``p4.v1.TableEntry`` and :func:`decode_rule` turns one read back into a
rule, so that ``decode_rule(schema, encode_rule(schema, r)) == r``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from p4.v1 import p4runtime_pb2

from controller.p4runtime.schema import P4Schema, SchemaError, TableInfo
from controller.p4runtime.values import BadValue, decode_int, encode_int, format_value, parse_int

__all__ = [
    "Exact",
    "Lpm",
    "MatchValue",
    "Optional",
    "Range",
    "TableRule",
    "Ternary",
    "action_profile_group",
    "action_profile_member",
    "action_text",
    "clone_session_entry",
    "decode_rule",
    "encode_rule",
    "format_rule",
    "match_text",
    "multicast_group_entry",
    "parse_match",
    "rule_key",
    "update",
]


@dataclass(frozen=True, slots=True)
class Exact:
    value: int


@dataclass(frozen=True, slots=True)
class Lpm:
    value: int
    prefix_len: int


@dataclass(frozen=True, slots=True)
class Ternary:
    value: int
    mask: int


@dataclass(frozen=True, slots=True)
class Range:
    low: int
    high: int


@dataclass(frozen=True, slots=True)
class Optional:
    value: int


MatchValue = Exact | Lpm | Ternary | Range | Optional


@dataclass(frozen=True, slots=True)
class TableRule:
    """One table entry (or a table's default action when ``is_default``)."""

    table: str
    match: Mapping[str, MatchValue] = field(default_factory=dict)
    action: str = ""
    params: Mapping[str, int] = field(default_factory=dict)
    priority: int = 0
    is_default: bool = False

    def __hash__(self) -> int:
        return hash(rule_key(self))


def rule_key(rule: TableRule) -> tuple:
    """What identifies an entry in its table: table, match and priority."""
    return (rule.table, tuple(sorted(rule.match.items(), key=lambda kv: kv[0])), rule.priority, rule.is_default)


def parse_match(table: TableInfo, name: str, text: str | int) -> tuple[str, MatchValue]:
    """Parse one match field in natural notation for ``table``.

    ``10.0.0.0/8`` (lpm), ``0x800&&&0xfff`` (ternary), ``10..20`` (range), plain values
    for exact and optional fields.
    """
    mf = table.field(name)
    w = mf.bitwidth
    what = f"{table.name} field {mf.name}"
    s = str(text)
    if mf.match_type == "lpm":
        value_s, _, plen_s = s.partition("/")
        value = parse_int(value_s, w, what)
        plen = int(plen_s) if plen_s else w
        if not 0 <= plen <= w:
            raise BadValue(f"{what}: prefix length {plen} out of range 0..{w}")
        mask = ((1 << w) - 1) ^ ((1 << (w - plen)) - 1)
        return mf.name, Lpm(value & mask, plen)
    if mf.match_type == "ternary":
        value_s, sep, mask_s = s.partition("&&&")
        value = parse_int(value_s, w, what)
        mask = parse_int(mask_s, w, what) if sep else (1 << w) - 1
        return mf.name, Ternary(value & mask, mask)
    if mf.match_type == "range":
        low_s, sep, high_s = s.partition("..")
        low = parse_int(low_s, w, what)
        high = parse_int(high_s, w, what) if sep else low
        if low > high:
            raise BadValue(f"{what}: range {low}..{high} is empty")
        return mf.name, Range(low, high)
    if mf.match_type == "optional":
        return mf.name, Optional(parse_int(s, w, what))
    return mf.name, Exact(parse_int(s, w, what))


def encode_rule(schema: P4Schema, rule: TableRule) -> p4runtime_pb2.TableEntry:
    table = schema.table(rule.table)
    entry = p4runtime_pb2.TableEntry(table_id=table.id)
    if rule.is_default:
        entry.is_default_action = True
    for name, m in rule.match.items():
        mf = table.field(name)
        fm = entry.match.add(field_id=mf.id)
        w = mf.bitwidth
        if isinstance(m, Exact) and mf.match_type == "exact":
            fm.exact.value = encode_int(m.value, w)
        elif isinstance(m, Lpm) and mf.match_type == "lpm":
            if m.prefix_len == 0:
                del entry.match[-1]  # a /0 prefix is a wildcard: omitted, as the spec requires
                continue
            fm.lpm.value = encode_int(m.value, w)
            fm.lpm.prefix_len = m.prefix_len
        elif isinstance(m, Ternary) and mf.match_type == "ternary":
            if m.mask == 0:
                del entry.match[-1]
                continue
            fm.ternary.value = encode_int(m.value, w)
            fm.ternary.mask = encode_int(m.mask, w)
        elif isinstance(m, Range) and mf.match_type == "range":
            if m.low == 0 and m.high == (1 << w) - 1:
                del entry.match[-1]
                continue
            fm.range.low = encode_int(m.low, w)
            fm.range.high = encode_int(m.high, w)
        elif isinstance(m, Optional) and mf.match_type == "optional":
            fm.optional.value = encode_int(m.value, w)
        else:
            raise BadValue(f"{table.name} field {mf.name} is {mf.match_type}, got {type(m).__name__}")
    if rule.action:
        action = schema.action(rule.action)
        if action.id not in table.action_ids:
            raise SchemaError(f"action {action.name!r} is not an action of table {table.name!r}")
        missing = {p.name for p in action.params} - set(rule.params)
        extra = set(rule.params) - {p.name for p in action.params}
        if missing or extra:
            raise BadValue(f"action {action.name}: missing parameters {sorted(missing)}, unknown {sorted(extra)}")
        entry.action.action.action_id = action.id
        for p in action.params:
            value = parse_int(rule.params[p.name], p.bitwidth, f"{action.name} parameter {p.name}")
            entry.action.action.params.add(param_id=p.id, value=encode_int(value, p.bitwidth))
    if rule.priority:
        entry.priority = rule.priority
    return entry


def decode_rule(schema: P4Schema, entry: p4runtime_pb2.TableEntry) -> TableRule:
    table = schema.table(entry.table_id)
    fields = {mf.id: mf for mf in table.match_fields}
    match: dict[str, MatchValue] = {}
    for fm in entry.match:
        mf = fields.get(fm.field_id)
        if mf is None:
            raise SchemaError(f"table {table.name!r} has no match field id {fm.field_id}")
        kind = fm.WhichOneof("field_match_type")
        if kind == "exact":
            match[mf.name] = Exact(decode_int(fm.exact.value))
        elif kind == "lpm":
            match[mf.name] = Lpm(decode_int(fm.lpm.value), fm.lpm.prefix_len)
        elif kind == "ternary":
            match[mf.name] = Ternary(decode_int(fm.ternary.value), decode_int(fm.ternary.mask))
        elif kind == "range":
            match[mf.name] = Range(decode_int(fm.range.low), decode_int(fm.range.high))
        elif kind == "optional":
            match[mf.name] = Optional(decode_int(fm.optional.value))
    action_name = ""
    params: dict[str, int] = {}
    if entry.action.WhichOneof("type") == "action":
        action = schema.action(entry.action.action.action_id)
        action_name = action.name
        by_id = {p.id: p for p in action.params}
        for p in entry.action.action.params:
            params[by_id[p.param_id].name] = decode_int(p.value)
    return TableRule(table.name, match, action_name, params, entry.priority, entry.is_default_action)


def _field_text(m: MatchValue, width: int, name: str) -> str:
    if isinstance(m, Exact | Optional):
        return format_value(m.value, width, name)
    if isinstance(m, Lpm):
        return f"{format_value(m.value, width, name)}/{m.prefix_len}"
    if isinstance(m, Ternary):
        return f"{format_value(m.value, width, name)}&&&{format_value(m.mask, width, name)}"
    return f"{format_value(m.low, width, name)}..{format_value(m.high, width, name)}"


def action_text(schema: P4Schema, rule: TableRule) -> str:
    """``ACTION(param=value, ...)`` in natural notation, the action by its short name."""
    if not rule.action:
        return "(no action)"
    action = schema.action(rule.action)
    args = ", ".join(f"{p.name}={format_value(rule.params.get(p.name, 0), p.bitwidth, p.name)}"
                     for p in action.params)
    return f"{action.name.split('.')[-1]}({args})"


def format_rule(schema: P4Schema, rule: TableRule) -> dict[str, str]:
    """A rule as display strings: match fields in natural notation, then action(params)."""
    table = schema.table(rule.table)
    out: dict[str, str] = {}
    for mf in table.match_fields:
        m = rule.match.get(mf.name)
        out[mf.name] = "*" if m is None else _field_text(m, mf.bitwidth, mf.name)
    if rule.action:
        out["action"] = action_text(schema, rule)
    if rule.priority:
        out["priority"] = str(rule.priority)
    return out


def match_text(schema: P4Schema, rule: TableRule) -> str:
    """The match of a rule as a user types it: ``FIELD=VALUE ...`` by short field names
    (wildcards left out), then ``priority=N``; ``*`` when it matches everything.

    >>> from controller.p4build import pipeline_files
    >>> s = P4Schema.from_file(pipeline_files("rail_switch").p4info)
    >>> match_text(s, TableRule("ipv4_lpm", {"hdr.ipv4.dst_addr": Lpm(0x0A090000, 16)}))
    'dst_addr=10.9.0.0/16'
    """
    table = schema.table(rule.table)
    short = [mf.name.split(".")[-1] for mf in table.match_fields]
    parts = []
    for mf, name in zip(table.match_fields, short, strict=True):
        m = rule.match.get(mf.name)
        if m is not None:
            parts.append(f"{name if short.count(name) == 1 else mf.name}={_field_text(m, mf.bitwidth, mf.name)}")
    if rule.priority:
        parts.append(f"priority={rule.priority}")
    return " ".join(parts) or "*"


def update(kind: str, entity: object) -> p4runtime_pb2.Update:
    """Wrap a TableEntry / PacketReplicationEngineEntry / ... in an Update of ``kind``."""
    types = {"insert": p4runtime_pb2.Update.INSERT, "modify": p4runtime_pb2.Update.MODIFY,
             "delete": p4runtime_pb2.Update.DELETE}
    if kind not in types:
        raise BadValue(f"update kind {kind!r} is not one of {sorted(types)}")
    u = p4runtime_pb2.Update(type=types[kind])
    if isinstance(entity, p4runtime_pb2.TableEntry):
        u.entity.table_entry.CopyFrom(entity)
    elif isinstance(entity, p4runtime_pb2.PacketReplicationEngineEntry):
        u.entity.packet_replication_engine_entry.CopyFrom(entity)
    elif isinstance(entity, p4runtime_pb2.CounterEntry):
        u.entity.counter_entry.CopyFrom(entity)
    elif isinstance(entity, p4runtime_pb2.Entity):
        u.entity.CopyFrom(entity)
    else:
        raise BadValue(f"cannot wrap {type(entity).__name__} in an Update")
    return u


def multicast_group_entry(group_id: int, replicas: Iterable[tuple[int, int]]) -> p4runtime_pb2.PacketReplicationEngineEntry:
    """A multicast group of (egress_port, instance) replicas."""
    pre = p4runtime_pb2.PacketReplicationEngineEntry()
    pre.multicast_group_entry.multicast_group_id = group_id
    for port, instance in replicas:
        pre.multicast_group_entry.replicas.add(egress_port=port, instance=instance)
    return pre


def clone_session_entry(session_id: int, replicas: Iterable[tuple[int, int]],
                        class_of_service: int = 0, packet_length_bytes: int = 0) -> p4runtime_pb2.PacketReplicationEngineEntry:
    pre = p4runtime_pb2.PacketReplicationEngineEntry()
    cs = pre.clone_session_entry
    cs.session_id = session_id
    cs.class_of_service = class_of_service
    cs.packet_length_bytes = packet_length_bytes
    for port, instance in replicas:
        cs.replicas.add(egress_port=port, instance=instance)
    return pre


def action_profile_member(schema: P4Schema, profile: str, member_id: int, action: str,
                          params: Mapping[str, int]) -> p4runtime_pb2.Entity:
    """An ActionProfileMember entity: ``member_id`` of ``profile`` runs ``action(params)``."""
    prof = _profile(schema, profile)
    info = schema.action(action)
    ent = p4runtime_pb2.Entity()
    m = ent.action_profile_member
    m.action_profile_id, m.member_id = prof.preamble.id, member_id
    m.action.action_id = info.id
    for p in info.params:
        m.action.params.add(param_id=p.id, value=encode_int(parse_int(params[p.name], p.bitwidth), p.bitwidth))
    return ent


def action_profile_group(schema: P4Schema, profile: str, group_id: int,
                         members: Iterable[tuple[int, int]], max_size: int = 0) -> p4runtime_pb2.Entity:
    """An ActionProfileGroup entity of (member id, weight) pairs."""
    prof = _profile(schema, profile)
    ent = p4runtime_pb2.Entity()
    g = ent.action_profile_group
    g.action_profile_id, g.group_id, g.max_size = prof.preamble.id, group_id, max_size
    for mid, weight in members:
        g.members.add(member_id=mid, weight=weight)
    return ent


def _profile(schema: P4Schema, name: str):
    matches = [p for p in schema.p4info.action_profiles
               if p.preamble.name == name or p.preamble.name.split(".")[-1] == name]
    if len(matches) != 1:
        known = [p.preamble.name for p in schema.p4info.action_profiles]
        raise SchemaError(f"no single action profile named {name!r}; known: {known}")
    return matches[0]
