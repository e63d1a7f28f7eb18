"""An index over a P4Info message and its binding to a loaded BMv2 JSON program.

:class:`P4InfoIndex` looks P4 objects up by id and by name. :func:`bind` pairs every P4Info
table, action, counter, meter and digest with its BMv2 JSON counterpart (p4c gives both the
same fully qualified name, e.g. ``RailIngress.ipv4_lpm``), checks that they agree (match
fields, widths, action parameters, sizes) and raises :class:`P4InfoMismatchError` naming the
first disagreement. Match fields map by position: p4c emits the P4Info match fields and the
JSON key in the same order, which :func:`bind` verifies field by field.
"""

from __future__ import annotations

import logging
from collections.abc import Container
from dataclasses import dataclass, field
from functools import cached_property

import grpc
from p4.config.v1 import p4info_pb2

from pybmv2.action_profiles import ActionProfile
from pybmv2.program import Program
from pybmv2.runtime.errors import P4RuntimeError

__all__ = [
    "ActionInfo",
    "ActionProfileInfo",
    "ControllerHeader",
    "CounterInfo",
    "DigestInfo",
    "MatchFieldInfo",
    "MeterInfo",
    "P4InfoIndex",
    "P4InfoMismatchError",
    "ParamInfo",
    "PipelineBinding",
    "TableBinding",
    "TableInfo",
    "bind",
    "id_prefix",
]

log = logging.getLogger(__name__)

P4Ids = p4info_pb2.P4Ids
MatchType = p4info_pb2.MatchField.MatchType

#: P4Info match type -> the BMv2 JSON match types that implement it
_JSON_KINDS = {
    MatchType.EXACT: ("exact", "valid"),
    MatchType.LPM: ("lpm",),
    MatchType.TERNARY: ("ternary",),
    MatchType.RANGE: ("range",),
    MatchType.OPTIONAL: ("optional", "ternary"),
}
_PRIORITY_KINDS = (MatchType.TERNARY, MatchType.RANGE, MatchType.OPTIONAL)


class P4InfoMismatchError(P4RuntimeError):
    """The P4Info does not describe the BMv2 JSON it was sent with (INVALID_ARGUMENT)."""

    def __init__(self, message: str) -> None:
        super().__init__(grpc.StatusCode.INVALID_ARGUMENT, f"P4Info/JSON mismatch: {message}")


def id_prefix(p4_id: int) -> int:
    """The P4Ids.Prefix of an id (its most significant byte)."""
    return (p4_id >> 24) & 0xFF


@dataclass(frozen=True)
class MatchFieldInfo:
    id: int
    name: str
    bitwidth: int
    match_type: int  # p4info_pb2.MatchField.MatchType
    position: int
    #: of a type with @p4runtime_translation: the P4Info width is the controller's
    translated: bool = False


@dataclass(frozen=True)
class ParamInfo:
    id: int
    name: str
    bitwidth: int
    #: of a type with @p4runtime_translation: the P4Info width is the controller's
    translated: bool = False


@dataclass(frozen=True)
class ActionInfo:
    id: int
    name: str
    params: tuple[ParamInfo, ...]

    def param_position(self, param_id: int) -> int | None:
        """The position of a parameter id (the first, if the P4Info repeats it)."""
        return self._positions.get(param_id)

    @cached_property
    def _positions(self) -> dict[int, int]:
        positions: dict[int, int] = {}
        for i, p in enumerate(self.params):
            positions.setdefault(p.id, i)
        return positions


@dataclass(frozen=True)
class TableInfo:
    id: int
    name: str
    match_fields: tuple[MatchFieldInfo, ...]
    action_scopes: dict[int, int] = field(hash=False)  # action id -> ActionRef.Scope
    const_default_action_id: int = 0
    is_const_table: bool = False
    direct_counter_id: int = 0
    direct_meter_id: int = 0
    implementation_id: int = 0
    size: int = 0
    supports_idle_timeout: bool = False

    @cached_property
    def requires_priority(self) -> bool:
        return any(mf.match_type in _PRIORITY_KINDS for mf in self.match_fields)

    @cached_property
    def field_ids(self) -> tuple[int, ...]:
        """The match fields' ids in key order (a key given in this order, every field
        once, needs no lookup per field); empty if the P4Info repeats an id."""
        ids = tuple(mf.id for mf in self.match_fields)
        return ids if len(set(ids)) == len(ids) else ()

    @cached_property
    def takes_plain_entries(self) -> bool:
        """A direct, writable table with a key PI passes on as it is: an entry with a direct
        action and nothing else to check can take :mod:`~pybmv2.runtime.table_ops`' short
        path."""
        return (bool(self.match_fields) and not self.is_const_table
                and not self.implementation_id and self.translated_field is None)

    @cached_property
    def translated_field(self) -> MatchFieldInfo | None:
        """The first match field of a @p4runtime_translation type, if any."""
        return next((mf for mf in self.match_fields if mf.translated), None)

    def field_by_id(self, field_id: int) -> MatchFieldInfo | None:
        """The match field of an id (the first, if the P4Info repeats it)."""
        return self._fields_by_id.get(field_id)

    @cached_property
    def _fields_by_id(self) -> dict[int, MatchFieldInfo]:
        by_id: dict[int, MatchFieldInfo] = {}
        for mf in self.match_fields:
            by_id.setdefault(mf.id, mf)
        return by_id


