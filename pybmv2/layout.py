"""The packet header vector (PHV) layout of a BMv2 JSON program.

Every field of every header instance (packet headers and metadata alike) gets one slot in a
flat list of Python ints, so that compiled expressions read and write ``state.values[i]``
without any name lookup at packet time. Header validity lives in a parallel list indexed by
header id.

Header unions group member headers of which at most one is valid: each header knows its
``siblings`` (the other members of its union), which become invalid when it becomes valid,
as BMv2's union membership does. Stacks of headers and stacks of unions keep their ``next``
index in ``PacketState.stack_next``: header stacks first, then union stacks.

A header with a varbit field (width ``"*"`` in the JSON, at most one per header) gets one
extra slot right after its fields: the varbit's current length in bits (0 until extracted,
as BMv2 resets it). The varbit's value is an int in its own slot like any field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pybmv2.errors import JsonFormatError, UnsupportedJsonError

__all__ = ["FieldSlot", "HeaderLayout", "PhvLayout", "StackLayout", "UnionLayout"]


@dataclass(frozen=True, slots=True)
class FieldSlot:
    """One field of one header instance."""

    header: str
    name: str
    index: int
    width: int
    signed: bool
    #: bits between this field's least significant bit and the end of its header, not
    #: counting the varbit field of the header (if any) when that comes after this field
    shift: int
    #: a varbit field: ``width`` is its maximum, the current length is in a separate slot
    varbit: bool = False

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
    #: size on the wire, without the varbit field's current length
    nbits: int
    #: the slot holding the current bit length of the varbit field; None for fixed headers
    length_index: int | None = None

    @property
    def nbytes(self) -> int:
        return self.nbits // 8

    @property
    def nslots(self) -> int:
        """Slots the header occupies (its fields, plus the varbit length slot if any)."""
        return len(self.fields) + (self.length_index is not None)

    @property
    def varbit(self) -> FieldSlot | None:
        """The header's varbit field, if it has one."""
        for slot in self.fields:
            if slot.varbit:
                return slot
        return None

    def current_nbytes(self, values: list[int]) -> int:
        """Size on the wire for the packet whose field values are ``values``."""
        if self.length_index is None:
            return self.nbits // 8
        return (self.nbits + values[self.length_index]) // 8

    @property
    def first_index(self) -> int:
        return self.fields[0].index if self.fields else 0


@dataclass(frozen=True, slots=True)
class StackLayout:
    """A header stack, or a stack of header unions: its elements in order, each element the
    ids of its headers (one header for a header stack, the members for a union stack)."""

    name: str
    id: int
    elements: tuple[tuple[int, ...], ...]
    #: where the stack's ``next`` index lives in ``PacketState.stack_next``
    next_index: int
    #: the union ids of a union stack's elements (empty for a header stack)
    union_ids: tuple[int, ...] = ()

    @property
    def header_ids(self) -> tuple[int, ...]:
        """The element headers of a header stack (every member header of a union stack)."""
        return tuple(h for element in self.elements for h in element)

    @property
    def is_union_stack(self) -> bool:
        return bool(self.union_ids)


@dataclass(frozen=True, slots=True)
class UnionLayout:
    """A header union instance: the ids of its member headers, in the type's order."""

    name: str
    id: int
    header_ids: tuple[int, ...]


def _require(obj: dict[str, Any], key: str, where: str) -> Any:
    try:
        return obj[key]
    except (KeyError, TypeError):
        raise JsonFormatError(f"{where}: missing key {key!r}") from None


def _header_layout(
    h: dict[str, Any], name: str, htype: dict[str, Any], specs: list[Any], index: int
) -> HeaderLayout:
    """The layout of header instance ``h`` whose first field gets slot ``index``."""
    type_name = htype["name"]
    varbits = [spec[0] for spec in specs if not isinstance(spec[1], int)]
    if len(varbits) > 1:
        raise JsonFormatError(f"header_type {type_name!r}: more than one varbit field")
    fixed = sum(spec[1] for spec in specs if isinstance(spec[1], int))
    max_bits = 0
    if varbits:
        if "max_length" not in htype:
            raise JsonFormatError(f"header_type {type_name!r}: varbit field without max_length")
        max_bits = int(htype["max_length"]) * 8 - fixed
        if max_bits <= 0:
            raise UnsupportedJsonError(f"header_type {type_name!r}: varbit layout {specs}")
    slots = []
    remaining = fixed
    for spec in specs:
        fname, width = spec[0], spec[1]
        signed = bool(spec[2]) if len(spec) > 2 else False
        if isinstance(width, int):
            remaining -= width
            slots.append(FieldSlot(name, fname, index, width, signed, remaining))
        else:
            slots.append(FieldSlot(name, fname, index, max_bits, False, remaining, varbit=True))
        index += 1
    metadata = bool(h.get("metadata", False))
    if not metadata and fixed % 8:
        raise JsonFormatError(f"header {name!r}: {fixed} bits is not a whole byte count")
    length_index = index if varbits else None
    return HeaderLayout(name, int(h["id"]), type_name, metadata, tuple(slots), fixed, length_index)


