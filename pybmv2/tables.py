"""Match-action tables: entry management and packet-time lookup.

Entries are kept in the structure their match kinds allow: a dict for exact-only tables, a
dict per prefix length for exact+LPM tables, and a priority-ordered list otherwise. A key is
a tuple with one element per match field:

- exact (and ``$valid$``): ``value``
- lpm: ``(value, prefix_len)``
- ternary: ``(value, mask)``
- range: ``(low, high)``
- optional: ``(value, mask)`` where the mask is all ones or zero (wildcard)

Priorities follow P4Runtime: a larger number wins.

Entries are copy-on-write: once inserted, a :class:`TableEntry` is never changed by the
control plane (:meth:`MatchTable.modify`, :meth:`MatchTable.modify_indirect` and
:meth:`MatchTable.replace` swap in a changed copy), so a reader holding entries taken from
:meth:`MatchTable.entries` sees each one as it was when it took them. Only the data path
updates an entry in place (its direct counter and meter state).

A table tells its :attr:`MatchTable.observer` (when one is set: the native engine's mirror)
of every change the control plane makes, right after making it.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from pybmv2.errors import (
    EntryExistsError,
    EntryNotFoundError,
    InvalidEntryError,
    TableFullError,
    UnsupportedJsonError,
)
from pybmv2.expressions import parse_hexstr, slot_reader, valid_reader
from pybmv2.layout import PhvLayout
from pybmv2.state import PacketState

if TYPE_CHECKING:
    from pybmv2.action_profiles import ActionProfile
    from pybmv2.externs import MeterCell

__all__ = ["ActionCall", "IndirectIndex", "KeyField", "MatchTable", "TableEntry",
           "TableObserver"]

MATCH_KINDS = ("exact", "lpm", "ternary", "range", "optional", "valid")


@dataclass(frozen=True, slots=True)
class KeyField:
    name: str
    match_type: str
    width: int
    mask: int | None  # static mask p4c puts on the key expression


@dataclass(frozen=True, slots=True)
class ActionCall:
    """An action and its arguments (one int per action parameter)."""

    action_id: int
    args: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class IndirectIndex:
    """What an indirect table's entry points to: a member or (selectors only) a group."""

    handle: int
    is_group: bool = False


#: the placeholder action of indirect entries (their action comes from the profile)
NO_ACTION = ActionCall(-1)


@dataclass(slots=True)
class TableEntry:
    key: tuple[Any, ...]
    action: ActionCall
    priority: int = 0
    is_const: bool = False
    packets: int = 0
    bytes: int = 0
    handle: int = 0
    metadata: int = 0  # P4Runtime controller metadata cookie
    extra: dict[str, Any] = field(default_factory=dict)
    indirect: IndirectIndex | None = None  # set in indirect tables only
    meter: MeterCell | None = None  # the direct meter's configuration; None: always green
    #: idle timeout (P4Runtime's idle_timeout_ns; 0: the entry does not age), tables with
    #: support_timeout only
    ttl_ns: int = 0
    #: the switch clock (µs) of the entry's last hit, or of when its timeout was last set
    hit_us: int = 0


def _match_order(entry: TableEntry) -> tuple[int, int]:
    """The order of a ternary or range table's entries: priority, then insertion."""
    return -entry.priority, entry.handle


class TableObserver(Protocol):
    """Told of every control-plane change to a table, after it is made."""

    def entry_changed(self, table: MatchTable, old: TableEntry | None, new: TableEntry | None,
                      *, counters: bool = False) -> None:
        """``old`` None: ``new`` was inserted; ``new`` None: ``old`` was deleted; else ``old``
        was replaced by ``new`` (``counters``: its direct counters were written)."""

    def default_changed(self, table: MatchTable) -> None:
        """The table's default action changed."""


def _full(width: int) -> int:
    return (1 << width) - 1