@dataclass(frozen=True)
class ActionProfileInfo:
    id: int
    name: str
    with_selector: bool
    size: int
    max_group_size: int
    table_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class CounterInfo:
    """An indirect counter (``direct_table_id`` 0) or a direct counter."""

    id: int
    name: str
    unit: int  # p4info_pb2.CounterSpec.Unit
    size: int = 0
    direct_table_id: int = 0


@dataclass(frozen=True)
class MeterInfo:
    id: int
    name: str
    unit: int  # p4info_pb2.MeterSpec.Unit
    size: int = 0
    direct_table_id: int = 0


@dataclass(frozen=True)
class DigestInfo:
    """A digest whose type is a struct or tuple of bitstrings, or a single bitstring."""

    id: int
    name: str
    kind: str  # "struct", "tuple" or "bitstring"
    bitwidths: tuple[int, ...]


@dataclass(frozen=True)
class ControllerHeader:
    """A @controller_header (``packet_in`` / ``packet_out``): its fields in wire order."""

    id: int
    name: str
    fields: tuple[ParamInfo, ...]

    @property
    def nbits(self) -> int:
        return sum(f.bitwidth for f in self.fields)

    @property
    def nbytes(self) -> int:
        return (self.nbits + 7) // 8


def _bitstring_width(spec: object) -> int | None:
    bs = spec.bitstring  # type: ignore[attr-defined]
    if bs.HasField("bit"):
        return int(bs.bit.bitwidth)
    if bs.HasField("int"):
        return int(bs.int.bitwidth)
    return None


def _digest_info(d: p4info_pb2.Digest, type_info: object) -> DigestInfo:
    spec = d.type_spec
    name = d.preamble.name
    which = spec.WhichOneof("type_spec")
    if which == "bitstring":
        width = _bitstring_width(spec)
        if width is None:
            raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED,
                                 f"digest {name!r}: varbits are not supported for digests")
        return DigestInfo(d.preamble.id, name, "bitstring", (width,))
    if which == "struct":
        structs = type_info.structs  # type: ignore[attr-defined]
        if spec.struct.name not in structs:
            raise P4RuntimeError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Struct name '{spec.struct.name}' name not found in P4TypeInfo struct map")
        members = [m.type_spec for m in structs[spec.struct.name].members]
        kind = "struct"
    elif which == "tuple":
        members = list(spec.tuple.members)
        kind = "tuple"
    else:
        raise P4RuntimeError(
            grpc.StatusCode.UNIMPLEMENTED,
            "Packed type for digest can only be bitstring, struct or tuple")
    widths = []
    for m in members:
        w = _bitstring_width(m) if m.HasField("bitstring") else None
        if w is None:
            raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED,
                                 f"digest {name!r}: {kind} members must be bit<W> or int<W>")
        widths.append(w)
    return DigestInfo(d.preamble.id, name, kind, tuple(widths))


