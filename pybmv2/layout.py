"""The packet header vector (PHV) layout of a BMv2 JSON program.

Every field of every header instance (packet headers and metadata alike) gets one slot in a
flat list of Python ints, so that compiled expressions read and write ``state.values[i]``
without any name lookup at packet time. Header validity lives in a parallel list indexed by
header id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pybmv2.errors import JsonFormatError, UnsupportedJsonError

__all__ = ["FieldSlot", "HeaderLayout", "PhvLayout", "StackLayout"]


@dataclass(frozen=True, slots=True)
class FieldSlot:
    """One field of one header instance."""

    header: str
    name: str
    index: int
    width: int
    signed: bool
    #: bits between this field's least significant bit and the end of its header
    shift: int

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1


@dataclass(frozen=True, slots=True)
class HeaderLayout:
    """A header instance: its fields, their slots and its size on the wire."""

    name: str
    id: int
    type_name: str
    metadata: bool
    fields: tuple[FieldSlot, ...]
    nbits: int

    @property
    def nbytes(self) -> int:
        return self.nbits // 8

    @property
    def first_index(self) -> int:
        return self.fields[0].index if self.fields else 0


@dataclass(frozen=True, slots=True)
class StackLayout:
    """A header stack: the ids of its element headers, in order."""

    name: str
    id: int
    header_ids: tuple[int, ...]


def _require(obj: dict[str, Any], key: str, where: str) -> Any:
    try:
        return obj[key]
    except (KeyError, TypeError):
        raise JsonFormatError(f"{where}: missing key {key!r}") from None


@dataclass(slots=True)
class PhvLayout:
    """The slots of every field and header of one program."""

    headers: list[HeaderLayout] = field(default_factory=list)
    stacks: list[StackLayout] = field(default_factory=list)
    num_fields: int = 0
    _by_name: dict[str, HeaderLayout] = field(default_factory=dict)
    _stack_by_name: dict[str, StackLayout] = field(default_factory=dict)
    _aliases: dict[str, tuple[str, str]] = field(default_factory=dict)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> PhvLayout:
        types: dict[str, dict[str, Any]] = {}
        for ht in _require(doc, "header_types", "program"):
            types[_require(ht, "name", "header_types[]")] = ht
        if doc.get("header_unions"):
            names = [u.get("name") for u in doc["header_unions"]]
            raise UnsupportedJsonError(f"header unions are not supported: {names}")
        layout = cls()
        index = 0
        for h in _require(doc, "headers", "program"):
            name = _require(h, "name", "headers[]")
            type_name = _require(h, "header_type", f"header {name!r}")
            if type_name not in types:
                raise JsonFormatError(f"header {name!r}: unknown header_type {type_name!r}")
            specs = _require(types[type_name], "fields", f"header_type {type_name!r}")
            total = 0
            for spec in specs:
                width = spec[1]
                if not isinstance(width, int):
                    raise UnsupportedJsonError(
                        f"header_type {type_name!r}: varbit field {spec[0]!r} is not supported"
                    )
                total += width
            slots = []
            consumed = 0
            for spec in specs:
                fname, width = spec[0], spec[1]
                signed = bool(spec[2]) if len(spec) > 2 else False
                consumed += width
                slots.append(FieldSlot(name, fname, index, width, signed, total - consumed))
                index += 1
            metadata = bool(h.get("metadata", False))
            if not metadata and total % 8:
                raise JsonFormatError(f"header {name!r}: {total} bits is not a whole byte count")
            hl = HeaderLayout(name, int(h["id"]), type_name, metadata, tuple(slots), total)
            layout.headers.append(hl)
            layout._by_name[name] = hl
        layout.headers.sort(key=lambda hl: hl.id)
        if [hl.id for hl in layout.headers] != list(range(len(layout.headers))):
            raise JsonFormatError("header ids are not 0..N-1")
        layout.num_fields = index
        for s in doc.get("header_stacks", []):
            stack = StackLayout(s["name"], int(s["id"]), tuple(int(i) for i in s["header_ids"]))
            layout.stacks.append(stack)
            layout._stack_by_name[stack.name] = stack
        for alias, target in doc.get("field_aliases", []):
            layout._aliases[alias] = (target[0], target[1])
        return layout

    def header(self, name: str) -> HeaderLayout:
        try:
            return self._by_name[name]
        except KeyError:
            raise JsonFormatError(f"unknown header instance {name!r}") from None

    def has_header(self, name: str) -> bool:
        return name in self._by_name

    def stack(self, name: str) -> StackLayout:
        try:
            return self._stack_by_name[name]
        except KeyError:
            raise JsonFormatError(f"unknown header stack {name!r}") from None

    def field(self, header: str, name: str) -> FieldSlot:
        """The slot of ``header.name``, following simple_switch's field aliases."""
        hl = self._by_name.get(header)
        if hl is not None:
            for slot in hl.fields:
                if slot.name == name:
                    return slot
        alias = self._aliases.get(f"{header}.{name}")
        if alias is not None:
            return self.field(*alias)
        raise JsonFormatError(f"unknown field {header}.{name}")

    def has_field(self, header: str, name: str) -> bool:
        try:
            self.field(header, name)
        except JsonFormatError:
            return False
        return True

    def initial_values(self) -> list[int]:
        return [0] * self.num_fields

    def initial_validity(self) -> list[bool]:
        return [hl.metadata for hl in self.headers]

    def metadata_slots(self) -> list[int]:
        return [s.index for hl in self.headers if hl.metadata for s in hl.fields]