class MatchTable:
    """One table of a pipeline."""

    def __init__(self, layout: PhvLayout, spec: dict[str, Any], action_names: dict[int, str]):
        self.name: str = spec["name"]
        self.id: int = int(spec["id"])
        kind = spec.get("type", "simple")
        if kind not in ("simple", "indirect", "indirect_ws"):
            raise UnsupportedJsonError(f"table {self.name!r}: table type {kind!r}")
        if kind != "simple" and not spec.get("action_profile"):
            raise UnsupportedJsonError(
                f"table {self.name!r}: {kind} tables without an 'action_profile' (legacy "
                "per-table action profiles and selectors) are not supported")
        #: the name of the table's action profile (indirect tables), else None
        self.action_profile_name: str | None = spec.get("action_profile") if kind != "simple" \
            else None
        #: the ActionProfile object, bound by the pipeline
        self.profile: ActionProfile | None = None
        self.max_size: int = int(spec.get("max_size", 1024))
        self.with_counters: bool = bool(spec.get("with_counters", False))
        #: the name of the table's direct meter array, else None
        self.direct_meter_name: str | None = spec.get("direct_meters") or None
        #: entries may age (P4 ``support_timeout = true``): hits are time-stamped
        self.support_timeout: bool = bool(spec.get("support_timeout", False))
        self.action_ids: tuple[int, ...] = tuple(int(a) for a in spec.get("action_ids", []))
        self.action_names = action_names
        self.next_tables: dict[str, str | None] = dict(spec.get("next_tables", {}))
        self.base_default_next: str | None = spec.get("base_default_next")
        self.keys: list[KeyField] = []
        readers: list[Callable[[PacketState], int]] = []
        for k in spec.get("key", []):
            mt = k["match_type"]
            if mt not in MATCH_KINDS:
                raise UnsupportedJsonError(f"table {self.name!r}: match type {mt!r}")
            target = k["target"]
            mask = parse_hexstr(k["mask"]) if k.get("mask") else None
            if target[1] == "$valid$":
                hid = layout.header(target[0]).id
                width = 1
                readers.append(valid_reader(hid))
            else:
                slot = layout.field(target[0], target[1])
                width = slot.width
                readers.append(slot_reader(slot.index, mask))
            self.keys.append(KeyField(k.get("name", ".".join(target)), mt, width, mask))
        self._readers = readers
        kinds = {k.match_type for k in self.keys}
        n_lpm = sum(1 for k in self.keys if k.match_type == "lpm")
        if kinds <= {"exact", "valid"}:
            self.mode = "exact"
        elif kinds <= {"exact", "valid", "lpm"} and n_lpm == 1:
            self.mode = "lpm"
        else:
            self.mode = "ternary"
        self.requires_priority = self.mode == "ternary"
        self._lpm_pos = next((i for i, k in enumerate(self.keys) if k.match_type == "lpm"), -1)
        self._exact: dict[tuple[int, ...], TableEntry] = {}
        # lpm: prefix_len -> {(exact..., lpm_value_masked): entry}; lengths kept sorted desc
        self._lpm: dict[int, dict[tuple[int, ...], TableEntry]] = {}
        self._lpm_lengths: list[int] = []
        self._ternary: list[TableEntry] = []
        #: whether the packet-path index (_exact, _lpm, _ternary) follows the entries; off
        #: while another engine runs the packets (defer_index), rebuilt at the next lookup
        self._index_live = True
        self._by_key: dict[tuple[Any, ...], TableEntry] = {}
        self._next_handle = 1
        self.default: ActionCall = ActionCall(0)
        self.default_is_const = False
        self.default_entry_is_const = False
        self.initial_default: ActionCall = ActionCall(0)
        self.default_packets = 0
        self.default_bytes = 0
        #: told of every change (the native engine's mirror), or None
        self.observer: TableObserver | None = None
        if len(self.keys) == 1 and self.mode == "exact":
            r0 = readers[0]
            self.read_key: Callable[[PacketState], tuple[int, ...]] = lambda s: (r0(s),)
        else:
            self.read_key = lambda s: tuple(r(s) for r in readers)

    # -- entry management --------------------------------------------------------------

    def _store_key(self, key: tuple[Any, ...], priority: int) -> tuple[Any, ...]:
        return (key, priority) if self.requires_priority else (key, 0)

    def validate_key(self, key: tuple[Any, ...], priority: int, *, canonical: bool = True) -> None:
        """Check arity, widths and (unless not ``canonical``) that no value has bits outside
        its mask or prefix, the way PI does; raise InvalidEntryError."""
        if len(key) != len(self.keys):
            raise InvalidEntryError(
                f"table {self.name!r}: key has {len(key)} fields, expected {len(self.keys)}"
            )
        for kf, part in zip(self.keys, key, strict=True):
            full = _full(kf.width)
            values: tuple[int, ...]
            if kf.match_type in ("exact", "valid"):
                values = (part,)
            elif kf.match_type == "lpm":
                value, plen = part
                if not 0 <= plen <= kf.width:
                    raise InvalidEntryError(
                        f"table {self.name!r}: prefix length {plen} of {kf.name!r} "
                        f"exceeds its {kf.width} bits"
                    )
                values = (value,)
                if canonical and value & ~(full ^ _full(kf.width - plen)) & full:
                    raise InvalidEntryError(
                        f"table {self.name!r}: {kf.name!r} value {value:#x} has bits set "
                        f"beyond its /{plen} prefix"
                    )
            elif kf.match_type in ("ternary", "optional"):
                value, mask = part
                values = (value, mask)
                if canonical and value & ~mask:
                    raise InvalidEntryError(
                        f"table {self.name!r}: {kf.name!r} value {value:#x} has bits set "
                        f"outside its mask {mask:#x}"
                    )
            else:
                low, high = part
                values = (low, high)
                if low > high:
                    raise InvalidEntryError(
                        f"table {self.name!r}: {kf.name!r} range low {low} > high {high}"
                    )
            for v in values:
                if not 0 <= v <= full:
                    raise InvalidEntryError(
                        f"table {self.name!r}: value {v:#x} does not fit the "
                        f"{kf.width}-bit field {kf.name!r}"
                    )
        if self.requires_priority and priority <= 0:
            raise InvalidEntryError(f"table {self.name!r}: a priority > 0 is required")
        if not self.requires_priority and priority != 0:
            raise InvalidEntryError(f"table {self.name!r}: a priority is not allowed here")

    def validate_action(self, call: ActionCall) -> None:
        if self.profile is not None and call == NO_ACTION:
            return
        if call.action_id not in self.action_ids:
            raise InvalidEntryError(
                f"table {self.name!r}: action id {call.action_id} is not one of its actions"
            )

    def insert(self, entry: TableEntry, *, canonical: bool = True,
               checked: bool = False) -> TableEntry:
        """Add an entry. Const entries from the JSON need not be ``canonical``: a ternary
        or LPM value may have bits outside its mask or prefix, which BMv2 ignores (they are
        cleared here); P4Runtime writes must be canonical, as PI requires. ``checked``:
        the caller validated the key and the action as :meth:`validate_key` and
        :meth:`validate_action` do (P4Runtime's codec, which is stricter)."""
        if not checked:
            self.validate_key(entry.key, entry.priority, canonical=canonical)
            if not canonical:
                entry.key = tuple(_canonical(kf, part) for kf, part in zip(self.keys, entry.key, strict=True))
            self.validate_action(entry.action)
        sk = self._store_key(entry.key, entry.priority)
        if sk in self._by_key:
            raise EntryExistsError(f"table {self.name!r}: entry already exists")
        if len(self._by_key) >= self.max_size:
            raise TableFullError(f"table {self.name!r} is full ({self.max_size} entries)")
        self._ref_indirect(entry.indirect, 1)
        entry.handle = self._next_handle
        self._next_handle += 1
        self._by_key[sk] = entry
        self._index(entry)
        if self.observer is not None:
            self.observer.entry_changed(self, None, entry)
        return entry

    def _lpm_key(self, key: tuple[Any, ...]) -> tuple[Any, ...]:
        """The key of an exact+LPM entry in its prefix length's bucket."""
        pos = self._lpm_pos
        return (*tuple(key[:pos]), key[pos][0], *tuple(key[pos + 1:]))

    def defer_index(self) -> None:
        """Stop keeping the packet-path index while another engine (the native one) runs
        the packets: a write then costs the entry alone. The next :meth:`lookup` rebuilds it."""
        self._index_live = False
        self._exact, self._lpm, self._lpm_lengths, self._ternary = {}, {}, [], []

    def _rebuild_index(self) -> None:
        self._index_live = True
        for entry in sorted(self._by_key.values(), key=lambda e: e.handle):
            self._index(entry)

    def _index(self, entry: TableEntry) -> None:
        if not self._index_live:
            return
        if self.mode == "exact":
            self._exact[entry.key] = entry
        elif self.mode == "lpm":
            _, plen = entry.key[self._lpm_pos]
            lk = self._lpm_key(entry.key)
            bucket = self._lpm.get(plen)
            if bucket is None:
                bucket = self._lpm[plen] = {}
                self._lpm_lengths = sorted(self._lpm, reverse=True)
            bucket[lk] = entry
        else:
            # Highest priority first; among equals, the earliest inserted wins. A binary
            # search, not a sort per insert: 11,000 range entries took 20 s to write.
            bisect.insort(self._ternary, entry, key=_match_order)

    def _unindex(self, entry: TableEntry) -> None:
        if not self._index_live:
            return
        if self.mode == "exact":
            del self._exact[entry.key]
        elif self.mode == "lpm":
            _, plen = entry.key[self._lpm_pos]
            bucket = self._lpm[plen]
            del bucket[self._lpm_key(entry.key)]
            if not bucket:
                del self._lpm[plen]
                self._lpm_lengths = sorted(self._lpm, reverse=True)
        else:
            del self._ternary[self._ternary_pos(entry)]

    def _ternary_pos(self, entry: TableEntry) -> int:
        """Where ``entry`` (this very object) sits in the ordered ternary/range list."""
        ternary = self._ternary
        i = bisect.bisect_left(ternary, _match_order(entry), key=_match_order)
        while ternary[i] is not entry:
            i += 1
        return i

    def get(self, key: tuple[Any, ...], priority: int = 0) -> TableEntry | None:
        """The entry of ``key`` (a tuple) and ``priority``, or None."""
        return self._by_key.get((key, priority) if self.requires_priority else (key, 0))

    def find(self, key: tuple[Any, ...], priority: int = 0) -> TableEntry:
        sk = self._store_key(tuple(key), priority)
        try:
            return self._by_key[sk]
        except KeyError:
            raise EntryNotFoundError(f"table {self.name!r}: no such entry") from None

    def modify(self, key: tuple[Any, ...], priority: int, action: ActionCall) -> TableEntry:
        """Give an entry another action; return the new entry (the old one is unchanged)."""
        self.validate_key(key, priority)
        entry = self.find(key, priority)
        if entry.is_const:
            raise InvalidEntryError(f"table {self.name!r}: const entries cannot be modified")
        self.validate_action(action)
        return self.replace(entry, action=action)

    def replace(self, entry: TableEntry, **changes: Any) -> TableEntry:
        """Swap ``entry`` for a copy with ``changes`` (fields of :class:`TableEntry`).

        The copy takes the entry's place everywhere lookups find it and keeps its handle,
        counters and meter unless ``changes`` say otherwise; ``entry`` itself is left as it
        was, for whoever still holds it. Call it under the switch's lock, as every change.
        """
        new = self._swap(entry, changes)
        if self.observer is not None:
            self.observer.entry_changed(self, entry, new)
        return new

    def set_counters(self, entry: TableEntry, packets: int, nbytes: int) -> TableEntry:
        """Write an entry's direct counters (by copy, as :meth:`replace`); the new entry."""
        new = self._swap(entry, {"packets": packets, "bytes": nbytes})
        if self.observer is not None:
            self.observer.entry_changed(self, entry, new, counters=True)
        return new

    def _swap(self, entry: TableEntry, changes: dict[str, Any]) -> TableEntry:
        if not self.holds(entry):
            raise EntryNotFoundError(f"table {self.name!r}: no such entry")
        if "key" in changes or "priority" in changes or "handle" in changes:
            raise InvalidEntryError("an entry's key, priority and handle cannot change")
        changes.setdefault("extra", dict(entry.extra))
        new = replace(entry, **changes)
        self._by_key[self._store_key(entry.key, entry.priority)] = new
        if not self._index_live:
            return new
        if self.mode == "exact":
            self._exact[entry.key] = new
        elif self.mode == "lpm":
            _, plen = entry.key[self._lpm_pos]
            self._lpm[plen][self._lpm_key(entry.key)] = new
        else:
            self._ternary[self._ternary_pos(entry)] = new  # same priority and handle: same place
        return new

    def delete(self, key: tuple[Any, ...], priority: int = 0) -> TableEntry:
        self.validate_key(key, priority)
        entry = self.find(key, priority)
        if entry.is_const:
            raise InvalidEntryError(f"table {self.name!r}: const entries cannot be deleted")
        del self._by_key[self._store_key(entry.key, entry.priority)]
        self._unindex(entry)
        self._ref_indirect(entry.indirect, -1)
        if self.observer is not None:
            self.observer.entry_changed(self, entry, None)
        return entry

    def _ref_indirect(self, index: IndirectIndex | None, delta: int) -> None:
        """Check (when adding) and count a reference to a profile member or group."""
        if (index is None) != (self.profile is None):
            raise InvalidEntryError(
                f"table {self.name!r}: entries "
                f"{'need' if self.profile is not None else 'cannot have'} an indirect index")
        if self.profile is not None and index is not None:
            if delta > 0:
                self.profile.check_index(index)
            self.profile.ref(index, delta)

    def modify_indirect(self, key: tuple[Any, ...], priority: int,
                        index: IndirectIndex) -> TableEntry:
        """Point an indirect table's entry to another member or group; return the new entry."""
        self.validate_key(key, priority)
        entry = self.find(key, priority)
        self._ref_indirect(index, 1)
        self._ref_indirect(entry.indirect, -1)
        return self.replace(entry, indirect=index)

    def clear(self) -> None:
        for entry in [e for e in self._by_key.values() if not e.is_const]:
            self.delete(entry.key, entry.priority)
        self.default = self.initial_default
        if self.observer is not None:
            self.observer.default_changed(self)

    def set_default(self, action: ActionCall) -> None:
        if self.default_entry_is_const or (
            self.default_is_const and action.action_id != self.default.action_id
        ):
            raise InvalidEntryError(f"table {self.name!r}: the default action is const")
        self.validate_action(action)
        self.default = action
        if self.observer is not None:
            self.observer.default_changed(self)

    def entries(self) -> Iterator[TableEntry]:
        """The entries, from a copy of the table's list taken now (one cheap C-level copy)."""
        return iter(list(self._by_key.values()))

    def holds(self, entry: TableEntry) -> bool:
        """Whether ``entry`` is still this table's entry for its key (not deleted or replaced)."""
        return self._by_key.get(self._store_key(entry.key, entry.priority)) is entry

    def __len__(self) -> int:
        return len(self._by_key)

    # -- packet time -------------------------------------------------------------------

    def lookup(self, s: PacketState) -> TableEntry | None:
        """The entry matching this packet, or None on a miss."""
        if not self._index_live:
            self._rebuild_index()
        if self.mode == "exact":
            return self._exact.get(self.read_key(s))
        key = self.read_key(s)
        if self.mode == "lpm":
            pos = self._lpm_pos
            width = self.keys[pos].width
            full = _full(width)
            value = key[pos]
            for plen in self._lpm_lengths:
                masked = value & (full ^ _full(width - plen))
                lk = (*key[:pos], masked, *key[pos + 1:])
                hit = self._lpm[plen].get(lk)
                if hit is not None:
                    return hit
            return None
        for entry in self._ternary:
            if _matches(self.keys, entry.key, key):
                return entry
        return None


def _canonical(kf: KeyField, part: Any) -> Any:
    """A key part with the bits outside its mask (ternary, optional) or prefix (lpm) cleared."""
    if kf.match_type in ("ternary", "optional"):
        value, mask = part
        return (value & mask, mask)
    if kf.match_type == "lpm":
        value, plen = part
        return (value & (_full(kf.width) ^ _full(kf.width - plen)), plen)
    return part


def _matches(fields: list[KeyField], spec: tuple[Any, ...], key: tuple[int, ...]) -> bool:
    for kf, part, v in zip(fields, spec, key, strict=True):
        mt = kf.match_type
        if mt in ("exact", "valid"):
            if v != part:
                return False
        elif mt in ("ternary", "optional"):
            if v & part[1] != part[0]:
                return False
        elif mt == "lpm":
            value, plen = part
            full = _full(kf.width)
            if v & (full ^ _full(kf.width - plen)) != value:
                return False
        elif not part[0] <= v <= part[1]:
            return False
    return True