class P4InfoIndex:
    """Lookups over one P4Info message; built once per SetForwardingPipelineConfig."""

    def __init__(self, p4info: p4info_pb2.P4Info) -> None:
        self.p4info = p4info
        self.actions: dict[int, ActionInfo] = {}
        new_types = p4info.type_info.new_types
        translated = {name for name, t in new_types.items() if t.HasField("translated_type")}
        for a in p4info.actions:
            params = tuple(ParamInfo(p.id, p.name, p.bitwidth, p.type_name.name in translated)
                           for p in a.params)
            self.actions[a.preamble.id] = ActionInfo(a.preamble.id, a.preamble.name, params)
        self.tables: dict[int, TableInfo] = {}
        for t in p4info.tables:
            self.tables[t.preamble.id] = self._table_info(t)
        self.counters = {
            c.preamble.id: CounterInfo(c.preamble.id, c.preamble.name, c.spec.unit, c.size)
            for c in p4info.counters
        }
        self.direct_counters = {
            c.preamble.id: CounterInfo(c.preamble.id, c.preamble.name, c.spec.unit, 0,
                                       c.direct_table_id)
            for c in p4info.direct_counters
        }
        self.meters = {
            m.preamble.id: MeterInfo(m.preamble.id, m.preamble.name, m.spec.unit, m.size)
            for m in p4info.meters
        }
        self.direct_meters = {
            m.preamble.id: MeterInfo(m.preamble.id, m.preamble.name, m.spec.unit, 0,
                                     m.direct_table_id)
            for m in p4info.direct_meters
        }
        self.digests = {d.preamble.id: _digest_info(d, p4info.type_info) for d in p4info.digests}
        self.registers = {r.preamble.id: r.preamble.name for r in p4info.registers}
        self.action_profiles = {
            a.preamble.id: ActionProfileInfo(a.preamble.id, a.preamble.name, a.with_selector,
                                             a.size, a.max_group_size, tuple(a.table_ids))
            for a in p4info.action_profiles
        }
        self.controller_headers = {
            h.preamble.name: ControllerHeader(
                h.preamble.id, h.preamble.name,
                tuple(ParamInfo(m.id, m.name, m.bitwidth) for m in h.metadata))
            for h in p4info.controller_packet_metadata
        }
        self._names: dict[str, int] = {}
        for registry in (self.action_profiles, self.registers, self.digests, self.direct_meters, self.meters,
                         self.direct_counters, self.counters, self.actions, self.tables):
            for pid, obj in registry.items():
                self._names[obj if isinstance(obj, str) else obj.name] = pid

    def _table_info(self, t: p4info_pb2.Table) -> TableInfo:
        fields = []
        for pos, mf in enumerate(t.match_fields):
            if mf.WhichOneof("match") != "match_type" or mf.match_type not in _JSON_KINDS:
                raise P4RuntimeError(
                    grpc.StatusCode.UNIMPLEMENTED,
                    f"table {t.preamble.name!r}: match field {mf.name!r} has an unsupported "
                    f"match kind {mf.other_match_type or mf.match_type!r}")
            new_type = self.p4info.type_info.new_types.get(mf.type_name.name)
            translated = new_type is not None and new_type.HasField("translated_type")
            fields.append(MatchFieldInfo(mf.id, mf.name, mf.bitwidth, mf.match_type, pos,
                                         translated))
        direct_counter = next(
            (r for r in t.direct_resource_ids if id_prefix(r) == P4Ids.DIRECT_COUNTER), 0)
        direct_meter = next(
            (r for r in t.direct_resource_ids if id_prefix(r) == P4Ids.DIRECT_METER), 0)
        return TableInfo(
            id=t.preamble.id,
            name=t.preamble.name,
            match_fields=tuple(fields),
            action_scopes={r.id: r.scope for r in t.action_refs},
            const_default_action_id=t.const_default_action_id,
            is_const_table=t.is_const_table,
            direct_counter_id=direct_counter,
            direct_meter_id=direct_meter,
            implementation_id=t.implementation_id,
            size=t.size,
            supports_idle_timeout=(
                t.idle_timeout_behavior == p4info_pb2.Table.NOTIFY_CONTROL),
        )

    def is_valid_id(self, p4_id: int, prefix: int) -> bool:
        """PI's ``check_p4_id``: the id has the expected prefix and exists."""
        if id_prefix(p4_id) != prefix:
            return False
        return p4_id in self._registries.get(prefix, ())

    @cached_property
    def _registries(self) -> dict[int, Container[int]]:
        return {
            P4Ids.TABLE: self.tables,
            P4Ids.ACTION: self.actions,
            P4Ids.COUNTER: self.counters,
            P4Ids.DIRECT_COUNTER: self.direct_counters,
            P4Ids.METER: self.meters,
            P4Ids.DIRECT_METER: self.direct_meters,
            P4Ids.DIGEST: self.digests,
            P4Ids.REGISTER: self.registers,
            P4Ids.ACTION_PROFILE: self.action_profiles,
        }

    def id_of(self, name: str) -> int:
        """The id of a P4 object by its fully qualified name (KeyError otherwise).

        Tables win over actions, counters, meters, digests and registers of the same name.
        """
        return self._names[name]

    def action_by_name(self, name: str) -> ActionInfo | None:
        for a in self.actions.values():
            if a.name == name:
                return a
        return None


