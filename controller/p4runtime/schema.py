"""A read-only index over a P4Info: names and ids of tables, actions, counters, packet metadata.

Names resolve in full (``RailIngress.ipv4_lpm``) or by a unique suffix (``ipv4_lpm``), the
way p4runtime-shell users type them; an unknown or ambiguous name raises
:class:`SchemaError` listing the candidates.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from controller.errors import MlfabricError

__all__ = ["ActionInfo", "CounterInfo", "DirectCounterInfo", "MatchFieldInfo", "P4Schema", "SchemaError", "TableInfo"]


class SchemaError(MlfabricError):
    """A name or id is not in the P4Info."""


@dataclass(frozen=True, slots=True)
class MatchFieldInfo:
    id: int
    name: str
    bitwidth: int
    match_type: str  # exact | lpm | ternary | range | optional


@dataclass(frozen=True, slots=True)
class ParamInfo:
    id: int
    name: str
    bitwidth: int


@dataclass(frozen=True, slots=True)
class ActionInfo:
    id: int
    name: str
    params: tuple[ParamInfo, ...]

    def param(self, name: str) -> ParamInfo:
        for p in self.params:
            if p.name == name:
                return p
        raise SchemaError(f"action {self.name!r} has no parameter {name!r}; parameters: {[p.name for p in self.params]}")


@dataclass(frozen=True, slots=True)
class TableInfo:
    id: int
    name: str
    match_fields: tuple[MatchFieldInfo, ...]
    action_ids: tuple[int, ...]
    const_default_action_id: int
    size: int
    direct_counter_id: int
    is_const: bool

    @property
    def needs_priority(self) -> bool:
        return any(m.match_type in ("ternary", "range", "optional") for m in self.match_fields)

    def field(self, name: str) -> MatchFieldInfo:
        for m in self.match_fields:
            if m.name == name or m.name.split(".")[-1] == name:
                return m
        raise SchemaError(f"table {self.name!r} has no match field {name!r}; fields: {[m.name for m in self.match_fields]}")


@dataclass(frozen=True, slots=True)
class CounterInfo:
    id: int
    name: str
    size: int
    unit: str


@dataclass(frozen=True, slots=True)
class DirectCounterInfo:
    """A direct counter: one cell per entry of ``table_id``."""

    id: int
    name: str
    table_id: int
    unit: str


@dataclass(frozen=True, slots=True)
class PacketMetadataInfo:
    id: int
    name: str
    bitwidth: int


T = TypeVar("T", TableInfo, ActionInfo, CounterInfo, DirectCounterInfo)


class _Names(Generic[T]):
    def __init__(self, kind: str, items: list[T]) -> None:
        self.kind = kind
        self.by_id: dict[int, T] = {i.id: i for i in items}
        self.by_name: dict[str, T] = {i.name: i for i in items}

    def get(self, key: str | int) -> T:
        if isinstance(key, int):
            try:
                return self.by_id[key]
            except KeyError:
                raise SchemaError(f"no {self.kind} with id {key}") from None
        if key in self.by_name:
            return self.by_name[key]
        matches = [n for n in self.by_name if n.split(".")[-1] == key or n.endswith("." + key)]
        if len(matches) == 1:
            return self.by_name[matches[0]]
        if matches:
            raise SchemaError(f"{self.kind} name {key!r} is ambiguous: {sorted(matches)}")
        raise SchemaError(f"no {self.kind} named {key!r}; known: {sorted(self.by_name)}")

    def __iter__(self):
        return iter(self.by_id.values())


_MATCH_TYPES = {
    p4info_pb2.MatchField.EXACT: "exact",
    p4info_pb2.MatchField.LPM: "lpm",
    p4info_pb2.MatchField.TERNARY: "ternary",
    p4info_pb2.MatchField.RANGE: "range",
    p4info_pb2.MatchField.OPTIONAL: "optional",
}


class P4Schema:
    """Index of one P4Info message."""

    def __init__(self, p4info: p4info_pb2.P4Info) -> None:
        self.p4info = p4info
        tables = []
        for t in p4info.tables:
            fields = tuple(
                MatchFieldInfo(m.id, m.name, m.bitwidth, _MATCH_TYPES.get(m.match_type, "other"))
                for m in t.match_fields
            )
            direct = t.direct_resource_ids[0] if t.direct_resource_ids else 0
            tables.append(
                TableInfo(t.preamble.id, t.preamble.name, fields,
                          tuple(a.id for a in t.action_refs), t.const_default_action_id,
                          t.size, direct, t.is_const_table)
            )
        self.tables: _Names[TableInfo] = _Names("table", tables)
        self.actions: _Names[ActionInfo] = _Names("action", [
            ActionInfo(a.preamble.id, a.preamble.name,
                       tuple(ParamInfo(p.id, p.name, p.bitwidth) for p in a.params))
            for a in p4info.actions
        ])
        self.counters: _Names[CounterInfo] = _Names("counter", [
            CounterInfo(c.preamble.id, c.preamble.name, c.size,
                        p4info_pb2.CounterSpec.Unit.Name(c.spec.unit))
            for c in p4info.counters
        ])
        self.direct_counters: _Names[DirectCounterInfo] = _Names("direct counter", [
            DirectCounterInfo(c.preamble.id, c.preamble.name, c.direct_table_id,
                              p4info_pb2.CounterSpec.Unit.Name(c.spec.unit))
            for c in p4info.direct_counters
        ])
        self.packet_metadata: dict[str, tuple[PacketMetadataInfo, ...]] = {
            cpm.preamble.name: tuple(PacketMetadataInfo(m.id, m.name, m.bitwidth) for m in cpm.metadata)
            for cpm in p4info.controller_packet_metadata
        }

    @classmethod
    def from_file(cls, path: str | Path) -> P4Schema:
        return cls(load_p4info(path))

    def table(self, name: str | int) -> TableInfo:
        return self.tables.get(name)

    def action(self, name: str | int) -> ActionInfo:
        return self.actions.get(name)

    def counter(self, name: str | int) -> CounterInfo:
        return self.counters.get(name)

    def any_counter(self, name: str) -> CounterInfo | DirectCounterInfo:
        """An indexed or a direct counter by name (full or unique suffix).

        >>> from controller.p4build import pipeline_files
        >>> s = P4Schema.from_file(pipeline_files("rail_switch").p4info)
        >>> type(s.any_counter("ipv4_lpm_hits")).__name__, type(s.any_counter("port_rx")).__name__
        ('DirectCounterInfo', 'CounterInfo')
        """
        found: list[CounterInfo | DirectCounterInfo] = []
        ambiguous: SchemaError | None = None
        for names in (self.counters, self.direct_counters):
            try:
                found.append(names.get(name))
            except SchemaError as exc:
                if "ambiguous" in str(exc):
                    ambiguous = exc
        if len(found) == 1 and ambiguous is None:
            return found[0]
        if found:
            raise SchemaError(f"counter name {name!r} is ambiguous: {sorted(c.name for c in found)}")
        if ambiguous is not None:
            raise ambiguous
        known = sorted([*self.counters.by_name, *self.direct_counters.by_name])
        raise SchemaError(f"no counter named {name!r}; known: {known}")


def load_p4info(path: str | Path) -> p4info_pb2.P4Info:
    """Read a P4Info in text (``.txtpb``/``.txt``) or binary format."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise SchemaError(f"cannot read P4Info {p}: {exc.strerror}") from exc
    info = p4info_pb2.P4Info()
    try:
        if p.suffix in (".bin", ".pb"):
            info.ParseFromString(data)
        else:
            text_format.Parse(data.decode(), info)
    except (text_format.ParseError, UnicodeDecodeError, ValueError) as exc:
        raise SchemaError(f"{p}: not a valid P4Info ({exc})") from exc
    return info