@dataclass(slots=True)
class PhvLayout:
    """The slots of every field and header of one program."""

    headers: list[HeaderLayout] = field(default_factory=list)
    stacks: list[StackLayout] = field(default_factory=list)
    unions: list[UnionLayout] = field(default_factory=list)
    union_stacks: list[StackLayout] = field(default_factory=list)
    #: per header id, the other members of its union (empty outside unions)
    siblings: list[tuple[int, ...]] = field(default_factory=list)
    num_fields: int = 0
    _by_name: dict[str, HeaderLayout] = field(default_factory=dict)
    _stack_by_name: dict[str, StackLayout] = field(default_factory=dict)
    _union_by_name: dict[str, UnionLayout] = field(default_factory=dict)
    _union_stack_by_name: dict[str, StackLayout] = field(default_factory=dict)
    _aliases: dict[str, tuple[str, str]] = field(default_factory=dict)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> PhvLayout:
        types: dict[str, dict[str, Any]] = {}
        for ht in _require(doc, "header_types", "program"):
            types[_require(ht, "name", "header_types[]")] = ht
        layout = cls()
        index = 0
        for h in _require(doc, "headers", "program"):
            name = _require(h, "name", "headers[]")
            type_name = _require(h, "header_type", f"header {name!r}")
            if type_name not in types:
                raise JsonFormatError(f"header {name!r}: unknown header_type {type_name!r}")
            specs = _require(types[type_name], "fields", f"header_type {type_name!r}")
            hl = _header_layout(h, name, types[type_name], specs, index)
            index += hl.nslots
            layout.headers.append(hl)
            layout._by_name[name] = hl
        layout.headers.sort(key=lambda hl: hl.id)
        if [hl.id for hl in layout.headers] != list(range(len(layout.headers))):
            raise JsonFormatError("header ids are not 0..N-1")
        layout.num_fields = index
        for s in doc.get("header_stacks", []):
            stack = StackLayout(s["name"], int(s["id"]), tuple((int(i),) for i in s["header_ids"]),
                                int(s["id"]))
            layout.stacks.append(stack)
            layout._stack_by_name[stack.name] = stack
        layout._load_unions(doc)
        for alias, target in doc.get("field_aliases", []):
            layout._aliases[alias] = (target[0], target[1])
        return layout

    def _load_unions(self, doc: dict[str, Any]) -> None:
        self.siblings = [() for _ in self.headers]
        for u in doc.get("header_unions", []):
            union = UnionLayout(u["name"], int(u["id"]), tuple(int(h) for h in u["header_ids"]))
            if union.id != len(self.unions):
                raise JsonFormatError("header union ids are not 0..N-1")
            for h in union.header_ids:
                if not 0 <= h < len(self.headers) or self.siblings[h]:
                    raise JsonFormatError(f"header union {union.name!r}: bad member header {h}")
                self.siblings[h] = tuple(o for o in union.header_ids if o != h)
            self.unions.append(union)
            self._union_by_name[union.name] = union
        base = len(self.stacks)
        for us in doc.get("header_union_stacks", []):
            sid = int(us["id"])
            union_ids = tuple(int(u) for u in us["header_union_ids"])
            if any(not 0 <= u < len(self.unions) for u in union_ids):
                raise JsonFormatError(f"header union stack {us['name']!r}: bad union ids {union_ids}")
            elements = tuple(self.unions[u].header_ids for u in union_ids)
            stack = StackLayout(us["name"], sid, elements, base + sid, union_ids)
            self.union_stacks.append(stack)
            self._union_stack_by_name[stack.name] = stack
        if [s.id for s in self.union_stacks] != list(range(len(self.union_stacks))):
            raise JsonFormatError("header union stack ids are not 0..N-1")

    @property
    def num_stacks(self) -> int:
        """Entries of ``PacketState.stack_next``: header stacks, then union stacks."""
        return len(self.stacks) + len(self.union_stacks)

    def union(self, name: str) -> UnionLayout:
        try:
            return self._union_by_name[name]
        except KeyError:
            raise JsonFormatError(f"unknown header union {name!r}") from None

    def union_stack(self, name: str) -> StackLayout:
        try:
            return self._union_stack_by_name[name]
        except KeyError:
            raise JsonFormatError(f"unknown header union stack {name!r}") from None

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