@dataclass(frozen=True)
class TableBinding:
    """A P4Info table and the JSON table that implements it."""

    info: TableInfo
    target_name: str
    #: P4Info action id -> JSON action id, for the actions of this table
    to_target_action: dict[int, int] = field(hash=False)
    #: JSON action id -> P4Info action id
    from_target_action: dict[int, int] = field(hash=False)
    #: the JSON match type of each key field (same order as the P4Info match fields)
    target_kinds: tuple[str, ...] = ()


@dataclass(frozen=True)
class PipelineBinding:
    """Everything the runtime needs to translate P4Runtime ids to the loaded program."""

    index: P4InfoIndex = field(hash=False)
    tables: dict[int, TableBinding] = field(hash=False)
    counters: dict[int, str] = field(hash=False)  # P4Info counter id -> JSON counter name
    meters: dict[int, str] = field(hash=False)
    digests: dict[int, int] = field(hash=False)  # P4Info digest id -> JSON learn list id
    #: P4Info action profile id -> the JSON action profile
    action_profiles: dict[int, ActionProfile] = field(hash=False, default_factory=dict)

    def digest_for_learn_id(self, learn_id: int) -> int | None:
        for digest_id, lid in self.digests.items():
            if lid == learn_id:
                return digest_id
        return None


def _bind_table(index: P4InfoIndex, info: TableInfo, program: Program) -> TableBinding:
    tables = program.tables
    table = tables.get(info.name)
    if table is None:
        raise P4InfoMismatchError(
            f"P4Info table {info.name!r} (id {info.id:#x}) has no table of that name in the "
            f"BMv2 JSON (JSON tables: {sorted(tables)})")
    profile = index.action_profiles.get(info.implementation_id)
    if info.implementation_id and (profile is None
                                   or profile.name != table.action_profile_name):
        raise P4InfoMismatchError(
            f"table {info.name!r}: implementation {info.implementation_id:#x} is not the "
            f"JSON table's action profile {table.action_profile_name!r}")
    if not info.implementation_id and table.action_profile_name is not None:
        raise P4InfoMismatchError(
            f"table {info.name!r} has action profile {table.action_profile_name!r} in the "
            "BMv2 JSON but no implementation in the P4Info")
    if len(info.match_fields) != len(table.keys):
        raise P4InfoMismatchError(
            f"table {info.name!r} has {len(info.match_fields)} match fields in the P4Info "
            f"but {len(table.keys)} key fields in the BMv2 JSON")
    for mf, kf in zip(info.match_fields, table.keys, strict=True):
        if kf.match_type not in _JSON_KINDS[mf.match_type]:
            raise P4InfoMismatchError(
                f"table {info.name!r}, match field {mf.name!r}: P4Info match type "
                f"{MatchType.Name(mf.match_type)} but the JSON key {kf.name!r} is "
                f"{kf.match_type!r}")
        low_slice = kf.mask is not None and kf.mask == (1 << mf.bitwidth) - 1
        # a bitwidth of 0: p4c gives none for a key of type error, which BMv2 accepts; a
        # translated type (@p4runtime_translation) has the controller's width: BMv2 loads it
        if mf.bitwidth and not mf.translated and mf.bitwidth != kf.width and \
                not (low_slice and mf.bitwidth < kf.width):
            raise P4InfoMismatchError(
                f"table {info.name!r}, match field {mf.name!r}: {mf.bitwidth} bits in the "
                f"P4Info but the JSON key {kf.name!r} is {kf.width} bits")
    to_target: dict[int, int] = {}
    json_by_name = {table.action_names.get(a, ""): a for a in table.action_ids}
    for aid in info.action_scopes:
        action = index.actions.get(aid)
        if action is None:
            raise P4InfoMismatchError(
                f"table {info.name!r} refers to action id {aid:#x}, absent from the P4Info")
        json_id = json_by_name.get(action.name)
        if json_id is None:
            raise P4InfoMismatchError(
                f"table {info.name!r}: action {action.name!r} is not one of the JSON "
                f"table's actions {sorted(json_by_name)}")
        params = program.actions[json_id].params
        if len(params) != len(action.params):
            raise P4InfoMismatchError(
                f"action {action.name!r} has {len(action.params)} parameters in the "
                f"P4Info but {len(params)} in the BMv2 JSON")
        for p, (jname, jwidth) in zip(action.params, params, strict=True):
            if p.bitwidth != jwidth and not p.translated:
                raise P4InfoMismatchError(
                    f"action {action.name!r}, parameter {p.name!r}: {p.bitwidth} bits in "
                    f"the P4Info but {jname!r} is {jwidth} bits in the BMv2 JSON")
        to_target[aid] = json_id
    from_target = {j: a for a, j in to_target.items()}
    # A JSON default action the P4Info does not list (e.g. NoAction) still reads back.
    for json_id in table.action_ids:
        if json_id not in from_target:
            action = index.action_by_name(table.action_names.get(json_id, ""))
            if action is not None:
                from_target[json_id] = action.id
    if info.direct_counter_id and not table.with_counters:
        raise P4InfoMismatchError(
            f"table {info.name!r} has a direct counter in the P4Info but not in the JSON")
    return TableBinding(info, table.name, to_target, from_target,
                        tuple(k.match_type for k in table.keys))


def bind(index: P4InfoIndex, program: Program) -> PipelineBinding:
    """Pair the P4Info objects with the program's; raise P4InfoMismatchError on a mismatch.

    A P4Info table with no JSON table of its name is left unbound, as BMv2 loads such a
    pair: p4c drops a table that is never applied (e.g. behind a constant condition) from
    the JSON but not from the P4Info. Operations on it fail (see Pipeline.table).
    """
    tables = {tid: _bind_table(index, info, program) for tid, info in index.tables.items()
              if info.name in program.tables}
    for info in index.tables.values():
        if info.name not in program.tables:
            log.warning("P4Info table %r is not in the BMv2 JSON (p4c leaves out tables that "
                        "are never applied): P4Runtime access to it will fail", info.name)
    counters: dict[int, str] = {}
    json_counters = program.externs.counters
    for cid, c in index.counters.items():
        array = json_counters.get(c.name)
        if array is None or array.is_direct:
            raise P4InfoMismatchError(
                f"P4Info counter {c.name!r} has no indirect counter array of that name in "
                f"the BMv2 JSON (JSON counters: {sorted(json_counters)})")
        if array.size != c.size:
            raise P4InfoMismatchError(
                f"counter {c.name!r} has {c.size} cells in the P4Info but {array.size} in "
                f"the BMv2 JSON")
        counters[cid] = array.name
    meters: dict[int, str] = {}
    json_meters = program.externs.meters
    for mid, m in index.meters.items():
        marray = json_meters.get(m.name)
        if marray is None or marray.is_direct:
            raise P4InfoMismatchError(
                f"P4Info meter {m.name!r} has no meter array of that name in the BMv2 JSON "
                f"(JSON meters: {sorted(json_meters)})")
        if marray.size != m.size:
            raise P4InfoMismatchError(
                f"meter {m.name!r} has {m.size} cells in the P4Info but {marray.size} in "
                f"the BMv2 JSON")
        meters[mid] = marray.name
    for m in index.direct_meters.values():
        _check_direct_meter(index, m, program)
    digests: dict[int, int] = {}
    learn_by_name = {ll.name: ll for ll in program.learn_lists.values()}
    for did, d in index.digests.items():
        ll = learn_by_name.get(d.name)
        if ll is None:
            raise P4InfoMismatchError(
                f"P4Info digest {d.name!r} has no learn list of that name in the BMv2 JSON "
                f"(learn lists: {sorted(learn_by_name)})")
        widths = tuple(w for _, _, _, w in ll.fields)
        if widths != d.bitwidths:
            raise P4InfoMismatchError(
                f"digest {d.name!r}: member widths {d.bitwidths} in the P4Info but "
                f"{widths} in the BMv2 JSON learn list")
        digests[did] = ll.id
    return PipelineBinding(index, tables, counters, meters, digests,
                           _bind_action_profiles(index, program))


def _check_direct_meter(index: P4InfoIndex, m: MeterInfo, program: Program) -> None:
    """A P4Info direct meter must be the JSON direct meter of its table."""
    info = index.tables.get(m.direct_table_id)
    table = program.tables.get(info.name) if info is not None else None
    if table is None or table.direct_meter_name != m.name:
        raise P4InfoMismatchError(
            f"P4Info direct meter {m.name!r} is not the BMv2 JSON direct meter of its table "
            f"{info.name if info is not None else m.direct_table_id!r}")


def _bind_action_profiles(index: P4InfoIndex, program: Program) -> dict[int, ActionProfile]:
    json_profiles = {**program.ingress.action_profiles, **program.egress.action_profiles}
    out: dict[int, ActionProfile] = {}
    for pid, info in index.action_profiles.items():
        profile = json_profiles.get(info.name)
        if profile is None or profile.with_selector != info.with_selector:
            raise P4InfoMismatchError(
                f"P4Info action profile {info.name!r} has no action "
                f"{'selector' if info.with_selector else 'profile'} of that name in the BMv2 "
                f"JSON (JSON action profiles: {sorted(json_profiles)})")
        out[pid] = profile
    return out
